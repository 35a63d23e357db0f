//! Catching a user written by two zones: the rule behind `tidegate_dual_owner_writes_total`.
//!
//! Services report a bounded sample of the writes they commit as `(user, zone, version, at)`,
//! the version being the routing version of the table their write check judged with. During a
//! correct move the old owner's last write comes before the new owner's first, and carries an
//! older version. Two zones writing for one user at once shows as a write at an *older* version,
//! by another zone, committed at or after a write at a newer version: the old owner still
//! accepted the user's writes once the new owner had started. That is what [`is_dual_owner`]
//! judges, against the newest-version write seen for the user.

/// One committed write as a service reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteObservation {
    pub zone: String,
    /// The routing version the writer's check judged with.
    pub version: u64,
    /// When it was committed (ms since the epoch, the writer's clock).
    pub at_ms: u64,
}

/// Whether `write` shows a second owner of its user, given `newest`, the write of the highest
/// version seen for the user so far (the latest of those at that version).
pub fn is_dual_owner(newest: &WriteObservation, write: &WriteObservation) -> bool {
    write.zone != newest.zone && write.version < newest.version && write.at_ms >= newest.at_ms
}

/// The observation to keep as the user's newest after `write`.
pub fn newest_after<'a>(
    newest: &'a WriteObservation,
    write: &'a WriteObservation,
) -> &'a WriteObservation {
    if (write.version, write.at_ms) > (newest.version, newest.at_ms) { write } else { newest }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(zone: &str, version: u64, at_ms: u64) -> WriteObservation {
        WriteObservation { zone: zone.into(), version, at_ms }
    }

    #[test]
    fn a_stale_zone_writing_after_the_new_owner_is_a_second_owner() {
        // A correct move: az-b's last write (v5) before az-a's first (v8).
        assert!(!is_dual_owner(&w("az-a", 8, 100), &w("az-a", 8, 120)));
        assert!(!is_dual_owner(&w("az-b", 5, 90), &w("az-a", 8, 100)));
        // Late report of an earlier write: older version, earlier time.
        assert!(!is_dual_owner(&w("az-a", 8, 100), &w("az-b", 5, 90)));
        // The stale zone accepted a write after the new owner had written.
        assert!(is_dual_owner(&w("az-a", 8, 100), &w("az-b", 7, 100)));
        assert!(is_dual_owner(&w("az-a", 8, 100), &w("az-b", 5, 150)));
        // Same zone, any version: one owner.
        assert!(!is_dual_owner(&w("az-a", 8, 100), &w("az-a", 7, 150)));
        assert_eq!(newest_after(&w("az-a", 8, 100), &w("az-b", 9, 50)).zone, "az-b");
        assert_eq!(newest_after(&w("az-a", 8, 100), &w("az-b", 7, 500)).zone, "az-a");
    }
}
