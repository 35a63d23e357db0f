//! Zone capacity: reads each zone's load and capacity for the pure `core::judge`.
//!
//! Load comes from the health source (the outcome window's request rate, or Prometheus' load
//! query); capacity from `[zones.<zone>]` (a number, or a PromQL query). Reading may block on the
//! network with Prometheus: call from a blocking context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::{CapacityConfig, ZoneCapacity};
use crate::core::{Capacity, CapacityInputs, Color, RoutingTable, Verdict, ZoneLoad, judge};
use crate::service::health::Health;

pub struct Capacities {
    health: Arc<Health>,
    config: CapacityConfig,
    /// Each zone's last known load per unit of the routing table, and when it was read: a
    /// source zone that goes silent is judged by it instead of by an estimate from the
    /// receiving zone's (lagging) load. That estimate let an evacuation of a silent az-b take
    /// az-a to 1 993 rps against 1 500 allowed.
    last_known: Mutex<HashMap<String, (f64, u64)>>,
}

/// How long a silent zone's last known load is used; past it the zone's load is unknown.
pub const LAST_KNOWN_FOR_MS: u64 = 15 * 60_000;

impl Capacities {
    pub fn new(health: Arc<Health>, config: CapacityConfig) -> Capacities {
        Capacities { health, config, last_known: Mutex::new(HashMap::new()) }
    }

    /// The load of a zone that serves `units` units now, as a *source* of moved users: read
    /// now and remembered per unit, or, when it cannot be read (silent, or not measured yet),
    /// the last one remembered within [`LAST_KNOWN_FOR_MS`], scaled to the units it has now.
    fn source_load(&self, zone: &str, units: u32, now_ms: u64) -> ZoneLoad {
        let mut load = self.zone(zone, now_ms);
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
        ZoneLoad {
            zone: zone.to_owned(),
            load_rps: self.health.load_rps(zone, now_ms),
            capacity,
            load_note: None,
        }
    }

    /// The readings a drain of `drained` (a colour) is judged against; `None` when no zone has
    /// a capacity, or the receiving zone has none (it is not checked, so nothing is read).
    pub fn drain_inputs(
        &self,
        table: &RoutingTable,
        drained: Color,
        now_ms: u64,
    ) -> Option<CapacityInputs> {
        let receiving = table.zone_of(drained.other());
        if !self.config.zones.contains_key(receiving) {
            return None;
        }
        Some(CapacityInputs {
            units: table.units(),
            draining: self.source_load(table.zone_of(drained), units_of(table, drained), now_ms),
            receiving: self.zone(receiving, now_ms),
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
        let source = if to_blue_units < from { Color::Blue } else { Color::Green };
        if !self.config.zones.contains_key(table.zone_of(source.other())) {
            return Verdict::Unchecked;
        }
        let units_of = |c: Color| match c {
            Color::Blue => from,
            Color::Green => table.units() - from,
        };
        judge(
            from.abs_diff(to_blue_units),
            units_of(source),
            units_of(source.other()),
            &self.source_load(table.zone_of(source), units_of(source), now_ms),
            &self.zone(table.zone_of(source.other()), now_ms),
            self.config.headroom,
        )
    }
}

/// The units a colour serves in the table.
fn units_of(table: &RoutingTable, color: Color) -> u32 {
    match color {
        Color::Blue => table.blue_units(),
        Color::Green => table.units() - table.blue_units(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::core::{ColorZones, Genesis, State, UnitMode, UnitScheme};
    use crate::service::health::Source;

    fn setup() -> (Arc<Health>, Capacities, State) {
        let zones = ColorZones::default();
        let health = Arc::new(
            Health::new(zones.clone(), 60_000, Source::Outcomes).with_detection(10_000, 15_000),
        );
        let config = CapacityConfig {
            zones: BTreeMap::from([(zones.green.clone(), ZoneCapacity::Rps(4_000.0))]),
            headroom: 0.1,
        };
        let capacities = Capacities::new(Arc::clone(&health), config);
        let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
        let state = State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap();
        (health, capacities, state)
    }

    /// 2 000 rps in each zone, reported every second from `from_ms` to `to_ms`.
    fn feed(health: &Health, zones: &[&str], from_ms: u64, to_ms: u64) {
        let mut t = from_ms;
        while t <= to_ms {
            for zone in zones {
                let color = if *zone == "az-b" { Color::Blue } else { Color::Green };
                health.record(zone, color, 2_000, 0, t).unwrap();
            }
            t += 1_000;
        }
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
        let inputs = capacities.drain_inputs(state.table(), Color::Blue, 1_040_500).unwrap();
        let last_known = *inputs.draining.load_rps.as_ref().unwrap();
        assert!((2_000.0..2_200.0).contains(&last_known), "{last_known}");
        let note = inputs.draining.load_note.clone().unwrap();
        assert!(note.contains("last known 2105 rps") && note.contains("silent"), "{note}");
        // Moving all of az-b onto az-a is judged with az-b's real weight and refused.
        let verdict = capacities.judge_dial(state.table(), 0, 1_040_500);
        assert!(matches!(verdict, Verdict::Exceeds(_)), "{verdict:?}");
        assert!(verdict.explain().contains("last known"), "{}", verdict.explain());
    }
}
