//! The table lease: how long a copy of the routing table may answer `owned` to a write check
//! after the coordinator last confirmed it current. Pure arithmetic; time is an argument.
//!
//! A replica *confirms* at `c` (its wall clock, Unix milliseconds) when it has read its whole
//! command log as of `c`: on the file log always, on a shared log when a record it wrote at `c`
//! came back to it through the log (so nothing committed before `c` is unread). It sends `c` in
//! the heartbeats of every watch stream (`:heartbeat c=<ms>`), and an edge forwards it unchanged.
//! A subscriber that receives `c` may answer `owned` until `c + T` (the lease `T`, announced in
//! the stream's head), measured on its own monotonic clock from the moment it received `c`:
//! [`lease_left`] gives how long, never more than `T`.
//!
//! Why this bounds a cut-off copy: a freeze committed at `f` is applied by a replica before any
//! confirmation at a time after `f`, and the stream carries events before the heartbeats behind
//! them, so a subscriber that has not applied the freeze holds a confirmation from before `f`: its
//! lease ends by `f + T + skew`, where `skew` bounds how far the subscriber's wall clock may trail
//! the replica's. A barrier that waits [`lease_bound_ms`] after a freeze is committed therefore
//! knows that every copy that missed the freeze stopped answering `owned`, whether or not it can
//! hear from it (docs/src/partitions.md).

/// How long a copy confirmed at `confirmed_at_ms` (the replica's wall clock) may answer `owned`,
/// seen at `now_ms` (the subscriber's wall clock, when the confirmation arrived), under the
/// lease `lease_ms`. Never more than the lease: a confirmation from a clock ahead of ours does
/// not buy more than `T`; one that arrives late buys only what is left of it.
pub fn lease_left(confirmed_at_ms: u64, lease_ms: u64, now_ms: u64) -> u64 {
    confirmed_at_ms.saturating_add(lease_ms).saturating_sub(now_ms).min(lease_ms)
}

/// How long after a freeze was committed every copy that has not applied it has stopped
/// answering `owned`: the lease and the largest clock skew allowed between a subscriber and a
/// replica.
pub fn lease_bound_ms(lease_ms: u64, max_clock_skew_ms: u64) -> u64 {
    lease_ms.saturating_add(max_clock_skew_ms)
}

/// The heartbeat comment that confirms at `confirmed_at_ms` (without the SSE framing), and the
/// one that confirms nothing.
pub fn heartbeat_text(confirmed_at_ms: Option<u64>) -> String {
    match confirmed_at_ms {
        Some(c) => format!(":heartbeat c={c}"),
        None => ":heartbeat".to_owned(),
    }
}

/// The confirmation a heartbeat comment carries: the `c=` field of `:heartbeat c=<ms> ...`
/// (the comment's text after the colon, with or without the leading colon). Unknown fields are
/// ignored; a bare heartbeat, a malformed `c` or another comment confirm nothing.
pub fn parse_confirmation(comment: &str) -> Option<u64> {
    let text = comment.strip_prefix(':').unwrap_or(comment);
    let mut words = text.split_ascii_whitespace();
    if words.next()? != "heartbeat" {
        return None;
    }
    words.find_map(|w| w.strip_prefix("c=")).and_then(|c| c.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per case: (confirmed at, lease, received at, left).
    #[test]
    fn a_confirmation_buys_what_is_left_of_its_lease_and_never_more() {
        for (c, t, now, left) in [
            (10_000, 6_000, 10_000, 6_000), // fresh
            (10_000, 6_000, 10_250, 5_750), // arrived 250 ms late
            (10_000, 6_000, 16_000, 0),     // arrived after its lease
            (10_000, 6_000, 99_000, 0),     // long after
            (10_500, 6_000, 10_000, 6_000), // the replica's clock is ahead: still at most T
            (u64::MAX, 6_000, 0, 6_000),    // no overflow
            (0, 0, 0, 0),                   // no lease
        ] {
            assert_eq!(lease_left(c, t, now), left, "c={c} T={t} now={now}");
        }
    }

    #[test]
    fn heartbeats_carry_their_confirmation_and_nothing_else_confirms() {
        for (text, parsed) in [
            (":heartbeat c=1765080000123", Some(1_765_080_000_123)),
            ("heartbeat c=5", Some(5)),
            (":heartbeat c=5 x=1", Some(5)),
            (":heartbeat x=1 c=7", Some(7)),
            (":heartbeat", None),
            (":heartbeat c=", None),
            (":heartbeat c=-1", None),
            (":heartbeat c=12ab", None),
            (":hello c=5", None),
            ("", None),
        ] {
            assert_eq!(parse_confirmation(text), parsed, "{text:?}");
        }
        assert_eq!(parse_confirmation(&heartbeat_text(Some(42))), Some(42));
        assert_eq!(parse_confirmation(&heartbeat_text(None)), None);
    }

    #[test]
    fn the_barrier_bound_is_the_lease_and_the_skew() {
        assert_eq!(lease_bound_ms(6_000, 500), 6_500);
        assert_eq!(lease_bound_ms(u64::MAX, 500), u64::MAX);
    }
}
