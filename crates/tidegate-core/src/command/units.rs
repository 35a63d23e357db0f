//! Unit-set moves: `MoveUnits` gives explicit unit sets to zones (`PUT /v1/units`), every move
//! or none, in one version; a plan's `move_units` step moves the same way. [`State::moved_maps`]
//! checks and applies moves without changing the state (the server projects capacity with it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::describe::describe_all_maps;
use super::{Change, CommandError, Outcome, State, changed};
use crate::plan::PlanMove;
use crate::staged::{HeldUnits, MAX_HOLD_MS, Phases, PinChange, UnitsChange};
use crate::table::{DEFAULT_DOMAIN, GlobalWriter, RoutingTable};
use crate::unit_map::{UnitMap, UnitMove, UnitSet, UnitSetError};
use crate::zone::{ZoneError, Zones};

pub(super) fn move_units(c: &mut Change, moves: &[UnitMove]) -> Outcome {
    c.before.no_running_drain()?;
    c.before.no_active_run()?;
    if c.before.units_change().is_some_and(UnitsChange::is_held) {
        // Inside a hold: made at once when every unit it moves is held (their writes are
        // refused everywhere), refused like any move during a change otherwise.
        return begin(c, Staging { moves, pins: &[], global: None, window_ms: 1, run: None });
    }
    c.before.no_units_change()?;
    if !move_in_table(c, moves)? {
        return Ok(None);
    }
    changed(describe_all_maps(&c.before.table), describe_all_maps(&c.table))
}

/// `HoldUnits`: freezes `units` (and, with `global`, global writes) in place, moving nothing;
/// held once every live subscriber applied the freeze (the change's switch), until released
/// (`UnfreezeUnits`) or `hold_ms` later.
pub(super) fn hold(
    c: &mut Change,
    units: &[HeldUnits],
    global: bool,
    window_ms: u64,
    hold_ms: u64,
) -> Outcome {
    c.before.no_active_run()?;
    hold_for(c, units, global, window_ms, hold_ms, None)
}

/// A hold (see [`hold`]); `run` names the plan run and hold step it is, which its switch ends.
pub(super) fn hold_for(
    c: &mut Change,
    units: &[HeldUnits],
    global: bool,
    window_ms: u64,
    hold_ms: u64,
    run: Option<(u64, usize)>,
) -> Outcome {
    c.before.no_running_drain()?;
    c.before.no_units_change()?;
    if window_ms == 0 || window_ms > crate::drain::MAX_FREEZE_MS {
        return Err(CommandError::FreezeWindow(window_ms));
    }
    if hold_ms == 0 || hold_ms > MAX_HOLD_MS {
        return Err(CommandError::InvalidHold(format!(
            "hold: must be from 1 ms to {MAX_HOLD_MS} ms, got {hold_ms}"
        )));
    }
    if units.is_empty() && !global {
        return Err(CommandError::InvalidHold(
            "name the units to hold, or hold global writes".into(),
        ));
    }
    let count = c.before.table.units();
    let mut frozen: Frozen = BTreeMap::new();
    for held in units {
        let domain = held.domain.clone().filter(|d| d != DEFAULT_DOMAIN);
        if let Some(name) = &domain
            && !c.before.table.domains.contains_key(name)
        {
            return Err(CommandError::UnknownDomain(name.clone()));
        }
        if let Some(&(_, hi)) = held.units.ranges().last()
            && hi >= count
        {
            return Err(UnitSetError::OutOfRange { unit: hi, units: count }.into());
        }
        let set = frozen.entry(domain).or_default();
        for &(lo, hi) in held.units.ranges() {
            set.extend(lo..=hi);
        }
    }
    frozen.retain(|_, set| !set.is_empty());
    if frozen.is_empty() && !global {
        return Err(CommandError::InvalidHold("the unit sets are empty".into()));
    }
    let version = c.version();
    let words = freeze_in_table(c, frozen, global);
    c.next.units_change = Some(Arc::new(UnitsChange {
        moves: vec![],
        pins: vec![],
        phases: Phases { frozen_version: version, frozen_ms: c.at_ms(), window_ms, switched: None },
        run,
        global: None,
        hold_ms: Some(hold_ms),
    }));
    changed(
        "nothing held",
        format!(
            "{} frozen in place (a hold, nothing moves), held once every live subscriber applies version {version}, at most {hold_ms} ms",
            words.join(", ")
        ),
    )
}

