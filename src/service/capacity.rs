//! Zone capacity: reads each zone's load and capacity for the pure `core::judge`.
//!
//! Load comes from the health source (the outcome window's request rate, or Prometheus' load
//! query); capacity from `[zones.<zone>]` (a number, or a PromQL query). Reading may block on the
//! network with Prometheus: call from a blocking context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::{CapacityConfig, ZoneCapacity};
use crate::core::{Capacity, CapacityInputs, RoutingTable, Verdict, ZoneId, ZoneLoad, judge};
use crate::service::health::Health;

pub struct Capacities {
    health: Arc<Health>,
    config: CapacityConfig,
    /// Each zone's last known load per unit of the routing table, and when it was read: a
    /// source zone that goes silent is judged by it instead of by an estimate from the
    /// receiving zone's (lagging) load. That estimate let an evacuation of a silent az-b take
    /// az-a to 1 993 rps against 1 500 allowed.
    last_known: Mutex<HashMap<String, (f64, u64)>>,
    /// Each zone's loads read over `capacity.peak_window` (at most one sample per second), for
    /// its peak: a receiving zone is judged by "its own peak + the moved share of the source".
    history: Mutex<HashMap<String, std::collections::VecDeque<(u64, f64)>>>,
    /// Per drain: the source's load per unit and the receiving zone's load when the drain was
    /// first judged here. Later steps add the load earlier steps moved, which the measured load
    /// of the receiving zone shows only after its detection window.
    baselines: Mutex<HashMap<u64, Baseline>>,
    /// Each zone's units when last judged, and since when it has had them.
    steady: Mutex<HashMap<String, (u32, u64)>>,
}

#[derive(Clone, Copy, Debug)]
struct Baseline {
    /// The drained zone's units when the baseline was read.
    start_units: u32,
    source_per_unit: f64,
    receiving_rps: f64,
}

/// How long a silent zone's last known load is used; past it the zone's load is unknown.
pub const LAST_KNOWN_FOR_MS: u64 = 15 * 60_000;

impl Capacities {
    pub fn new(health: Arc<Health>, config: CapacityConfig) -> Capacities {
        Capacities {
            health,
            config,
            last_known: Mutex::new(HashMap::new()),
            history: Mutex::new(HashMap::new()),
            baselines: Mutex::new(HashMap::new()),
            steady: Mutex::new(HashMap::new()),
        }
    }

    /// The load of a zone that serves `units` units now, as a *source* of moved users: read
    /// now and remembered per unit, or, when it cannot be read (silent, or not measured yet),
    /// the last one remembered within [`LAST_KNOWN_FOR_MS`], scaled to the units it has now.
    fn source_load(&self, zone: &str, units: u32, now_ms: u64) -> ZoneLoad {
        let mut load = self.zone(zone, now_ms);
        if let Ok(rps) = load.load_rps {
            self.remember(zone, rps, units, now_ms);
        }
        let mut memory = self.last_known.lock().unwrap_or_else(|p| p.into_inner());
        match &load.load_rps {
            Ok(rps) if units > 0 => {
                memory.insert(zone.to_owned(), (rps / f64::from(units), now_ms));
            }
            Ok(_) => {}
            Err(why) => {
                if let Some((per_unit, at)) = memory.get(zone).copied()
                    && now_ms.saturating_sub(at) <= LAST_KNOWN_FOR_MS
                {
                    load.load_note = Some(format!(
                        "{zone}'s load is its last known {:.0} rps for its {units} units, read {} ago ({why})",
                        per_unit * f64::from(units),
                        crate::duration::format_duration_ms(now_ms.saturating_sub(at))
                    ));
                    load.load_rps = Ok(per_unit * f64::from(units));
                }
            }
        }
        load
    }

    /// Whether any zone has a capacity (otherwise nothing is checked and nothing is read).
    pub fn is_configured(&self) -> bool {
        !self.config.zones.is_empty()
    }

    pub fn headroom(&self) -> f64 {
        self.config.headroom
    }

