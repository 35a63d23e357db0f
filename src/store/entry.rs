//! The on-disk (and on-wire) form of log entries: serde types kept at the edge of the core.

use serde::{Deserialize, Serialize};

use crate::core::{
    Audit, Channel, ChannelFallback, CheckKind, Command, DrainMode, DrainPlan, Envelope, Genesis,
    GlobalWriter, Guard, HttpCall, OnBreach, PinChange, Plan, PlanMove, PlanStep, Precondition,
    RoutingTable, Trigger, UnitMode, UnitMove, UnitScheme, UnitSet, ZoneClass, ZoneId, ZoneSample,
    ZoneSpec, Zones,
};

/// Version of the entry format, written into the genesis entry.
pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum LogEntry {
    /// Always the first entry: fixes the unit scheme and the starting dial.
    Genesis {
        format: u32,
        units: u32,
        unit_mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        digits_skip: Option<u8>,
        blue_units: u32,
        at_ms: u64,
        by: String,
        reason: String,
        /// A random identity drawn when the log was created; clients use it to tell logs apart.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log_id: Option<String>,
        /// The colour-to-zone map the log was created with (shared logs pin it, so that replay
        /// never depends on a replica's configuration).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zones: Option<WireZones>,
        /// Every zone, when the log starts with more than the two colours (or classes other
        /// than `rzone`): the list wins over `zones`. Absent in two-zone logs, which older
        /// releases read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone_list: Option<Vec<WireZone>>,
    },
    /// A proposed command on a shared log: whether it takes effect, and which version it makes,
    /// is decided when the log is applied (compare-and-set on `expected_version`), the same way
    /// on every replica. `id` is unique per command: a second record with the same `id` (a retry
    /// after an unknown outcome) is ignored.
    Proposal {
        id: String,
        expected_version: u64,
        at_ms: u64,
        by: String,
        reason: String,
        command: WireCommand,
    },
    /// A claim (or renewal) of the named lease on a shared log, by replica `holder` until
    /// `until_ms` (wall clock). Granted when applied iff the lease is free, already `holder`'s,
    /// or its current `until_ms` is before this record's `at_ms` (`store::Applier`). Leases are
    /// not routing state: they spend no version and leave the audit trail and `state_hash` alone.
    Lease {
        id: String,
        name: String,
        holder: String,
        /// Where clients reach the holder (its `node.url`), so others can name it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        at_ms: u64,
        until_ms: u64,
    },
    /// An accepted command; applying it produced `version`.
    Change {
        version: u64,
        expected_version: u64,
        at_ms: u64,
        by: String,
        reason: String,
        command: WireCommand,
        from: String,
        to: String,
    },
}

/// The colour-to-zone map as written in a genesis entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireZones {
    pub blue: String,
    pub green: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireCommand {
    SetBlueUnits {
        blue_units: u32,
        /// A named domain's dial (format level 3); absent for the default domain.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
    },
    Pin {
        user_id: String,
        color: String,
    },
    Unpin {
        user_id: String,
    },
    StartDrain {
        zone: String,
        color: String,
        target_blue_units: u32,
        step_units: u32,
        interval_ms: u64,
        max_error_rate: f64,
        min_requests: u64,
        breaches: u32,
        on_breach: String,
        /// `evacuate`; absent for maintenance drains (and in logs written before modes).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode: Option<String>,
        /// A named domain's drain (format level 3); absent for the default domain.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
        /// A loss-less drain's freeze window (format level 4); absent: steps switch at once.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        freeze_ms: Option<u64>,
        /// A zone drain among N: its receivers by lane (format level 7); absent: the dial.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receivers: Option<Vec<String>>,
    },
    DrainStep {
        drain: u64,
        blue_units: u32,
    },
    /// A zone drain among N moves a slice (format level 7).
    ZoneDrainStep {
        drain: u64,
        moves: Vec<WireUnitMove>,
    },
    /// A loss-less zone drain freezes the slice it will move (format level 7).
    ZoneDrainFreeze {
        drain: u64,
        moves: Vec<WireUnitMove>,
    },
    DrainFreeze {
        drain: u64,
        blue_units: u32,
    },
    DrainUnfreeze {
        drain: u64,
        aborted: bool,
    },
    DrainHold {
        drain: u64,
        breach: bool,
        reason: String,
    },
    PauseDrain {
        drain: u64,
    },
    ResumeDrain {
        drain: u64,
    },
    AbortDrain {
        drain: u64,
    },
    RollbackDrain {
        drain: u64,
    },
    CompleteDrain {
        drain: u64,
    },
    PutPlan {
        plan: WirePlan,
    },
    SetAutomation {
        stopped: bool,
    },
    StartPlanRun {
        plan: String,
        revision: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drill_hold_ms: Option<u64>,
        /// The run restores unit maps (format level 7); absent: dial positions only.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        restores_maps: bool,
    },
    PlanStepStarted {
        run: u64,
        step: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drain: Option<WireDrainPlan>,
        #[serde(default)]
        samples: Vec<WireZoneSample>,
    },
    PlanStepFreeze {
        run: u64,
        step: usize,
    },
    PlanStepDone {
        run: u64,
        step: usize,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        converged_ms: Option<u64>,
        #[serde(default)]
        samples: Vec<WireZoneSample>,
    },
    PlanRunHold {
        run: u64,
        reason: String,
    },
    PausePlanRun {
        run: u64,
    },
    ResumePlanRun {
        run: u64,
    },
    AbortPlanRun {
        run: u64,
    },
    RollbackPlanRun {
        run: u64,
    },
    FailPlanRun {
        run: u64,
        reason: String,
    },
    PlanRestore {
        run: u64,
    },
    PlanCallStarted {
        run: u64,
        step: usize,
        attempt: u32,
        caller: String,
        until_ms: u64,
    },
    PlanCallDone {
        run: u64,
        step: usize,
        attempt: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<u16>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    MoveUnits {
        moves: Vec<WireUnitMove>,
    },
    AddZone {
        zone: WireZone,
    },
    RetireZone {
        zone: String,
    },
    SetGlobalWriter {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zone: Option<String>,
        read_only: bool,
    },
    AddDomain {
        name: String,
    },
    PutChannel {
        channel: WireChannel,
    },
    DeleteChannel {
        name: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        expired: bool,
    },
    FreezeChannel {
        name: String,
        /// The channel after the change (absent: it is deleted).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        next: Option<WireChannel>,
        window_ms: u64,
    },
    SwitchChannel {
        name: String,
    },
    UnfreezeChannel {
        name: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        aborted: bool,
    },
    FreezeUnits {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        moves: Vec<WireUnitMove>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pins: Vec<WirePinChange>,
        /// A loss-less move of the global writer: its zone (by lane) and read-only flag.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        global: Option<WireGlobalTarget>,
        window_ms: u64,
    },
    HoldUnits {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        units: Vec<WireHeldUnits>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        global: bool,
        window_ms: u64,
        hold_ms: u64,
    },
    SwitchUnits {},
    UnfreezeUnits {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        aborted: bool,
    },
}

/// A drain plan as a plan step starts it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireDrainPlan {
    pub zone: String,
    pub color: String,
    pub target_blue_units: u32,
    pub step_units: u32,
    pub interval_ms: u64,
    /// The bits of the `f64`, so a replay restores exactly the rate that was logged.
    pub max_error_rate_bits: u64,
    pub min_requests: u64,
    pub breaches: u32,
    pub on_breach: String,
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_ms: Option<u64>,
    /// A zone drain among N: its receivers by lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receivers: Option<Vec<String>>,
}

