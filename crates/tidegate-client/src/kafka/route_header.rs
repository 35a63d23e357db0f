//! The route header of a lane message: the colour it was produced for and the routing version the
//! producer tagged the user with. Pure: encode, decode, and reading whichever format a producer
//! wrote.
//!
//! The lane producer writes the header `tg` whose value is one colour byte (`b` blue, `g` green)
//! followed by the version as an unsigned LEB128 varint (7 bits a byte, low bits first, high bit
//! set on every byte but the last): `tg: b 0x0c` is blue, version 12. Versions below 128 take one
//! byte, below 16 384 two, any `u64` at most ten, so the whole header is 5-6 bytes a record on
//! the broker where the text header before it (`tidegate-route: blue;v=12`) took about 25.
//!
//! A producer in the default mode ([`RouteMarks::Switches`](super::RouteMarks)) writes the same
//! value once per partition and version change, in the `tgs` header of a switch marker, and its
//! messages carry no header: a message's colour and version are those of the last marker before
//! it in its partition ([`switch`] tells a marker from a message).
//!
//! Consumers read every format a producer of a rolling upgrade may still write: `tg`, the text
//! header `tidegate-route: blue;v=12`, and the two headers before that (`tidegate-color: blue`,
//! `tidegate-version: 12`).

use super::{COLOR_HEADER, ROUTE_HEADER, SWITCH_HEADER, TEXT_ROUTE_HEADER, VERSION_HEADER};
use tidegate_core::ZoneId;

/// The longest value: a colour byte and a ten-byte varint.
pub const MAX_LEN: usize = 1 + 10;

/// Why a route header value could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteHeaderError {
    #[error("the route header is empty; expected a colour byte and a version")]
    Empty,
    #[error(
        "the route header's colour byte is {0:#04x}; expected `b` (blue), `g` (green) or a zone index 2-63"
    )]
    UnknownColor(u8),
    #[error("the route header's version ends in the middle of its varint")]
    Truncated,
    #[error("the route header's version does not fit in 64 bits")]
    Overflow,
    #[error("the route header has {0} byte(s) after its version")]
    Trailing(usize),
    #[error("the text route header is not `blue;v=N` or `green;v=N`")]
    Text,
}

/// `b` for blue, `g` for green (the bytes of every earlier release), the zone index itself
/// (2-63) for further zones.
fn color_byte(color: ZoneId) -> u8 {
    match color {
        ZoneId::BLUE => b'b',
        ZoneId::GREEN => b'g',
        ZoneId(n) => n as u8,
    }
}

/// Writes the `tg` value of `color` and `version` into `buf` and returns the bytes written.
/// No allocation, no formatting: a byte and a varint.
pub fn encode(color: ZoneId, version: u64, buf: &mut [u8; MAX_LEN]) -> &[u8] {
    buf[0] = color_byte(color);
    let mut rest = version;
    let mut len = 1;
    while rest >= 0x80 {
        buf[len] = (rest as u8) | 0x80;
        rest >>= 7;
        len += 1;
    }
    buf[len] = rest as u8;
    &buf[..=len]
}

/// Reads a `tg` value written by [`encode`].
pub fn decode(value: &[u8]) -> Result<(ZoneId, u64), RouteHeaderError> {
    let (&first, varint) = value.split_first().ok_or(RouteHeaderError::Empty)?;
    let color = match first {
        b'b' => ZoneId::BLUE,
        b'g' => ZoneId::GREEN,
        n @ 2..=63 => ZoneId(u16::from(n)),
        other => return Err(RouteHeaderError::UnknownColor(other)),
    };
    let mut version: u64 = 0;
    for (i, &byte) in varint.iter().enumerate() {
        let bits = u64::from(byte & 0x7f);
        // The tenth byte holds bit 63 only.
        if i > 9 || (i == 9 && bits > 1) {
            return Err(RouteHeaderError::Overflow);
        }
        version |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return match varint.len() - i - 1 {
                0 => Ok((color, version)),
                extra => Err(RouteHeaderError::Trailing(extra)),
            };
        }
    }
    Err(RouteHeaderError::Truncated)
}

