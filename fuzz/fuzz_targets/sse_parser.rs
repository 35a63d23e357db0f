//! The client's `text/event-stream` reader (plain and chunked) on arbitrary bytes: events,
//! comments, an end or an error, never a panic or a hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidegate::client::sse::EventReader;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut reader = EventReader::from_bytes(rest.to_vec(), mode & 1 == 1);
    // Every item consumes at least one line, so this bound is never what stops a valid run.
    for _ in 0..=rest.len() {
        match reader.next_item() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
});