/// One zone's error rate at a step boundary of a plan run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireZoneSample {
    pub zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rate: Option<f64>,
    pub requests: u64,
}

impl WireDrainPlan {
    pub fn encode(plan: &DrainPlan, zones: &Zones) -> WireDrainPlan {
        WireDrainPlan {
            zone: plan.zone.clone(),
            color: zones.lane(plan.color).to_owned(),
            target_blue_units: plan.target_blue_units,
            step_units: plan.step_units,
            interval_ms: plan.interval_ms,
            max_error_rate_bits: plan.guard.max_error_rate.to_bits(),
            min_requests: plan.guard.min_requests,
            breaches: plan.guard.breaches,
            on_breach: plan.guard.on_breach.as_str().to_owned(),
            mode: plan.mode.as_str().to_owned(),
            domain: plan.domain.clone(),
            freeze_ms: plan.freeze_ms,
            receivers: encode_receivers(plan, zones),
        }
    }

    pub fn to_plan(&self, zones: &Zones) -> Result<DrainPlan, String> {
        Ok(DrainPlan {
            zone: self.zone.clone(),
            color: zones
                .by_lane(&self.color)
                .ok_or_else(|| format!("`{}` is not a lane of the table", self.color))?,
            target_blue_units: self.target_blue_units,
            step_units: self.step_units,
            interval_ms: self.interval_ms,
            guard: Guard {
                max_error_rate: f64::from_bits(self.max_error_rate_bits),
                min_requests: self.min_requests,
                breaches: self.breaches,
                on_breach: match self.on_breach.as_str() {
                    "pause" => OnBreach::Pause,
                    "rollback" => OnBreach::Rollback,
                    other => return Err(format!("unknown on_breach `{other}`")),
                },
            },
            mode: DrainMode::parse(&self.mode)
                .ok_or_else(|| format!("unknown drain mode `{}`", self.mode))?,
            domain: self.domain.clone(),
            freeze_ms: self.freeze_ms,
            receivers: decode_receivers(self.receivers.as_deref(), zones)?,
        })
    }
}

/// A zone drain's receivers by lane, as records and snapshots store them.
pub fn encode_receivers(plan: &DrainPlan, zones: &Zones) -> Option<Vec<String>> {
    plan.receivers.as_ref().map(|r| r.iter().map(|z| zones.lane(*z).to_owned()).collect())
}

/// The receivers of [`encode_receivers`], each lane resolved in `zones`.
pub fn decode_receivers(
    lanes: Option<&[String]>,
    zones: &Zones,
) -> Result<Option<Vec<ZoneId>>, String> {
    lanes
        .map(|lanes| {
            lanes
                .iter()
                .map(|lane| {
                    zones
                        .by_lane(lane)
                        .ok_or_else(|| format!("receivers: `{lane}` is not a lane of the table"))
                })
                .collect()
        })
        .transpose()
}

pub fn wire_samples(samples: &[ZoneSample]) -> Vec<WireZoneSample> {
    samples
        .iter()
        .map(|s| WireZoneSample {
            zone: s.zone.clone(),
            error_rate: s.error_rate,
            requests: s.requests,
        })
        .collect()
}

pub fn core_samples(samples: &[WireZoneSample]) -> Vec<ZoneSample> {
    samples
        .iter()
        .map(|s| ZoneSample {
            zone: s.zone.clone(),
            error_rate: s.error_rate,
            requests: s.requests,
        })
        .collect()
}

/// The serde form of a plan, in the log and (with `rto` as text) in the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WirePlan {
    pub name: String,
    #[serde(default)]
    pub preconditions: Vec<WirePrecondition>,
    pub steps: Vec<WireStep>,
    pub rto_ms: u64,
    /// The opt-in automatic trigger; absent in plans stored before triggers existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<WireTrigger>,
    /// Loss-less zone moves: the freeze window of each drain step (absent: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_ms: Option<u64>,
}

/// A plan's automatic trigger in the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireTrigger {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_down_for_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_silent_for_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_consumers_gone: Option<String>,
    /// Absent (0) in plans stored before it existed, which fired at once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lane_consumers_gone_for_ms: u64,
    pub cooldown_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A precondition: exactly one of `promql` (true when non-zero) and `http` (true on 2xx).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WirePrecondition {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promql: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum WireStep {
    Drain {
        zone: String,
        to_percent: f64,
        /// The routing domain (absent: the default domain).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
    },
    Evacuate {
        zone: String,
        to_percent: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
    },
    Dial {
        blue_percent: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        domain: Option<String>,
    },
    Pin {
        user_id: String,
        color: String,
    },
    Unpin {
        user_id: String,
    },
    WaitConsumed {
        zone: String,
    },
    WaitPrecondition {
        name: String,
    },
    /// An HTTP action (`core::HttpCall`); the token is named (`token_env`), never written.
    Http(WireHttpCall),
    /// Unit sets to zones (by name), one version; `domain` per move for a linked change.
    MoveUnits {
        moves: Vec<WireUnitMove>,
    },
    /// A hold (a freeze in place) until the plan's `release` step; `hold` is text (`10m`).
    Hold {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        units: Vec<WireHeldUnits>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        global: bool,
        hold: String,
    },
    Release {},
}

/// An HTTP step, in the API, config and the log. `timeout` is text (`5s`) in every form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireHttpCall {
    pub name: String,
    pub url: String,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<u16>,
    #[serde(default = "default_timeout")]
    pub timeout: String,
    #[serde(default = "default_retries")]
    pub retries: u32,
}

/// An HTTP step's method when the body leaves it out.
pub const DEFAULT_CALL_METHOD: &str = "POST";
/// An HTTP step's timeout per attempt when the body leaves it out.
pub const DEFAULT_CALL_TIMEOUT: &str = "5s";
/// An HTTP step's retries when the body leaves them out.
pub const DEFAULT_CALL_RETRIES: u32 = 3;

fn default_method() -> String {
    DEFAULT_CALL_METHOD.to_owned()
}

fn default_timeout() -> String {
    DEFAULT_CALL_TIMEOUT.to_owned()
}

fn default_retries() -> u32 {
    DEFAULT_CALL_RETRIES
}

