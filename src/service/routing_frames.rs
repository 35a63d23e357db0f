//! The routing table's wire form and its server-sent event, built once per version and shared by
//! every watch stream (the Rocket route `http::watch` and the fast listener's `http_fast`).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::core::{HASH_ALGORITHM, RoutingTable, State as CoreState, UnitMode, ZoneId};

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
        table.pins().iter().map(|(user, zone)| (user.clone(), json!(table.lane(*zone)))).collect();
    let global = table.global();
    json!({
        "version": table.version(),
        "log_id": log_id,
        "units": share.units,
        "blue_units": share.blue_units,
        "blue_percent": share.blue_percent(),
        "green_percent": percent(table.units_of(ZoneId::GREEN), share.units),
        "colors": { "blue": table.zone_of(ZoneId::BLUE), "green": table.zone_of(ZoneId::GREEN) },
        "pins": pins,
        "unit_mode": mode,
        "digits_skip": digits_skip,
        "hash": HASH_ALGORITHM,
        "rule": "a pinned user goes to their pin's lane; else, for a call of a service that has a release channel in the domain, a user the channel selects (their unit in its `units`, or their ID in its `users`) goes to the channel's lane unless the channel is suspended (then its `fallback`: `global` goes on to the map, `reject` refuses); every other user goes to the lane of the zone that owns their unit in `unit_map` (on a two-zone dial-form table: blue when unit < blue_units)",
        "zones": zones_body(table),
        "unit_map": unit_map_body(table, table.map()),
        "domains": table
            .domains()
            .iter()
            .map(|(name, map)| (name.clone(), domain_body(table, map)))
            .collect::<serde_json::Map<String, Value>>(),
        "global_writer": {
            "zone": global.zone.map(|z| table.zone_of(z)),
            "lane": global.zone.map(|z| table.lane(z)),
            "read_only": global.read_only,
            // A global-writer move in progress: global writes wait (the global write check
            // answers `frozen`) until the unfreeze.
            "frozen": global.frozen,
        },
        "precedence": ["pin", "channel", "unit"],
        "channels": channels_body(table),
        // Units frozen by a move in progress, by domain: their users' writes get "busy, retry"
        // from every write check until the unfreeze (reads go on). Empty between moves.
        "frozen": table
            .frozen()
            .iter()
            .map(|(domain, units)| (domain.clone(), json!(units.to_string())))
            .collect::<serde_json::Map<String, Value>>(),
        // The freeze of a loss-less channel change in progress (null between changes): writes
        // of its `services` in its `domain` by users of its `units` or listed in its `users`
        // get "busy, retry" from every write check, whichever rule routes them (not a pinned
        // user's).
        "channel_freeze": table.channel_freeze().map(|f| json!({
            "channel": f.channel,
            "domain": f.domain.as_deref().unwrap_or(crate::core::DEFAULT_DOMAIN),
            "services": f.services,
            "units": f.units.to_string(),
            "users": f.users,
        })),
    })
}

/// The release channels, by name: what a client needs to apply the `channel` rule.
pub fn channels_body(table: &RoutingTable) -> Value {
    Value::Array(table.channels().values().map(|c| channel_body(table, c)).collect())
}

/// One release channel's wire form (`GET /v1/routing`, `GET /v1/channels/{name}`).
pub fn channel_body(table: &RoutingTable, c: &crate::core::Channel) -> Value {
    json!({
        "name": c.name,
        "domain": c.domain_name(),
        "services": c.services,
        "zone": table.zone_of(c.zone),
        "lane": table.lane(c.zone),
        "units": c.units.to_string(),
        "share_percent": percent(c.units.len(), table.units()),
        "users": c.users,
        "fallback": c.fallback.as_str(),
        "expires_at_ms": c.expires_at_ms,
        "suspended": c.suspended,
    })
}

/// A named domain in `GET /v1/routing`: its unit map, and on a two-zone table its dial.
fn domain_body(table: &RoutingTable, map: &crate::core::UnitMap) -> Value {
    let mut body = json!({"unit_map": unit_map_body(table, map)});
    if table.zones().is_two() {
        let blue = map.count(ZoneId::BLUE);
        body["blue_units"] = json!(blue);
        body["blue_percent"] = json!(percent(blue, table.units()));
    }
    body
}

fn percent(count: u32, units: u32) -> f64 {
    (f64::from(count) * 100.0 / f64::from(units) * 1e6).round() / 1e6
}

/// The zones, in index order: name, the lane (colour) users see, the zone's class, whether it
/// is retired, and the units it owns. Blue is at index 0 and green at 1 in every table.
fn zones_body(table: &RoutingTable) -> Value {
    Value::Array(
        table
            .zones()
            .iter()
            .map(|(id, z)| {
                json!({
                    "index": id.0,
                    "name": z.name,
                    "lane": z.lane,
                    "class": z.class.as_str(),
                    "retired": z.retired,
                    "units": table.units_of(id),
                })
            })
            .collect(),
    )
}

/// Every unit's zone as runs `{"units": "0-49", "zone", "lane"}`, in unit order, covering every
/// unit once: the table as a map, the form clients in any language evaluate (the two-zone dial is
/// the map whose first `blue_units` units are blue).
fn unit_map_body(table: &RoutingTable, map: &crate::core::UnitMap) -> Value {
    Value::Array(
        map.runs()
            .iter()
            .map(|r| {
                json!({
                    "units": format!("{}-{}", r.first, r.last),
                    "zone": table.zone_of(r.zone),
                    "lane": table.lane(r.zone),
                })
            })
            .collect(),
    )
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

/// A heartbeat that confirms the table current as of `confirmed_at_ms` (`:heartbeat c=<ms>`,
/// `crate::core::lease`), or the plain one when there is nothing to confirm.
pub fn heartbeat(confirmed_at_ms: Option<u64>) -> Frame {
    match confirmed_at_ms {
        None => HEARTBEAT,
        Some(_) => {
            let text = crate::core::lease::heartbeat_text(confirmed_at_ms) + "\n\n";
            Frame::Shared(Arc::from(text.into_bytes()))
        }
    }
}

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
