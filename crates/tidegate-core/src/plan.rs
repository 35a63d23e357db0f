//! Prepared plans (预案): named, versioned switch procedures written before the incident, and
//! their dry run.
//!
//! A plan is stored in the log (`Command::PutPlan`) like any other change, so every replica and
//! every restart sees the same plans. [`dry_run`] is pure: given the table, each zone's load,
//! capacity and health, the MQ backlog and the preconditions' results, it says what running the
//! plan would do (users moved per step, projected load against capacity, expected duration
//! against the RTO) and every reason it would hold, without changing anything.

use std::collections::BTreeMap;

use super::capacity::{Gain, Verdict, ZoneLoad, judge, judge_gains};
use super::dial::{Share, percent_of};
use super::drain::{DrainMode, Guard, Reading, counterpart, step_toward};
use super::zone::{ZoneId, Zones};

/// Most steps and preconditions a plan may have.
pub const MAX_PLAN_STEPS: usize = 50;

/// A check that must pass before a plan runs (or a step waits for it).
#[derive(Clone, Debug, PartialEq)]
pub enum CheckKind {
    /// A PromQL expression whose value must be non-zero ("true").
    Promql(String),
    /// A URL that must answer 2xx to a GET.
    Http(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Precondition {
    pub name: String,
    pub check: CheckKind,
}

impl PlanStep {
    /// The domain a dial or zone-move step acts on, as written (`None`: the default domain).
    pub fn domain(&self) -> Option<&str> {
        match self {
            PlanStep::MoveZone { domain, .. } | PlanStep::Dial { domain, .. } => domain.as_deref(),
            _ => None,
        }
    }

    /// The domain the step acts on, `None` for the default one (`default` is normalised).
    pub fn named_domain(&self) -> Option<&str> {
        self.domain().filter(|d| *d != super::table::DEFAULT_DOMAIN)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum PlanStep {
    /// Drain (maintenance) or evacuate `zone` to `to_percent` of the users of `domain` (`None`:
    /// the default domain).
    MoveZone {
        zone: String,
        to_percent: f64,
        mode: DrainMode,
        domain: Option<String>,
    },
    /// Set the dial of `domain` (`None`: the default domain).
    Dial {
        blue_percent: f64,
        domain: Option<String>,
    },
    Pin {
        user_id: String,
        color: ZoneId,
    },
    Unpin {
        user_id: String,
    },
    /// Wait until `zone`'s half of every MQ lane is consumed.
    WaitConsumed {
        zone: String,
    },
    /// Wait until the named precondition passes.
    WaitPrecondition {
        name: String,
    },
    /// Call out: one HTTP request ("promote the replica", "scale az-a"), retried, audited.
    Http(HttpCall),
    /// Give unit sets to zones (by name), in one version; moves of several domains are linked.
    MoveUnits {
        moves: Vec<PlanMove>,
    },
    /// Freeze these units (and, with `global`, global writes) in place, moving nothing (a hold,
    /// `POST /v1/holds`); done once every live subscriber has the freeze, so the steps up to the
    /// next `Release` (a replica's catch-up, a promote, the moves of held units) run while no
    /// zone writes them. The plan's `freeze_window` bounds the freeze; `hold_ms` the hold.
    Hold {
        units: Vec<super::staged::HeldUnits>,
        global: bool,
        hold_ms: u64,
    },
    /// End the plan's hold: its units (with the owners the steps since gave them) thaw.
    Release,
}

/// One move of a `move_units` plan step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanMove {
    pub units: super::unit_map::UnitSet,
    /// The receiving zone's name.
    pub zone: String,
    /// The routing domain; `None`: the default domain.
    pub domain: Option<String>,
}

/// Most retries an HTTP step may ask for.
pub const MAX_CALL_RETRIES: u32 = 10;
/// Longest timeout of one HTTP step's attempt.
pub const MAX_CALL_TIMEOUT_MS: u64 = 120_000;

/// An HTTP action a plan step performs. The plan holds no secret: `token_env` names the
/// environment variable the replica reads the token from when it calls.
///
/// The plan runner calls on one replica at a time (a logged claim, `Command::PlanCallStarted`),
/// but a claim whose caller died is retried after its timeout, so the action must be safe to
/// repeat (idempotent: "promote az-a" twice leaves az-a promoted).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpCall {
    /// Names the call in the timeline and the audit.
    pub name: String,
    pub url: String,
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The environment variable holding the token, sent as `Authorization: Bearer <token>`
    /// (or in `token_header`).
    pub token_env: Option<String>,
    /// The header that carries the token as is, instead of `Authorization: Bearer`.
    pub token_header: Option<String>,
    /// The status that counts as success; `None`: any 2xx.
    pub expect_status: Option<u16>,
    pub timeout_ms: u64,
    /// Attempts after the first one that failed.
    pub retries: u32,
}

impl HttpCall {
    pub const METHODS: [&'static str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

    /// Whether `status` is success for this call.
    pub fn accepts(&self, status: u16) -> bool {
        match self.expect_status {
            Some(s) => status == s,
            None => (200..300).contains(&status),
        }
    }

    /// What success is, in words.
    pub fn expects(&self) -> String {
        match self.expect_status {
            Some(s) => format!("HTTP {s}"),
            None => "2xx".to_owned(),
        }
    }

    /// Checks the call; the error names the field below `steps[i]`.
    pub fn validate(&self, i: usize) -> Result<(), String> {
        let label_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 64
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        };
        if !label_ok(&self.name) {
            return Err(format!(
                "steps[{i}].name: 1 to 64 characters of letters, digits, '-', '_' or '.'"
            ));
        }
        let rest = self
            .url
            .strip_prefix("https://")
            .or_else(|| self.url.strip_prefix("http://"))
            .ok_or_else(|| format!("steps[{i}].url: must be an http:// or https:// URL"))?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() {
            return Err(format!("steps[{i}].url: names no host"));
        }
        if authority.contains('@') {
            return Err(format!(
                "steps[{i}].url: must not carry credentials (user:password@); name the token's \
                 environment variable in token_env"
            ));
        }
        if self.url.len() > 2048 || self.url.chars().any(|c| c.is_control() || c == ' ') {
            return Err(format!("steps[{i}].url: at most 2048 characters, without spaces"));
        }
        if !Self::METHODS.contains(&self.method.as_str()) {
            return Err(format!("steps[{i}].method: one of {}", Self::METHODS.join(", ")));
        }
        let env_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 128
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
        };
        if let Some(env) = &self.token_env
            && !env_ok(env)
        {
            return Err(format!(
                "steps[{i}].token_env: the name of an environment variable (letters, digits, '_'), \
                 not the token itself"
            ));
        }
        if let Some(h) = &self.token_header {
            if self.token_env.is_none() {
                return Err(format!("steps[{i}].token_header: needs token_env"));
            }
            if h.is_empty()
                || h.len() > 64
                || !h.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(format!(
                    "steps[{i}].token_header: a header name such as X-Admin-Token"
                ));
            }
        }
        if let Some(s) = self.expect_status
            && !(100..=599).contains(&s)
        {
            return Err(format!("steps[{i}].expect_status: an HTTP status from 100 to 599"));
        }
        if self.timeout_ms == 0 || self.timeout_ms > MAX_CALL_TIMEOUT_MS {
            return Err(format!(
                "steps[{i}].timeout: longer than zero and at most {} s",
                MAX_CALL_TIMEOUT_MS / 1000
            ));
        }
        if self.retries > MAX_CALL_RETRIES {
            return Err(format!("steps[{i}].retries: at most {MAX_CALL_RETRIES}"));
        }
        Ok(())
    }