impl WirePlan {
    /// The serde form of `plan`, its pins written as lanes of `zones`.
    pub fn encode(plan: &Plan, zones: &Zones) -> WirePlan {
        WirePlan {
            name: plan.name.clone(),
            preconditions: plan
                .preconditions
                .iter()
                .map(|p| {
                    let (promql, http) = match &p.check {
                        CheckKind::Promql(q) => (Some(q.clone()), None),
                        CheckKind::Http(u) => (None, Some(u.clone())),
                    };
                    WirePrecondition { name: p.name.clone(), promql, http }
                })
                .collect(),
            steps: plan
                .steps
                .iter()
                .map(|s| match s {
                    PlanStep::MoveZone {
                        zone,
                        to_percent,
                        mode: DrainMode::Maintenance,
                        domain,
                    } => WireStep::Drain {
                        zone: zone.clone(),
                        to_percent: *to_percent,
                        domain: domain.clone(),
                    },
                    PlanStep::MoveZone { zone, to_percent, mode: DrainMode::Evacuate, domain } => {
                        WireStep::Evacuate {
                            zone: zone.clone(),
                            to_percent: *to_percent,
                            domain: domain.clone(),
                        }
                    }
                    PlanStep::Dial { blue_percent, domain } => {
                        WireStep::Dial { blue_percent: *blue_percent, domain: domain.clone() }
                    }
                    PlanStep::Pin { user_id, color } => WireStep::Pin {
                        user_id: user_id.clone(),
                        color: zones.lane(*color).to_owned(),
                    },
                    PlanStep::Unpin { user_id } => WireStep::Unpin { user_id: user_id.clone() },
                    PlanStep::WaitConsumed { zone } => {
                        WireStep::WaitConsumed { zone: zone.clone() }
                    }
                    PlanStep::WaitPrecondition { name } => {
                        WireStep::WaitPrecondition { name: name.clone() }
                    }
                    PlanStep::MoveUnits { moves } => WireStep::MoveUnits {
                        moves: moves
                            .iter()
                            .map(|m| WireUnitMove {
                                units: m.units.to_string(),
                                zone: m.zone.clone(),
                                domain: m.domain.clone(),
                            })
                            .collect(),
                    },
                    PlanStep::Hold { units, global, hold_ms } => WireStep::Hold {
                        units: units
                            .iter()
                            .map(|h| WireHeldUnits {
                                units: h.units.to_string(),
                                domain: h.domain.clone(),
                            })
                            .collect(),
                        global: *global,
                        hold: crate::duration::format_duration_ms(*hold_ms),
                    },
                    PlanStep::Release => WireStep::Release {},
                    PlanStep::Http(c) => WireStep::Http(WireHttpCall {
                        name: c.name.clone(),
                        url: c.url.clone(),
                        method: c.method.clone(),
                        token_env: c.token_env.clone(),
                        token_header: c.token_header.clone(),
                        expect_status: c.expect_status,
                        timeout: crate::duration::format_duration_ms(c.timeout_ms),
                        retries: c.retries,
                    }),
                })
                .collect(),
            rto_ms: plan.rto_ms,
            trigger: plan.trigger.as_ref().map(|t| WireTrigger {
                zone_down_for_ms: t.zone_down_for_ms,
                zone_silent_for_ms: t.zone_silent_for_ms,
                lane_consumers_gone: t.lane_consumers_gone.clone(),
                lane_consumers_gone_for_ms: t.lane_consumers_gone_for_ms,
                cooldown_ms: t.cooldown_ms,
            }),
            freeze_ms: plan.freeze_ms,
        }
    }

    /// The plan, its lanes resolved in `zones`.
    pub fn to_plan(&self, zones: &Zones) -> Result<Plan, String> {
        let mut preconditions = Vec::new();
        for (i, p) in self.preconditions.iter().enumerate() {
            let check = match (&p.promql, &p.http) {
                (Some(q), None) => CheckKind::Promql(q.clone()),
                (None, Some(u)) => CheckKind::Http(u.clone()),
                _ => {
                    return Err(format!("preconditions[{i}]: give exactly one of promql and http"));
                }
            };
            preconditions.push(Precondition { name: p.name.clone(), check });
        }
        let mut steps = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            steps.push(match s {
                WireStep::Drain { zone, to_percent, domain } => PlanStep::MoveZone {
                    zone: zone.clone(),
                    to_percent: *to_percent,
                    mode: DrainMode::Maintenance,
                    domain: domain.clone(),
                },
                WireStep::Evacuate { zone, to_percent, domain } => PlanStep::MoveZone {
                    zone: zone.clone(),
                    to_percent: *to_percent,
                    mode: DrainMode::Evacuate,
                    domain: domain.clone(),
                },
                WireStep::Dial { blue_percent, domain } => {
                    PlanStep::Dial { blue_percent: *blue_percent, domain: domain.clone() }
                }
                WireStep::Pin { user_id, color } => PlanStep::Pin {
                    user_id: user_id.clone(),
                    color: zones
                        .by_lane(color)
                        .ok_or_else(|| format!("steps[{i}].color: `{color}` is not a lane"))?,
                },
                WireStep::Unpin { user_id } => PlanStep::Unpin { user_id: user_id.clone() },
                WireStep::WaitConsumed { zone } => PlanStep::WaitConsumed { zone: zone.clone() },
                WireStep::WaitPrecondition { name } => {
                    PlanStep::WaitPrecondition { name: name.clone() }
                }
                WireStep::Hold { units, global, hold } => PlanStep::Hold {
                    units: units
                        .iter()
                        .enumerate()
                        .map(|(j, h)| {
                            Ok(crate::core::HeldUnits {
                                // The table's unit count is checked by `validate_plan`.
                                units: UnitSet::parse(&h.units, crate::core::MAX_UNITS)
                                    .map_err(|e| format!("steps[{i}].units[{j}].units: {e}"))?,
                                domain: h.domain.clone(),
                            })
                        })
                        .collect::<Result<_, String>>()?,
                    global: *global,
                    hold_ms: crate::duration::parse_duration_ms(hold)
                        .map_err(|e| format!("steps[{i}].hold: {e}"))?,
                },
                WireStep::Release {} => PlanStep::Release,
                WireStep::MoveUnits { moves } => {
                    let mut out = Vec::with_capacity(moves.len());
                    for (j, m) in moves.iter().enumerate() {
                        out.push(PlanMove {
                            // The table's unit count is checked by `validate_plan`.
                            units: UnitSet::parse(&m.units, crate::core::MAX_UNITS)
                                .map_err(|e| format!("steps[{i}].moves[{j}].units: {e}"))?,
                            zone: m.zone.clone(),
                            domain: m.domain.clone(),
                        });
                    }
                    PlanStep::MoveUnits { moves: out }
                }
                WireStep::Http(c) => PlanStep::Http(HttpCall {
                    name: c.name.clone(),
                    url: c.url.clone(),
                    method: c.method.to_ascii_uppercase(),
                    token_env: c.token_env.clone(),
                    token_header: c.token_header.clone(),
                    expect_status: c.expect_status,
                    timeout_ms: crate::duration::parse_duration_ms(&c.timeout)
                        .map_err(|e| format!("steps[{i}].timeout: {e}"))?,
                    retries: c.retries,
                }),
            });
        }
        let trigger = self.trigger.as_ref().map(|t| Trigger {
            zone_down_for_ms: t.zone_down_for_ms,
            zone_silent_for_ms: t.zone_silent_for_ms,
            lane_consumers_gone: t.lane_consumers_gone.clone(),
            lane_consumers_gone_for_ms: t.lane_consumers_gone_for_ms,
            cooldown_ms: t.cooldown_ms,
        });
        if let Some(ms) = self.freeze_ms
            && !(100..=crate::core::MAX_FREEZE_MS).contains(&ms)
        {
            return Err(format!(
                "freeze_window: must be from 100ms to {}",
                crate::duration::format_duration_ms(crate::core::MAX_FREEZE_MS)
            ));
        }
        Ok(Plan {
            name: self.name.clone(),
            preconditions,
            steps,
            rto_ms: self.rto_ms,
            trigger,
            freeze_ms: self.freeze_ms,
        })
    }
}

