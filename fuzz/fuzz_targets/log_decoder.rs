//! The command log decoder and replay on arbitrary bytes: never a panic, only entries or errors.
//!
//! Raw input rarely passes the per-line CRC, so when the first byte is odd the rest is taken as
//! newline-separated JSON payloads and framed with correct checksums, which sends the fuzzer's
//! bytes through the JSON decoding of entries and through replay.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidegate::core::Zones;
use tidegate::store::{decode_log, replay};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let framed;
    let bytes = if mode & 1 == 1 {
        let mut out = Vec::with_capacity(rest.len() + 16);
        for payload in rest.split(|&b| b == b'\n') {
            out.extend_from_slice(format!("{:08x} ", crc32fast_hash(payload)).as_bytes());
            out.extend_from_slice(payload);
            out.push(b'\n');
        }
        framed = out;
        &framed[..]
    } else {
        rest
    };
    if let Ok(entries) = decode_log(bytes) {
        let _ = replay(&entries, &Zones::default());
    }
});

/// CRC-32 (IEEE), as the log writes it; computed here so the target needs no extra crate.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