/// The two lanes the text headers of producers before `tg` could name.
fn legacy_lane(text: &str) -> Option<ZoneId> {
    match text {
        "blue" => Some(ZoneId::BLUE),
        "green" => Some(ZoneId::GREEN),
        _ => None,
    }
}

/// Reads a value of the text header producers before `tg` wrote (`blue;v=12`).
pub fn decode_text(value: &[u8]) -> Result<(ZoneId, u64), RouteHeaderError> {
    let text = std::str::from_utf8(value).map_err(|_| RouteHeaderError::Text)?;
    let (color, version) = text.split_once(";v=").ok_or(RouteHeaderError::Text)?;
    let color = legacy_lane(color).ok_or(RouteHeaderError::Text)?;
    let version = version.parse().map_err(|_| RouteHeaderError::Text)?;
    Ok((color, version))
}

/// The colour and routing version of a message from its headers (name, value): the `tg`
/// header, else the `tidegate-route` text header, else the two headers before it. Unknown
/// headers and values that do not decode are ignored (the field stays `None`).
pub fn read<'h>(
    headers: impl IntoIterator<Item = (&'h str, Option<&'h [u8]>)>,
) -> (Option<ZoneId>, Option<u64>) {
    let (mut binary, mut text) = (None, None);
    let (mut color, mut version) = (None, None);
    for (name, value) in headers {
        let Some(value) = value else { continue };
        match name {
            ROUTE_HEADER => binary = decode(value).ok(),
            TEXT_ROUTE_HEADER => text = decode_text(value).ok(),
            COLOR_HEADER => color = std::str::from_utf8(value).ok().and_then(legacy_lane),
            VERSION_HEADER => {
                version = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
    }
    match binary.or(text) {
        Some((c, v)) => (Some(c), Some(v)),
        None => (color, version),
    }
}

/// Whether a record is a switch marker (it carries the `tgs` header), and if so the colour and
/// version its value names (`Err` when the value does not decode: still a marker, never a
/// message). `None`: a message.
pub fn switch<'h>(
    headers: impl IntoIterator<Item = (&'h str, Option<&'h [u8]>)>,
) -> Option<Result<(ZoneId, u64), RouteHeaderError>> {
    headers
        .into_iter()
        .find(|(name, _)| *name == SWITCH_HEADER)
        .map(|(_, value)| decode(value.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(color: ZoneId, version: u64) -> Vec<u8> {
        let mut buf = [0; MAX_LEN];
        encode(color, version, &mut buf).to_vec()
    }

    #[test]
    fn encodes_a_colour_byte_and_a_varint_and_decodes_back() {
        assert_eq!(encoded(ZoneId::BLUE, 12), b"b\x0c");
        assert_eq!(encoded(ZoneId::GREEN, 0), b"g\x00");
        assert_eq!(encoded(ZoneId::BLUE, 300), b"b\xac\x02");
        assert_eq!(encoded(ZoneId::GREEN, u64::MAX).len(), MAX_LEN);
        for version in [0, 1, 127, 128, 16_383, 16_384, 1 << 35, u64::MAX - 1, u64::MAX] {
            for color in [ZoneId::BLUE, ZoneId::GREEN] {
                let value = encoded(color, version);
                assert_eq!(decode(&value), Ok((color, version)), "{value:02x?}");
            }
        }
    }

    #[test]
    fn a_switch_marker_is_told_from_a_message_by_its_header_name() {
        let value = encoded(ZoneId::GREEN, 300);
        let tg: [(&str, Option<&[u8]>); 1] = [("tg", Some(&value))];
        let tgs: [(&str, Option<&[u8]>); 2] = [("other", None), ("tgs", Some(&value))];
        assert_eq!(switch(tg), None, "a message with a route header");
        assert_eq!(switch([]), None, "a message without headers");
        assert_eq!(switch(tgs), Some(Ok((ZoneId::GREEN, 300))));
        // A marker whose value does not decode is still a marker (never handed out).
        assert_eq!(
            switch([("tgs", Some(&b"x"[..]))]),
            Some(Err(RouteHeaderError::UnknownColor(b'x')))
        );
        assert_eq!(switch([("tgs", None)]), Some(Err(RouteHeaderError::Empty)));
    }

    #[test]
    fn malformed_values_are_clear_errors() {
        use RouteHeaderError::*;
        let cases: [(&[u8], RouteHeaderError); 7] = [
            (b"", Empty),
            (b"x\x01", UnknownColor(b'x')),
            (b"b", Truncated),
            (b"g\x80", Truncated),
            (b"b\x0c\x00", Trailing(1)),
            (b"b\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", Overflow),
            (b"b\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x00", Overflow),
        ];
        for (value, expected) in &cases {
            assert_eq!(decode(value).as_ref(), Err(expected), "{value:02x?}");
        }
        // The old text value under the new name is refused, not misread (`l` after `b` is a
        // varint byte of 108 followed by 7 more bytes).
        assert_eq!(decode(b"blue;v=12"), Err(Trailing(7)));
        assert!(UnknownColor(b'x').to_string().contains("0x78"), "{}", UnknownColor(b'x'));
    }

    #[test]
    fn decoding_any_short_input_never_panics() {
        // Every value of up to two bytes, and three-byte values over a sample of prefixes.
        for a in 0..=255u8 {
            let _ = decode(&[a]);
            for b in 0..=255u8 {
                let _ = decode(&[a, b]);
                let _ = decode(&[b'b', a, b, 0x80]);
                let _ = decode_text(&[a, b]);
            }
        }
    }

    #[test]
    fn decodes_the_text_header_of_the_producers_before() {
        assert_eq!(decode_text(b"blue;v=12"), Ok((ZoneId::BLUE, 12)));
        assert_eq!(decode_text(b"green;v=18446744073709551615"), Ok((ZoneId::GREEN, u64::MAX)));
        for bad in [
            &b""[..],
            b"blue",
            b"blue;12",
            b"red;v=1",
            b"blue;v=",
            b"blue;v=-1",
            b"blue;v=1;x",
            b"\xffblue;v=1",
        ] {
            assert_eq!(decode_text(bad), Err(RouteHeaderError::Text), "{bad:?}");
        }
    }

    #[test]
    fn reads_every_format_a_rolling_upgrade_has() {
        let tg = encoded(ZoneId::GREEN, 7);
        let current = [("tg", Some(&tg[..])), ("other", Some(&b"x"[..]))];
        assert_eq!(read(current), (Some(ZoneId::GREEN), Some(7)));
        let text = [("tidegate-route", Some(&b"blue;v=9"[..]))];
        assert_eq!(read(text), (Some(ZoneId::BLUE), Some(9)));
        let older = [("tidegate-color", Some(&b"blue"[..])), ("tidegate-version", Some(&b"3"[..]))];
        assert_eq!(read(older), (Some(ZoneId::BLUE), Some(3)));
        // `tg` wins over the text header, which wins over the two older ones.
        let both = [("tidegate-route", Some(&b"blue;v=9"[..])), ("tg", Some(&tg[..]))];
        assert_eq!(read(both), (Some(ZoneId::GREEN), Some(7)));
        let both =
            [("tidegate-color", Some(&b"green"[..])), ("tidegate-route", Some(&b"blue;v=9"[..]))];
        assert_eq!(read(both), (Some(ZoneId::BLUE), Some(9)));
        // Malformed or missing values leave the fields empty.
        assert_eq!(read([("tg", Some(&b"x\x01"[..]))]), (None, None));
        assert_eq!(read([("tidegate-route", Some(&b"purple;v=1"[..]))]), (None, None));
        assert_eq!(read([("tg", None)]), (None, None));
    }
}