impl LogEntry {
    pub fn genesis(genesis: &Genesis, audit: &Audit) -> LogEntry {
        let (unit_mode, digits_skip) = match genesis.scheme.mode() {
            UnitMode::Hash => ("hash".to_owned(), None),
            UnitMode::Digits { skip } => ("digits".to_owned(), Some(skip)),
        };
        LogEntry::Genesis {
            format: FORMAT,
            units: genesis.scheme.count(),
            unit_mode,
            digits_skip,
            blue_units: genesis.blue_units,
            at_ms: audit.at_ms,
            by: audit.by.clone(),
            reason: audit.reason.clone(),
            log_id: None,
            zones: None,
            zone_list: None,
        }
    }

    /// A genesis entry that also pins a log identity and, for shared logs, the zones.
    pub fn genesis_pinned(
        genesis: &Genesis,
        audit: &Audit,
        log_id: String,
        zones: Option<&Zones>,
    ) -> LogEntry {
        let mut entry = LogEntry::genesis(genesis, audit);
        if let LogEntry::Genesis { log_id: id, zones: z, zone_list, .. } = &mut entry {
            *id = Some(log_id);
            *z = zones.map(|z| WireZones {
                blue: z.zone_of(ZoneId::BLUE).to_owned(),
                green: z.zone_of(ZoneId::GREEN).to_owned(),
            });
            *zone_list = zones.filter(|z| !is_plain_two(z)).map(wire_zones);
        }
        entry
    }

    /// The zones a genesis record fixes, if it fixes them: its zone list, else its two pinned
    /// colours.
    pub fn genesis_zones(&self) -> Result<Option<Zones>, String> {
        match self {
            LogEntry::Genesis { zone_list: Some(list), .. } => zones_of(list).map(Some),
            LogEntry::Genesis { zones: Some(z), .. } => Ok(Some(Zones::two(&z.blue, &z.green))),
            _ => Ok(None),
        }
    }

    /// A proposal of `envelope` under the unique command `id`.
    pub fn proposal(id: &str, envelope: &Envelope, zones: &Zones) -> LogEntry {
        LogEntry::Proposal {
            id: id.to_owned(),
            expected_version: envelope.expected_version,
            at_ms: envelope.audit.at_ms,
            by: envelope.audit.by.clone(),
            reason: envelope.audit.reason.clone(),
            command: WireCommand::encode(&envelope.command, zones),
        }
    }

    pub fn change(
        envelope: &Envelope,
        version: u64,
        from: &str,
        to: &str,
        zones: &Zones,
    ) -> LogEntry {
        LogEntry::Change {
            version,
            expected_version: envelope.expected_version,
            at_ms: envelope.audit.at_ms,
            by: envelope.audit.by.clone(),
            reason: envelope.audit.reason.clone(),
            command: WireCommand::encode(&envelope.command, zones),
            from: from.to_owned(),
            to: to.to_owned(),
        }
    }
}

