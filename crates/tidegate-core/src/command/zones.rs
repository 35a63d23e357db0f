//! Zone lifecycle and the global writer: `AddZone` appends a zone, `RetireZone` retires an idle
//! one, `SetGlobalWriter` chooses the zone that takes global writes.

use super::{Change, CommandError, Outcome, changed};
use crate::table::{GlobalWriter, RoutingTable};
use crate::zone::{ZoneId, ZoneSpec};

/// Appends a zone to the list. It owns nothing until units are moved to it.
pub(super) fn add(c: &mut Change, spec: &ZoneSpec) -> Outcome {
    if spec.retired {
        return Err(CommandError::InvalidMove("a new zone cannot be retired".into()));
    }
    let before = &c.before.table.zones;
    let (zones, id) = before.with(spec.clone())?;
    c.table.zones = zones;
    changed(
        format!("{} zone(s)", before.len()),
        format!(
            "zone {} added as index {} (lane {}, {})",
            spec.name,
            id.0,
            spec.lane,
            spec.class.as_str()
        ),
    )
}

/// Retires a zone: refused while it owns units (in any domain) or pins, or takes global writes.
pub(super) fn retire(c: &mut Change, zone: ZoneId) -> Outcome {
    let s = c.before;
    s.no_units_change()?;
    let spec = s.live_zone(zone)?;
    let busy = |what: String| Err(CommandError::ZoneBusy { zone: spec.name.clone(), what });
    let owned =
        s.table.map.count(zone) + s.table.domains.values().map(|m| m.count(zone)).sum::<u32>();
    if owned > 0 {
        return busy(format!("owns {owned} unit(s)"));
    }
    let pinned = s.table.pins.values().filter(|z| **z == zone).count();
    if pinned > 0 {
        return busy(format!("has {pinned} pinned user(s)"));
    }
    if s.table.global.zone == Some(zone) {
        return busy("takes global writes".to_owned());
    }
    if let Some(channel) = s.table.channels.values().find(|ch| ch.zone == zone) {
        return busy(format!("receives release channel `{}`", channel.name));
    }
    c.table.zones = s.table.zones.retiring(zone);
    changed(format!("zone {} live", spec.name), format!("zone {} retired", spec.name))
}

pub(super) fn set_global_writer(c: &mut Change, zone: Option<ZoneId>, read_only: bool) -> Outcome {
    if let Some(zone) = zone {
        c.before.live_zone(zone)?;
    }
    // Inside a hold of global writes, made at once (every live subscriber refuses global
    // writes already); they stay frozen until the hold's release.
    let held = c.before.units_change().is_some_and(|h| h.is_held()) && c.before.table.global.frozen;
    if !held {
        c.before.no_units_change()?;
    }
    let next_global = GlobalWriter { zone, read_only, frozen: held };
    if next_global == c.before.table.global {
        return Ok(None);
    }
    c.table.global = next_global;
    changed(describe_global(&c.before.table), describe_global(&c.table))
}

pub(super) fn describe_global(table: &RoutingTable) -> String {
    let zone = table.global.zone.map_or("no zone", |z| table.zones.zone_of(z));
    let mode = if table.global.read_only { "read-only" } else { "writable" };
    format!("global writes: {zone} ({mode})")
}
