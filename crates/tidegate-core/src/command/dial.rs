//! The two-zone dial: `SetBlueUnits` moves a domain's blue share in the fixed unit order.

use super::describe::describe_share_in;
use super::{Change, CommandError, Outcome, changed};
use crate::dial::Share;
use crate::zone::ZoneId;

/// Moves the dial of `domain` (`None`: the default domain) to `blue_units`; refused while a
/// drain runs or on a table of more than two zones.
pub(super) fn set(c: &mut Change, blue_units: u32, domain: Option<&str>) -> Outcome {
    let s = c.before;
    s.no_running_drain()?;
    s.no_units_change()?;
    if !s.table.zones.is_two() {
        return Err(CommandError::NeedsTwoZones("the dial"));
    }
    let map = s.domain_map(domain)?;
    let share = Share::from_units(u64::from(blue_units), s.table.units())?;
    if share.blue_units == map.count(ZoneId::BLUE) {
        return Ok(None);
    }
    let moved = map.set_count(ZoneId::BLUE, ZoneId::GREEN, share.blue_units);
    c.table.set_map_of(domain, moved);
    changed(describe_share_in(&s.table, domain), describe_share_in(&c.table, domain))
}