impl WireCommand {
    /// The wire form of `command`; zones are written as their lanes in `zones` (the table the
    /// command is proposed against), which never change meaning within a log.
    pub fn encode(command: &Command, zones: &Zones) -> Self {
        let lane = |z: &ZoneId| {
            zones.get(*z).map_or_else(|| z.default_lane().into_owned(), |s| s.lane.clone())
        };
        match command {
            Command::SetBlueUnits { blue_units, domain } => {
                WireCommand::SetBlueUnits { blue_units: *blue_units, domain: domain.clone() }
            }
            Command::Pin { user_id, color } => {
                WireCommand::Pin { user_id: user_id.clone(), color: lane(color) }
            }
            Command::Unpin { user_id } => WireCommand::Unpin { user_id: user_id.clone() },
            Command::StartDrain { plan } => WireCommand::StartDrain {
                zone: plan.zone.clone(),
                color: lane(&plan.color),
                target_blue_units: plan.target_blue_units,
                step_units: plan.step_units,
                interval_ms: plan.interval_ms,
                max_error_rate: plan.guard.max_error_rate,
                min_requests: plan.guard.min_requests,
                breaches: plan.guard.breaches,
                on_breach: plan.guard.on_breach.as_str().to_owned(),
                mode: (plan.mode != DrainMode::Maintenance).then(|| plan.mode.as_str().to_owned()),
                domain: plan.domain.clone(),
                freeze_ms: plan.freeze_ms,
                receivers: plan.receivers.as_ref().map(|r| r.iter().map(&lane).collect()),
            },
            Command::DrainStep { drain, blue_units } => {
                WireCommand::DrainStep { drain: *drain, blue_units: *blue_units }
            }
            Command::ZoneDrainStep { drain, moves } => {
                WireCommand::ZoneDrainStep { drain: *drain, moves: wire_moves(moves, &lane) }
            }
            Command::ZoneDrainFreeze { drain, moves } => {
                WireCommand::ZoneDrainFreeze { drain: *drain, moves: wire_moves(moves, &lane) }
            }
            Command::DrainFreeze { drain, blue_units } => {
                WireCommand::DrainFreeze { drain: *drain, blue_units: *blue_units }
            }
            Command::DrainUnfreeze { drain, aborted } => {
                WireCommand::DrainUnfreeze { drain: *drain, aborted: *aborted }
            }
            Command::DrainHold { drain, breach, reason } => {
                WireCommand::DrainHold { drain: *drain, breach: *breach, reason: reason.clone() }
            }
            Command::PauseDrain { drain } => WireCommand::PauseDrain { drain: *drain },
            Command::ResumeDrain { drain } => WireCommand::ResumeDrain { drain: *drain },
            Command::AbortDrain { drain } => WireCommand::AbortDrain { drain: *drain },
            Command::RollbackDrain { drain } => WireCommand::RollbackDrain { drain: *drain },
            Command::CompleteDrain { drain } => WireCommand::CompleteDrain { drain: *drain },
            Command::PutPlan { plan } => {
                WireCommand::PutPlan { plan: WirePlan::encode(plan, zones) }
            }
            Command::SetAutomation { stopped } => WireCommand::SetAutomation { stopped: *stopped },
            Command::StartPlanRun { plan, revision, drill_hold_ms, restores_maps } => {
                WireCommand::StartPlanRun {
                    plan: plan.clone(),
                    revision: *revision,
                    drill_hold_ms: *drill_hold_ms,
                    restores_maps: *restores_maps,
                }
            }
            Command::PlanStepStarted { run, step, drain, samples } => {
                WireCommand::PlanStepStarted {
                    run: *run,
                    step: *step,
                    drain: drain.as_ref().map(|d| WireDrainPlan::encode(d, zones)),
                    samples: wire_samples(samples),
                }
            }
            Command::PlanStepFreeze { run, step } => {
                WireCommand::PlanStepFreeze { run: *run, step: *step }
            }
            Command::PlanStepDone { run, step, converged_ms, samples } => {
                WireCommand::PlanStepDone {
                    run: *run,
                    step: *step,
                    converged_ms: *converged_ms,
                    samples: wire_samples(samples),
                }
            }
            Command::PlanRunHold { run, reason } => {
                WireCommand::PlanRunHold { run: *run, reason: reason.clone() }
            }
            Command::PausePlanRun { run } => WireCommand::PausePlanRun { run: *run },
            Command::ResumePlanRun { run } => WireCommand::ResumePlanRun { run: *run },
            Command::AbortPlanRun { run } => WireCommand::AbortPlanRun { run: *run },
            Command::RollbackPlanRun { run } => WireCommand::RollbackPlanRun { run: *run },
            Command::FailPlanRun { run, reason } => {
                WireCommand::FailPlanRun { run: *run, reason: reason.clone() }
            }
            Command::PlanRestore { run } => WireCommand::PlanRestore { run: *run },
            Command::PlanCallStarted { run, step, attempt, caller, until_ms } => {
                WireCommand::PlanCallStarted {
                    run: *run,
                    step: *step,
                    attempt: *attempt,
                    caller: caller.clone(),
                    until_ms: *until_ms,
                }
            }
            Command::PlanCallDone { run, step, attempt, status, error } => {
                WireCommand::PlanCallDone {
                    run: *run,
                    step: *step,
                    attempt: *attempt,
                    status: *status,
                    error: error.clone(),
                }
            }
            Command::MoveUnits { moves } => {
                WireCommand::MoveUnits { moves: wire_moves(moves, &lane) }
            }
            Command::FreezeUnits { moves, pins, global, window_ms } => WireCommand::FreezeUnits {
                moves: wire_moves(moves, &lane),
                pins: wire_pins(pins, &lane),
                global: global.map(|g| WireGlobalTarget {
                    zone: g.zone.as_ref().map(lane),
                    read_only: g.read_only,
                }),
                window_ms: *window_ms,
            },
            Command::HoldUnits { units, global, window_ms, hold_ms } => WireCommand::HoldUnits {
                units: units
                    .iter()
                    .map(|h| WireHeldUnits { units: h.units.to_string(), domain: h.domain.clone() })
                    .collect(),
                global: *global,
                window_ms: *window_ms,
                hold_ms: *hold_ms,
            },
            Command::SwitchUnits => WireCommand::SwitchUnits {},
            Command::UnfreezeUnits { aborted } => WireCommand::UnfreezeUnits { aborted: *aborted },
            Command::AddZone { spec } => WireCommand::AddZone { zone: WireZone::from(spec) },
            Command::RetireZone { zone } => WireCommand::RetireZone { zone: lane(zone) },
            Command::AddDomain { name } => WireCommand::AddDomain { name: name.clone() },
            Command::PutChannel { channel } => {
                WireCommand::PutChannel { channel: WireChannel::encode(channel, &lane) }
            }
            Command::DeleteChannel { name, expired } => {
                WireCommand::DeleteChannel { name: name.clone(), expired: *expired }
            }
            Command::FreezeChannel { name, next, window_ms } => WireCommand::FreezeChannel {
                name: name.clone(),
                next: next.as_ref().map(|c| WireChannel::encode(c, &lane)),
                window_ms: *window_ms,
            },
            Command::SwitchChannel { name } => WireCommand::SwitchChannel { name: name.clone() },
            Command::UnfreezeChannel { name, aborted } => {
                WireCommand::UnfreezeChannel { name: name.clone(), aborted: *aborted }
            }
            Command::SetGlobalWriter { zone, read_only } => WireCommand::SetGlobalWriter {
                zone: zone.as_ref().map(lane),
                read_only: *read_only,
            },
        }
    }
}

