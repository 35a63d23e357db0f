//! Zone capacity: reads each zone's load and capacity for the pure `core::judge`.
//!
//! Load comes from the health source (the outcome window's request rate, or Prometheus' load
//! query); capacity from `[zones.<zone>]` (a number, or a PromQL query). Reading may block on the
//! network with Prometheus: call from a blocking context.

use std::sync::Arc;

use crate::config::{CapacityConfig, ZoneCapacity};
use crate::core::{Capacity, CapacityInputs, Color, RoutingTable, Verdict, ZoneLoad, judge};
use crate::service::health::Health;

pub struct Capacities {
    health: Arc<Health>,
    config: CapacityConfig,
}

impl Capacities {
    pub fn new(health: Arc<Health>, config: CapacityConfig) -> Capacities {
        Capacities { health, config }
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
        ZoneLoad { zone: zone.to_owned(), load_rps: self.health.load_rps(zone, now_ms), capacity }
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
            draining: self.zone(table.zone_of(drained), now_ms),
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
            &self.zone(table.zone_of(source), now_ms),
            &self.zone(table.zone_of(source.other()), now_ms),
            self.config.headroom,
        )
    }
}
