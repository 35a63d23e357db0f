//! The on-disk (and on-wire) form of log entries: serde types kept at the edge of the core.

use serde::{Deserialize, Serialize};

use crate::core::{Audit, Color, Command, Envelope, Genesis, UnitMode, UnitScheme};

/// Version of the entry format, written into the genesis entry.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LogEntry {
    /// Always the first entry: fixes the unit scheme and the starting dial.
    Genesis {
        format: u32,
        units: u32,
        unit_mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digits_skip: Option<u8>,
        blue_units: u32,
        at_ms: u64,
        by: String,
        reason: String,
    },
    /// An accepted command; applying it produced `version`.
    Change {
        version: u64,
        expected_version: u64,
        at_ms: u64,
        by: String,
        reason: String,
        command: WireCommand,
        from: String,
        to: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireCommand {
    SetBlueUnits { blue_units: u32 },
    Pin { user_id: String, color: String },
    Unpin { user_id: String },
}

impl LogEntry {
    pub fn genesis(genesis: &Genesis, audit: &Audit) -> LogEntry {
        let (unit_mode, digits_skip) = match genesis.scheme.mode() {
            UnitMode::Hash => ("hash".to_owned(), None),
            UnitMode::Digits { skip } => ("digits".to_owned(), Some(skip)),
        };
        LogEntry::Genesis {
            format: FORMAT,
            units: genesis.scheme.count(),
            unit_mode,
            digits_skip,
            blue_units: genesis.blue_units,
            at_ms: audit.at_ms,
            by: audit.by.clone(),
            reason: audit.reason.clone(),
        }
    }

    pub fn change(envelope: &Envelope, version: u64, from: &str, to: &str) -> LogEntry {
        LogEntry::Change {
            version,
            expected_version: envelope.expected_version,
            at_ms: envelope.audit.at_ms,
            by: envelope.audit.by.clone(),
            reason: envelope.audit.reason.clone(),
            command: WireCommand::from(&envelope.command),
            from: from.to_owned(),
            to: to.to_owned(),
        }
    }
}

impl From<&Command> for WireCommand {
    fn from(command: &Command) -> Self {
        match command {
            Command::SetBlueUnits { blue_units } => WireCommand::SetBlueUnits {
                blue_units: *blue_units,
            },
            Command::Pin { user_id, color } => WireCommand::Pin {
                user_id: user_id.clone(),
                color: color.as_str().to_owned(),
            },
            Command::Unpin { user_id } => WireCommand::Unpin {
                user_id: user_id.clone(),
            },
        }
    }
}

impl WireCommand {
    pub fn to_command(&self) -> Result<Command, String> {
        Ok(match self {
            WireCommand::SetBlueUnits { blue_units } => Command::SetBlueUnits {
                blue_units: *blue_units,
            },
            WireCommand::Pin { user_id, color } => Command::Pin {
                user_id: user_id.clone(),
                color: color.parse::<Color>().map_err(|e| e.to_string())?,
            },
            WireCommand::Unpin { user_id } => Command::Unpin {
                user_id: user_id.clone(),
            },
        })
    }

    /// A short name for the audit log and metrics.
    pub fn action(&self) -> &'static str {
        match self {
            WireCommand::SetBlueUnits { .. } => "dial",
            WireCommand::Pin { .. } => "pin",
            WireCommand::Unpin { .. } => "unpin",
        }
    }
}

/// Rebuilds the unit scheme recorded in a genesis entry.
pub fn scheme_of(
    units: u32,
    unit_mode: &str,
    digits_skip: Option<u8>,
) -> Result<UnitScheme, String> {
    let mode = match unit_mode {
        "hash" => UnitMode::Hash,
        "digits" => UnitMode::Digits {
            skip: digits_skip.unwrap_or(0),
        },
        other => return Err(format!("unknown unit_mode `{other}`")),
    };
    UnitScheme::new(units, mode).map_err(|e| format!("units: {e}"))
}
