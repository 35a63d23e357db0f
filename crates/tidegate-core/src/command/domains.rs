//! Routing domains: `AddDomain` adds a named domain as a copy of the default domain's map.

use std::sync::Arc;

use super::{Change, CommandError, Outcome, changed};
use crate::table::{DEFAULT_DOMAIN, MAX_DOMAINS};
use crate::zone::validate_zone_name;

pub(super) fn add(c: &mut Change, name: &str) -> Outcome {
    let table = &c.before.table;
    if name == DEFAULT_DOMAIN || table.domains.contains_key(name) {
        return Err(CommandError::DomainExists(name.to_owned()));
    }
    validate_zone_name(name)?;
    if table.domains.len() >= MAX_DOMAINS {
        return Err(CommandError::InvalidMove(format!(
            "a table holds at most {MAX_DOMAINS} named domains"
        )));
    }
    Arc::make_mut(&mut c.table.domains).insert(name.to_owned(), table.map.clone());
    changed(
        format!("{} named domain(s)", table.domains.len()),
        format!("domain {name} added as a copy of the default domain"),
    )
}