    /// The call in words, without the token (only its variable's name).
    pub fn describe(&self) -> String {
        let token = match (&self.token_env, &self.token_header) {
            (Some(env), Some(h)) => format!(", token from ${env} in {h}"),
            (Some(env), None) => format!(", bearer token from ${env}"),
            _ => String::new(),
        };
        format!(
            "call `{}`: {} {} (expects {}, timeout {} ms, up to {} retries{token})",
            self.name,
            self.method,
            self.url,
            self.expects(),
            self.timeout_ms,
            self.retries
        )
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub name: String,
    pub preconditions: Vec<Precondition>,
    pub steps: Vec<PlanStep>,
    /// Recovery time objective: the run should be done within this.
    pub rto_ms: u64,
    /// The opt-in automatic trigger, if any (`core::plan_trigger`).
    pub trigger: Option<Trigger>,
    /// Loss-less zone moves: each step of the plan's drain and evacuate steps freezes its units
    /// for at most this window, switches once every live subscriber has the freeze, and
    /// unfreezes once every one has the switch (`None`: the steps switch at once).
    pub freeze_ms: Option<u64>,
}

/// A stored plan: the plan plus who stored which revision, when and why.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredPlan {
    pub plan: Plan,
    pub revision: u64,
    pub updated_by: String,
    pub updated_ms: u64,
    pub reason: String,
}

/// Checks a plan against the zones and the unit count; the error names the field.
pub fn validate_plan(plan: &Plan, zones: &Zones, units: u32) -> Result<(), String> {
    let label_ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    };
    if !label_ok(&plan.name) {
        return Err("name: 1 to 64 characters of letters, digits, '-', '_' or '.'".into());
    }
    if plan.steps.is_empty() || plan.steps.len() > MAX_PLAN_STEPS {
        return Err(format!("steps: give 1 to {MAX_PLAN_STEPS} steps"));
    }
    if plan.preconditions.len() > MAX_PLAN_STEPS {
        return Err(format!("preconditions: at most {MAX_PLAN_STEPS}"));
    }
    if plan.rto_ms == 0 {
        return Err("rto: must be longer than zero".into());
    }
    for (i, p) in plan.preconditions.iter().enumerate() {
        if p.name.trim().is_empty() {
            return Err(format!("preconditions[{i}].name: must not be empty"));
        }
        if plan.preconditions[..i].iter().any(|q| q.name == p.name) {
            return Err(format!("preconditions[{i}].name: `{}` appears twice", p.name));
        }
        match &p.check {
            CheckKind::Promql(q) if q.trim().is_empty() => {
                return Err(format!("preconditions[{i}].promql: must not be empty"));
            }
            CheckKind::Http(url)
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                return Err(format!("preconditions[{i}].http: must be an http:// or https:// URL"));
            }
            _ => {}
        }
    }
    let zone_ok = |i: usize, zone: &str| {
        zones
            .color_in(zone)
            .map(|_| ())
            .ok_or_else(|| format!("steps[{i}].zone: `{zone}` is not one of {}", zones.names()))
    };
    for (i, step) in plan.steps.iter().enumerate() {
        match step {
            PlanStep::MoveZone { zone, to_percent, .. } => {
                zone_ok(i, zone)?;
                Share::from_percent(*to_percent, units)
                    .map_err(|e| format!("steps[{i}].to_percent: {e}"))?;
            }
            PlanStep::Dial { blue_percent, .. } => {
                Share::from_percent(*blue_percent, units)
                    .map_err(|e| format!("steps[{i}].blue_percent: {e}"))?;
            }
            PlanStep::Pin { user_id, .. } | PlanStep::Unpin { user_id } => {
                super::unit::validate_user_id(user_id)
                    .map_err(|e| format!("steps[{i}].user_id: {e}"))?;
            }
            PlanStep::WaitConsumed { zone } => zone_ok(i, zone)?,
            PlanStep::MoveUnits { moves } => {
                if moves.is_empty() {
                    return Err(format!("steps[{i}].moves: the list is empty"));
                }
                for (j, m) in moves.iter().enumerate() {
                    zones.color_in(&m.zone).ok_or_else(|| {
                        format!(
                            "steps[{i}].moves[{j}].zone: `{}` is not one of {}",
                            m.zone,
                            zones.names()
                        )
                    })?;
                    if let Some(&(_, hi)) = m.units.ranges().last()
                        && hi >= units
                    {
                        return Err(format!(
                            "steps[{i}].moves[{j}].units: unit {hi} is outside the table's {units} units"
                        ));
                    }
                }
            }
            PlanStep::Http(call) => {
                call.validate(i)?;
                if plan.steps[..i]
                    .iter()
                    .any(|s| matches!(s, PlanStep::Http(c) if c.name == call.name))
                {
                    return Err(format!("steps[{i}].name: `{}` appears twice", call.name));
                }
            }
            PlanStep::WaitPrecondition { name } => {
                if !plan.preconditions.iter().any(|p| &p.name == name) {
                    return Err(format!(
                        "steps[{i}].precondition: no precondition is named `{name}`"
                    ));
                }
            }
            PlanStep::Hold { units: held, global, hold_ms } => {
                if plan.freeze_ms.is_none() {
                    return Err(format!(
                        "steps[{i}]: a hold needs the plan's freeze_window (how long every live subscriber has to apply it)"
                    ));
                }
                if held.is_empty() && !global {
                    return Err(format!(
                        "steps[{i}].units: name the units to hold, or hold global writes"
                    ));
                }
                if *hold_ms == 0 || *hold_ms > super::staged::MAX_HOLD_MS {
                    return Err(format!(
                        "steps[{i}].hold: must be from 1 ms to {} ms",
                        super::staged::MAX_HOLD_MS
                    ));
                }
                for (j, h) in held.iter().enumerate() {
                    if let Some(&(_, hi)) = h.units.ranges().last()
                        && hi >= units
                    {
                        return Err(format!(
                            "steps[{i}].units[{j}].units: unit {hi} is outside the table's {units} units"
                        ));
                    }
                }
            }
            PlanStep::Release => {}
        }
    }
    check_holds(plan)?;
    let names: Vec<&str> = zones.iter().map(|(_, z)| z.name.as_str()).collect();
    validate_trigger(plan, &names)
}

