//! Release channels: `PutChannel` creates or replaces one, `DeleteChannel` removes one (by an
//! operator, or at its expiry). The rules themselves are the pure `crate::channel`.

use std::sync::Arc;

use super::{Change, Outcome, changed};
use crate::channel::{self, Channel};

pub(super) fn put(c: &mut Change, ch: &Channel) -> Outcome {
    c.before.live_zone(ch.zone)?;
    match channel::put(&c.before.table, ch, c.at_ms())? {
        Some((from, to, channels)) => {
            c.table.channels = Arc::new(channels);
            changed(from, to)
        }
        None => Ok(None),
    }
}

pub(super) fn delete(c: &mut Change, name: &str, expired: bool) -> Outcome {
    let (from, to, channels) = channel::delete(&c.before.table, name, expired)?;
    c.table.channels = Arc::new(channels);
    changed(from, to)
}