impl WireCommand {
    /// The audit action of this command: [`Command::action`] of what [`WireCommand::to_command`]
    /// gives, read without a table. A file log's entry carries its own audit, so an audit page
    /// read from the log decodes only its own entries (`store::history`).
    pub fn action(&self) -> &'static str {
        match self {
            WireCommand::SetBlueUnits { .. } => "dial",
            WireCommand::Pin { .. } => "pin",
            WireCommand::Unpin { .. } => "unpin",
            WireCommand::StartDrain { .. } => "drain_start",
            WireCommand::DrainStep { .. } | WireCommand::ZoneDrainStep { .. } => "drain_step",
            WireCommand::DrainFreeze { .. } | WireCommand::ZoneDrainFreeze { .. } => "drain_freeze",
            WireCommand::DrainUnfreeze { .. } => "drain_unfreeze",
            WireCommand::DrainHold { .. } => "drain_hold",
            WireCommand::PauseDrain { .. } => "drain_pause",
            WireCommand::ResumeDrain { .. } => "drain_resume",
            WireCommand::AbortDrain { .. } => "drain_abort",
            WireCommand::RollbackDrain { .. } => "drain_rollback",
            WireCommand::CompleteDrain { .. } => "drain_complete",
            WireCommand::PutPlan { .. } => "plan_put",
            WireCommand::StartPlanRun { .. } => "plan_run_start",
            WireCommand::PlanStepStarted { .. } => "plan_step_start",
            WireCommand::PlanStepDone { .. } => "plan_step_done",
            WireCommand::PlanStepFreeze { .. } => "plan_step_freeze",
            WireCommand::PlanRunHold { .. } => "plan_run_hold",
            WireCommand::PausePlanRun { .. } => "plan_run_pause",
            WireCommand::ResumePlanRun { .. } => "plan_run_resume",
            WireCommand::AbortPlanRun { .. } => "plan_run_abort",
            WireCommand::RollbackPlanRun { .. } => "plan_run_rollback",
            WireCommand::FailPlanRun { .. } => "plan_run_fail",
            WireCommand::PlanRestore { .. } => "plan_run_restore",
            WireCommand::SetAutomation { stopped: true } => "automation_stop",
            WireCommand::SetAutomation { stopped: false } => "automation_arm",
            WireCommand::PlanCallStarted { .. } => "plan_call_start",
            WireCommand::PlanCallDone { .. } => "plan_call_done",
            WireCommand::MoveUnits { .. } => "units_move",
            WireCommand::FreezeUnits { .. } => "units_freeze",
            WireCommand::HoldUnits { .. } => "units_hold",
            WireCommand::SwitchUnits {} => "units_switch",
            WireCommand::UnfreezeUnits { .. } => "units_unfreeze",
            WireCommand::AddZone { .. } => "zone_add",
            WireCommand::RetireZone { .. } => "zone_retire",
            WireCommand::SetGlobalWriter { .. } => "global_writer",
            WireCommand::AddDomain { .. } => "domain_add",
            WireCommand::PutChannel { .. } => "channel_put",
            WireCommand::DeleteChannel { expired: false, .. } => "channel_delete",
            WireCommand::DeleteChannel { expired: true, .. } => "channel_expire",
            WireCommand::FreezeChannel { .. } => "channel_freeze",
            WireCommand::SwitchChannel { .. } => "channel_switch",
            WireCommand::UnfreezeChannel { .. } => "channel_unfreeze",
        }
    }

    /// The command, its lanes resolved in `table` (the table it applies to).
    pub fn to_command(&self, table: &RoutingTable) -> Result<Command, String> {
        let zones = table.zones();
        let lane_of = |lane: &str| {
            zones.by_lane(lane).ok_or_else(|| format!("`{lane}` is not a lane of the table"))
        };
        Ok(match self {
            WireCommand::SetBlueUnits { blue_units, domain } => {
                Command::SetBlueUnits { blue_units: *blue_units, domain: domain.clone() }
            }
            WireCommand::Pin { user_id, color } => {
                Command::Pin { user_id: user_id.clone(), color: lane_of(color)? }
            }
            WireCommand::Unpin { user_id } => Command::Unpin { user_id: user_id.clone() },
            WireCommand::StartDrain {
                zone,
                color,
                target_blue_units,
                step_units,
                interval_ms,
                max_error_rate,
                min_requests,
                breaches,
                on_breach,
                mode,
                domain,
                freeze_ms,
                receivers,
            } => Command::StartDrain {
                plan: DrainPlan {
                    zone: zone.clone(),
                    color: lane_of(color)?,
                    target_blue_units: *target_blue_units,
                    step_units: *step_units,
                    interval_ms: *interval_ms,
                    guard: Guard {
                        max_error_rate: *max_error_rate,
                        min_requests: *min_requests,
                        breaches: *breaches,
                        on_breach: match on_breach.as_str() {
                            "pause" => OnBreach::Pause,
                            "rollback" => OnBreach::Rollback,
                            other => return Err(format!("unknown on_breach `{other}`")),
                        },
                    },
                    mode: match mode.as_deref() {
                        None => DrainMode::Maintenance,
                        Some(text) => DrainMode::parse(text)
                            .ok_or_else(|| format!("unknown drain mode `{text}`"))?,
                    },
                    domain: domain.clone(),
                    freeze_ms: *freeze_ms,
                    receivers: decode_receivers(receivers.as_deref(), zones)?,
                },
            },
            WireCommand::DrainStep { drain, blue_units } => {
                Command::DrainStep { drain: *drain, blue_units: *blue_units }
            }
            WireCommand::DrainFreeze { drain, blue_units } => {
                Command::DrainFreeze { drain: *drain, blue_units: *blue_units }
            }
            WireCommand::DrainUnfreeze { drain, aborted } => {
                Command::DrainUnfreeze { drain: *drain, aborted: *aborted }
            }
            WireCommand::DrainHold { drain, breach, reason } => {
                Command::DrainHold { drain: *drain, breach: *breach, reason: reason.clone() }
            }
            WireCommand::PauseDrain { drain } => Command::PauseDrain { drain: *drain },
            WireCommand::ResumeDrain { drain } => Command::ResumeDrain { drain: *drain },
            WireCommand::AbortDrain { drain } => Command::AbortDrain { drain: *drain },
            WireCommand::RollbackDrain { drain } => Command::RollbackDrain { drain: *drain },
            WireCommand::CompleteDrain { drain } => Command::CompleteDrain { drain: *drain },
            WireCommand::PutPlan { plan } => Command::PutPlan { plan: plan.to_plan(zones)? },
            WireCommand::SetAutomation { stopped } => Command::SetAutomation { stopped: *stopped },
            WireCommand::StartPlanRun { plan, revision, drill_hold_ms, restores_maps } => {
                Command::StartPlanRun {
                    plan: plan.clone(),
                    revision: *revision,
                    drill_hold_ms: *drill_hold_ms,
                    restores_maps: *restores_maps,
                }
            }
            WireCommand::PlanStepStarted { run, step, drain, samples } => {
                Command::PlanStepStarted {
                    run: *run,
                    step: *step,
                    drain: drain.as_ref().map(|d| d.to_plan(zones)).transpose()?,
                    samples: core_samples(samples),
                }
            }
            WireCommand::PlanStepFreeze { run, step } => {
                Command::PlanStepFreeze { run: *run, step: *step }
            }
            WireCommand::PlanStepDone { run, step, converged_ms, samples } => {
                Command::PlanStepDone {
                    run: *run,
                    step: *step,
                    converged_ms: *converged_ms,
                    samples: core_samples(samples),
                }
            }
            WireCommand::PlanRunHold { run, reason } => {
                Command::PlanRunHold { run: *run, reason: reason.clone() }
            }
            WireCommand::PausePlanRun { run } => Command::PausePlanRun { run: *run },
            WireCommand::ResumePlanRun { run } => Command::ResumePlanRun { run: *run },
            WireCommand::AbortPlanRun { run } => Command::AbortPlanRun { run: *run },
            WireCommand::RollbackPlanRun { run } => Command::RollbackPlanRun { run: *run },
            WireCommand::FailPlanRun { run, reason } => {
                Command::FailPlanRun { run: *run, reason: reason.clone() }
            }
            WireCommand::PlanRestore { run } => Command::PlanRestore { run: *run },
            WireCommand::PlanCallStarted { run, step, attempt, caller, until_ms } => {
                Command::PlanCallStarted {
                    run: *run,
                    step: *step,
                    attempt: *attempt,
                    caller: caller.clone(),
                    until_ms: *until_ms,
                }
            }
            WireCommand::PlanCallDone { run, step, attempt, status, error } => {
                Command::PlanCallDone {
                    run: *run,
                    step: *step,
                    attempt: *attempt,
                    status: *status,
                    error: error.clone(),
                }
            }
            WireCommand::MoveUnits { moves } => {
                Command::MoveUnits { moves: core_moves(moves, table)? }
            }
            WireCommand::FreezeUnits { moves, pins, global, window_ms } => Command::FreezeUnits {
                moves: core_moves(moves, table)?,
                pins: core_pins(pins, table.zones())?,
                global: match global {
                    None => None,
                    Some(g) => Some(GlobalWriter {
                        zone: g.zone.as_deref().map(lane_of).transpose()?,
                        read_only: g.read_only,
                        frozen: false,
                    }),
                },
                window_ms: *window_ms,
            },
            WireCommand::HoldUnits { units, global, window_ms, hold_ms } => Command::HoldUnits {
                units: units
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        Ok(crate::core::HeldUnits {
                            units: UnitSet::parse(&h.units, table.units())
                                .map_err(|e| format!("units[{i}].units: {e}"))?,
                            domain: h.domain.clone(),
                        })
                    })
                    .collect::<Result<_, String>>()?,
                global: *global,
                window_ms: *window_ms,
                hold_ms: *hold_ms,
            },
            WireCommand::SwitchUnits {} => Command::SwitchUnits,
            WireCommand::UnfreezeUnits { aborted } => Command::UnfreezeUnits { aborted: *aborted },
            WireCommand::ZoneDrainStep { drain, moves } => {
                Command::ZoneDrainStep { drain: *drain, moves: core_moves(moves, table)? }
            }
            WireCommand::ZoneDrainFreeze { drain, moves } => {
                Command::ZoneDrainFreeze { drain: *drain, moves: core_moves(moves, table)? }
            }
            WireCommand::AddZone { zone: z } => Command::AddZone { spec: z.to_spec()? },
            WireCommand::RetireZone { zone: lane } => Command::RetireZone { zone: lane_of(lane)? },
            WireCommand::AddDomain { name } => Command::AddDomain { name: name.clone() },
            WireCommand::PutChannel { channel } => {
                Command::PutChannel { channel: channel.decode(zones, table.units())? }
            }
            WireCommand::DeleteChannel { name, expired } => {
                Command::DeleteChannel { name: name.clone(), expired: *expired }
            }
            WireCommand::FreezeChannel { name, next, window_ms } => Command::FreezeChannel {
                name: name.clone(),
                next: next.as_ref().map(|c| c.decode(zones, table.units())).transpose()?,
                window_ms: *window_ms,
            },
            WireCommand::SwitchChannel { name } => Command::SwitchChannel { name: name.clone() },
            WireCommand::UnfreezeChannel { name, aborted } => {
                Command::UnfreezeChannel { name: name.clone(), aborted: *aborted }
            }
            WireCommand::SetGlobalWriter { zone: lane, read_only } => Command::SetGlobalWriter {
                zone: lane.as_deref().map(lane_of).transpose()?,
                read_only: *read_only,
            },
        })
    }
}

