//! The automation switch: `SetAutomation` stops automatic failover, or starts and re-arms it.

use super::{Change, Outcome, changed};
use crate::automation::Automation;

pub(super) fn set(c: &mut Change, stopped: bool) -> Outcome {
    let before = &c.before.automation;
    let at_ms = c.at_ms();
    let from = if before.stopped { "automation stopped" } else { "automation on" };
    c.next.automation = Automation {
        stopped,
        // Starting (or re-arming) clears the caps' memory; stopping keeps it.
        armed_ms: if stopped { before.armed_ms } else { at_ms },
        changed_by: c.audit.by.clone(),
        changed_ms: at_ms,
        reason: c.audit.reason.clone(),
    };
    let to = if stopped {
        "automation stopped"
    } else {
        "automation on, re-armed (earlier automatic runs no longer count)"
    };
    changed(from, to)
}