    /// One zone's load and capacity now.
    pub fn zone(&self, zone: &str, now_ms: u64) -> ZoneLoad {
        let capacity = match self.config.zones.get(zone) {
            None => Capacity::Unchecked,
            Some(ZoneCapacity::Rps(rps)) => Capacity::Rps(*rps),
            Some(ZoneCapacity::Query(query)) => match self.health.capacity_query(query, zone) {
                Ok(rps) => Capacity::Rps(rps),
                Err(why) => Capacity::Unknown { why },
            },
        };
        let load_rps = self.health.load_rps(zone, now_ms);
        ZoneLoad { zone: zone.to_owned(), load_rps, capacity, load_note: None }
    }

    /// Keeps the zone's load per unit (`rps` over the `units` it serves) in its history, one
    /// sample per second at most, over the peak window. Per unit, so a zone's peak is the peak of
    /// the users it serves now: a zone that carried its neighbour's users during a drill does not
    /// keep that load as its "own peak" once they went back.
    fn remember(&self, zone: &str, rps: f64, units: u32, now_ms: u64) {
        let window = self.config.peak_window_ms;
        if window == 0 || units == 0 {
            return;
        }
        // The measured load lags a change of units by the detection window: a zone that just gave
        // its neighbour's users back still reads their load for a while, which over its fewer
        // units looked like a new peak. Sample only once its units have been steady that long.
        {
            let mut steady = self.steady.lock().unwrap_or_else(|p| p.into_inner());
            let since = steady.entry(zone.to_owned()).or_insert((units, now_ms));
            if since.0 != units {
                *since = (units, now_ms);
                return;
            }
            if now_ms.saturating_sub(since.1) < self.health.detect_ms() {
                return;
            }
        }
        let rps = rps / f64::from(units);
        let mut history = self.history.lock().unwrap_or_else(|p| p.into_inner());
        let samples = history.entry(zone.to_owned()).or_default();
        match samples.back_mut() {
            Some((at, peak)) if now_ms.saturating_sub(*at) < 1_000 => *peak = peak.max(rps),
            _ => samples.push_back((now_ms, rps)),
        }
        while samples.front().is_some_and(|(at, _)| now_ms.saturating_sub(*at) > window) {
            samples.pop_front();
        }
    }

    /// The zone, serving `units` units, as the receiver of moved users: its load is the peak of
    /// its users over the peak window (its highest load per unit, times the units it serves now)
    /// when that is above its load now ("own peak + the moved share of the neighbour").
    fn receiving_load(&self, zone: &str, units: u32, now_ms: u64) -> ZoneLoad {
        let mut load = self.zone(zone, now_ms);
        let Ok(now_rps) = load.load_rps else { return load };
        self.remember(zone, now_rps, units, now_ms);
        let peak = {
            let history = self.history.lock().unwrap_or_else(|p| p.into_inner());
            history
                .get(zone)
                .and_then(|s| s.iter().map(|(_, per_unit)| *per_unit).reduce(f64::max))
                .map(|per_unit| per_unit * f64::from(units))
        };
        if let Some(peak) = peak
            && peak > now_rps
        {
            load.load_rps = Ok(peak);
            load.load_note = Some(format!(
                "{zone} is judged at its peak of the last {}, {peak:.0} rps (now {now_rps:.0} rps)",
                crate::duration::format_duration_ms(self.config.peak_window_ms)
            ));
        }
        load
    }

