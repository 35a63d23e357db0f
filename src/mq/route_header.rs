//! The route header of a lane message: the colour it was produced for and the routing version the
//! producer tagged the user with, in one compact value (`blue;v=12`). Pure.
//!
//! One header instead of two halves the producer's per-message header work (each header is an
//! allocation made on the sending thread and freed on librdkafka's) and the bytes the broker
//! stores per record. Consumers still read the two headers older producers wrote.

use std::io::Write;

use super::{COLOR_HEADER, ROUTE_HEADER, VERSION_HEADER};
use crate::core::Color;

/// The longest value: `green;v=` and a `u64`.
pub const MAX_LEN: usize = 8 + 20;

/// Writes `color;v=version` into `buf` and returns the bytes written.
pub fn encode(color: Color, version: u64, buf: &mut [u8; MAX_LEN]) -> &[u8] {
    let mut rest = &mut buf[..];
    // Cannot fail: MAX_LEN holds the longest colour and any u64.
    let _ = write!(rest, "{};v={version}", color.as_str());
    let len = MAX_LEN - rest.len();
    &buf[..len]
}

/// The colour and routing version of a message from its headers (name, UTF-8 value): the
/// [`ROUTE_HEADER`], or the two headers of producers before it. Unknown headers are ignored.
pub fn read<'h>(
    headers: impl IntoIterator<Item = (&'h str, Option<&'h str>)>,
) -> (Option<Color>, Option<u64>) {
    let (mut color, mut version) = (None, None);
    for (name, value) in headers {
        match (name, value) {
            (ROUTE_HEADER, Some(v)) => {
                if let Some((c, v)) = parse(v) {
                    (color, version) = (Some(c), Some(v));
                }
            }
            (COLOR_HEADER, Some(v)) => color = v.parse().ok(),
            (VERSION_HEADER, Some(v)) => version = v.parse().ok(),
            _ => {}
        }
    }
    (color, version)
}

/// Reads a value written by [`encode`]; `None` for anything else.
pub fn parse(value: &str) -> Option<(Color, u64)> {
    let (color, version) = value.split_once(";v=")?;
    Some((color.parse().ok()?, version.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_parses_back() {
        let mut buf = [0; MAX_LEN];
        assert_eq!(encode(Color::Blue, 12, &mut buf), b"blue;v=12");
        for (color, version) in [(Color::Green, u64::MAX), (Color::Blue, 0)] {
            let mut buf = [0; MAX_LEN];
            let text = std::str::from_utf8(encode(color, version, &mut buf)).unwrap().to_owned();
            assert_eq!(parse(&text), Some((color, version)), "{text}");
        }
    }

    #[test]
    fn reads_the_route_header_and_the_two_older_headers() {
        let route = [("tidegate-route", Some("green;v=7")), ("other", Some("x"))];
        assert_eq!(read(route), (Some(Color::Green), Some(7)));
        let older = [("tidegate-color", Some("blue")), ("tidegate-version", Some("3"))];
        assert_eq!(read(older), (Some(Color::Blue), Some(3)));
        assert_eq!(read([("tidegate-route", Some("purple;v=1"))]), (None, None));
        assert_eq!(read([("tidegate-route", None)]), (None, None));
    }

    #[test]
    fn refuses_what_it_did_not_write() {
        for bad in ["", "blue", "blue;12", "red;v=1", "blue;v=", "blue;v=-1", "blue;v=1;x"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
