//! The colour as an OpenFeature flag: the pure evaluation behind the OFREP endpoints of the
//! coordinator and of `tidegate edge` (both call [`evaluate_color_flag`], so they cannot disagree).
//!
//! Reasons (OpenFeature's standard reason strings):
//! - `SPLIT`: the user's unit decided (a pseudorandom, sticky split by hash or digits);
//! - `TARGETING_MATCH`: a pin for this very user decided;
//! - `DEFAULT`: no targeting key, and the configured fallback (`random`) drew the colour.
//!
//! Errors follow OFREP's error codes: an unknown key is `FLAG_NOT_FOUND`; a context without a
//! targeting key under the `reject` fallback is `TARGETING_KEY_MISSING`; a targeting key that is
//! not a valid user ID (not a string, too long, not numeric in digits mode...) is
//! `INVALID_CONTEXT`. `PARSE_ERROR` and `GENERAL` are decided by the HTTP layer (bad JSON, no table).

use super::table::{Fallback, RoutingTable};
use super::unit::Unit;
use super::zone::ZoneId;

/// The flag key when none is configured.
pub const DEFAULT_FLAG_KEY: &str = "tidegate-color";

/// Why the flag has its value, as an OpenFeature reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagReason {
    /// The user's unit decided.
    Split,
    /// A pin for this user decided.
    TargetingMatch,
    /// No targeting key: the fallback decided.
    Default,
}

impl FlagReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FlagReason::Split => "SPLIT",
            FlagReason::TargetingMatch => "TARGETING_MATCH",
            FlagReason::Default => "DEFAULT",
        }
    }
}

/// The targeting key as found in an evaluation context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetingKey<'a> {
    /// Absent or `null`.
    Missing,
    /// Present but not a string.
    NotAString,
    Given(&'a str),
}

/// A successful evaluation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlagEvaluation {
    pub color: ZoneId,
    pub reason: FlagReason,
    /// The unit, when a targeting key was given.
    pub unit: Option<Unit>,
    pub version: u64,
    /// The user's unit is frozen by a move in progress: writes must wait (OFREP metadata
    /// `writeFrozen`), reads go on.
    pub write_frozen: bool,
    /// The release channel that decided, for a context that names its service.
    pub channel: Option<String>,
}

/// OFREP's error codes, for the failures the pure evaluation can decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error("flag `{0}` does not exist here; the colour flag is `{1}`")]
    FlagNotFound(String, String),
    #[error(
        "the evaluation context has no targetingKey (the user ID), and the fallback is `reject`"
    )]
    TargetingKeyMissing,
    #[error("the evaluation context is invalid: {0}")]
    InvalidContext(String),
    #[error(
        "release channel `{0}` of the context's service is suspended (its zone was evacuated) and its fallback is `reject`"
    )]
    ChannelUnavailable(String),
}

impl FlagError {
    /// The OFREP `errorCode`.
    pub fn code(&self) -> &'static str {
        match self {
            FlagError::FlagNotFound(..) => "FLAG_NOT_FOUND",
            FlagError::TargetingKeyMissing => "TARGETING_KEY_MISSING",
            FlagError::InvalidContext(_) => "INVALID_CONTEXT",
            FlagError::ChannelUnavailable(_) => "GENERAL",
        }
    }
}

/// Evaluates flag `requested` for `key` against `table`, for a call of `service` when the
/// context names one (its release channel may decide: pin > channel > map, as `GET /v1/tag`).
/// `draw` is a uniform sample in `[0, 1)` for the random fallback (the core draws no random
/// numbers).
pub fn evaluate_color_flag(
    table: &RoutingTable,
    flag_key: &str,
    requested: &str,
    key: TargetingKey<'_>,
    service: Option<&str>,
    fallback: Fallback,
    draw: f64,
) -> Result<FlagEvaluation, FlagError> {
    // One flag per routing domain: `<flag_key>` is the default domain, `<flag_key>.<domain>`
    // a named one.
    let (map, domain) = if requested == flag_key {
        (table.map(), None)
    } else {
        requested
            .strip_prefix(flag_key)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|domain| table.domains().get(domain).map(|map| (map, Some(domain))))
            .ok_or_else(|| FlagError::FlagNotFound(requested.to_owned(), flag_key.to_owned()))?
    };
    let version = table.version();
    match key {
        TargetingKey::NotAString => {
            Err(FlagError::InvalidContext("targetingKey must be a string (the user ID)".into()))
        }
        TargetingKey::Missing => match table.untagged(fallback, draw) {
            Ok(color) => Ok(FlagEvaluation {
                color,
                reason: FlagReason::Default,
                unit: None,
                version,
                write_frozen: false,
                channel: None,
            }),
            Err(_) => Err(FlagError::TargetingKeyMissing),
        },
        TargetingKey::Given(user_id) => {
            let tag = super::unit::validate_user_id(user_id)
                .and_then(|()| table.tag_in(map, user_id))
                .map_err(|e| FlagError::InvalidContext(format!("targetingKey: {e}")))?;
            // A channel of the context's service takes precedence over the map (not a pin).
            let (color, channel) = match service {
                Some(service) => match table.tag_service(domain, user_id, Some(service)) {
                    Ok(Some((t, super::table::Rule::Channel(name)))) => {
                        (t.color, Some(name.to_owned()))
                    }
                    Ok(_) => (tag.color, None),
                    Err(super::table::TagError::ChannelUnavailable(name)) => {
                        return Err(FlagError::ChannelUnavailable(name));
                    }
                    Err(e) => return Err(FlagError::InvalidContext(format!("targetingKey: {e}"))),
                },
                None => (tag.color, None),
            };
            // A channel is a targeting rule, like a pin.
            let reason = if tag.pinned || channel.is_some() {
                FlagReason::TargetingMatch
            } else {
                FlagReason::Split
            };
            // The write checks' rule: a map move's freeze, or a channel change's of the service.
            let write_frozen = table.write_frozen(domain, service, user_id, &tag);
            Ok(FlagEvaluation {
                color,
                reason,
                unit: Some(tag.unit),
                version,
                write_frozen,
                channel,
            })
        }
    }
}