    /// The readings a drain of `drained` (a colour) is judged against; `None` when no zone has
    /// a capacity, or the receiving zone has none (it is not checked, so nothing is read).
    ///
    /// The receiving zone's load carries what the drain's earlier steps moved: at least its
    /// load when this replica first judged the drain plus the source's load per unit then, times
    /// the units moved since (its measured load shows a step only after the detection window, so
    /// step after step used to be judged on a load that lagged).
    pub fn drain_inputs(
        &self,
        table: &RoutingTable,
        drain: &crate::core::Drain,
        now_ms: u64,
    ) -> Option<CapacityInputs> {
        let drained = drain.plan.color;
        let receiving = table.zone_of(drain.receiving_color());
        if !self.config.zones.contains_key(receiving) {
            return None;
        }
        let source_units = units_of(table, drained);
        let draining = self.source_load(table.zone_of(drained), source_units, now_ms);
        let mut receiving = self.receiving_load(receiving, table.units() - source_units, now_ms);
        let baseline = {
            let mut baselines = self.baselines.lock().unwrap_or_else(|p| p.into_inner());
            baselines.retain(|id, _| *id + 64 > drain.id);
            match (baselines.get(&drain.id), &draining.load_rps, &receiving.load_rps) {
                (Some(b), _, _) => Some(*b),
                (None, Ok(source), Ok(receiving_rps)) if source_units > 0 => {
                    let b = Baseline {
                        start_units: source_units,
                        source_per_unit: source / f64::from(source_units),
                        receiving_rps: *receiving_rps,
                    };
                    // First judged mid-drain (after a restart): what moved before is in the
                    // load measured now (give or take the detection window's lag), so only the
                    // units moved from here on are carried.
                    baselines.insert(drain.id, b);
                    Some(b)
                }
                _ => None,
            }
        };
        if let (Some(b), Ok(measured)) = (baseline, receiving.load_rps.clone()) {
            let moved = b.start_units.saturating_sub(source_units);
            let carried = b.receiving_rps + b.source_per_unit * f64::from(moved);
            if carried > measured {
                let note = format!(
                    "{} carries {carried:.0} rps: {:.0} rps before this drain plus {moved} unit(s) it moved already ({measured:.0} rps measured)",
                    receiving.zone, b.receiving_rps
                );
                receiving.load_note = Some(match receiving.load_note.take() {
                    Some(peak) => format!("{note}; {peak}"),
                    None => note,
                });
                receiving.load_rps = Ok(carried);
            }
        }
        Some(CapacityInputs {
            units: table.units(),
            draining,
            receiving,
            headroom: self.config.headroom,
        })
    }

    /// Whether moving the dial from the table's blue units to `to_blue_units` fits the zone
    /// that receives the moved users.
    pub fn judge_dial(&self, table: &RoutingTable, to_blue_units: u32, now_ms: u64) -> Verdict {
        let from = table.blue_units();
        if to_blue_units == from {
            return Verdict::Unchecked;
        }
        // Fewer blue units: blue's users move to green, and the other way round.
        let source = if to_blue_units < from { ZoneId::BLUE } else { ZoneId::GREEN };
        let receiving = crate::core::counterpart(source);
        if !self.config.zones.contains_key(table.zone_of(receiving)) {
            return Verdict::Unchecked;
        }
        let units_of = |c: ZoneId| table.units_of(c);
        judge(
            from.abs_diff(to_blue_units),
            units_of(source),
            units_of(receiving),
            &self.source_load(table.zone_of(source), units_of(source), now_ms),
            &self.receiving_load(table.zone_of(receiving), units_of(receiving), now_ms),
            self.config.headroom,
        )
    }

    /// One verdict per zone that gains units when `table`'s map becomes `next` (a unit-set
    /// move), in zone order; zones without a configured capacity are `Unchecked`.
    pub fn judge_map(
        &self,
        table: &RoutingTable,
        next: &crate::core::UnitMap,
        now_ms: u64,
    ) -> Vec<(ZoneId, Verdict)> {
        self.judge_maps(table, &[(table.map(), next)], now_ms)
    }

    /// [`Capacities::judge_map`] for a change of several domains' maps at once, each given as
    /// (its map now, its map after): a zone that gains units in several domains is judged on
    /// the sum. A source zone's load per unit is its load over the units it owns in the map the
    /// units leave, as the dial of a named domain judges it.
    pub fn judge_maps(
        &self,
        table: &RoutingTable,
        changes: &[(&crate::core::UnitMap, &crate::core::UnitMap)],
        now_ms: u64,
    ) -> Vec<(ZoneId, Verdict)> {
        let zones = table.zones();
        let n = zones.len();
        // moved[change][source][receiver] = units moving from source to receiver.
        let mut moved = vec![vec![vec![0u32; n]; n]; changes.len()];
        for (c, (now, next)) in changes.iter().enumerate() {
            for unit in now.diff(next) {
                moved[c][now.owner(unit).index()][next.owner(unit).index()] += 1;
            }
        }
        let mut out = Vec::new();
        for receiver in zones.ids() {
            let gains_from: Vec<(usize, ZoneId)> = (0..changes.len())
                .flat_map(|c| zones.ids().map(move |s| (c, s)))
                .filter(|(c, s)| moved[*c][s.index()][receiver.index()] > 0)
                .collect();
            if gains_from.is_empty() {
                continue;
            }
            let name = table.zone_of(receiver);
            if !self.config.zones.contains_key(name) {
                out.push((receiver, Verdict::Unchecked));
                continue;
            }
            let sources: Vec<(u32, u32, ZoneLoad)> = gains_from
                .iter()
                .map(|&(c, s)| {
                    let units = changes[c].0.count(s);
                    (
                        moved[c][s.index()][receiver.index()],
                        units,
                        self.source_load(table.zone_of(s), units, now_ms),
                    )
                })
                .collect();
            let gains: Vec<crate::core::Gain<'_>> = sources
                .iter()
                .map(|(m, u, load)| crate::core::Gain {
                    moved_units: *m,
                    source_units: *u,
                    source: load,
                })
                .collect();
            let units = table.units_of(receiver);
            let receiving = idle_is_zero(table, receiver, self.receiving_load(name, units, now_ms));
            out.push((
                receiver,
                crate::core::judge_gains(&gains, units, &receiving, self.config.headroom),
            ));
        }
        out
    }

