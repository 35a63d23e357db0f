//! Decoding the routing table's JSON form (`GET /v1/routing`, the watch stream) into a core table.

use std::collections::BTreeMap;

use serde_json::Value;

use tidegate_core::{Color, ColorZones, RoutingTable, UnitMode, UnitScheme};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("routing table JSON: {0}")]
pub struct DecodeError(pub String);

fn field<'a>(value: &'a Value, key: &str) -> Result<&'a Value, DecodeError> {
    value.get(key).ok_or_else(|| DecodeError(format!("missing `{key}`")))
}

fn number(value: &Value, key: &str) -> Result<u64, DecodeError> {
    field(value, key)?.as_u64().ok_or_else(|| DecodeError(format!("`{key}` is not a whole number")))
}

fn text<'a>(value: &'a Value, key: &str) -> Result<&'a str, DecodeError> {
    field(value, key)?.as_str().ok_or_else(|| DecodeError(format!("`{key}` is not a string")))
}

/// Decodes the wire form produced by the server's `routing_body`.
pub fn decode_table(value: &Value) -> Result<RoutingTable, DecodeError> {
    let units = u32::try_from(number(value, "units")?)
        .map_err(|_| DecodeError("`units` too large".into()))?;
    let mode = match text(value, "unit_mode")? {
        "hash" => UnitMode::Hash,
        "digits" => UnitMode::Digits {
            skip: value.get("digits_skip").and_then(Value::as_u64).unwrap_or(0) as u8,
        },
        other => return Err(DecodeError(format!("unknown unit_mode `{other}`"))),
    };
    let scheme = UnitScheme::new(units, mode).map_err(|e| DecodeError(e.to_string()))?;
    let blue_units = u32::try_from(number(value, "blue_units")?)
        .map_err(|_| DecodeError("`blue_units` too large".into()))?;
    let colors = field(value, "colors")?;
    let zones = ColorZones {
        blue: text(colors, "blue")?.to_owned(),
        green: text(colors, "green")?.to_owned(),
    };
    let mut pins = BTreeMap::new();
    if let Some(map) = value.get("pins").and_then(Value::as_object) {
        for (user, color) in map {
            let color: Color = color
                .as_str()
                .ok_or_else(|| DecodeError(format!("pin of `{user}` is not a string")))?
                .parse()
                .map_err(|e: tidegate_core::ParseColorError| DecodeError(e.to_string()))?;
            pins.insert(user.clone(), color);
        }
    }
    RoutingTable::from_parts(number(value, "version")?, scheme, blue_units, pins, zones)
        .map_err(|e| DecodeError(e.to_string()))
}