/// Whether a held hold covers a change that freezes `frozen` and (when `global`) global
/// writes: every one of them is already refused everywhere.
fn held_covers(table: &RoutingTable, frozen: &Frozen, global: bool) -> bool {
    if global && !table.global.frozen {
        return false;
    }
    frozen.iter().all(|(domain, units)| {
        let held = table.frozen().get(domain.as_deref().unwrap_or(DEFAULT_DOMAIN));
        units.iter().all(|u| held.is_some_and(|set| set.contains(*u)))
    })
}

/// `FreezeUnits`: checks the moves as `MoveUnits` would make them now and the pins as `Pin` and
/// `Unpin` would, freezes (a map move's `frozen`, which every write check already knows) the
/// units that change owner in each domain and the units of the users whose pin changes their
/// owner there, and records the change. Nothing else may change a map until it ends.
pub(super) fn freeze(
    c: &mut Change,
    moves: &[UnitMove],
    pins: &[PinChange],
    global: Option<GlobalWriter>,
    window_ms: u64,
) -> Outcome {
    c.before.no_active_run()?;
    begin(c, Staging { moves, pins, global, window_ms, run: None })
}

/// What a loss-less change of owner moves, and how it is bounded and owned.
pub(super) struct Staging<'a> {
    pub moves: &'a [UnitMove],
    pub pins: &'a [PinChange],
    /// The global writer the switch sets, when it moves (or changes read-only).
    pub global: Option<GlobalWriter>,
    pub window_ms: u64,
    /// The plan run and step it is, whose unfreeze ends that step.
    pub run: Option<(u64, usize)>,
}

/// Freezes a loss-less change of owner (see [`freeze`]); `run` names the plan run and step it
/// is, whose unfreeze ends that step. `Ok(None)` when it changes no owner.
pub(super) fn begin(c: &mut Change, staging: Staging<'_>) -> Outcome {
    let Staging { moves, pins, global, window_ms, run } = staging;
    // The global writer's zone and read-only flag (never the freeze flag) as the switch sets them.
    let global = global.map(|g| GlobalWriter { frozen: false, ..g });
    if let Some(zone) = global.and_then(|g| g.zone) {
        c.before.live_zone(zone)?;
    }
    let current = GlobalWriter { frozen: false, ..c.before.table.global };
    let global = global.filter(|g| *g != current);
    c.before.no_running_drain()?;
    let held = c.before.units_change().is_some_and(UnitsChange::is_held);
    if !held {
        c.before.no_units_change()?;
    }
    if window_ms == 0 || window_ms > crate::drain::MAX_FREEZE_MS {
        return Err(CommandError::FreezeWindow(window_ms));
    }
    let before = &c.before.table;
    // The table the switch will make, to compare every domain's owners with.
    let mut after = (**before).clone();
    if !moves.is_empty() {
        let (map, domains) = c.before.moved_maps(moves)?;
        after.map = map;
        after.domains = Arc::new(domains);
    }
    apply_pins(c.before, &mut after, pins)?;
    let mut frozen: Frozen = BTreeMap::new();
    for domain in domains_of(before) {
        if let (Some(from), Some(to)) =
            (before.map_of(domain.as_deref()), after.map_of(domain.as_deref()))
        {
            frozen.entry(domain).or_default().extend(from.diff(to));
        }
    }
    pin_units(before, &after, pins, &mut frozen)?;
    frozen.retain(|_, set| !set.is_empty());
    if frozen.is_empty() && global.is_none() {
        return Ok(None);
    }
    if held {
        return within_hold(c, &after, &frozen, moves, pins, global);
    }
    let version = c.version();
    let words = freeze_in_table(c, frozen, global.is_some());
    c.next.units_change = Some(Arc::new(UnitsChange {
        moves: moves.to_vec(),
        pins: pins.to_vec(),
        phases: Phases { frozen_version: version, frozen_ms: c.at_ms(), window_ms, switched: None },
        run,
        global,
        hold_ms: None,
    }));
    let what = match (moves.is_empty(), pins.is_empty()) {
        (false, _) => "a loss-less move",
        (true, false) => "a loss-less pin change",
        (true, true) => "a loss-less global-writer move",
    };
    let mut from = describe_change(before, moves, pins);
    if global.is_some() {
        from = join(from, super::zones::describe_global(before));
    }
    changed(
        from,
        format!(
            "{} frozen for {what} until every live subscriber applies version {version}",
            words.join(", ")
        ),
    )
}

