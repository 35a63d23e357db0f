//! The routing domains' shared name: every table has the default domain, whose map is
//! `RoutingTable::map`; named domains are `POST /v1/domains`.

/// The name of the domain every table has, whose map is [`RoutingTable::map`].
///
/// [`RoutingTable::map`]: crate::RoutingTable::map
pub const DEFAULT_DOMAIN: &str = "default";
