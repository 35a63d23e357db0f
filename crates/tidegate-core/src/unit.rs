//! `unit_of(user_id)`: the stable mapping of a user to one of N logical units.
//!
//! The hash is XXH3-64 with seed 0 over the UTF-8 bytes of the user ID, reduced modulo N:
//! `unit = xxh3_64(user_id_bytes) % N`. XXH3 was chosen because it is specified, fast (a few
//! nanoseconds for short IDs) and has maintained implementations in every language our clients use
//! (Python `xxhash.xxh3_64_intdigest`, Go `zeebo/xxh3`, Java `zero-allocation-hashing`, ...).
//! The golden vectors in `tests/fixtures/unit_hash_vectors.json` pin it; they were produced by
//! the Python reference implementation, not by this code.
//!
//! The optional `digits` mode follows the LDC article: when user IDs are numeric and already
//! uniformly distributed in their low digits, the unit is a fixed slice of the ID's digits.

use std::fmt;

/// Smallest and largest unit count a deployment may configure.
pub const MIN_UNITS: u32 = 2;
pub const MAX_UNITS: u32 = 10_000;

/// Name of the hash, as published in `GET /v1/routing` for clients in other languages.
pub const HASH_ALGORITHM: &str = "xxh3_64(seed=0) mod units";

/// A logical bucket of users, `0..units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Unit(pub u32);

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("user_id is empty")]
    Empty,
    #[error("user_id is {len} bytes long; at most 256 bytes are allowed")]
    TooLong { len: usize },
    #[error("user_id contains a control character")]
    ControlCharacter,
    #[error(
        "user_id must be numeric with at least {needed} digits in digits mode (the unit is digits {from}..{to} counted from the end)"
    )]
    NotNumeric { needed: usize, from: usize, to: usize },
}

/// How user IDs are turned into units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitMode {
    /// `xxh3_64(user_id) % units`.
    Hash,
    /// The `width` decimal digits that end `skip` characters before the end of a numeric ID,
    /// where `10^width == units`. With `skip = 0` and 100 units: the last two digits.
    Digits { skip: u8 },
}

/// The unit count and mode: everything needed to evaluate `unit_of`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitScheme {
    count: u32,
    mode: UnitMode,
    /// Number of digits in digits mode (log10 of `count`); 0 in hash mode.
    width: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    #[error("must be between {MIN_UNITS} and {MAX_UNITS}, got {0}")]
    CountOutOfRange(u32),
    #[error("digits mode needs a power of ten (10, 100, 1000 or 10000) as the unit count, got {0}")]
    CountNotPowerOfTen(u32),
}

impl UnitScheme {
    pub fn new(count: u32, mode: UnitMode) -> Result<UnitScheme, SchemeError> {
        if !(MIN_UNITS..=MAX_UNITS).contains(&count) {
            return Err(SchemeError::CountOutOfRange(count));
        }
        let width = match mode {
            UnitMode::Hash => 0,
            UnitMode::Digits { .. } => match count {
                10 => 1,
                100 => 2,
                1000 => 3,
                10_000 => 4,
                other => return Err(SchemeError::CountNotPowerOfTen(other)),
            },
        };
        Ok(UnitScheme { count, mode, width })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    pub fn mode(&self) -> UnitMode {
        self.mode
    }

    /// The unit of a user. The ID must already have passed [`super::validate_user_id`].
    #[inline]
    pub fn unit_of(&self, user_id: &str) -> Result<Unit, UnitError> {
        match self.mode {
            UnitMode::Hash => Ok(Unit((hash_user_id(user_id) % u64::from(self.count)) as u32)),
            UnitMode::Digits { skip } => self.digit_slice(user_id, usize::from(skip)),
        }
    }

    fn digit_slice(&self, user_id: &str, skip: usize) -> Result<Unit, UnitError> {
        let width = usize::from(self.width);
        let bytes = user_id.as_bytes();
        let not_numeric =
            || UnitError::NotNumeric { needed: width + skip, from: skip + width, to: skip + 1 };
        if bytes.len() < width + skip || !bytes.iter().all(u8::is_ascii_digit) {
            return Err(not_numeric());
        }
        let end = bytes.len() - skip;
        let value = bytes[end - width..end]
            .iter()
            .fold(0u32, |acc, digit| acc * 10 + u32::from(digit - b'0'));
        Ok(Unit(value % self.count))
    }
}

/// The published hash of a user ID: XXH3-64, seed 0, over its UTF-8 bytes.
#[inline]
pub fn hash_user_id(user_id: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_id.as_bytes())
}

/// Bounds on a user ID, shared by the server, the client library and the CLI.
pub const MAX_USER_ID_BYTES: usize = 256;

/// Checks the shape of a user ID: 1..=256 bytes of UTF-8 without control characters.
///
/// Why here and not in the HTTP layer: pins are stored in the log and replayed, so the core must
/// refuse IDs the edge would refuse, or a log written by one front end could poison another.
pub fn validate_user_id(user_id: &str) -> Result<(), UnitError> {
    if user_id.is_empty() {
        return Err(UnitError::Empty);
    }
    if user_id.len() > MAX_USER_ID_BYTES {
        return Err(UnitError::TooLong { len: user_id.len() });
    }
    if has_control(user_id.as_bytes()) {
        return Err(UnitError::ControlCharacter);
    }
    Ok(())
}

/// Whether UTF-8 `bytes` hold a control character (`char::is_control`: U+0000-U+001F and
/// U+007F-U+009F), read from the bytes without decoding: the first range and U+007F are single
/// bytes, U+0080-U+009F are `C2 80`-`C2 9F`. About half the work of `chars().any(..)` on the
/// tag path.
#[inline]
fn has_control(bytes: &[u8]) -> bool {
    let ascii_control = |b: &u8| *b < 0x20 || *b == 0x7f;
    if bytes.is_ascii() {
        return bytes.iter().any(ascii_control);
    }
    bytes.iter().any(ascii_control)
        || bytes.windows(2).any(|w| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_byte_scan_finds_exactly_the_control_characters() {
        for c in (0u32..0x3000).chain([0xfeff, 0x1f600, 0x10ffff]).filter_map(char::from_u32) {
            for s in [c.to_string(), format!("a{c}b"), format!("é{c}")] {
                assert_eq!(
                    super::has_control(s.as_bytes()),
                    s.chars().any(char::is_control),
                    "{c:?}"
                );
            }
        }
    }
}
