//! Release channels: `PutChannel` creates or replaces one, `DeleteChannel` removes one (by an
//! operator, or at its expiry), and `FreezeChannel`, `SwitchChannel` and `UnfreezeChannel` make
//! either one loss-lessly. The rules themselves are the pure `crate::channel` and
//! `crate::channel_change`.

use std::sync::Arc;

use super::{Change, Outcome, changed};
use crate::channel::{Channel, ChannelError};
use crate::channel_apply as channel;
use crate::channel_change::{ChannelChange, change_freeze};
use crate::staged::Phases;

/// A channel being changed loss-lessly takes no other put or delete.
fn not_changing(c: &Change, name: &str) -> Result<(), ChannelError> {
    match c.before.channel_change() {
        Some(change) if change.name == name => Err(ChannelError::Changing(name.to_owned())),
        _ => Ok(()),
    }
}

pub(super) fn put(c: &mut Change, ch: &Channel) -> Outcome {
    not_changing(c, &ch.name)?;
    put_now(c, ch)
}

fn put_now(c: &mut Change, ch: &Channel) -> Outcome {
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
    not_changing(c, name)?;
    delete_now(c, name, expired)
}

fn delete_now(c: &mut Change, name: &str, expired: bool) -> Outcome {
    let (from, to, channels) = channel::delete(&c.before.table, name, expired)?;
    c.table.channels = Arc::new(channels);
    changed(from, to)
}

/// `FreezeChannel`: checks the change as the switch will make it, freezes the writes it moves
/// (computed from the diff) and records the change. One change at a time.
pub(super) fn freeze(
    c: &mut Change,
    name: &str,
    next: Option<&Channel>,
    window_ms: u64,
) -> Outcome {
    if let Some(other) = c.before.channel_change() {
        return Err(ChannelError::Changing(other.name.clone()).into());
    }
    if window_ms == 0 || window_ms > crate::drain::MAX_FREEZE_MS {
        return Err(ChannelError::FreezeWindow(window_ms).into());
    }
    let before = c.before.table.channels().get(name).cloned();
    // The switch's own checks, now: a change that could not switch is refused before it freezes.
    let (from, to) = match next {
        Some(ch) => {
            if ch.name != name {
                return Err(ChannelError::InvalidName(ch.name.clone()).into());
            }
            c.before.live_zone(ch.zone)?;
            match channel::put(&c.before.table, ch, c.at_ms())? {
                Some((from, to, _)) => (from, to),
                None => return Ok(None),
            }
        }
        None => {
            let (from, to, _) = channel::delete(&c.before.table, name, false)?;
            (from, to)
        }
    };
    let domain = before.as_ref().or(next).and_then(|ch| ch.domain.clone());
    let map = c
        .before
        .table
        .map_of(domain.as_deref())
        .ok_or_else(|| ChannelError::UnknownDomain(domain.clone().unwrap_or_default()))?;
    let freeze = change_freeze(map, name, before.as_ref(), next);
    let version = c.version();
    let what = format!(
        "writes of {} frozen for {} unit(s) and {} listed user(s) until every live subscriber applies version {version}",
        freeze.services.join(","),
        freeze.units.len(),
        freeze.users.len()
    );
    c.table.channel_freeze = Some(Arc::new(freeze));
    c.next.channel_change = Some(Arc::new(ChannelChange {
        name: name.to_owned(),
        next: next.cloned(),
        phases: Phases { frozen_version: version, frozen_ms: c.at_ms(), window_ms, switched: None },
    }));
    changed(from, format!("{to} (loss-less: {what})"))
}

/// The change in progress of channel `name`.
fn change_of<'a>(
    c: &'a Change,
    name: &str,
    action: &'static str,
) -> Result<&'a ChannelChange, ChannelError> {
    match c.before.channel_change() {
        Some(change) if change.name == name => Ok(change),
        _ => Err(ChannelError::ChangePhase(name.to_owned(), action)),
    }
}

/// `SwitchChannel`: puts (or deletes) the channel; its writes stay frozen until the unfreeze.
pub(super) fn switch(c: &mut Change, name: &str) -> Outcome {
    let mut change = change_of(c, name, "switch: it is not freezing")?.clone();
    if change.phases.switched.is_some() {
        return Err(ChannelError::ChangePhase(name.to_owned(), "switch twice").into());
    }
    let words = match &change.next {
        Some(ch) => put_now(c, ch)?,
        None => delete_now(c, name, false)?,
    };
    let (from, to) =
        words.unwrap_or_else(|| (format!("channel {name}"), format!("channel {name}")));
    let version = c.version();
    change.phases.switched = Some((version, c.at_ms()));
    c.next.channel_change = Some(Arc::new(change));
    changed(
        from,
        format!(
            "{to}; its writes stay frozen until every live subscriber applies version {version}"
        ),
    )
}

/// `UnfreezeChannel`: ends the change, after its switch or (`aborted`) without it.
pub(super) fn unfreeze(c: &mut Change, name: &str, aborted: bool) -> Outcome {
    let change = change_of(c, name, "unfreeze: it is not in progress")?.clone();
    if aborted != change.phases.switched.is_none() {
        let why = if aborted { "abort: it has switched" } else { "unfreeze: it has not switched" };
        return Err(ChannelError::ChangePhase(name.to_owned(), why).into());
    }
    c.table.channel_freeze = None;
    c.next.channel_change = None;
    let window = c.at_ms().saturating_sub(change.phases.frozen_ms);
    let to = match change.phases.switched {
        Some((_, at)) => format!(
            "channel {name}'s writes unfrozen after {window} ms (switched {} ms after the freeze)",
            at.saturating_sub(change.phases.frozen_ms)
        ),
        None => format!(
            "channel {name}'s freeze undone after {window} ms without switching: the channel is unchanged"
        ),
    };
    changed(format!("channel {name}'s writes frozen"), to)
}