/// A plan's holds pair with its releases: no hold inside a hold, no release without one, and
/// none left open at the end (a forgotten hold refuses writes until its `hold` runs out).
fn check_holds(plan: &Plan) -> Result<(), String> {
    let mut open: Option<usize> = None;
    for (i, step) in plan.steps.iter().enumerate() {
        match (step, open) {
            (PlanStep::Hold { .. }, Some(at)) => {
                return Err(format!(
                    "steps[{i}]: a hold inside the hold of steps[{at}]; release it first"
                ));
            }
            (PlanStep::Hold { .. }, None) => open = Some(i),
            (PlanStep::Release, None) => {
                return Err(format!("steps[{i}]: a release without a hold before it"));
            }
            (PlanStep::Release, Some(_)) => open = None,
            (PlanStep::MoveZone { .. }, Some(at)) => {
                return Err(format!(
                    "steps[{i}]: a drain or evacuation inside the hold of steps[{at}] (move held units with move_units)"
                ));
            }
            _ => {}
        }
    }
    match open {
        Some(at) => {
            Err(format!("steps[{at}]: the hold is never released; end it with a release step"))
        }
        None => Ok(()),
    }
}

/// What makes a plan start by itself. At least one of the conditions is set.
#[derive(Clone, Debug, PartialEq)]
pub struct Trigger {
    /// The plan's zone (the one its first drain or evacuate step moves) has been down this long.
    pub zone_down_for_ms: Option<u64>,
    /// The plan's zone has reported nothing (its health is unknown) this long: a zone that dies
    /// silently, reporters and all, never reads as down.
    pub zone_silent_for_ms: Option<u64>,
    /// Every lane consumer in this zone is gone...
    pub lane_consumers_gone: Option<String>,
    /// ...for this long (0 in plans stored before it existed; the API and config default it).
    pub lane_consumers_gone_for_ms: u64,
    /// At most one automatic run per cooldown.
    pub cooldown_ms: u64,
}

/// The zone a plan evacuates: the zone of its first `MoveZone` step.
pub fn trigger_zone(plan: &Plan) -> Option<&str> {
    plan.steps.iter().find_map(|s| match s {
        PlanStep::MoveZone { zone, .. } => Some(zone.as_str()),
        _ => None,
    })
}

/// Checks a trigger against the plan and the configured zones; the error names the field.
pub fn validate_trigger(plan: &Plan, zones: &[&str]) -> Result<(), String> {
    let Some(t) = &plan.trigger else { return Ok(()) };
    if t.zone_down_for_ms.is_none()
        && t.zone_silent_for_ms.is_none()
        && t.lane_consumers_gone.is_none()
    {
        return Err(
            "trigger: give zone_down_for, zone_silent_for and/or lane_consumers_gone".into()
        );
    }
    if t.zone_silent_for_ms.is_some() && trigger_zone(plan).is_none() {
        return Err("trigger.zone_silent_for: the plan has no drain or evacuate step, so it has \
                    no zone to watch"
            .into());
    }
    if t.zone_silent_for_ms == Some(0) {
        return Err("trigger.zone_silent_for: must be more than 0s".into());
    }
    if t.zone_down_for_ms.is_some() && trigger_zone(plan).is_none() {
        return Err("trigger.zone_down_for: the plan has no drain or evacuate step, so it has \
                    no zone to watch"
            .into());
    }
    if t.zone_down_for_ms == Some(0) {
        return Err("trigger.zone_down_for: must be more than 0s".into());
    }
    if let Some(zone) = &t.lane_consumers_gone
        && !zones.contains(&zone.as_str())
    {
        return Err(format!(
            "trigger.lane_consumers_gone: `{zone}` is not a configured zone ({})",
            zones.join(", ")
        ));
    }
    if t.cooldown_ms == 0 {
        return Err("cooldown: a plan with a trigger needs a cooldown of more than 0s".into());
    }
    Ok(())
}