/// A change of owner inside a held hold: made at once (the table `after`) when the hold covers
/// everything it would freeze, which every live subscriber already refuses; the units stay
/// frozen until the hold's release. Otherwise refused as any change during a change.
fn within_hold(
    c: &mut Change,
    after: &RoutingTable,
    frozen: &Frozen,
    moves: &[UnitMove],
    pins: &[PinChange],
    global: Option<GlobalWriter>,
) -> Outcome {
    if !held_covers(&c.before.table, frozen, global.is_some()) {
        return Err(CommandError::UnitsChanging);
    }
    c.table.map = after.map.clone();
    c.table.domains = Arc::clone(&after.domains);
    c.table.pins = Arc::clone(&after.pins);
    if let Some(g) = global {
        c.table.global = GlobalWriter { frozen: true, ..g };
    }
    let mut from = describe_change(&c.before.table, moves, pins);
    let mut to = describe_change(&c.table, moves, pins);
    if global.is_some() {
        from = join(from, super::zones::describe_global(&c.before.table));
        to = join(to, super::zones::describe_global(&c.table));
    }
    changed(
        from,
        format!("{to}; made at once inside the hold, whose units stay frozen until it is released"),
    )
}

/// `SwitchUnits`: makes the moves and the pin changes; their units stay frozen until the
/// unfreeze.
pub(super) fn switch(c: &mut Change) -> Outcome {
    let Some(change) = c.before.units_change() else {
        return Err(CommandError::UnitsPhase("switch: none is in progress"));
    };
    let mut change = change.clone();
    if change.phases.switched.is_some() {
        return Err(CommandError::UnitsPhase("switch twice"));
    }
    if !change.moves.is_empty() {
        move_in_table(c, &change.moves)?;
    }
    let mut table = c.table.clone();
    apply_pins(c.before, &mut table, &change.pins)?;
    c.table = table;
    if let Some(global) = change.global {
        if let Some(zone) = global.zone {
            c.before.live_zone(zone)?;
        }
        // Still frozen: global writes resume at the unfreeze.
        c.table.global = GlobalWriter { frozen: true, ..global };
    }
    let version = c.version();
    change.phases.switched = Some((version, c.at_ms()));
    if let Some(hold_ms) = change.hold_ms {
        let held = describe_frozen(&c.table);
        let mut to = format!(
            "{held} held: every live subscriber refuses their writes; until released, at most {hold_ms} ms"
        );
        // A plan's hold step ends once held.
        if let Some(mut run) = linked_run(c.before, &change) {
            run.step_freeze = None;
            let step = run.step;
            super::run_steps::finish(&mut run, c.at_ms(), None, &[]);
            to = format!("{to}; plan run {} step {} done", run.id, step + 1);
            c.next.insert_run(run);
        }
        c.next.units_change = Some(Arc::new(change));
        return changed(format!("{held} freezing in place"), to);
    }
    let mut from = describe_change(&c.before.table, &change.moves, &change.pins);
    let mut to = describe_change(&c.table, &change.moves, &change.pins);
    if change.global.is_some() {
        from = join(from, super::zones::describe_global(&c.before.table));
        to = join(to, super::zones::describe_global(&c.table));
    }
    c.next.units_change = Some(Arc::new(change));
    changed(
        from,
        format!(
            "{to}; the frozen units stay frozen until every live subscriber applies version {version}"
        ),
    )
}

/// Freezes `frozen` (and global writes, when `global`) in the next table; says what, for the
/// audit. One place for a move's freeze and a hold's.
fn freeze_in_table(c: &mut Change, frozen: Frozen, global: bool) -> Vec<String> {
    let mut words = Vec::new();
    if global {
        words.push("global writes".to_owned());
        c.table.set_global_frozen(true);
    }
    for (domain, set) in frozen {
        let units: Vec<u32> = set.into_iter().collect();
        let set = UnitSet::from_sorted(&units).unwrap_or_default();
        words.push(format!("units {set} in {}", domain.as_deref().unwrap_or(DEFAULT_DOMAIN)));
        c.table.set_frozen(domain.as_deref(), Some(set));
    }
    words
}