    /// The standing capacity question for every zone that owns users: could the other live
    /// zones take all of them now? One answer per receiving zone that has a capacity, as
    /// `(receiver, source, fits)` (`None`: unknown). On two zones the other zone takes every
    /// user (the dial to 0 or 100 %); among more, each receiver its share of the source's units
    /// (every domain's) spread by free room, as an evacuation without `to` would give them.
    pub fn can_absorb(
        &self,
        table: &RoutingTable,
        now_ms: u64,
    ) -> Vec<(ZoneId, ZoneId, Option<bool>)> {
        let answer = |v: &Verdict| match v {
            Verdict::Unchecked => None,
            Verdict::Fits(_) => Some(Some(true)),
            Verdict::Exceeds(_) => Some(Some(false)),
            Verdict::Unknown { .. } => Some(None),
        };
        let zones = table.zones();
        let mut out = Vec::new();
        if zones.is_two() {
            for (from, to, to_units) in
                [(ZoneId::BLUE, ZoneId::GREEN, 0), (ZoneId::GREEN, ZoneId::BLUE, table.units())]
            {
                if let Some(can) = answer(&self.judge_dial(table, to_units, now_ms)) {
                    out.push((to, from, can));
                }
            }
            return out;
        }
        let live: Vec<ZoneId> = zones.live().collect();
        for &from in &live {
            let receivers: Vec<ZoneId> = live.iter().copied().filter(|z| *z != from).collect();
            if receivers.is_empty() || table.units_of(from) == 0 {
                continue;
            }
            let rooms: Vec<Option<f64>> =
                receivers.iter().map(|z| self.room(table, *z, now_ms)).collect();
            let mut maps: Vec<(&crate::core::UnitMap, crate::core::UnitMap)> = Vec::new();
            for map in std::iter::once(table.map()).chain(table.domains().values()) {
                let given: Vec<u32> = map.units_of(from).collect();
                if given.is_empty() {
                    continue;
                }
                maps.push((map, spread_map(map, &given, &receivers, &rooms)));
            }
            let changes: Vec<(&crate::core::UnitMap, &crate::core::UnitMap)> =
                maps.iter().map(|(now, next)| (*now, next)).collect();
            for (to, verdict) in self.judge_maps(table, &changes, now_ms) {
                if let Some(can) = answer(&verdict) {
                    out.push((to, from, can));
                }
            }
        }
        out
    }

    /// Each receiver's free room (allowed load less current load, in rps) for spreading an
    /// evacuation by headroom; `None` where it is not known or not checked.
    pub fn room(&self, table: &RoutingTable, zone: ZoneId, now_ms: u64) -> Option<f64> {
        let name = table.zone_of(zone);
        if !self.config.zones.contains_key(name) {
            return None;
        }
        let load =
            idle_is_zero(table, zone, self.receiving_load(name, table.units_of(zone), now_ms));
        match (&load.capacity, &load.load_rps) {
            (crate::core::Capacity::Rps(cap), Ok(now)) => {
                Some(cap * (1.0 - self.config.headroom) - now)
            }
            _ => None,
        }
    }
}