/// How drains of each mode step, for the dry run's arithmetic (from the configuration).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepDefaults {
    pub step_units: u32,
    pub interval_ms: u64,
    pub guard: Guard,
}

/// Everything a dry run looks at, read by the caller.
#[derive(Clone, Debug)]
pub struct DryRunInputs<'a> {
    pub zones: &'a Zones,
    pub units: u32,
    pub blue_units: u32,
    /// The blue units of each named domain (a step in a domain missing here starts from
    /// `blue_units`).
    pub domain_blue_units: &'a BTreeMap<String, u32>,
    /// Load and capacity of the blue zone and the green zone.
    pub blue_load: &'a ZoneLoad,
    pub green_load: &'a ZoneLoad,
    pub headroom: f64,
    /// Health of the blue zone and the green zone.
    pub blue_health: &'a Reading,
    pub green_health: &'a Reading,
    pub maintenance: StepDefaults,
    pub evacuate: StepDefaults,
    /// Each precondition's result: passed, failed, or could not be checked.
    pub preconditions: &'a [(String, Result<bool, String>)],
    /// Unconsumed messages in the blue and green halves (`None`: unknown).
    pub backlog: [Option<u64>; 2],
    /// Whether a drain or another run is active now (a run could not start).
    pub busy: Option<String>,
    /// The table's release channels: a step that empties a channel's zone in its domain
    /// suspends it (its users get its fallback), one that gives the zone units back resumes it.
    pub channels: &'a [super::channel::Channel],
    /// The default domain's unit map now, and each zone's load and capacity by zone index: what
    /// a `move_units` step's capacity projection and a zone move among three or more zones (a
    /// zone drain) start from (`None` or a list shorter than the zones: neither is projected).
    pub unit_map: Option<&'a super::unit_map::UnitMap>,
    pub zone_loads: &'a [ZoneLoad],
    /// The named domains' unit maps now: what a `move_units` step's moves in those domains are
    /// projected from (a domain missing here: its moves are judged when the step runs).
    pub domain_maps: &'a BTreeMap<String, super::unit_map::UnitMap>,
}

/// The dry run of a zone move among three or more zones (a zone drain).
struct ZoneDrainDryRun {
    description: String,
    moved: u32,
    expected_ms: u64,
    verdict: Verdict,
    holds: Vec<String>,
}

/// A `drain`/`evacuate` step on a table of three or more zones: the zone keeps `to_percent` of
/// the units and gives the rest to every other live zone, a step at a time; projected by free
/// room when every zone's load is known (`zone_loads` then carries the moved load on).
fn dry_run_zone_drain(
    zone: &str,
    to_percent: f64,
    mode: DrainMode,
    inputs: &DryRunInputs<'_>,
    domain: &str,
    unit_map: Option<&super::unit_map::UnitMap>,
    zone_loads: &mut [ZoneLoad],
) -> ZoneDrainDryRun {
    let units = inputs.units;
    let defaults = if mode == DrainMode::Evacuate { inputs.evacuate } else { inputs.maintenance };
    let verb = if mode == DrainMode::Evacuate { "evacuate" } else { "drain" };
    let source = inputs.zones.color_in(zone);
    let owned = source.zip(unit_map).map_or(0, |(c, map)| map.count(c));
    let keep = Share::from_percent(to_percent, units).map_or(owned, |s| s.blue_units);
    let mut holds = Vec::new();
    if keep > owned {
        holds.push(format!(
            "would fail: {zone} owns {owned} units; among {} zones a zone move only gives units away (a move_units step gives a zone more)",
            inputs.zones.len()
        ));
    }
    let moved = owned.saturating_sub(keep);
    let step_units = defaults.step_units.max(1);
    let n = u64::from(moved.div_ceil(step_units));
    let mut verdict = Verdict::Unchecked;
    match source.zip(unit_map) {
        Some((source, map)) if moved > 0 && zone_loads.len() >= inputs.zones.len() => {
            // Load follows the routed map: the moved units a channel keeps elsewhere carry none
            // (the drain's units are taken as a fair sample of the zone's), and a drain to zero
            // suspends the channels into the zone, whose users then follow the map out.
            let routed = routed_in(map, inputs.channels, domain);
            let stays = map.units_of(source).filter(|u| routed.owner(*u) == source).count();
            let mut carried = (u64::from(moved) * stays as u64).div_ceil(u64::from(owned)) as u32;
            if keep == 0 {
                carried += routed.units_of(source).filter(|u| map.owner(*u) != source).count() as u32;
            }
            verdict = project_zone_drain(
                source,
                carried,
                inputs.zones,
                &routed,
                zone_loads,
                inputs.headroom,
            );
            holds.push(
                "a zone move among three or more zones is a zone drain: its receivers' health is judged when it runs, and its split by free room is projected for the whole move"
                    .to_owned(),
            );
        }
        _ if moved > 0 => holds.push(
            "a zone move among three or more zones is a zone drain: its receivers' health and capacity are judged when it runs (the dry run does not project them)"
                .to_owned(),
        ),
        _ => {}
    }
    ZoneDrainDryRun {
        description: format!(
            "{verb} {zone} to {to_percent}% among the other live zones: {moved} unit(s) in {n} step(s) of up to {}% every {} ms",
            percent_of(step_units, units),
            defaults.interval_ms
        ),
        moved,
        expected_ms: n.saturating_sub(1) * defaults.interval_ms,
        verdict,
        holds,
    }
}