/// The frozen units of `table` and its global writes when frozen, for the audit.
fn describe_frozen(table: &RoutingTable) -> String {
    let mut words: Vec<String> =
        table.frozen().iter().map(|(domain, set)| format!("units {set} in {domain}")).collect();
    if table.global.frozen {
        words.insert(0, "global writes".into());
    }
    words.join(", ")
}

/// Units to freeze, by domain (`None`: the default domain).
type Frozen = BTreeMap<Option<String>, BTreeSet<u32>>;

/// The default domain and every named domain of `table`.
fn domains_of(table: &RoutingTable) -> Vec<Option<String>> {
    let mut domains: Vec<Option<String>> = vec![None];
    domains.extend(table.domains.keys().cloned().map(Some));
    domains
}

/// Adds to `frozen` the units of the users whose owner `pins` change from `before` to `after`:
/// in each domain where their map-routed owner changes, and in the domain of each release
/// channel that selects them where the channel's zone and the pin's differ (pin > channel: the
/// owner of their writes of the channel's services changes). One rule for the freeze and for
/// whether a pin changes an owner at all ([`State::pin_changes_owner`]).
fn pin_units(
    before: &RoutingTable,
    after: &RoutingTable,
    pins: &[PinChange],
    frozen: &mut Frozen,
) -> Result<(), CommandError> {
    for domain in domains_of(before) {
        let (Some(from), Some(to)) =
            (before.map_of(domain.as_deref()), after.map_of(domain.as_deref()))
        else {
            continue;
        };
        for pin in pins {
            let (was, now) = (before.tag_in(from, &pin.user_id)?, after.tag_in(to, &pin.user_id)?);
            if was.color != now.color {
                frozen.entry(domain.clone()).or_default().insert(was.unit.0);
            }
        }
    }
    for pin in pins {
        let unit = before.scheme.unit_of(&pin.user_id)?.0;
        for channel in before.channels.values().filter(|ch| ch.selects(&pin.user_id, unit)) {
            let was = before.pins.get(&pin.user_id).copied().unwrap_or(channel.zone);
            let now = pin.zone.unwrap_or(channel.zone);
            if was != now {
                let domain = channel.domain.clone().filter(|d| d != DEFAULT_DOMAIN);
                frozen.entry(domain).or_default().insert(unit);
            }
        }
    }
    Ok(())
}

impl State {
    /// Whether `pin` would give its user another owner for some write (a map-routed one in
    /// some domain, or a release channel's service's): the rule the loss-less pin freezes by.
    /// A pin that changes none is a record only, made at once. Errors as the pin would refuse.
    pub fn pin_changes_owner(&self, pin: &PinChange) -> Result<bool, CommandError> {
        let pins = std::slice::from_ref(pin);
        let mut after = (*self.table).clone();
        apply_pins(self, &mut after, pins)?;
        let mut frozen = Frozen::new();
        pin_units(&self.table, &after, pins, &mut frozen)?;
        Ok(frozen.values().any(|set| !set.is_empty()))
    }
}

/// Applies `pins` to `table`'s pins, each checked as `Pin` (a live zone, a valid user ID, room
/// for a new pin) or `Unpin` (the user is pinned) checks it.
fn apply_pins(
    state: &State,
    table: &mut RoutingTable,
    pins: &[PinChange],
) -> Result<(), CommandError> {
    for pin in pins {
        let before = super::pins::check_pin(table, &pin.user_id)?;
        match pin.zone {
            Some(zone) => {
                state.live_zone(zone)?;
                super::pins::check_room(table, before)?;
                Arc::make_mut(&mut table.pins).insert(pin.user_id.clone(), zone);
            }
            None => {
                if before.is_none() {
                    return Err(CommandError::PinNotFound(pin.user_id.clone()));
                }
                Arc::make_mut(&mut table.pins).remove(&pin.user_id);
            }
        }
    }
    Ok(())
}

