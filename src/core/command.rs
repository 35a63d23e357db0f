//! Commands that change the routing state, and the pure function that applies them.
//!
//! Every change is an [`Envelope`]: a command, the version it expects (compare-and-set) and an
//! audit record. [`State::apply`] either returns the next state or says why not, without side
//! effects; the store logs accepted envelopes and rebuilds the state by applying them again.

use std::collections::BTreeMap;

use super::color::{Color, ColorZones};
use super::dial::{DialError, Share, percent_of};
use super::table::RoutingTable;
use super::unit::{UnitError, UnitScheme};
use super::validate_user_id;

/// How many users may be pinned at once: pins are for testers and incidents, not for routing
/// whole populations (that is what units are for), and the whole table is pushed to every
/// subscriber on every change.
pub const MAX_PINS: usize = 10_000;

/// Longest accepted audit reason, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The first record of every log: the unit scheme is fixed for the life of a log because changing
/// it would move almost every user at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Genesis {
    pub scheme: UnitScheme,
    pub blue_units: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Move the dial to `blue_units` of the table's units.
    SetBlueUnits { blue_units: u32 },
    /// Force a user to a colour, whatever their unit.
    Pin { user_id: String, color: Color },
    /// Remove a user's pin.
    Unpin { user_id: String },
}

/// Who asked for a change, when (milliseconds since the Unix epoch, read by the caller) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub by: String,
    pub at_ms: u64,
    pub reason: String,
}

/// A command with the version it expects and its audit record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub expected_version: u64,
    pub command: Command,
    pub audit: Audit,
}

/// What an accepted command did, in words an operator reads in the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub version: u64,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommandError {
    #[error("the routing table is at version {current}, not the expected version {expected}")]
    VersionConflict { expected: u64, current: u64 },
    #[error(transparent)]
    Dial(#[from] DialError),
    #[error(transparent)]
    InvalidUserId(#[from] UnitError),
    #[error("user `{0}` is not pinned")]
    PinNotFound(String),
    #[error("at most {MAX_PINS} users may be pinned at once")]
    TooManyPins,
    #[error("a reason is required for every change")]
    MissingReason,
    #[error("the reason is {0} bytes long; at most {MAX_REASON_BYTES} bytes are allowed")]
    ReasonTooLong(usize),
    #[error("the operator name is empty")]
    MissingActor,
}

/// The whole replicated state: today the routing table; drains join it later.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    table: RoutingTable,
}

impl State {
    /// The state right after the genesis record (version 1).
    pub fn genesis(genesis: Genesis, zones: ColorZones) -> Result<State, DialError> {
        Share::from_units(u64::from(genesis.blue_units), genesis.scheme.count())?;
        Ok(State {
            table: RoutingTable {
                version: 1,
                scheme: genesis.scheme,
                blue_units: genesis.blue_units,
                pins: BTreeMap::new(),
                zones,
            },
        })
    }

    pub fn table(&self) -> &RoutingTable {
        &self.table
    }

    pub fn version(&self) -> u64 {
        self.table.version
    }

    /// Applies an envelope. `Ok(None)` means the command is valid but changes nothing (moving
    /// the dial to where it already is): no version is spent and nothing needs logging.
    pub fn apply(&self, envelope: &Envelope) -> Result<Option<(State, Applied)>, CommandError> {
        let current = self.version();
        if envelope.expected_version != current {
            return Err(CommandError::VersionConflict {
                expected: envelope.expected_version,
                current,
            });
        }
        validate_audit(&envelope.audit)?;
        let mut next = self.table.clone();
        next.version = current + 1;
        let (from, to) = match &envelope.command {
            Command::SetBlueUnits { blue_units } => {
                let share = Share::from_units(u64::from(*blue_units), self.table.units())?;
                if share.blue_units == self.table.blue_units {
                    return Ok(None);
                }
                next.blue_units = share.blue_units;
                (describe_share(&self.table), describe_share(&next))
            }
            Command::Pin { user_id, color } => {
                validate_user_id(user_id)?;
                // A pinned user must still have a unit (digits mode checks the ID's shape).
                self.table.scheme.unit_of(user_id)?;
                let before = self.table.pins.get(user_id).copied();
                if before == Some(*color) {
                    return Ok(None);
                }
                if before.is_none() && self.table.pins.len() >= MAX_PINS {
                    return Err(CommandError::TooManyPins);
                }
                next.pins.insert(user_id.clone(), *color);
                (
                    describe_pin(user_id, before),
                    describe_pin(user_id, Some(*color)),
                )
            }
            Command::Unpin { user_id } => {
                let before = next
                    .pins
                    .remove(user_id)
                    .ok_or_else(|| CommandError::PinNotFound(user_id.clone()))?;
                (
                    describe_pin(user_id, Some(before)),
                    describe_pin(user_id, None),
                )
            }
        };
        let applied = Applied {
            version: next.version,
            from,
            to,
        };
        Ok(Some((State { table: next }, applied)))
    }

    /// The same state under another colour-to-zone mapping (configuration, not logged state).
    pub fn with_zones(self, zones: ColorZones) -> State {
        State {
            table: self.table.with_zones(zones),
        }
    }
}

fn validate_audit(audit: &Audit) -> Result<(), CommandError> {
    if audit.by.trim().is_empty() {
        return Err(CommandError::MissingActor);
    }
    if audit.reason.trim().is_empty() {
        return Err(CommandError::MissingReason);
    }
    if audit.reason.len() > MAX_REASON_BYTES {
        return Err(CommandError::ReasonTooLong(audit.reason.len()));
    }
    Ok(())
}

fn describe_share(table: &RoutingTable) -> String {
    let blue = table.blue_units;
    let units = table.units();
    format!(
        "blue {}% / green {}% ({blue}/{units} units blue)",
        percent_of(blue, units),
        percent_of(units - blue, units)
    )
}

fn describe_pin(user_id: &str, color: Option<Color>) -> String {
    match color {
        Some(color) => format!("user {user_id} pinned {color}"),
        None => format!("user {user_id} not pinned"),
    }
}
