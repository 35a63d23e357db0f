//! Decoding the routing table's JSON form (`GET /v1/routing`, the watch stream) into a core table.

use std::collections::BTreeMap;

use serde_json::Value;

use tidegate_core::{
    Channel, ChannelFallback, ChannelFreeze, GlobalWriter, RoutingTable, Run, UnitMap, UnitMode,
    UnitScheme, UnitSet, ZoneClass, ZoneSpec, Zones,
};

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
    let units_count = units;
    let version = number(value, "version")?;
    // Tables of every release since the N-zone model carry `zones` and `unit_map`; the first
    // releases sent only `colors` and `blue_units` (a two-zone dial-form table).
    let (zones, map) = match (value.get("zones"), value.get("unit_map")) {
        (Some(zones), Some(map)) => {
            let zones = decode_zones(zones)?;
            let map = decode_map(map, &zones, units)?;
            (zones, map)
        }
        _ => {
            let blue_units = u32::try_from(number(value, "blue_units")?)
                .map_err(|_| DecodeError("`blue_units` too large".into()))?;
            if blue_units > units {
                return Err(DecodeError(format!(
                    "`blue_units` {blue_units} exceeds {units} units"
                )));
            }
            let colors = field(value, "colors")?;
            let zones = Zones::two(text(colors, "blue")?, text(colors, "green")?);
            (zones, UnitMap::dial(units, blue_units))
        }
    };
    let mut pins = BTreeMap::new();
    if let Some(map) = value.get("pins").and_then(Value::as_object) {
        for (user, lane) in map {
            let lane = lane
                .as_str()
                .ok_or_else(|| DecodeError(format!("pin of `{user}` is not a string")))?;
            let zone = zones.by_lane(lane).ok_or_else(|| {
                DecodeError(format!("pin of `{user}` names unknown lane `{lane}`"))
            })?;
            pins.insert(user.clone(), zone);
        }
    }
    let global = match value.get("global_writer") {
        Some(Value::Object(g)) => GlobalWriter {
            zone: match g.get("zone") {
                Some(Value::String(name)) => Some(zones.color_in(name).ok_or_else(|| {
                    DecodeError(format!("`global_writer.zone` names unknown zone `{name}`"))
                })?),
                _ => None,
            },
            read_only: g.get("read_only").and_then(Value::as_bool).unwrap_or(false),
            frozen: g.get("frozen").and_then(Value::as_bool).unwrap_or(false),
        },
        _ => GlobalWriter::default(),
    };
    let mut domains = std::collections::BTreeMap::new();
    if let Some(named) = value.get("domains").and_then(Value::as_object) {
        for (name, domain) in named {
            let runs = field(domain, "unit_map")?;
            let map = decode_map(runs, &zones, units)
                .map_err(|e| DecodeError(format!("domain `{name}`: {}", e.0)))?;
            domains.insert(name.clone(), map);
        }
    }
    // Units frozen by a move in progress, by domain (absent between moves, and from
    // coordinators before loss-less moves).
    let mut frozen = BTreeMap::new();
    if let Some(named) = value.get("frozen").and_then(Value::as_object) {
        for (domain, units) in named {
            let text = units
                .as_str()
                .ok_or_else(|| DecodeError(format!("`frozen.{domain}` is not a string")))?;
            let set = UnitSet::parse(text, units_count)
                .map_err(|e| DecodeError(format!("`frozen.{domain}`: {e}")))?;
            frozen.insert(domain.clone(), set);
        }
    }
    // Release channels (absent from coordinators before channels).
    let mut channels = BTreeMap::new();
    if let Some(list) = value.get("channels").and_then(Value::as_array) {
        for (i, c) in list.iter().enumerate() {
            let channel = decode_channel(c, &zones, units_count)
                .map_err(|e| DecodeError(format!("`channels[{i}]`: {}", e.0)))?;
            channels.insert(channel.name.clone(), channel);
        }
    }
    // The freeze of a loss-less channel change in progress (null or absent between changes,
    // and from coordinators before loss-less channel changes).
    let channel_freeze = match value.get("channel_freeze") {
        None | Some(Value::Null) => None,
        Some(f) => Some(
            decode_channel_freeze(f, units_count)
                .map_err(|e| DecodeError(format!("`channel_freeze`: {}", e.0)))?,
        ),
    };
    RoutingTable::from_map(version, scheme, map, pins, zones, global)
        .and_then(|t| t.with_domains(domains))
        .and_then(|t| t.with_frozen(frozen))
        .and_then(|t| t.with_channels(channels))
        .and_then(|t| t.with_channel_freeze(channel_freeze))
        .map_err(|e| DecodeError(e.to_string()))
}