/// The default domain's map as its load follows it (see [`routed_map`]).
///
/// [`routed_map`]: super::channel::routed_map
fn routed_default(
    map: &super::unit_map::UnitMap,
    channels: &[super::channel::Channel],
) -> super::unit_map::UnitMap {
    routed_in(map, channels, super::table::DEFAULT_DOMAIN)
}

/// `domain`'s map as its load follows it: with its own channels (see [`routed_map`]).
///
/// [`routed_map`]: super::channel::routed_map
fn routed_in(
    map: &super::unit_map::UnitMap,
    channels: &[super::channel::Channel],
    domain: &str,
) -> super::unit_map::UnitMap {
    super::channel::routed_map(map, channels.iter().filter(|c| c.domain_name() == domain))
}

/// Projects a zone drain among N of `moved` units out of `source`: spread over every other live
/// zone by free room (as its steps spread each slice), then judged and carried as any move.
fn project_zone_drain(
    source: ZoneId,
    moved: u32,
    zones: &Zones,
    map: &super::unit_map::UnitMap,
    loads: &mut [ZoneLoad],
    headroom: f64,
) -> Verdict {
    let receivers: Vec<ZoneId> = zones.live().filter(|z| *z != source).collect();
    let room = |l: &ZoneLoad| match (&l.capacity, &l.load_rps) {
        (super::capacity::Capacity::Rps(cap), Ok(load)) => Some(cap * (1.0 - headroom) - load),
        _ => None,
    };
    let rooms: Vec<Option<f64>> = receivers.iter().map(|r| room(&loads[r.index()])).collect();
    let shares = super::capacity::spread_by_headroom(moved, &rooms);
    let mut units = vec![vec![0u32; loads.len()]; loads.len()];
    for (r, share) in receivers.iter().zip(shares) {
        units[source.index()][r.index()] = share;
    }
    project_moves(&units, map, loads, headroom)
}

/// Projects the move from `now` to `next` (a `move_units` step).
fn project_map_move(
    now: &super::unit_map::UnitMap,
    next: &super::unit_map::UnitMap,
    loads: &mut [ZoneLoad],
    headroom: f64,
) -> Verdict {
    let n = loads.len();
    let mut units = vec![vec![0u32; n]; n];
    for unit in now.diff(next) {
        let (s, r) = (now.owner(unit).index(), next.owner(unit).index());
        if s < n && r < n {
            units[s][r] += 1;
        }
    }
    project_moves(&units, now, loads, headroom)
}

/// Judges each zone that gains units (`moved[source][receiver]`, zone indices, from the map
/// `now`) on `loads`, as `PUT /v1/units` judges a move (each source zone adds its load per unit
/// times the units it gives), then carries the moved load over where both loads are known, so
/// later steps are judged against it. The first blocking verdict, else the last one judged.
fn project_moves(
    moved: &[Vec<u32>],
    now: &super::unit_map::UnitMap,
    loads: &mut [ZoneLoad],
    headroom: f64,
) -> Verdict {
    let n = loads.len();
    let before = loads.to_vec();
    let count = |z: usize| now.count(ZoneId(z as u16));
    let mut verdict = Verdict::Unchecked;
    for r in 0..n {
        let gains: Vec<Gain<'_>> = (0..n)
            .filter(|s| moved[*s][r] > 0)
            .map(|s| Gain { moved_units: moved[s][r], source_units: count(s), source: &before[s] })
            .collect();
        if gains.is_empty() {
            continue;
        }
        let v = judge_gains(&gains, count(r), &before[r], headroom);
        if !verdict.blocks() {
            verdict = v;
        }
    }
    for s in 0..n {
        for r in 0..n {
            if moved[s][r] == 0 || count(s) == 0 {
                continue;
            }
            if let (Ok(src), Ok(_)) = (&before[s].load_rps, &before[r].load_rps) {
                let carried = src * f64::from(moved[s][r]) / f64::from(count(s));
                if let Ok(l) = &mut loads[s].load_rps {
                    *l -= carried;
                }
                if let Ok(l) = &mut loads[r].load_rps {
                    *l += carried;
                }
            }
        }
    }
    verdict
}

/// One step of the dry run.
#[derive(Clone, Debug, PartialEq)]
pub struct DryRunStep {
    pub index: usize,
    /// The domain whose dial the step moves (`None`: the default domain); `blue_percent_*` are
    /// that domain's.
    pub domain: Option<String>,
    pub description: String,
    pub blue_percent_before: f64,
    pub blue_percent_after: f64,
    /// Share of all users that change zone in this step, in percent.
    pub users_moved_percent: f64,
    /// The tightest capacity verdict among the step's moves (`Unchecked` when nothing moves or
    /// the receiving zone has no capacity).
    pub capacity: Verdict,
    pub expected_ms: u64,
    pub holds: Vec<String>,
    /// What the step does to release channels: each it suspends or resumes, and why.
    pub channels: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DryRun {
    pub steps: Vec<DryRunStep>,
    /// Reasons the run could not start now (failed preconditions, an active drain or run).
    pub refusals: Vec<String>,
    pub expected_ms: u64,
    pub rto_ms: u64,
    /// Every reason the run would hold or could not start, in order.
    pub holds: Vec<String>,
}

impl DryRun {
    pub fn fits_rto(&self) -> bool {
        self.expected_ms <= self.rto_ms
    }

