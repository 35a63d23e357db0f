//! The audit's words for the routing table: a dial's share, a unit map as runs.

use crate::dial::percent_of;
use crate::table::{DEFAULT_DOMAIN, RoutingTable};
use crate::unit_map::describe_runs;

/// [`describe_share`] of one domain's dial, named when it is not the default domain.
pub(super) fn describe_share_in(table: &RoutingTable, domain: Option<&str>) -> String {
    let named = domain.filter(|d| *d != DEFAULT_DOMAIN);
    match named.zip(table.view_of(domain)) {
        Some((name, view)) => format!("domain {name}: {}", describe_share(&view)),
        None => describe_share(table),
    }
}

pub(super) fn describe_share(table: &RoutingTable) -> String {
    if !table.zones.is_two() || !table.map.is_dial_form() {
        return describe_map(table);
    }
    let blue = table.blue_units();
    let units = table.units();
    format!(
        "blue {}% / green {}% ({blue}/{units} units blue)",
        percent_of(blue, units),
        percent_of(units - blue, units)
    )
}

/// Every domain's map: the default's, then `domain <name>: units ...` for each named one.
pub(super) fn describe_all_maps(table: &RoutingTable) -> String {
    let mut out = describe_map(table);
    for (name, map) in table.domains.iter() {
        let runs = map.runs();
        out.push_str(&format!(
            "; domain {name}: units {}",
            describe_runs(&runs, |z| table.zones.lane(z).to_owned())
        ));
    }
    out
}

/// The map as runs with lanes: `units 0-49 blue, 50-99 green`.
pub(super) fn describe_map(table: &RoutingTable) -> String {
    let runs = table.map.runs();
    format!("units {}", describe_runs(&runs, |z| table.zones.lane(z).to_owned()))
}
