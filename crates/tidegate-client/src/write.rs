//! The write contract a service implements: check, answer, forward once.
//!
//! A write handler asks [`crate::Router::check_write`] with the user, its own zone and the
//! routing version the caller propagated (`x-tidegate-version`), then does what the answer says:
//!
//! | answer | meaning | HTTP |
//! |---|---|---|
//! | `owned` | this zone owns the user at a table at least as new as the caller's | write |
//! | `misrouted` | another zone owns the user, at a table at least as new as the caller's | forward once, or 421 naming the owner |
//! | `behind` | the caller decided at a newer version than the local table | 503 + `Retry-After` (the local copy catches up) |
//! | `frozen` | the user's unit is frozen by a move in progress | 503 + `Retry-After` (reads go on) |
//! | `unconfirmed` | this copy of the table was not confirmed current within its lease (cut off from the coordinators) | 503 + `Retry-After` (reads go on) |
//!
//! [`forward_once`] turns an answer and the request's hop header into a [`WriteRoute`]: a
//! misrouted write without a hop header is forwarded to the owner with `x-tidegate-hop: 1`; a
//! misrouted write that already took its hop is refused, so two stale services never bounce a
//! write between them.

use std::time::Duration;

use tidegate_core::{RoutingTable, WRITE_RETRY_AFTER_MS, WriteCheck, ZoneId};

use crate::header_names::{COLOR_HEADER, VERSION_HEADER};
use crate::metrics::{CLIENT_MISROUTED, CLIENT_WRITE_CHECKS};

/// The header a forwarded write carries: how many hops it took (`1`).
pub const HOP_HEADER: &str = "x-tidegate-hop";

/// The answer of a write check, with what a response needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteAnswer {
    pub check: WriteCheck,
    /// The version of the local table that judged.
    pub version: u64,
    /// The user's owner zone and its lane at that version.
    pub owner: ZoneId,
    pub owner_zone: String,
    pub owner_lane: String,
}

impl WriteAnswer {
    pub(crate) fn new(table: &RoutingTable, check: WriteCheck) -> WriteAnswer {
        let owner = match check {
            WriteCheck::Frozen { owner, .. } | WriteCheck::Misrouted { owner } => Some(owner),
            WriteCheck::Owned | WriteCheck::Behind { .. } | WriteCheck::Unconfirmed => None,
        };
        let owner = owner.unwrap_or(ZoneId::BLUE);
        WriteAnswer {
            check,
            version: table.version(),
            owner,
            owner_zone: table.zone_of(owner).to_owned(),
            owner_lane: table.lane(owner).to_owned(),
        }
    }

    /// Whether the write may go ahead here.
    pub fn is_owned(&self) -> bool {
        self.check == WriteCheck::Owned
    }

    /// How long a `behind`, `frozen` or `unconfirmed` write should wait before it retries.
    pub fn retry_after(&self) -> Option<Duration> {
        matches!(
            self.check,
            WriteCheck::Behind { .. } | WriteCheck::Frozen { .. } | WriteCheck::Unconfirmed
        )
        .then_some(Duration::from_millis(WRITE_RETRY_AFTER_MS))
    }

    /// The HTTP status a service answers with when it does not write: 421 for `misrouted`, 503
    /// for `behind`, `frozen` and `unconfirmed`; `None` for `owned`.
    pub fn status(&self) -> Option<u16> {
        match self.check {
            WriteCheck::Owned => None,
            WriteCheck::Misrouted { .. } => Some(421),
            WriteCheck::Behind { .. } | WriteCheck::Frozen { .. } | WriteCheck::Unconfirmed => {
                Some(503)
            }
        }
    }
}

pub(crate) fn count(answer: &WriteAnswer) {
    metrics::counter!(CLIENT_WRITE_CHECKS, "answer" => answer.check.as_str()).increment(1);
    if let WriteCheck::Misrouted { .. } = answer.check {
        metrics::counter!(CLIENT_MISROUTED, "color" => answer.owner_lane.clone()).increment(1);
    }
}

/// What a write handler does with a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteRoute {
    /// Write here.
    Write,
    /// Send the request once to `zone` (its lane `lane`) with these headers added (the hop,
    /// the owner's colour and the deciding version).
    Forward { zone: String, lane: String, headers: Vec<(&'static str, String)> },
    /// Answer `status` (421 or 503) without writing; `retry_after` for 503.
    Refuse { status: u16, retry_after: Option<Duration>, detail: String },
}

/// The route of a write from its check and the request's [`HOP_HEADER`] (`hop`): misrouted
/// writes are forwarded to the owner once; a write that already took a hop and is misrouted
/// again is refused with 421 (a second non-owner never forwards, so forwarding cannot
/// ping-pong between two stale services).
pub fn forward_once(answer: &WriteAnswer, hop: Option<&str>) -> WriteRoute {
    let hopped = hop.map(str::trim).is_some_and(|h| !h.is_empty() && h != "0");
    match answer.check {
        WriteCheck::Owned => WriteRoute::Write,
        WriteCheck::Misrouted { .. } if !hopped => WriteRoute::Forward {
            zone: answer.owner_zone.clone(),
            lane: answer.owner_lane.clone(),
            headers: vec![
                (HOP_HEADER, "1".to_owned()),
                (COLOR_HEADER, answer.owner_lane.clone()),
                (VERSION_HEADER, answer.version.to_string()),
            ],
        },
        WriteCheck::Misrouted { .. } => WriteRoute::Refuse {
            status: 421,
            retry_after: None,
            detail: format!(
                "the user belongs to {} ({}) at routing version {}, and the write was already forwarded once",
                answer.owner_zone, answer.owner_lane, answer.version
            ),
        },
        WriteCheck::Behind { incoming, local } => WriteRoute::Refuse {
            status: 503,
            retry_after: answer.retry_after(),
            detail: format!(
                "the caller routed at version {incoming}, this service's table is at {local}; retry once it catches up"
            ),
        },
        WriteCheck::Frozen { unit, .. } => WriteRoute::Refuse {
            status: 503,
            retry_after: answer.retry_after(),
            detail: format!("unit {unit} is frozen by a move in progress; retry shortly"),
        },
        WriteCheck::Unconfirmed => WriteRoute::Refuse {
            status: 503,
            retry_after: answer.retry_after(),
            detail: format!(
                "this service's table (version {}) has not been confirmed current within its lease; retry once the coordinators are reachable",
                answer.version
            ),
        },
    }
}
