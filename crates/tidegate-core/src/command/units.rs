//! Unit-set moves: `MoveUnits` gives explicit unit sets to zones (`PUT /v1/units`), every move
//! or none, in one version; a plan's `move_units` step moves the same way. [`State::moved_maps`]
//! checks and applies moves without changing the state (the server projects capacity with it).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::describe::describe_all_maps;
use super::{Change, CommandError, Outcome, State, UnitMove, changed};
use crate::plan::PlanMove;
use crate::table::DEFAULT_DOMAIN;
use crate::unit_map::{UnitMap, UnitSetError};
use crate::zone::{ZoneError, Zones};

pub(super) fn move_units(c: &mut Change, moves: &[UnitMove]) -> Outcome {
    c.before.no_running_drain()?;
    c.before.no_active_run()?;
    if !move_in_table(c, moves)? {
        return Ok(None);
    }
    changed(describe_all_maps(&c.before.table), describe_all_maps(&c.table))
}

/// Gives the next table the maps after `moves`; says whether any unit changed owner.
pub(super) fn move_in_table(c: &mut Change, moves: &[UnitMove]) -> Result<bool, CommandError> {
    let before = &c.before.table;
    let (map, domains) = c.before.moved_maps(moves)?;
    let moved = map != before.map || domains != *before.domains;
    c.table.map = map;
    c.table.domains = Arc::new(domains);
    Ok(moved)
}

/// A plan step's moves, their receiving zones looked up by name.
pub(super) fn resolve(zones: &Zones, moves: &[PlanMove]) -> Result<Vec<UnitMove>, CommandError> {
    moves
        .iter()
        .map(|m| {
            let zone = zones.color_in(&m.zone).ok_or_else(|| ZoneError::Unknown(m.zone.clone()))?;
            Ok(UnitMove { units: m.units.clone(), zone, domain: m.domain.clone() })
        })
        .collect()
}

impl State {
    /// The default domain's map and the named domains' maps after `moves` (see
    /// [`State::moved_map`]; a unit may be named once per domain).
    pub fn moved_maps(
        &self,
        moves: &[UnitMove],
    ) -> Result<(UnitMap, BTreeMap<String, UnitMap>), CommandError> {
        if moves.is_empty() {
            return Err(CommandError::InvalidMove(
                "`moves` is empty: name at least one unit set".into(),
            ));
        }
        let mut default = Vec::new();
        let mut named: BTreeMap<&str, Vec<UnitMove>> = BTreeMap::new();
        for m in moves {
            match m.domain.as_deref() {
                None | Some(DEFAULT_DOMAIN) => default.push(m.clone()),
                Some(name) => {
                    if !self.table.domains.contains_key(name) {
                        return Err(CommandError::UnknownDomain(name.to_owned()));
                    }
                    named.entry(name).or_default().push(m.clone());
                }
            }
        }
        let map =
            if default.is_empty() { self.table.map.clone() } else { self.moved_map(&default)? };
        let mut domains = (*self.table.domains).clone();
        for (name, moves) in named {
            let base = &self.table.domains[name];
            let moved = self.moved_map_from(base, &moves)?;
            domains.insert(name.to_owned(), moved);
        }
        Ok((map, domains))
    }

    /// The map after `moves`, checked: at least one move, each to a live zone, no unit named
    /// twice, every unit inside the table.
    pub fn moved_map(&self, moves: &[UnitMove]) -> Result<UnitMap, CommandError> {
        self.moved_map_from(&self.table.map, moves)
    }

    fn moved_map_from(&self, base: &UnitMap, moves: &[UnitMove]) -> Result<UnitMap, CommandError> {
        if moves.is_empty() {
            return Err(CommandError::InvalidMove(
                "`moves` is empty: name at least one unit set".into(),
            ));
        }
        let units = self.table.units();
        let mut map = base.clone();
        for (i, m) in moves.iter().enumerate() {
            self.live_zone(m.zone)?;
            if let Some(&(_, hi)) = m.units.ranges().last()
                && hi >= units
            {
                return Err(UnitSetError::OutOfRange { unit: hi, units }.into());
            }
            for earlier in &moves[..i] {
                if let Some(unit) = earlier.units.overlaps(&m.units) {
                    return Err(CommandError::InvalidMove(format!(
                        "moves[{i}] names unit {unit}, which an earlier move also names"
                    )));
                }
            }
            map = map.moved(&m.units, m.zone);
        }
        Ok(map)
    }
}
