//! The replicated state: the routing table, the drains, the plans and their runs, and the
//! automation switch; its read accessors, and the lookups the command arms share.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{CommandError, Genesis};
use crate::automation::Automation;
use crate::channel_change::ChannelChange;
use crate::dial::{DialError, Share};
use crate::drain::{Drain, DrainStatus};
use crate::plan::StoredPlan;
use crate::plan_run::{FINISHED_RUNS_KEPT, PlanRun, RunStatus};
use crate::staged::UnitsChange;
use crate::table::{GlobalWriter, RoutingTable};
use crate::unit_map::UnitMap;
use crate::zone::{ZoneError, ZoneId, ZoneSpec, Zones};

/// How many finished drains the state remembers (active drains are always kept).
pub const FINISHED_DRAINS_KEPT: usize = 100;

/// The whole replicated state: the routing table and the drains.
///
/// Both halves sit behind `Arc`s so that a snapshot is cheap to clone and a command that only
/// touches a drain does not copy the pins.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub(super) table: Arc<RoutingTable>,
    pub(super) drains: Arc<BTreeMap<u64, Drain>>,
    pub(super) next_drain_id: u64,
    pub(super) plans: Arc<BTreeMap<String, StoredPlan>>,
    pub(super) runs: Arc<BTreeMap<u64, PlanRun>>,
    pub(super) next_run_id: u64,
    pub(super) automation: Automation,
    /// The loss-less change of a release channel in progress (at most one).
    pub(super) channel_change: Option<Arc<ChannelChange>>,
    /// The loss-less unit move in progress (at most one).
    pub(super) units_change: Option<Arc<UnitsChange>>,
}

impl State {
    /// The state right after the genesis record (version 1).
    pub fn genesis(genesis: Genesis, zones: Zones) -> Result<State, DialError> {
        Share::from_units(u64::from(genesis.blue_units), genesis.scheme.count())?;
        Ok(State {
            table: Arc::new(RoutingTable {
                version: 1,
                scheme: genesis.scheme,
                map: UnitMap::dial(genesis.scheme.count(), genesis.blue_units),
                pins: Arc::new(BTreeMap::new()),
                zones,
                global: GlobalWriter::default(),
                domains: Arc::new(BTreeMap::new()),
                frozen: Arc::new(BTreeMap::new()),
                channels: Arc::new(BTreeMap::new()),
                channel_freeze: None,
            }),
            drains: Arc::new(BTreeMap::new()),
            next_drain_id: 1,
            plans: Arc::new(BTreeMap::new()),
            runs: Arc::new(BTreeMap::new()),
            next_run_id: 1,
            automation: Automation::default(),
            channel_change: None,
            units_change: None,
        })
    }

    pub fn table(&self) -> &RoutingTable {
        &self.table
    }

    /// A shared handle to the table, for publishing without a copy.
    pub fn table_arc(&self) -> Arc<RoutingTable> {
        Arc::clone(&self.table)
    }

    /// Every remembered drain, oldest first.
    pub fn drains(&self) -> impl DoubleEndedIterator<Item = &Drain> {
        self.drains.values()
    }

    pub fn drain(&self, id: u64) -> Option<&Drain> {
        self.drains.get(&id)
    }

    /// The running or paused drain, if there is one (there is at most one).
    pub fn active_drain(&self) -> Option<&Drain> {
        self.drains.values().rev().find(|d| d.is_active())
    }

    pub fn version(&self) -> u64 {
        self.table.version
    }

    /// The ID the next drain will get.
    pub fn next_drain_id(&self) -> u64 {
        self.next_drain_id
    }

    /// A state from its parts, as a snapshot of an earlier replay stores them. Only the store
    /// calls this, with parts that a replay through [`State::apply`] produced and a checksum
    /// guarded; the log after the snapshot is then applied as usual.
    pub fn restore(
        table: RoutingTable,
        drains: Vec<Drain>,
        next_drain_id: u64,
        plans: Vec<StoredPlan>,
        runs: Vec<PlanRun>,
        next_run_id: u64,
        automation: Automation,
    ) -> State {
        State {
            channel_change: None,
            units_change: None,
            table: Arc::new(table),
            drains: Arc::new(drains.into_iter().map(|d| (d.id, d)).collect()),
            next_drain_id,
            plans: Arc::new(plans.into_iter().map(|p| (p.plan.name.clone(), p)).collect()),
            runs: Arc::new(runs.into_iter().map(|r| (r.id, r)).collect()),
            next_run_id,
            automation,
        }
    }

    /// The restored state with the channel change a snapshot holds (see [`State::restore`]).
    pub fn with_channel_change(mut self, change: Option<ChannelChange>) -> State {
        self.channel_change = change.map(Arc::new);
        self
    }

    /// The loss-less unit move in progress, if there is one.
    pub fn units_change(&self) -> Option<&UnitsChange> {
        self.units_change.as_deref()
    }

    /// The restored state with the unit move a snapshot holds (see [`State::restore`]).
    pub fn with_units_change(mut self, change: Option<UnitsChange>) -> State {
        self.units_change = change.map(Arc::new);
        self
    }

    /// Refuses changing a map while a loss-less unit move holds its freeze: the switch makes
    /// exactly the moves the freeze named, on the maps the freeze saw.
    pub(super) fn no_units_change(&self) -> Result<(), CommandError> {
        match self.units_change {
            Some(_) => Err(CommandError::UnitsChanging),
            None => Ok(()),
        }
    }

    /// The loss-less channel change in progress, if there is one.
    pub fn channel_change(&self) -> Option<&ChannelChange> {
        self.channel_change.as_deref()
    }