/// The maps and the pins a change names, as the audit's "from".
fn describe_change(table: &RoutingTable, moves: &[UnitMove], pins: &[PinChange]) -> String {
    let mut out = if moves.is_empty() { String::new() } else { describe_all_maps(table) };
    for pin in pins {
        if !out.is_empty() {
            out.push_str("; ");
        }
        match table.pins.get(&pin.user_id) {
            Some(zone) => {
                out.push_str(&format!("user {} pinned {}", pin.user_id, table.zones.lane(*zone)))
            }
            None => out.push_str(&format!("user {} not pinned", pin.user_id)),
        }
    }
    out
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
    thaw(c);
    let window = c.at_ms().saturating_sub(change.phases.frozen_ms);
    let held = describe_frozen(&c.before.table);
    let mut to = match (change.hold_ms, change.phases.switched) {
        (Some(_), Some((_, at))) => format!(
            "the hold released after {window} ms (held {} ms after the freeze): {held} writable again",
            at.saturating_sub(change.phases.frozen_ms)
        ),
        (Some(_), None) => format!(
            "the hold's freeze undone after {window} ms without switching: {held} never held"
        ),
        (None, Some((_, at))) => format!(
            "the moved units unfrozen after {window} ms (switched {} ms after the freeze)",
            at.saturating_sub(change.phases.frozen_ms)
        ),
        (None, None) => format!(
            "the unit move's freeze undone after {window} ms without switching: no unit changed owner"
        ),
    };
    // A loss-less plan step ends with its change: done once switched, else the run fails
    // (nothing moved; the plan's rollback, if any, is the operator's, as for a failed drain).
    if let Some(mut run) = linked_run(c.before, &change) {
        let (id, step) = (run.id, run.step);
        run.step_freeze = None;
        if change.phases.switched.is_some() {
            super::run_steps::finish(&mut run, c.at_ms(), None, &[]);
            to = format!("{to}; plan run {id} step {} done", step + 1);
        } else {
            let reason = format!(
                "step {}'s freeze was not applied by every live subscriber within {} ms; nothing moved",
                step + 1,
                change.phases.window_ms
            );
            run.status = crate::plan_run::RunStatus::Failed;
            run.fail_reason = Some(reason.clone());
            run.hold_reason = None;
            run.finished_ms = Some(c.at_ms());
            to = format!("{to}; plan run {id} failed: {reason}");
        }
        c.next.insert_run(run);
    }
    let from = if change.hold_ms.is_some() {
        format!("{held} frozen in place")
    } else {
        "the moved units frozen".to_owned()
    };
    changed(from, to)
}

/// Ends the unit change in progress in the next table: every frozen unit and global writes thaw.
fn thaw(c: &mut Change) {
    let domains: Vec<String> = c.table.frozen().keys().cloned().collect();
    for domain in domains {
        c.table.set_frozen(Some(&domain), None);
    }
    c.table.set_global_frozen(false);
    c.next.units_change = None;
}

/// The plan run whose current step `change` is (a loss-less step or a hold step not yet ended).
fn linked_run(state: &State, change: &UnitsChange) -> Option<crate::plan_run::PlanRun> {
    let (id, step) = change.run?;
    let run = state.runs.get(&id)?;
    (run.is_active() && run.step == step && run.step_freeze == Some(change.phases.frozen_version))
        .then(|| run.clone())
}

/// A plan's release step: ends the hold in progress in the next table (a hold still freezing
/// is undone). `None` when no hold is in progress (it ran out its `hold`): nothing to release.
pub(super) fn release_in(c: &mut Change) -> Option<String> {
    let change = c.before.units_change().filter(|u| u.hold_ms.is_some())?.clone();
    let held = describe_frozen(&c.before.table);
    thaw(c);
    let window = c.at_ms().saturating_sub(change.phases.frozen_ms);
    Some(match change.phases.switched {
        Some(_) => format!("the hold released after {window} ms: {held} writable again"),
        None => format!("the hold's freeze undone after {window} ms without being held: {held}"),
    })
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

/// `a; b`, or either alone when the other is empty.
fn join(a: String, b: String) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b,
        (_, true) => a,
        _ => format!("{a}; {b}"),
    }
}
