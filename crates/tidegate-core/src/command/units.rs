//! Unit-set moves: `MoveUnits` gives explicit unit sets to zones (`PUT /v1/units`), every move
//! or none, in one version; a plan's `move_units` step moves the same way. [`State::moved_maps`]
//! checks and applies moves without changing the state (the server projects capacity with it).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::describe::describe_all_maps;
use super::{Change, CommandError, Outcome, State, changed};
use crate::plan::PlanMove;
use crate::staged::{Phases, UnitsChange};
use crate::table::DEFAULT_DOMAIN;
use crate::unit_map::{UnitMap, UnitMove, UnitSet, UnitSetError};
use crate::zone::{ZoneError, Zones};

pub(super) fn move_units(c: &mut Change, moves: &[UnitMove]) -> Outcome {
    c.before.no_running_drain()?;
    c.before.no_active_run()?;
    c.before.no_units_change()?;
    if !move_in_table(c, moves)? {
        return Ok(None);
    }
    changed(describe_all_maps(&c.before.table), describe_all_maps(&c.table))
}

/// `FreezeUnits`: checks the moves as `MoveUnits` would make them now, freezes the units that
/// change owner in each domain (a map move's `frozen`, which every write check already knows)
/// and records the move. Nothing else may change a map until it ends.
pub(super) fn freeze(c: &mut Change, moves: &[UnitMove], window_ms: u64) -> Outcome {
    c.before.no_running_drain()?;
    c.before.no_active_run()?;
    c.before.no_units_change()?;
    if window_ms == 0 || window_ms > crate::drain::MAX_FREEZE_MS {
        return Err(CommandError::FreezeWindow(window_ms));
    }
    let before = &c.before.table;
    let (map, domains) = c.before.moved_maps(moves)?;
    let mut frozen = Vec::new();
    let diff =
        |from: &UnitMap, to: &UnitMap| UnitSet::from_sorted(&from.diff(to)).unwrap_or_default();
    let set = diff(&before.map, &map);
    if !set.is_empty() {
        frozen.push((None, set));
    }
    for (name, after) in &domains {
        let set = diff(&before.domains[name], after);
        if !set.is_empty() {
            frozen.push((Some(name.clone()), set));
        }
    }
    if frozen.is_empty() {
        return Ok(None);
    }
    let version = c.version();
    let mut words = Vec::new();
    for (domain, set) in frozen {
        words.push(format!("{set} in {}", domain.as_deref().unwrap_or(DEFAULT_DOMAIN)));
        c.table.set_frozen(domain.as_deref(), Some(set));
    }
    c.next.units_change = Some(Arc::new(UnitsChange {
        moves: moves.to_vec(),
        phases: Phases { frozen_version: version, frozen_ms: c.at_ms(), window_ms, switched: None },
    }));
    changed(
        describe_all_maps(before),
        format!(
            "units {} frozen for a loss-less move until every live subscriber applies version {version}",
            words.join(", ")
        ),
    )
}

/// `SwitchUnits`: makes the moves; their units stay frozen until the unfreeze.
pub(super) fn switch(c: &mut Change) -> Outcome {
    let Some(change) = c.before.units_change() else {
        return Err(CommandError::UnitsPhase("switch: none is in progress"));
    };
    let mut change = change.clone();
    if change.phases.switched.is_some() {
        return Err(CommandError::UnitsPhase("switch twice"));
    }
    move_in_table(c, &change.moves)?;
    let version = c.version();
    change.phases.switched = Some((version, c.at_ms()));
    c.next.units_change = Some(Arc::new(change));
    changed(
        describe_all_maps(&c.before.table),
        format!(
            "{}; the moved units stay frozen until every live subscriber applies version {version}",
            describe_all_maps(&c.table)
        ),
    )
}

/// `UnfreezeUnits`: ends the move, after its switch or (`aborted`) without it.
pub(super) fn unfreeze(c: &mut Change, aborted: bool) -> Outcome {
    let Some(change) = c.before.units_change().cloned() else {
        return Err(CommandError::UnitsPhase("unfreeze: none is in progress"));
    };
    if aborted != change.phases.switched.is_none() {
        return Err(CommandError::UnitsPhase(if aborted {
            "abort: it has switched"
        } else {
            "unfreeze: it has not switched"
        }));
    }
    let domains: Vec<String> = c.table.frozen().keys().cloned().collect();
    for domain in domains {
        c.table.set_frozen(Some(&domain), None);
    }
    c.next.units_change = None;
    let window = c.at_ms().saturating_sub(change.phases.frozen_ms);
    let to = match change.phases.switched {
        Some((_, at)) => format!(
            "the moved units unfrozen after {window} ms (switched {} ms after the freeze)",
            at.saturating_sub(change.phases.frozen_ms)
        ),
        None => format!(
            "the unit move's freeze undone after {window} ms without switching: no unit changed owner"
        ),
    };
    changed("the moved units frozen", to)
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
