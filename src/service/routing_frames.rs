//! The routing table's wire form and its server-sent event, built once per version and shared by
//! every watch stream (the Rocket route `http::watch` and the fast listener's `http_fast`).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::core::{Color, HASH_ALGORITHM, RoutingTable, State as CoreState, UnitMode};

/// The wire form of a routing table, shared by `GET /v1/routing`, dial and pin responses.
/// `log_id` names the command log the table comes from: a client that sees another log's table
/// with a lower version knows the log was replaced, not that it is reading an old table.
pub fn routing_body(table: &RoutingTable, log_id: &str) -> Value {
    let share = table.share();
    let (mode, digits_skip) = match table.scheme().mode() {
        UnitMode::Hash => ("hash", None),
        UnitMode::Digits { skip } => ("digits", Some(skip)),
    };
    let pins: serde_json::Map<String, Value> =
        table.pins().iter().map(|(user, color)| (user.clone(), json!(color.as_str()))).collect();
    json!({
        "version": table.version(),
        "log_id": log_id,
        "units": share.units,
        "blue_units": share.blue_units,
        "blue_percent": share.blue_percent(),
        "green_percent": 100.0 - share.blue_percent(),
        "colors": { "blue": table.zone_of(Color::Blue), "green": table.zone_of(Color::Green) },
        "pins": pins,
        "unit_mode": mode,
        "digits_skip": digits_skip,
        "hash": HASH_ALGORITHM,
        "rule": "unit u is blue when u < blue_units, green otherwise; a pin wins over the unit",
        "zones": zones_body(table),
        "unit_map": unit_map_body(table),
        "precedence": ["pin", "unit"],
    })
}

/// The zones, in index order: name, the lane (colour) users see, and the zone's class. A
/// two-zone table has blue at index 0 and green at 1.
fn zones_body(table: &RoutingTable) -> Value {
    json!([
        {"index": 0, "name": table.zone_of(Color::Blue), "lane": "blue", "class": "rzone"},
        {"index": 1, "name": table.zone_of(Color::Green), "lane": "green", "class": "rzone"},
    ])
}

/// Every unit's zone as runs `{"units": "0-49", "zone", "lane"}`, in unit order, covering every
/// unit once: the table as a map, the form clients in any language evaluate (the two-zone dial is
/// the map whose first `blue_units` units are blue).
fn unit_map_body(table: &RoutingTable) -> Value {
    let (units, blue) = (table.units(), table.blue_units());
    let run = |from: u32, to: u32, color: Color| json!({"units": format!("{from}-{to}"), "zone": table.zone_of(color), "lane": color.as_str()});
    let mut runs = Vec::new();
    if blue > 0 {
        runs.push(run(0, blue - 1, Color::Blue));
    }
    if blue < units {
        runs.push(run(blue, units - 1, Color::Green));
    }
    Value::Array(runs)
}

/// One server-sent event, already framed (`id:`, `event:`, `data:` lines and the blank line).
/// The routing event of a version is built once and shared by every stream that sends it, so a
/// change costs one serialisation however many subscribers watch, and no stream holds a copy.
#[derive(Clone)]
pub enum Frame {
    Shared(Arc<[u8]>),
    Static(&'static [u8]),
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        match self {
            Frame::Shared(bytes) => bytes,
            Frame::Static(bytes) => bytes,
        }
    }
}

pub const HEARTBEAT: Frame = Frame::Static(b":heartbeat\n\n");

/// The newest routing frame, built on first demand for its version.
#[derive(Default)]
pub struct RoutingFrames {
    newest: Mutex<Option<(u64, Arc<[u8]>)>>,
}

impl RoutingFrames {
    pub fn frame(&self, state: &CoreState, log_id: &str) -> Frame {
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((version, bytes)) = newest.as_ref()
            && *version == state.version()
        {
            return Frame::Shared(Arc::clone(bytes));
        }
        // Compact JSON has no line breaks, so the body fits one `data:` line.
        let json = routing_body(state.table(), log_id).to_string();
        let text = format!("id:{}\nevent:routing\ndata:{json}\n\n", state.version());
        let bytes: Arc<[u8]> = Arc::from(text.into_bytes());
        if newest.as_ref().is_none_or(|(version, _)| *version < state.version()) {
            *newest = Some((state.version(), Arc::clone(&bytes)));
        }
        Frame::Shared(bytes)
    }
}
