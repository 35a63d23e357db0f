//! Human durations such as `500ms`, `30s`, `2m` and `1h`, as used in config and the drain API.

/// Parses a duration into milliseconds. A bare number is refused: the unit is always explicit.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration like `500ms`, `30s`, `2m` or `1h`"))?;
    let factor = match unit.trim() {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(format!("`{text}` needs a unit: ms, s, m or h (e.g. `30s`)")),
    };
    value.checked_mul(factor).ok_or_else(|| format!("`{text}` is too long"))
}

/// Formats milliseconds the way [`parse_duration_ms`] reads them, e.g. `30s` or `250ms`.
pub fn format_duration_ms(ms: u64) -> String {
    match ms {
        0 => "0ms".to_owned(),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1_000 == 0 => format!("{}s", ms / 1_000),
        ms => format!("{ms}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for (text, ms) in [("500ms", 500), ("30s", 30_000), ("2m", 120_000), ("1h", 3_600_000)] {
            assert_eq!(parse_duration_ms(text), Ok(ms));
            assert_eq!(format_duration_ms(ms), text);
        }
        assert!(parse_duration_ms("30").is_err());
        assert!(parse_duration_ms("s").is_err());
        assert!(parse_duration_ms("-5s").is_err());
        assert!(parse_duration_ms("99999999999999999999h").is_err());
    }
}