    /// Automatic failover's stop switch and arming time.
    pub fn automation(&self) -> &Automation {
        &self.automation
    }

    /// Every remembered plan run, oldest first.
    pub fn plan_runs(&self) -> impl DoubleEndedIterator<Item = &PlanRun> {
        self.runs.values()
    }

    pub fn plan_run(&self, id: u64) -> Option<&PlanRun> {
        self.runs.get(&id)
    }

    /// The active plan run, if there is one (there is at most one).
    pub fn active_run(&self) -> Option<&PlanRun> {
        self.runs.values().rev().find(|r| r.is_active())
    }

    /// The ID the next plan run will get.
    pub fn next_run_id(&self) -> u64 {
        self.next_run_id
    }

    /// Every stored plan, by name.
    pub fn plans(&self) -> impl Iterator<Item = &StoredPlan> {
        self.plans.values()
    }

    pub fn plan(&self, name: &str) -> Option<&StoredPlan> {
        self.plans.get(name)
    }

    pub(super) fn live_run(&self, id: u64, action: &'static str) -> Result<&PlanRun, CommandError> {
        let run = self.runs.get(&id).ok_or(CommandError::RunNotFound(id))?;
        if !run.is_active() {
            return Err(CommandError::RunState { id, state: run.status.as_str(), action });
        }
        Ok(run)
    }

    pub(super) fn run_in(
        &self,
        id: u64,
        statuses: &[RunStatus],
        action: &'static str,
    ) -> Result<&PlanRun, CommandError> {
        let run = self.runs.get(&id).ok_or(CommandError::RunNotFound(id))?;
        if !statuses.contains(&run.status) {
            return Err(CommandError::RunState { id, state: run.status.as_str(), action });
        }
        Ok(run)
    }

    pub(super) fn insert_run(&mut self, run: PlanRun) {
        let runs = Arc::make_mut(&mut self.runs);
        runs.insert(run.id, run);
        while runs.values().filter(|r| !r.is_active()).count() > FINISHED_RUNS_KEPT {
            match runs.values().find(|r| !r.is_active()).map(|r| r.id) {
                Some(id) => runs.remove(&id),
                None => break,
            };
        }
    }

    pub(super) fn insert_drain(&mut self, drain: Drain) {
        let drains = Arc::make_mut(&mut self.drains);
        drains.insert(drain.id, drain);
        // Forget the oldest finished drains beyond the limit; their history stays in the log.
        while drains.values().filter(|d| !d.is_active()).count() > FINISHED_DRAINS_KEPT {
            let oldest = drains.values().find(|d| !d.is_active()).map(|d| d.id);
            match oldest {
                Some(id) => drains.remove(&id),
                None => break,
            };
        }
    }

    /// A drain that exists and is not finished.
    pub(super) fn live_drain(&self, id: u64, action: &'static str) -> Result<&Drain, CommandError> {
        let drain = self.drains.get(&id).ok_or(CommandError::DrainNotFound(id))?;
        if !drain.is_active() {
            return Err(CommandError::DrainFinished { id, state: drain.state_name(), action });
        }
        Ok(drain)
    }

    /// A drain that is running (not paused, not finished).
    pub(super) fn running_drain(
        &self,
        id: u64,
        action: &'static str,
    ) -> Result<&Drain, CommandError> {
        let drain = self.live_drain(id, action)?;
        if drain.status != DrainStatus::Running {
            return Err(CommandError::DrainNotRunning { id, state: drain.state_name(), action });
        }
        Ok(drain)
    }

    /// The unit map of `domain` (`None`: the default domain), or `unknown_domain`.
    pub(super) fn domain_map(&self, domain: Option<&str>) -> Result<&UnitMap, CommandError> {
        self.table
            .map_of(domain)
            .ok_or_else(|| CommandError::UnknownDomain(domain.unwrap_or_default().to_owned()))
    }

    /// A zone of the table that is not retired.
    pub(super) fn live_zone(&self, zone: ZoneId) -> Result<&ZoneSpec, CommandError> {
        let spec = self
            .table
            .zones
            .get(zone)
            .ok_or_else(|| ZoneError::Unknown(format!("zone index {}", zone.0)))?;
        if spec.retired {
            return Err(ZoneError::Retired(spec.name.clone()).into());
        }
        Ok(spec)
    }

    /// Refuses a change while a drain is active (running, paused or settling).
    pub(super) fn no_active_drain(&self) -> Result<(), CommandError> {
        match self.active_drain() {
            Some(drain) => Err(CommandError::DrainActive(drain.id)),
            None => Ok(()),
        }
    }

    /// Refuses a change while a plan run is active.
    pub(super) fn no_active_run(&self) -> Result<(), CommandError> {
        match self.active_run() {
            Some(run) => Err(CommandError::RunActive(run.id)),
            None => Ok(()),
        }
    }

    /// Refuses moving units by hand while a drain runs (a paused drain lets an operator move
    /// them).
    pub(super) fn no_running_drain(&self) -> Result<(), CommandError> {
        match self.active_drain().filter(|d| d.status != DrainStatus::Paused) {
            Some(drain) => Err(CommandError::DrainRunning(drain.id)),
            None => Ok(()),
        }
    }

    /// The same state with its blue and green zones named by configuration (a file log's
    /// first two zone names are configuration, not logged state). Later zones keep their names.
    pub fn with_zones(mut self, zones: Zones) -> State {
        let renamed = self
            .table
            .zones
            .renamed_colors(zones.zone_of(ZoneId::BLUE), zones.zone_of(ZoneId::GREEN));
        self.table = Arc::new((*self.table).clone().with_zones(renamed));
        self
    }
}