/// Unit moves as records store them: units as a set, zones by lane.
pub(crate) fn wire_moves(
    moves: &[UnitMove],
    lane: &impl Fn(&ZoneId) -> String,
) -> Vec<WireUnitMove> {
    moves
        .iter()
        .map(|m| WireUnitMove {
            units: m.units.to_string(),
            zone: lane(&m.zone),
            domain: m.domain.clone(),
        })
        .collect()
}

/// The global writer a loss-less move sets: its zone by lane (absent: none) and read-only flag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireGlobalTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    pub read_only: bool,
}

/// One pin change of a loss-less change of owner: the user and their new lane (absent: unpinned).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WirePinChange {
    user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lane: Option<String>,
}

/// The pin changes of a loss-less change, by lane.
pub(crate) fn wire_pins(
    pins: &[PinChange],
    lane: &impl Fn(&ZoneId) -> String,
) -> Vec<WirePinChange> {
    pins.iter()
        .map(|p| WirePinChange { user_id: p.user_id.clone(), lane: p.zone.as_ref().map(lane) })
        .collect()
}

/// The pins of [`wire_pins`], read against `zones`.
pub(crate) fn core_pins(pins: &[WirePinChange], zones: &Zones) -> Result<Vec<PinChange>, String> {
    pins.iter()
        .enumerate()
        .map(|(i, p)| {
            let zone = match &p.lane {
                None => None,
                Some(lane) => Some(zones.by_lane(lane).ok_or_else(|| {
                    format!("pins[{i}].lane: `{lane}` is not a lane of the table")
                })?),
            };
            Ok(PinChange { user_id: p.user_id.clone(), zone })
        })
        .collect()
}

/// The moves of [`wire_moves`], read against `table` (its units and lanes).
fn core_moves(moves: &[WireUnitMove], table: &RoutingTable) -> Result<Vec<UnitMove>, String> {
    core_moves_in(moves, table.zones(), table.units())
}

/// [`core_moves`] against zones and a unit count.
pub(crate) fn core_moves_in(
    moves: &[WireUnitMove],
    zones: &Zones,
    units: u32,
) -> Result<Vec<UnitMove>, String> {
    let mut out = Vec::with_capacity(moves.len());
    for (i, m) in moves.iter().enumerate() {
        out.push(UnitMove {
            units: UnitSet::parse(&m.units, units).map_err(|e| format!("moves[{i}].units: {e}"))?,
            zone: zones.by_lane(&m.zone).ok_or_else(|| {
                format!("moves[{i}].zone: `{}` is not a lane of the table", m.zone)
            })?,
            domain: m.domain.clone(),
        });
    }
    Ok(out)
}

/// Units a `units_hold` record freezes in place: a unit set (`25-49,60`) in a domain (absent:
/// the default domain).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireHeldUnits {
    pub units: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// One move of a `move_units` record: a unit set (`25-49,60`) and the receiving lane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireUnitMove {
    pub units: String,
    pub zone: String,
    /// The routing domain; absent for the default domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// A release channel as a `put_channel` record and a snapshot store it: its zone by lane, its
/// units as a set (`0-9,17`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireChannel {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    pub services: Vec<String>,
    pub zone: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub units: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    pub fallback: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspended: bool,
}

impl WireChannel {
    pub fn encode(c: &Channel, lane: &dyn Fn(&ZoneId) -> String) -> WireChannel {
        WireChannel {
            name: c.name.clone(),
            domain: c.domain.clone(),
            services: c.services.clone(),
            zone: lane(&c.zone),
            units: c.units.to_string(),
            users: c.users.iter().cloned().collect(),
            fallback: c.fallback.as_str().to_owned(),
            expires_at_ms: c.expires_at_ms,
            suspended: c.suspended,
        }
    }

    pub fn decode(&self, zones: &Zones, units: u32) -> Result<Channel, String> {
        let at = |e: String| format!("channel {}: {e}", self.name);
        Ok(Channel {
            name: self.name.clone(),
            domain: self.domain.clone(),
            services: self.services.clone(),
            zone: zones
                .by_lane(&self.zone)
                .ok_or_else(|| at(format!("`{}` is not a lane of the table", self.zone)))?,
            units: if self.units.is_empty() {
                UnitSet::default()
            } else {
                UnitSet::parse(&self.units, units).map_err(|e| at(e.to_string()))?
            },
            users: self.users.iter().cloned().collect(),
            fallback: ChannelFallback::parse(&self.fallback)
                .ok_or_else(|| at(format!("unknown fallback `{}`", self.fallback)))?,
            expires_at_ms: self.expires_at_ms,
            suspended: self.suspended,
        })
    }
}

/// A zone as a genesis record lists it or an `add_zone` record adds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireZone {
    pub name: String,
    pub lane: String,
    pub class: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

impl From<&ZoneSpec> for WireZone {
    fn from(spec: &ZoneSpec) -> WireZone {
        WireZone {
            name: spec.name.clone(),
            lane: spec.lane.clone(),
            class: spec.class.as_str().to_owned(),
            retired: spec.retired,
        }
    }
}

