//! Propagating a tag across RPC hops: the `x-tidegate-*` headers and how to read them back.
//!
//! The edge decides a request's colour once; every hop after it forwards the headers instead of
//! re-deciding, so a dial move in the middle of a request cannot send half of it to each colour.

use tidegate_core::ZoneId;

use super::router::{ClientError, Router, Tag};
use super::signature::{SIGNATURE_HEADER, TagKey};

pub use super::header_names::{COLOR_HEADER, VERSION_HEADER};

/// The headers to forward for `tag`.
pub fn headers_for(tag: &Tag) -> [(&'static str, String); 2] {
    [(COLOR_HEADER, tag.lane.to_string()), (VERSION_HEADER, tag.version.to_string())]
}

/// How a request's colour was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// From the incoming headers (decided upstream).
    Propagated,
    /// Recomputed from the user ID with the local table.
    Recomputed,
    /// Neither header nor user ID: the configured fallback.
    Fallback,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    pub color: ZoneId,
    /// The lane of `color`, as propagated in `x-tidegate-color`.
    pub lane: String,
    /// The routing version the colour was decided at, when known.
    pub version: Option<u64>,
    pub source: Source,
}

impl Resolved {
    /// The headers to forward to the next hop.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![(COLOR_HEADER, self.lane.clone())];
        if let Some(v) = self.version {
            out.push((VERSION_HEADER, v.to_string()));
        }
        out
    }
}

/// Resolves an incoming request's colour: the propagated header if valid, else the user ID with
/// the local table, else the fallback. `header` looks a header up by (lowercase) name.
///
/// A propagated colour decided at an older version than the local table (its
/// `x-tidegate-version` is lower) is recomputed from the user ID when there is one: the table
/// moved since the edge decided, and the newer table is the better answer.
///
/// It trusts whoever set the header: use it only behind a gateway that overwrites every
/// client-sent `x-tidegate-*` header (the shipped nginx config does). [`resolve_signed`] checks
/// the edge's signature instead, and trusts no unsigned tag.
pub fn resolve<'h>(
    router: &Router,
    header: impl Fn(&str) -> Option<&'h str>,
    user_id: Option<&str>,
) -> Result<Resolved, ClientError> {
    if let Some((lane, color)) = header(COLOR_HEADER)
        .map(str::trim)
        .and_then(|lane| router.zone_of_lane(lane).map(|zone| (lane, zone)))
    {
        let version: Option<u64> = header(VERSION_HEADER).and_then(|v| v.trim().parse().ok());
        let stale = match (version, router.version()) {
            (Some(propagated), Some(local)) => propagated < local,
            _ => false,
        };
        if !(stale && user_id.is_some()) {
            return Ok(Resolved {
                color,
                lane: lane.to_owned(),
                version,
                source: Source::Propagated,
            });
        }
    }
    if let Some(user_id) = user_id {
        let tag = router.tag(user_id)?;
        return Ok(Resolved {
            color: tag.color,
            lane: tag.lane.into_owned(),
            version: Some(tag.version),
            source: Source::Recomputed,
        });
    }
    let color = router.untagged()?;
    Ok(Resolved {
        color,
        lane: router.lane_name(color),
        version: router.version(),
        source: Source::Fallback,
    })
}

/// [`resolve`] for a service that shares the edges' tag key: a propagated tag counts only when
/// its `x-tidegate-signature` is the key's signature of that colour and version for `user_id`
/// (set by the edge's gateway check, never by a client). An unsigned or forged tag is recomputed
/// from the user ID with the local table, so a client that sends its own `x-tidegate-color`, or
/// reaches the service without the gateway, gets the colour the table gives it.
pub fn resolve_signed<'h>(
    router: &Router,
    header: impl Fn(&str) -> Option<&'h str>,
    user_id: &str,
    key: &TagKey,
) -> Result<Resolved, ClientError> {
    resolve_signed_for(router, header, user_id, key, None, None)
}

/// [`resolve_signed`] for a call of `service` in `domain` (`None`: the global rule, the default
/// domain): a propagated tag counts only when the gate signed it for that domain and service
/// ([`TagKey::sign_for`]), so a tag decided for another service (whose release channel may
/// route the user elsewhere) or another domain is not carried over; anything else is
/// recomputed as `service`'s call in `domain` (pin > channel > map).
pub fn resolve_signed_for<'h>(
    router: &Router,
    header: impl Fn(&str) -> Option<&'h str>,
    user_id: &str,
    key: &TagKey,
    domain: Option<&str>,
    service: Option<&str>,
) -> Result<Resolved, ClientError> {
    let lane = header(COLOR_HEADER).map(str::trim);
    let color = lane.and_then(|lane| router.zone_of_lane(lane));
    let version = header(VERSION_HEADER).and_then(|v| v.trim().parse::<u64>().ok());
    if let (Some(lane), Some(color), Some(version), Some(signature)) =
        (lane, color, version, header(SIGNATURE_HEADER))
        && key.verify_for(lane, version, user_id, domain, service, signature)
    {
        return Ok(Resolved {
            color,
            lane: lane.to_owned(),
            version: Some(version),
            source: Source::Propagated,
        });
    }
    let tag = match (domain, service) {
        (_, Some(service)) => router.tag_for_service(domain, service, user_id)?.0,
        (Some(domain), None) => router.tag_in(domain, user_id)?,
        (None, None) => router.tag(user_id)?,
    };
    Ok(Resolved {
        color: tag.color,
        lane: tag.lane.into_owned(),
        version: Some(tag.version),
        source: Source::Recomputed,
    })
}
