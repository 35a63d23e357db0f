//! Pins: `Pin` forces a user to a zone whatever their unit, `Unpin` lets them follow it again.
//! A plan's pin step checks a pin the same way ([`check_pin`]).

use std::sync::Arc;

use super::{Change, CommandError, Outcome, changed};
use crate::table::RoutingTable;
use crate::unit::validate_user_id;
use crate::zone::ZoneId;

/// How many users may be pinned at once: pins are for testers and incidents, not for routing
/// whole populations (that is what units are for), and the whole table is pushed to every
/// subscriber on every change.
pub const MAX_PINS: usize = 10_000;

pub(super) fn pin(c: &mut Change, user_id: &str, color: ZoneId) -> Outcome {
    let s = c.before;
    s.live_zone(color)?;
    let before = check_pin(&s.table, user_id)?;
    if before == Some(color) {
        return Ok(None);
    }
    check_room(&s.table, before)?;
    Arc::make_mut(&mut c.table.pins).insert(user_id.to_owned(), color);
    changed(describe_pin(&s.table, user_id, before), describe_pin(&s.table, user_id, Some(color)))
}

pub(super) fn unpin(c: &mut Change, user_id: &str) -> Outcome {
    let before = Arc::make_mut(&mut c.table.pins)
        .remove(user_id)
        .ok_or_else(|| CommandError::PinNotFound(user_id.to_owned()))?;
    changed(
        describe_pin(&c.before.table, user_id, Some(before)),
        describe_pin(&c.before.table, user_id, None),
    )
}

/// Checks a user ID a pin names and returns the user's pin before it. A pinned user must still
/// have a unit (digits mode checks the ID's shape).
pub(super) fn check_pin(
    table: &RoutingTable,
    user_id: &str,
) -> Result<Option<ZoneId>, CommandError> {
    validate_user_id(user_id)?;
    table.scheme.unit_of(user_id)?;
    Ok(table.pins.get(user_id).copied())
}

/// Refuses a new pin (one of a user not pinned `before`) beyond [`MAX_PINS`].
pub(super) fn check_room(table: &RoutingTable, before: Option<ZoneId>) -> Result<(), CommandError> {
    if before.is_none() && table.pins.len() >= MAX_PINS {
        return Err(CommandError::TooManyPins);
    }
    Ok(())
}

fn describe_pin(table: &RoutingTable, user_id: &str, color: Option<ZoneId>) -> String {
    match color {
        Some(color) => format!("user {user_id} pinned {}", table.zones.lane(color)),
        None => format!("user {user_id} not pinned"),
    }
}