impl WireZone {
    pub fn to_spec(&self) -> Result<ZoneSpec, String> {
        let class = ZoneClass::parse(&self.class).map_err(|e| e.to_string())?;
        let mut spec = ZoneSpec::new(&self.name, &self.lane, class);
        spec.retired = self.retired;
        Ok(spec)
    }
}

/// The zone list of a genesis record or a snapshot.
pub fn zones_of(list: &[WireZone]) -> Result<Zones, String> {
    let specs = list.iter().map(WireZone::to_spec).collect::<Result<Vec<_>, _>>()?;
    Zones::from_specs(specs).map_err(|e| format!("zones: {e}"))
}

/// True for the layout every earlier release knew: blue and green, both `rzone`.
pub fn is_plain_two(zones: &Zones) -> bool {
    zones.len() == 2 && zones.iter().all(|(_, z)| z.class == ZoneClass::Rzone && !z.retired)
}

pub fn wire_zones(zones: &Zones) -> Vec<WireZone> {
    zones.iter().map(|(_, spec)| WireZone::from(spec)).collect()
}

/// Rebuilds the unit scheme recorded in a genesis entry.
pub fn scheme_of(
    units: u32,
    unit_mode: &str,
    digits_skip: Option<u8>,
) -> Result<UnitScheme, String> {
    let mode = match unit_mode {
        "hash" => UnitMode::Hash,
        "digits" => UnitMode::Digits { skip: digits_skip.unwrap_or(0) },
        other => return Err(format!("unknown unit_mode `{other}`")),
    };
    UnitScheme::new(units, mode).map_err(|e| format!("units: {e}"))
}

/// A fresh random log identity: 128 bits as 32 hex digits.
pub fn new_log_id() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The identity of the log that starts with `genesis`: the recorded one, or (for file logs
/// created before identities existed) one derived from the genesis entry itself, stable across
/// restarts.
pub fn log_id_of(genesis: &LogEntry) -> String {
    if let LogEntry::Genesis { log_id: Some(id), .. } = genesis {
        return id.clone();
    }
    let json = serde_json::to_string(genesis).unwrap_or_default();
    format!("file-{:08x}", crc32fast::hash(json.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::State;

    /// `WireCommand::action` (read without a table, for audit pages read from a file log) names
    /// every command as `Command::action` does after `to_command`, for every action there is.
    #[test]
    fn the_wire_action_is_the_commands_action_for_every_action() {
        let genesis =
            Genesis { scheme: UnitScheme::new(100, UnitMode::Hash).unwrap(), blue_units: 50 };
        let state = State::genesis(genesis, Zones::default()).unwrap();
        let drain = r#""zone":"az-b","color":"blue","target_blue_units":0,"step_units":10,"interval_ms":1000,"max_error_rate":0.05,"min_requests":10,"breaches":2,"on_breach":"pause""#;
        let commands = [
            r#"{"type":"set_blue_units","blue_units":3}"#.to_owned(),
            r#"{"type":"pin","user_id":"u","color":"blue"}"#.into(),
            r#"{"type":"unpin","user_id":"u"}"#.into(),
            format!(r#"{{"type":"start_drain",{drain}}}"#),
            r#"{"type":"drain_step","drain":1,"blue_units":4}"#.into(),
            r#"{"type":"drain_freeze","drain":1,"blue_units":4}"#.into(),
            r#"{"type":"drain_unfreeze","drain":1,"aborted":false}"#.into(),
            r#"{"type":"drain_hold","drain":1,"breach":true,"reason":"r"}"#.into(),
            r#"{"type":"pause_drain","drain":1}"#.into(),
            r#"{"type":"resume_drain","drain":1}"#.into(),
            r#"{"type":"abort_drain","drain":1}"#.into(),
            r#"{"type":"rollback_drain","drain":1}"#.into(),
            r#"{"type":"complete_drain","drain":1}"#.into(),
            r#"{"type":"put_plan","plan":{"name":"p","steps":[{"type":"dial","blue_percent":50}],"rto_ms":1000}}"#.into(),
            r#"{"type":"set_automation","stopped":true}"#.into(),
            r#"{"type":"set_automation","stopped":false}"#.into(),
            r#"{"type":"start_plan_run","plan":"p","revision":1}"#.into(),
            r#"{"type":"plan_step_started","run":1,"step":0}"#.into(),
            r#"{"type":"plan_step_done","run":1,"step":0}"#.into(),
            r#"{"type":"plan_run_hold","run":1,"reason":"r"}"#.into(),
            r#"{"type":"pause_plan_run","run":1}"#.into(),
            r#"{"type":"resume_plan_run","run":1}"#.into(),
            r#"{"type":"abort_plan_run","run":1}"#.into(),
            r#"{"type":"rollback_plan_run","run":1}"#.into(),
            r#"{"type":"fail_plan_run","run":1,"reason":"r"}"#.into(),
            r#"{"type":"plan_restore","run":1}"#.into(),
            r#"{"type":"plan_call_started","run":1,"step":0,"attempt":1,"caller":"r1","until_ms":5}"#.into(),
            r#"{"type":"plan_call_done","run":1,"step":0,"attempt":1,"status":200}"#.into(),
            r#"{"type":"move_units","moves":[{"units":"1-3","zone":"green"}]}"#.into(),
            r#"{"type":"add_zone","zone":{"name":"az-c","lane":"c","class":"gzone"}}"#.into(),
            r#"{"type":"retire_zone","zone":"green"}"#.into(),
            r#"{"type":"set_global_writer","zone":"blue","read_only":false}"#.into(),
            r#"{"type":"add_domain","name":"eu"}"#.into(),
            r#"{"type":"put_channel","channel":{"name":"c","services":["orders"],"zone":"green","units":"0-9","fallback":"global"}}"#.into(),
            r#"{"type":"delete_channel","name":"c"}"#.into(),
            r#"{"type":"delete_channel","name":"c","expired":true}"#.into(),
            r#"{"type":"freeze_channel","name":"c","next":{"name":"c","services":["orders"],"zone":"green","units":"0-9","fallback":"global"},"window_ms":5000}"#.into(),
            r#"{"type":"switch_channel","name":"c"}"#.into(),
            r#"{"type":"unfreeze_channel","name":"c","aborted":true}"#.into(),
            r#"{"type":"freeze_units","moves":[{"units":"1-3","zone":"green"}],"window_ms":5000}"#.into(),
            r#"{"type":"hold_units","units":[{"units":"0-9"}],"global":true,"window_ms":5000,"hold_ms":60000}"#.into(),
            r#"{"type":"switch_units"}"#.into(),
            r#"{"type":"unfreeze_units"}"#.into(),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for json in &commands {
            let wire: WireCommand =
                serde_json::from_str(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            let command = wire.to_command(state.table()).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(wire.action(), command.action(), "{json}");
            seen.insert(wire.action());
        }
        let all: std::collections::BTreeSet<&str> = Command::ACTIONS.iter().copied().collect();
        assert_eq!(seen, all, "every action is checked");
    }
}