    pub fn would_start(&self) -> bool {
        self.refusals.is_empty()
    }
}

/// The channels of `domain` a dial at `blue` of `units` suspends or resumes (a channel's zone
/// that owns no unit of its domain suspends it, as `channel::settle` does after a command),
/// updating `suspended`. Only blue and green are projected: the dry run's dial is two-zone.
fn settle_channels(
    channels: &[super::channel::Channel],
    suspended: &mut BTreeMap<&str, bool>,
    zones: &Zones,
    domain: Option<&str>,
    blue: u32,
    units: u32,
) -> Vec<String> {
    let mut notes = Vec::new();
    let same_domain = |c: &super::channel::Channel| {
        c.domain.as_deref().filter(|d| *d != super::table::DEFAULT_DOMAIN)
            == domain.filter(|d| *d != super::table::DEFAULT_DOMAIN)
    };
    for channel in channels.iter().filter(|c| same_domain(c)) {
        let owns = match channel.zone {
            ZoneId::BLUE => blue > 0,
            ZoneId::GREEN => blue < units,
            _ => continue,
        };
        let Some(was) = suspended.get_mut(channel.name.as_str()) else { continue };
        let lane = zones.zone_of(channel.zone);
        if *was && owns {
            *was = false;
            notes.push(format!(
                "resumes channel {}: its zone ({lane}) owns units again, its users go back to it",
                channel.name
            ));
        } else if !*was && !owns {
            *was = true;
            let fallback = match channel.fallback {
                super::channel::ChannelFallback::Global => {
                    "its users get the map (fallback `global`)"
                }
                super::channel::ChannelFallback::Reject => {
                    "its users' calls are refused (fallback `reject`)"
                }
            };
            notes.push(format!(
                "suspends channel {}: its zone ({lane}) owns no units after the step; {fallback}",
                channel.name
            ));
        }
    }
    notes
}

/// What running `plan` now would do. Pure.
///
/// Load moves with users: after each simulated move, the moved share of the source zone's load
/// is carried over to the receiving zone, so later steps are judged against the load earlier
/// steps put there.
///
/// Only the start preconditions refuse a run (see [`start_preconditions`]).
pub fn dry_run(plan: &Plan, inputs: &DryRunInputs<'_>) -> DryRun {
    let units = inputs.units;
    let mut refusals = Vec::new();
    if let Some(busy) = &inputs.busy {
        refusals.push(busy.clone());
    }
    for p in start_preconditions(plan) {
        match inputs.preconditions.iter().find(|(n, _)| n == &p.name).map(|(_, r)| r) {
            Some(Ok(true)) => {}
            Some(Ok(false)) => refusals.push(format!("precondition `{}` is false", p.name)),
            Some(Err(why)) => {
                refusals.push(format!("precondition `{}` could not be checked: {why}", p.name))
            }
            None => refusals.push(format!("precondition `{}` was not checked", p.name)),
        }
    }
    // The dial of each domain the steps touch, as the steps move it (the default domain's is
    // `inputs.blue_units`; a named domain's starts at `inputs.domain_blue_units`).
    let mut blues: BTreeMap<Option<String>, u32> = BTreeMap::new();
    blues.insert(None, inputs.blue_units);
    let mut loads = [inputs.blue_load.clone(), inputs.green_load.clone()];
    // The default domain's map and every zone's load, as `move_units` steps move them.
    let mut map = inputs.unit_map.cloned();
    // The named domains' maps, as `move_units` steps and their dials move them.
    let mut named = inputs.domain_maps.clone();
    let mut zone_loads = inputs.zone_loads.to_vec();
    let idx = |c: ZoneId| if c == ZoneId::BLUE { 0 } else { 1 };
    let mut suspended: BTreeMap<&str, bool> =
        inputs.channels.iter().map(|c| (c.name.as_str(), c.suspended)).collect();
    let mut steps = Vec::new();
    for (index, step) in plan.steps.iter().enumerate() {
        let domain = step.named_domain().map(str::to_owned);
        let start = inputs
            .domain_blue_units
            .get(domain.as_deref().unwrap_or_default())
            .copied()
            .unwrap_or(inputs.blue_units);
        let mut blue = blues.get(&domain).copied().unwrap_or(start);
        let before = blue;
        let mut holds = Vec::new();
        let mut verdict = Verdict::Unchecked;
        let mut expected_ms = 0;
        // Moves the dial from `blue` to `to` in one move, judging and carrying load.
        // `base`: the default domain's map (a move of it is counted on the routed map, so units
        // a release channel keeps in its zone carry no load).
        let mut move_to = |blue: &mut u32,
                           to: u32,
                           verdict: &mut Verdict,
                           base: Option<&super::unit_map::UnitMap>| {
            if to == *blue {
                return;
            }
            let source = if to < *blue { ZoneId::BLUE } else { ZoneId::GREEN };
            let receiver = counterpart(source);
            let zone_units = |c: ZoneId, b: u32| if c == ZoneId::BLUE { b } else { units - b };
            let (moved, src_units, recv_units) = match base {
                Some(m) => {
                    let now = routed_default(
                        &m.set_count(ZoneId::BLUE, ZoneId::GREEN, *blue),
                        inputs.channels,
                    );
                    let next = routed_default(
                        &m.set_count(ZoneId::BLUE, ZoneId::GREEN, to),
                        inputs.channels,
                    );
                    let moved = now
                        .diff(&next)
                        .into_iter()
                        .filter(|u| now.owner(*u) == source && next.owner(*u) == receiver)
                        .count() as u32;
                    (moved, now.count(source), now.count(receiver))
                }
                None => (blue.abs_diff(to), zone_units(source, *blue), zone_units(receiver, *blue)),
            };
            let (s, r) = (idx(source), idx(receiver));
            let v = judge(moved, src_units, recv_units, &loads[s], &loads[r], inputs.headroom);
            if let (Ok(src), Ok(recv)) = (loads[s].load_rps.clone(), loads[r].load_rps.clone()) {
                let carried = if src_units == 0 {
                    0.0
                } else {
                    src * f64::from(moved) / f64::from(src_units)
                };
                loads[s].load_rps = Ok(src - carried);
                loads[r].load_rps = Ok(recv + carried);
            }
            // The first blocking verdict, or else the latest (the highest projection: load only
            // grows on the receiving side as a step's moves go on).
            if !verdict.blocks() {
                *verdict = v;
            }
            *blue = to;
        };
        // A zone move among three or more zones: the units it gives away (not a dial move).
        let mut zone_moved: Option<u32> = None;
        let base_map = if domain.is_none() && inputs.zones.is_two() { map.clone() } else { None };
        let base = base_map.as_ref();
        let description = match step {
            PlanStep::MoveZone { zone, to_percent, mode, .. } if !inputs.zones.is_two() => {
                // The zone move of the step's domain, on that domain's map.
                let (name, domain_map) = match domain.as_deref() {
                    None | Some(super::table::DEFAULT_DOMAIN) => {
                        (super::table::DEFAULT_DOMAIN, map.as_ref())
                    }
                    Some(d) => (d, named.get(d)),
                };
                let z = dry_run_zone_drain(
                    zone,
                    *to_percent,
                    *mode,
                    inputs,
                    name,
                    domain_map,
                    &mut zone_loads,
                );
                holds.extend(z.holds);
                expected_ms = z.expected_ms;
                zone_moved = Some(z.moved);
                verdict = z.verdict;
                // Which units went where is the run's: later unit moves of that domain are not
                // projected.
                if z.moved > 0 {
                    match domain.as_deref() {
                        None | Some(super::table::DEFAULT_DOMAIN) => map = None,
                        Some(d) => {
                            named.remove(d);
                        }
                    }
                }
                z.description
            }
            PlanStep::MoveZone { zone, to_percent, mode, .. } => {
                let color = inputs.zones.color_in(zone).unwrap_or(ZoneId::BLUE);
                let share =
                    Share::from_percent(*to_percent, units).map(|s| s.blue_units).unwrap_or(0);
                let target = if color == ZoneId::BLUE { share } else { units - share };
                let defaults =
                    if *mode == DrainMode::Evacuate { inputs.evacuate } else { inputs.maintenance };
                let health = [inputs.blue_health, inputs.green_health];
                let moving_out = (color == ZoneId::BLUE) == (target < blue);
                let receiving = if moving_out { counterpart(color) } else { color };
                let mut judged = vec![(receiving, "receiving")];
                if *mode == DrainMode::Maintenance {
                    judged.push((counterpart(receiving), "draining"));
                }
                if target != blue {
                    for (c, role) in judged {
                        let zone = inputs.zones.zone_of(c);
                        match health[idx(c)] {
                            Reading::Unknown { why } => holds.push(format!(
                                "{} would hold: health of {role} zone {zone} is unknown ({why})",
                                mode.as_str()
                            )),
                            Reading::Known { error_rate, requests }
                                if *requests >= defaults.guard.min_requests
                                    && *error_rate > defaults.guard.max_error_rate =>
                            {
                                holds.push(format!(
                                    "{} would hold: {role} zone {zone} has an error rate of {:.2}%, above {:.2}%",
                                    mode.as_str(),
                                    error_rate * 100.0,
                                    defaults.guard.max_error_rate * 100.0
                                ))
                            }
                            Reading::Known { .. } => {}
                        }
                    }
                }
                let mut n = 0u64;
                while blue != target {
                    let next = step_toward(blue, target, defaults.step_units.max(1));
                    move_to(&mut blue, next, &mut verdict, base);
                    n += 1;
                }
                expected_ms = n.saturating_sub(1) * defaults.interval_ms;
                format!(
                    "{} {zone} to {}% in {n} step(s) of {}% every {} ms",
                    if *mode == DrainMode::Evacuate { "evacuate" } else { "drain" },
                    to_percent,
                    percent_of(defaults.step_units, units),
                    defaults.interval_ms
                )
            }
            PlanStep::Dial { blue_percent, .. } => {
                let to =
                    Share::from_percent(*blue_percent, units).map(|s| s.blue_units).unwrap_or(blue);
                move_to(&mut blue, to, &mut verdict, base);
                format!("set the dial to {blue_percent}% blue")
            }
            PlanStep::Pin { user_id, color } => {
                format!("pin {user_id} to {}", color.default_lane())
            }
            PlanStep::Unpin { user_id } => format!("unpin {user_id}"),
            PlanStep::MoveUnits { moves } => {
                let in_default = |m: &&PlanMove| {
                    m.domain.as_deref().is_none_or(|d| d == super::table::DEFAULT_DOMAIN)
                };
                match map.as_mut() {
                    Some(now) if zone_loads.len() >= inputs.zones.len() => {
                        let mut next = now.clone();
                        for m in moves.iter().filter(in_default) {
                            if let Some(zone) = inputs.zones.color_in(&m.zone) {
                                next = next.moved(&m.units, zone);
                            }
                        }
                        verdict = project_map_move(
                            &routed_default(now, inputs.channels),
                            &routed_default(&next, inputs.channels),
                            &mut zone_loads,
                            inputs.headroom,
                        );
                        *now = next;
                        // Each named domain's moves, projected on the load the moves before
                        // them carried (a zone gaining in several domains is judged on the sum,
                        // as PUT /v1/units judges it).
                        let mut domains: Vec<&str> = moves
                            .iter()
                            .filter(|m| !in_default(m))
                            .filter_map(|m| m.domain.as_deref())
                            .collect();
                        domains.dedup();
                        for d in domains {
                            let Some(now_d) = named.get_mut(d) else {
                                holds.push(format!(
                                    "the moves of domain {d} are judged when the step runs (the dry run does not know its map)"
                                ));
                                continue;
                            };
                            let mut next_d = now_d.clone();
                            for m in moves.iter().filter(|m| m.domain.as_deref() == Some(d)) {
                                if let Some(zone) = inputs.zones.color_in(&m.zone) {
                                    next_d = next_d.moved(&m.units, zone);
                                }
                            }
                            let v = project_map_move(
                                &routed_in(now_d, inputs.channels, d),
                                &routed_in(&next_d, inputs.channels, d),
                                &mut zone_loads,
                                inputs.headroom,
                            );
                            if !verdict.blocks() && !matches!(v, Verdict::Unchecked) {
                                verdict = v;
                            }
                            *now_d = next_d;
                        }
                    }
                    _ => holds.push(
                        "the capacity of a unit move is judged when the step runs (the dry run does not project it)"
                            .to_owned(),
                    ),
                }
                describe_moves(moves)
            }
            PlanStep::WaitConsumed { zone } => {
                let color = inputs.zones.color_in(zone).unwrap_or(ZoneId::BLUE);
                match inputs.backlog[idx(color)] {
                    Some(0) => {}
                    Some(n) => holds
                        .push(format!("waits for {n} message(s) in {zone}'s half to be consumed")),
                    None => holds.push(format!("waits: {zone}'s MQ backlog is unknown")),
                }
                format!("wait until {zone}'s MQ half is consumed")
            }
            // Listed, never called: a dry run changes nothing, outside tidegate either.
            PlanStep::Http(call) => format!("{} (not called in a dry run)", call.describe()),
            PlanStep::Hold { units, global, hold_ms } => format!(
                "hold {} (frozen in place once every live subscriber has it, at most {hold_ms} ms)",
                super::staged::describe_held(units, *global)
            ),
            PlanStep::Release => "release the hold".to_owned(),
            PlanStep::WaitPrecondition { name } => {
                match inputs.preconditions.iter().find(|(n, _)| n == name).map(|(_, r)| r) {
                    Some(Ok(true)) => {}
                    Some(Ok(false)) => holds.push(format!("waits: precondition `{name}` is false")),
                    Some(Err(why)) => holds
                        .push(format!("waits: precondition `{name}` cannot be checked ({why})")),
                    None => holds.push(format!("waits: precondition `{name}` was not checked")),
                }
                format!("wait for precondition `{name}`")
            }
        };
        if verdict.blocks() {
            holds.push(format!("would hold: insufficient_capacity: {}", verdict.explain()));
        }
        blues.insert(domain.clone(), blue);
        // A dial move moves its domain's map too (what later unit moves start from).
        if zone_moved.is_none() && matches!(step, PlanStep::MoveZone { .. } | PlanStep::Dial { .. })
        {
            let m = match domain.as_deref() {
                None => map.as_mut(),
                Some(d) => named.get_mut(d),
            };
            if let Some(m) = m {
                *m = m.set_count(ZoneId::BLUE, ZoneId::GREEN, blue);
            }
        }
        let channels = if zone_moved.is_some() {
            // The channel arithmetic is the dial's (two zones); a zone drain's suspensions are
            // the state's when it runs.
            Vec::new()
        } else if matches!(step, PlanStep::MoveZone { .. } | PlanStep::Dial { .. }) {
            let d = domain.as_deref();
            settle_channels(inputs.channels, &mut suspended, inputs.zones, d, blue, units)
        } else {
            Vec::new()
        };
        let mut description = match &domain {
            Some(d) if matches!(step, PlanStep::MoveZone { .. } | PlanStep::Dial { .. }) => {
                format!("{description} in {d}")
            }
            _ => description,
        };
        if let (PlanStep::MoveZone { .. }, Some(window)) = (step, plan.freeze_ms) {
            description.push_str(&format!(
                "; loss-less: each step freezes its units until every live subscriber has it (at most {window} ms)"
            ));
        }
        steps.push(DryRunStep {
            index,
            domain,
            description,
            blue_percent_before: percent_of(before, units),
            blue_percent_after: percent_of(blue, units),
            users_moved_percent: percent_of(zone_moved.unwrap_or(before.abs_diff(blue)), units),
            capacity: verdict,
            expected_ms,
            holds,
            channels,
        });
    }
    let mut holds = refusals.clone();
    for s in &steps {
        holds.extend(s.holds.iter().map(|h| format!("step {}: {h}", s.index + 1)));
    }
    DryRun {
        expected_ms: steps.iter().map(|s| s.expected_ms).sum(),
        steps,
        refusals,
        rto_ms: plan.rto_ms,
        holds,
    }
}

/// The preconditions that must hold for a run to start: those no `wait_precondition` step
/// names. A precondition a step waits for may be false at the start ("wait for the replica
/// promotion, then evacuate"): the run holds at that step until it is true. Checking it before
/// the start used to refuse exactly the plans that wait for the data layer.
pub fn start_preconditions(plan: &Plan) -> impl Iterator<Item = &Precondition> {
    plan.preconditions.iter().filter(|p| {
        !plan
            .steps
            .iter()
            .any(|s| matches!(s, PlanStep::WaitPrecondition { name } if name == &p.name))
    })
}

/// `move units 25-49 to az-c, 0-9 to az-a in search`.
pub fn describe_moves(moves: &[PlanMove]) -> String {
    let parts: Vec<String> = moves
        .iter()
        .map(|m| match &m.domain {
            Some(d) => format!("{} to {} in {d}", m.units, m.zone),
            None => format!("{} to {}", m.units, m.zone),
        })
        .collect();
    format!("move units {}", parts.join(", "))
}