/// A zone that nothing routes to ([`RoutingTable::routes_nothing_to`]) and that reports no
/// load carries none: a site just added has no users to report outcomes for, and judging its
/// first units as "load unknown" meant every first move to it needed `force`.
fn idle_is_zero(table: &RoutingTable, zone: ZoneId, mut load: ZoneLoad) -> ZoneLoad {
    if load.load_rps.is_err() && table.routes_nothing_to(zone) {
        load.load_note = Some(format!(
            "{} owns no units, pins or channels and reports no outcomes: judged at 0 rps",
            load.zone
        ));
        load.load_rps = Ok(0.0);
    }
    load
}

/// The units a colour serves in the table.
fn units_of(table: &RoutingTable, color: ZoneId) -> u32 {
    table.units_of(color)
}

/// `map` with the units `given` (ascending) spread over `receivers` by their free `rooms`
/// (`core::spread_by_headroom`), each receiver taking a contiguous slice in receiver order: the
/// map an evacuation's or a zone drain's units lead to, for judging its capacity.
pub fn spread_map(
    map: &crate::core::UnitMap,
    given: &[u32],
    receivers: &[ZoneId],
    rooms: &[Option<f64>],
) -> crate::core::UnitMap {
    let counts = crate::core::spread_by_headroom(given.len() as u32, rooms);
    let mut next = map.clone();
    let mut at = 0usize;
    for (zone, count) in receivers.iter().zip(counts) {
        let slice = &given[at..at + count as usize];
        at += count as usize;
        if let Some(set) = crate::core::UnitSet::from_sorted(slice) {
            next = next.moved(&set, *zone);
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::core::{Genesis, State, UnitMode, UnitScheme, Zones};
    use crate::service::health::Source;

    fn setup() -> (Arc<Health>, Capacities, State) {
        let zones = Zones::default();
        let health = Arc::new(
            Health::new(zones.clone(), 60_000, Source::Outcomes).with_detection(10_000, 15_000),
        );
        let config = CapacityConfig {
            zones: BTreeMap::from([(
                zones.zone_of(ZoneId::GREEN).to_owned(),
                ZoneCapacity::Rps(4_000.0),
            )]),
            headroom: 0.1,
            peak_window_ms: 600_000,
        };
        let capacities = Capacities::new(Arc::clone(&health), config);
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let state = State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap();
        (health, capacities, state)
    }

    /// 2 000 rps in each zone, reported every second from `from_ms` to `to_ms`.
    fn feed(health: &Health, zones: &[&str], from_ms: u64, to_ms: u64) {
        feed_at(health, zones, 2_000, from_ms, to_ms);
    }

    fn feed_at(health: &Health, zones: &[&str], rps: u64, from_ms: u64, to_ms: u64) {
        let mut t = from_ms;
        while t <= to_ms {
            for zone in zones {
                let color = if *zone == "az-b" { ZoneId::BLUE } else { ZoneId::GREEN };
                health.record(zone, color, rps, 0, t).unwrap();
            }
            t += 1_000;
        }
    }

    /// A drain of az-b (blue) that started at `start_blue_units`.
    fn drain(id: u64, start_blue_units: u32) -> crate::core::Drain {
        use crate::core::{Direction, DrainMode, DrainPlan, DrainStatus, Guard, OnBreach};
        crate::core::Drain {
            id,
            plan: DrainPlan {
                zone: "az-b".into(),
                color: ZoneId::BLUE,
                target_blue_units: 0,
                step_units: 10,
                interval_ms: 1_000,
                guard: Guard {
                    max_error_rate: 0.05,
                    min_requests: 1,
                    breaches: 1,
                    on_breach: OnBreach::Pause,
                },
                mode: DrainMode::Evacuate,
                domain: None,
                freeze_ms: None,
                receivers: None,
            },
            start_blue_units,
            start_units: None,
            status: DrainStatus::Running,
            direction: Direction::Forward,
            next_due_ms: 0,
            consecutive_breaches: 0,
            hold_reason: None,
            pause_cause: None,
            steps_done: 0,
            last_step_version: None,
            last_step_ms: 0,
            started_ms: 0,
            started_by: "test".into(),
            reason: "test".into(),
            finished_ms: None,
            freeze: None,
            freezes: Vec::new(),
        }
    }

    #[test]
    fn a_receiving_zone_is_judged_at_its_own_peak() {
        let (health, capacities, state) = setup();
        // az-a carried 2 600 rps for a while, then 1 000 rps now; az-b 1 000 rps (the rates read
        // up to about 10 % above that over windows still filling).
        feed_at(&health, &["az-a", "az-b"], 2_600, 1_000_000, 1_022_000);
        // A sample counts once the units have been steady for the 10 s detection window.
        let _ = capacities.judge_dial(state.table(), 25, 1_011_000);
        let _ = capacities.judge_dial(state.table(), 25, 1_022_000);
        feed_at(&health, &["az-a", "az-b"], 1_000, 1_023_000, 1_040_000);
        // Moving 25 of az-b's 50 units: at az-a's peak, 2 600 + 500 fits the 3 600 allowed; all
        // 50 units (2 600 + 1 000) do not, though they would at its load now (1 000 + 1 000).
        let half = capacities.judge_dial(state.table(), 25, 1_040_500);
        let Verdict::Fits(p) = &half else { panic!("{half:?}") };
        assert!((3_300.0..3_600.0).contains(&p.projected_rps), "{p:?}");
        let all = capacities.judge_dial(state.table(), 0, 1_040_500);
        assert!(matches!(all, Verdict::Exceeds(_)), "{all:?}");
        // Judged on the load this minute, the same move fitted: the peak is what refuses it.
        let (health2, _, _) = setup();
        let current_only = Capacities::new(
            Arc::clone(&health2),
            CapacityConfig { peak_window_ms: 0, ..capacities.config.clone() },
        );
        feed_at(&health2, &["az-a", "az-b"], 2_600, 1_000_000, 1_022_000);
        let _ = current_only.judge_dial(state.table(), 25, 1_011_000);
        let _ = current_only.judge_dial(state.table(), 25, 1_022_000);
        feed_at(&health2, &["az-a", "az-b"], 1_000, 1_023_000, 1_040_000);
        let verdict = current_only.judge_dial(state.table(), 0, 1_040_500);
        assert!(matches!(verdict, Verdict::Fits(_)), "{verdict:?}");
    }

    #[test]
    fn a_zone_that_carried_its_neighbours_users_does_not_keep_their_load_as_its_peak() {
        let (health, capacities, state) = setup();
        // During a drill az-a (green) served every unit at 4 000 rps: 40 rps per unit.
        let all_green = {
            use crate::core::{Audit, Command, Envelope};
            let audit = Audit { by: "t".into(), at_ms: 1, reason: "drill".into() };
            let command = Command::SetBlueUnits { blue_units: 0, domain: None };
            let envelope = Envelope { expected_version: state.version(), command, audit };
            state.apply(&envelope).unwrap().unwrap().0
        };
        feed_at(&health, &["az-a"], 4_000, 1_000_000, 1_022_000);
        let _ = capacities.receiving_load("az-a", 100, 1_011_000);
        let _ = capacities.receiving_load("az-a", 100, 1_022_000);
        // Back at 50 units; for the detection window it still reads the drill's load (the window
        // lags), which is not taken for a peak of its 50 units.
        feed_at(&health, &["az-a"], 4_000, 1_023_000, 1_026_000);
        let _ = capacities.receiving_load("az-a", 50, 1_026_500);
        feed_at(&health, &["az-a", "az-b"], 2_000, 1_027_000, 1_050_000);
        let load = capacities.receiving_load("az-a", 50, 1_050_500);
        let rps = *load.load_rps.as_ref().unwrap();
        assert!((2_000.0..2_300.0).contains(&rps), "{rps} {:?}", load.load_note);
        let _ = all_green;
    }

    #[test]
    fn a_drain_step_carries_the_load_earlier_steps_moved() {
        let (health, capacities, mut state) = setup();
        feed(&health, &["az-a", "az-b"], 1_000_000, 1_012_000);
        let d = drain(7, 50);
        // First judged at the start: az-a 2 000 rps, az-b 40 rps per unit.
        let first = capacities.drain_inputs(state.table(), &d, 1_012_500).unwrap();
        assert_eq!(first.receiving.load_note, None);
        // Two steps later (30 units left), az-a's measured load has not caught up yet.
        state = {
            use crate::core::{Audit, Command, Envelope};
            let audit = Audit { by: "t".into(), at_ms: 1, reason: "dial".into() };
            let envelope = Envelope {
                expected_version: state.version(),
                command: Command::SetBlueUnits { blue_units: 30, domain: None },
                audit,
            };
            state.apply(&envelope).unwrap().unwrap().0
        };
        feed(&health, &["az-a", "az-b"], 1_013_000, 1_014_000);
        let later = capacities.drain_inputs(state.table(), &d, 1_014_500).unwrap();
        let carried = *later.receiving.load_rps.as_ref().unwrap();
        // About 2 100 rps then, plus 20 units of az-b's 42 rps per unit then (the rates read a
        // little above 2 000 over a window that is still filling).
        assert!((2_800.0..3_000.0).contains(&carried), "2 100 + 20 units x 42 rps: {carried}");
        let note = later.receiving.load_note.unwrap();
        assert!(note.contains("20 unit(s) it moved already"), "{note}");
    }

    #[test]
    fn right_after_a_start_the_load_is_unknown_not_low() {
        let (health, capacities, state) = setup();
        feed(&health, &["az-a", "az-b"], 1_000_000, 1_002_000);
        // Three seconds of reports: not enough of the 10 s detection window to read a rate.
        let early = capacities.judge_dial(state.table(), 0, 1_002_500);
        assert!(matches!(early, Verdict::Unknown { .. }), "{early:?}");
        assert!(early.explain().contains("not measured yet"), "{}", early.explain());
        feed(&health, &["az-a", "az-b"], 1_003_000, 1_012_000);
        let measured = capacities.judge_dial(state.table(), 0, 1_012_500);
        let Verdict::Exceeds(p) = &measured else { panic!("{measured:?}") };
        assert!((3_900.0..4_300.0).contains(&p.projected_rps), "{p:?}");
    }

    #[test]
    fn a_silent_source_zone_is_judged_by_its_last_known_load() {
        let (health, capacities, state) = setup();
        feed(&health, &["az-a", "az-b"], 1_000_000, 1_012_000);
        // Read while az-b reports: remembered per unit (2 000 rps over 50 units).
        assert!(matches!(capacities.judge_dial(state.table(), 25, 1_012_500), Verdict::Fits(_)));
        // az-b goes silent; az-a keeps reporting.
        feed(&health, &["az-a"], 1_013_000, 1_040_000);
        let inputs = capacities.drain_inputs(state.table(), &drain(1, 50), 1_040_500).unwrap();
        let last_known = *inputs.draining.load_rps.as_ref().unwrap();
        assert!((2_000.0..2_200.0).contains(&last_known), "{last_known}");
        let note = inputs.draining.load_note.clone().unwrap();
        assert!(note.contains("last known 2105 rps") && note.contains("silent"), "{note}");
        // Moving all of az-b onto az-a is judged with az-b's real weight and refused.
        let verdict = capacities.judge_dial(state.table(), 0, 1_040_500);
        assert!(matches!(verdict, Verdict::Exceeds(_)), "{verdict:?}");
        assert!(verdict.explain().contains("last known"), "{}", verdict.explain());
    }

    #[test]
    fn a_source_read_while_its_reports_stop_is_remembered_at_its_real_load() {
        let (health, capacities, state) = setup();
        feed(&health, &["az-a", "az-b"], 1_000_000, 1_012_000);
        assert!(matches!(capacities.judge_dial(state.table(), 25, 1_012_500), Verdict::Fits(_)));
        // az-b stops reporting; it is read again 4.5 s and 8.5 s later, before it is silent
        // (15 s), while its last reports fall out of the 10 s detection window.
        feed(&health, &["az-a"], 1_013_000, 1_040_000);
        for at in [1_016_500, 1_020_500] {
            let read = capacities.drain_inputs(state.table(), &drain(1, 50), at).unwrap();
            let rps = *read.draining.load_rps.as_ref().unwrap();
            assert!((1_900.0..2_300.0).contains(&rps), "read at {at}: {rps}");
        }
        // Silent: judged by the last known load, not by the decayed one (about 300 rps before).
        let inputs = capacities.drain_inputs(state.table(), &drain(2, 50), 1_040_500).unwrap();
        let last_known = *inputs.draining.load_rps.as_ref().unwrap();
        assert!((1_900.0..2_300.0).contains(&last_known), "{last_known}");
    }
}