/// `channel_freeze`: the channel, its domain, the services, units and listed users it freezes.
fn decode_channel_freeze(f: &Value, units: u32) -> Result<ChannelFreeze, DecodeError> {
    let strings = |key: &str| -> Result<Vec<String>, DecodeError> {
        f.get(key)
            .and_then(Value::as_array)
            .ok_or_else(|| DecodeError(format!("`{key}` is not a list")))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| DecodeError(format!("`{key}` holds a non-string")))
            })
            .collect()
    };
    let set = text(f, "units")?;
    let mut services = strings("services")?;
    services.sort();
    Ok(ChannelFreeze {
        channel: text(f, "channel")?.to_owned(),
        domain: Some(text(f, "domain")?)
            .filter(|d| *d != tidegate_core::DEFAULT_DOMAIN)
            .map(str::to_owned),
        services,
        units: if set.is_empty() {
            UnitSet::default()
        } else {
            UnitSet::parse(set, units).map_err(|e| DecodeError(format!("`units`: {e}")))?
        },
        users: strings("users")?.into_iter().collect(),
    })
}

/// One release channel of `channels`: name, domain, services, the receiving lane, its users as a
/// unit set and IDs, fallback and whether it is suspended.
fn decode_channel(c: &Value, zones: &Zones, units: u32) -> Result<Channel, DecodeError> {
    let strings = |key: &str| -> Result<Vec<String>, DecodeError> {
        match c.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(list)) => list
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| DecodeError(format!("`{key}` holds a non-string")))
                })
                .collect(),
            Some(_) => Err(DecodeError(format!("`{key}` is not a list"))),
        }
    };
    let lane = text(c, "lane")?;
    let set = text(c, "units")?;
    let fallback = text(c, "fallback")?;
    Ok(Channel {
        name: text(c, "name")?.to_owned(),
        domain: c
            .get("domain")
            .and_then(Value::as_str)
            .filter(|d| *d != tidegate_core::DEFAULT_DOMAIN)
            .map(str::to_owned),
        services: strings("services")?,
        zone: zones
            .by_lane(lane)
            .ok_or_else(|| DecodeError(format!("`lane` names unknown lane `{lane}`")))?,
        units: if set.is_empty() {
            UnitSet::default()
        } else {
            UnitSet::parse(set, units).map_err(|e| DecodeError(format!("`units`: {e}")))?
        },
        users: strings("users")?.into_iter().collect(),
        fallback: ChannelFallback::parse(fallback)
            .ok_or_else(|| DecodeError(format!("unknown `fallback` `{fallback}`")))?,
        expires_at_ms: c.get("expires_at_ms").and_then(Value::as_u64),
        suspended: c.get("suspended").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn decode_zones(value: &Value) -> Result<Zones, DecodeError> {
    let list = value.as_array().ok_or_else(|| DecodeError("`zones` is not a list".into()))?;
    let mut specs = Vec::with_capacity(list.len());
    for (i, z) in list.iter().enumerate() {
        if number(z, "index")? != i as u64 {
            return Err(DecodeError(format!("`zones[{i}].index` is not {i}")));
        }
        let class = ZoneClass::parse(text(z, "class")?).map_err(|e| DecodeError(e.to_string()))?;
        let mut spec = ZoneSpec::new(text(z, "name")?, text(z, "lane")?, class);
        spec.retired = z.get("retired").and_then(Value::as_bool).unwrap_or(false);
        specs.push(spec);
    }
    Zones::from_specs(specs).map_err(|e| DecodeError(format!("`zones`: {e}")))
}

fn decode_map(value: &Value, zones: &Zones, units: u32) -> Result<UnitMap, DecodeError> {
    let list = value.as_array().ok_or_else(|| DecodeError("`unit_map` is not a list".into()))?;
    let mut runs = Vec::with_capacity(list.len());
    for (i, run) in list.iter().enumerate() {
        let range = text(run, "units")?;
        let bad = || DecodeError(format!("`unit_map[{i}].units` is not `from-to`: `{range}`"));
        let (from, to) = range.split_once('-').ok_or_else(bad)?;
        let (first, last) =
            (from.parse::<u32>().map_err(|_| bad())?, to.parse::<u32>().map_err(|_| bad())?);
        let lane = text(run, "lane")?;
        let zone = zones.by_lane(lane).ok_or_else(|| {
            DecodeError(format!("`unit_map[{i}].lane` `{lane}` is not a zone's lane"))
        })?;
        runs.push(Run { first, last, zone });
    }
    UnitMap::from_runs(&runs, units).map_err(|e| DecodeError(format!("`unit_map`: {e}")))
}
