//! Propagating a tag across RPC hops: the `x-tidegate-*` headers and how to read them back.
//!
//! The edge decides a request's colour once; every hop after it forwards the headers instead of
//! re-deciding, so a dial move in the middle of a request cannot send half of it to each colour.

use tidegate_core::Color;

use super::router::{ClientError, Router, Tag};

pub const COLOR_HEADER: &str = "x-tidegate-color";
pub const VERSION_HEADER: &str = "x-tidegate-version";

/// The headers to forward for `tag`.
pub fn headers_for(tag: &Tag) -> [(&'static str, String); 2] {
    [(COLOR_HEADER, tag.color.as_str().to_owned()), (VERSION_HEADER, tag.version.to_string())]
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
    pub color: Color,
    /// The routing version the colour was decided at, when known.
    pub version: Option<u64>,
    pub source: Source,
}

impl Resolved {
    /// The headers to forward to the next hop.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![(COLOR_HEADER, self.color.as_str().to_owned())];
        if let Some(v) = self.version {
            out.push((VERSION_HEADER, v.to_string()));
        }
        out
    }
}

/// Resolves an incoming request's colour: the propagated header if valid, else the user ID with
/// the local table, else the fallback. `header` looks a header up by (lowercase) name.
pub fn resolve<'h>(
    router: &Router,
    header: impl Fn(&str) -> Option<&'h str>,
    user_id: Option<&str>,
) -> Result<Resolved, ClientError> {
    if let Some(color) = header(COLOR_HEADER).and_then(|c| c.trim().parse::<Color>().ok()) {
        let version = header(VERSION_HEADER).and_then(|v| v.trim().parse().ok());
        return Ok(Resolved { color, version, source: Source::Propagated });
    }
    if let Some(user_id) = user_id {
        let tag = router.tag(user_id)?;
        return Ok(Resolved {
            color: tag.color,
            version: Some(tag.version),
            source: Source::Recomputed,
        });
    }
    let color = router.untagged()?;
    Ok(Resolved { color, version: router.version(), source: Source::Fallback })
}
