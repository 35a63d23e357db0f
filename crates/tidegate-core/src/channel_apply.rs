//! Channel commands applied to a routing table: `PutChannel` and `DeleteChannel` ([`put`],
//! [`delete`]), the suspension and resumption every command may cause ([`settle`]), expiry, and
//! the audit's words for a channel. The channel types themselves are in `channel.rs`, which
//! knows no table, so the table can hold channels without the two importing each other.

use std::collections::BTreeMap;

use super::channel::{Channel, ChannelError, MAX_CHANNELS, valid_name};
use super::table::RoutingTable;

/// What a channel is, in the words of the audit log.
pub fn describe(table: &RoutingTable, c: &Channel) -> String {
    let users = match (c.units.len(), c.users.len()) {
        (u, 0) => format!("{} of {} units ({})", u, table.units(), c.units),
        (0, n) => format!("{n} listed user(s)"),
        (u, n) => format!("{} of {} units ({}) and {n} listed user(s)", u, table.units(), c.units),
    };
    let mut text = format!(
        "channel {} for {} in domain {}: {} to {} (fallback {}",
        c.name,
        c.services.join(","),
        c.domain_name(),
        users,
        table.zone_of(c.zone),
        c.fallback.as_str()
    );
    if let Some(at) = c.expires_at_ms {
        text.push_str(&format!(", expires at {at} ms"));
    }
    if c.suspended {
        text.push_str(", suspended");
    }
    text.push(')');
    text
}

/// What a channel command did: the audit's from/to words and the table's next channels.
type Applied = (String, String, BTreeMap<String, Channel>);

/// Applies `PutChannel` to `table` at `at_ms`: the new channel map, or `None` when the channel
/// is already exactly so. A channel put again resumes if it was suspended.
pub(crate) fn put(
    table: &RoutingTable,
    channel: &Channel,
    at_ms: u64,
) -> Result<Option<Applied>, ChannelError> {
    if !valid_name(&channel.name) {
        return Err(ChannelError::InvalidName(channel.name.clone()));
    }
    if let Some(at) = channel.expires_at_ms
        && at <= at_ms
    {
        return Err(ChannelError::ExpiryInPast(at));
    }
    table.check_channel(channel, table.channels())?;
    let before = table.channels().get(&channel.name);
    if before == Some(channel) {
        return Ok(None);
    }
    if before.is_none() && table.channels().len() >= MAX_CHANNELS {
        return Err(ChannelError::TooMany);
    }
    let mut channels = table.channels().clone();
    channels.insert(channel.name.clone(), channel.clone());
    let from =
        before.map_or_else(|| format!("no channel {}", channel.name), |b| describe(table, b));
    Ok(Some((from, describe(table, channel), channels)))
}

/// Applies `DeleteChannel` to `table`: the channel map without it.
pub(crate) fn delete(
    table: &RoutingTable,
    name: &str,
    expired: bool,
) -> Result<Applied, ChannelError> {
    let Some(before) = table.channels().get(name) else {
        return Err(ChannelError::NotFound(name.to_owned()));
    };
    let mut channels = table.channels().clone();
    channels.remove(name);
    let to = if expired { format!("channel {name} expired") } else { format!("no channel {name}") };
    Ok((describe(table, before), to, channels))
}

/// After any command: a channel whose zone has just lost its last unit of the channel's domain
/// (an evacuation, or a drain to zero) is suspended, and a suspended channel whose zone owns
/// units of its domain again (the restore) resumes. `to`, the audit's "after" text, gains a
/// sentence per channel that changed.
pub(crate) fn settle(before: &RoutingTable, after: &mut RoutingTable, mut to: String) -> String {
    if after.channels().is_empty() {
        return to;
    }
    let owned = |t: &RoutingTable, c: &Channel| {
        t.map_of(c.domain.as_deref()).map_or(0, |m| m.count(c.zone))
    };
    let mut changed = Vec::new();
    for c in after.channels().values() {
        let (was, now) = (owned(before, c), owned(after, c));
        if !c.suspended && was > 0 && now == 0 {
            changed.push((c.name.clone(), true));
        } else if c.suspended && now > 0 {
            changed.push((c.name.clone(), false));
        }
    }
    for (name, suspend) in changed {
        let mut c = after.channels()[&name].clone();
        c.suspended = suspend;
        let zone = after.zone_of(c.zone).to_owned();
        to.push_str(&if suspend {
            format!(
                "; channel {name} suspended: {zone} owns no units of domain {}",
                c.domain_name()
            )
        } else {
            format!(
                "; channel {name} resumed: {zone} owns units of domain {} again",
                c.domain_name()
            )
        });
        after.set_channel(&name, Some(c));
    }
    to
}

/// The channels whose expiry is at or before `now_ms`: the coordinator removes them with a logged
/// `DeleteChannel { expired: true }`.
pub fn expired_channels(table: &RoutingTable, now_ms: u64) -> impl Iterator<Item = &Channel> {
    table.channels().values().filter(move |c| c.expires_at_ms.is_some_and(|at| at <= now_ms))
}
