//! Snapshots: the replayed state at a log position, so start-up need not replay the whole log.
//!
//! A snapshot is one file, `tidegate.snapshot`, in the same framing as a log line
//! (`<crc32 hex> <JSON>\n`). It holds the state (table without zones, drains), the genesis entry,
//! the newest [`AUDIT_IN_MEMORY`] audit records and the [`LogPosition`] it covers. It is written to
//! a temporary file, fsynced, renamed over the old one and the directory fsynced, so a crash at
//! any point leaves either the old snapshot or the new one, never a mix.
//!
//! Architecture invariant: a snapshot is only a cache of a replay. The log keeps every entry, the
//! snapshot carries nothing the log does not, and a snapshot that is damaged, unreadable, from
//! another format or does not fit the log is ignored with a warning and the whole log is
//! replayed. The position is the log's own opaque position (a byte offset in the file log, the
//! next offset in a Kafka-topic log), so each replica of a replicated log keeps its own snapshot.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::{
    Applied, CallAttempt, CommandError, Direction, Drain, DrainMode, DrainPlan, DrainStatus,
    FreezeRecord, GlobalWriter, Guard, OnBreach, PlanRun, RoutingTable, Run, RunStatus, State,
    StepFreeze, StepRecord, StoredPlan, UnitMap, UnitSet, ZoneId, Zones,
};

use super::decision::{Lease, Outcome};
use super::entry::{
    LogEntry, WireChannel, WirePlan, WireZone, WireZoneSample, core_samples, is_plain_two,
    scheme_of, wire_samples, wire_zones, zones_of,
};
use super::log::{LogPosition, StoreError};
use super::replay::{AUDIT_IN_MEMORY, AuditRecord, Replayed, action_name};

pub const SNAPSHOT_FILE: &str = "tidegate.snapshot";
const SNAPSHOT_TMP: &str = "tidegate.snapshot.tmp";
/// Version of the snapshot format; a snapshot of another format is ignored (the log replays).
const FORMAT: u32 = 1;

/// Where snapshots of one log are kept, and how often they are taken.
#[derive(Clone, Debug)]
pub struct Snapshots {
    dir: PathBuf,
    /// Take a snapshot once this many entries were appended since the last one (0: never, apart
    /// from the one at clean shutdown).
    pub every: u64,
}

/// A snapshot read back: the replay it stands for, and where in the log it stops.
#[derive(Debug)]
pub struct Loaded {
    pub replayed: Replayed,
    pub position: LogPosition,
    /// How many entries of the log it covers (genesis included).
    pub entries: u64,
    /// A shared log replica's snapshot: the log's id, every decided command id and the leases.
    /// `None` for the file log.
    pub shared: Option<Shared>,
}

/// What a shared log replica decides besides the routing state, as of a snapshot: a replica
/// started from it must decide every later record (a retried command id, a lease claim) exactly
/// as one that applied the whole log.
#[derive(Debug, Clone, PartialEq)]
pub struct Shared {
    pub log_id: String,
    pub outcomes: Outcomes,
    pub leases: BTreeMap<String, Lease>,
}

impl Snapshots {
    pub fn new(dir: &Path, every: u64) -> Snapshots {
        Snapshots { dir: dir.to_path_buf(), every }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }

    /// The stored snapshot. `Ok(None)` when there is none; `Err(sentence)` when there is one
    /// that cannot be used (the caller warns and replays the whole log).
    pub fn load(&self, zones: &Zones) -> Result<Option<Loaded>, String> {
        let path = self.path();
        let data = match fs::read(&path) {
            Ok(data) => data,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        decode(&data, zones).map(Some).map_err(|why| format!("{} {why}", path.display()))
    }

    /// Writes a snapshot of `replayed` covering the log up to `position` (`entries` entries),
    /// atomically and durably.
    pub fn save(
        &self,
        replayed: &Replayed,
        position: LogPosition,
        entries: u64,
    ) -> Result<(), StoreError> {
        self.write(&encode(replayed, position, entries, None)?)
    }

    /// Writes a shared log replica's snapshot: the state, every command id decided up to
    /// `position` (the log's next position, Kafka: the next offset) and the leases.
    pub fn save_shared(
        &self,
        replayed: &Replayed,
        position: LogPosition,
        shared: &Shared,
    ) -> Result<(), StoreError> {
        let mut wire: Vec<WireOutcome> =
            shared.outcomes.iter().map(|(id, outcome)| wire_outcome(id, outcome)).collect();
        wire.sort_by(|a, b| a.id.cmp(&b.id));
        let leases = shared
            .leases
            .iter()
            .map(|(name, l)| WireLease {
                name: name.clone(),
                holder: l.holder.clone(),
                url: l.url.clone(),
                at_ms: l.at_ms,
                until_ms: l.until_ms,
            })
            .collect();
        let shared = WireShared { log_id: shared.log_id.clone(), outcomes: wire, leases };
        self.write(&encode(replayed, position, position.0, Some(shared))?)
    }

    fn write(&self, line: &str) -> Result<(), StoreError> {
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let path = self.path();
        let io_err = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { action, path, source }
        };
        let mut file = File::create(&tmp).map_err(io_err("create", &tmp))?;
        file.write_all(line.as_bytes()).map_err(io_err("write", &tmp))?;
        file.sync_all().map_err(io_err("fsync", &tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io_err("rename into place", &path))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io_err("fsync", &self.dir))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    format: u32,
    position: u64,
    entries: u64,
    genesis: LogEntry,
    version: u64,
    blue_units: u32,
    /// The table's zones, when they are not the genesis's two colours (absent in snapshots of
    /// two-zone tables, which older releases read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zones: Option<Vec<WireZone>>,
    /// The unit map as runs `[first, last, lane]`, when it is not the dial form of
    /// `blue_units`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit_map: Option<Vec<(u32, u32, String)>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    global_writer: Option<WireGlobalWriter>,
    /// The named routing domains' maps as runs (absent without named domains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domains: Option<BTreeMap<String, WireRuns>>,
    /// Units frozen by a drain step in progress, by domain (absent between moves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    frozen: Option<BTreeMap<String, String>>,
    /// Release channels (absent without channels, so older releases read such snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    channels: Option<Vec<WireChannel>>,
    /// The loss-less channel change in progress and its freeze (absent between changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    channel_change: Option<WireChannelChange>,
    /// The loss-less unit move in progress (absent between moves; its units are `frozen`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    units_change: Option<WireUnitsChange>,
    pins: BTreeMap<String, String>,
    drains: Vec<WireDrain>,
    next_drain_id: u64,
    /// Stored plans, in the log's own wire form (absent in snapshots from before plans).
    #[serde(default)]
    plans: Vec<WireStoredPlan>,
    /// Plan runs (absent in snapshots from before runs).
    #[serde(default)]
    runs: Vec<WireRun>,
    #[serde(default = "one")]
    next_run_id: u64,
    /// Automatic failover's switch (absent in snapshots from before it: on, never armed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    automation: Option<WireAutomation>,
    audit: Vec<WireAudit>,
    /// The history digest at `position` (absent in snapshots from before digests: ignored).
    #[serde(default)]
    state_hash: Option<u64>,
    /// What a replica of a shared log needs besides the state (absent for the file log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    shared: Option<WireShared>,
}

/// A unit map as runs `[first, last, lane]`.
type WireRuns = Vec<(u32, u32, String)>;

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireGlobalWriter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zone: Option<String>,
    read_only: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    frozen: bool,
}

/// A channel change in progress: the change as the state holds it and the freeze the table
/// publishes.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireChannelChange {
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    next: Option<WireChannel>,
    frozen_version: u64,
    frozen_ms: u64,
    window_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    switched: Option<(u64, u64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domain: Option<String>,
    services: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    units: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    users: Vec<String>,
}

/// A loss-less unit move in progress: its moves and its phases.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireUnitsChange {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    moves: Vec<super::entry::WireUnitMove>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pins: Vec<super::entry::WirePinChange>,
    frozen_version: u64,
    frozen_ms: u64,
    window_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    switched: Option<(u64, u64)>,
    /// The plan run and step this change is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<(u64, usize)>,
    /// The global writer its switch sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    global: Option<super::entry::WireGlobalTarget>,
    /// A hold's longest hold once held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hold_ms: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAutomation {
    stopped: bool,
    armed_ms: u64,
    changed_by: String,
    changed_ms: u64,
    reason: String,
}

/// A shared log replica's decisions so far: every command id seen, with its outcome, so that a
/// replica started from this snapshot ignores a late retry exactly as one that replayed it all.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireShared {
    log_id: String,
    outcomes: Vec<WireOutcome>,
    /// The leases as decided up to the snapshot (a lease claim after it is decided against them).
    #[serde(default)]
    leases: Vec<WireLease>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireLease {
    name: String,
    holder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    at_ms: u64,
    until_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireOutcome {
    id: String,
    /// `applied`, `unchanged`, `refused` or `unreadable`.
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    to: Option<String>,
    /// A version conflict's expected and current versions (kept exactly: the common refusal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    conflict: Option<(u64, u64)>,
    /// Why it was refused or unreadable, as a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    why: Option<String>,
}

/// The command ids a shared-log replica has decided, and how (see [`Outcome`]).
pub type Outcomes = HashMap<String, Outcome>;

fn wire_outcome(id: &str, outcome: &Outcome) -> WireOutcome {
    let mut w = WireOutcome {
        id: id.to_owned(),
        kind: String::new(),
        version: None,
        from: None,
        to: None,
        conflict: None,
        why: None,
    };
    match outcome {
        Outcome::Applied(applied) => {
            w.kind = "applied".into();
            w.version = Some(applied.version);
            w.from = Some(applied.from.clone());
            w.to = Some(applied.to.clone());
        }
        Outcome::Unchanged => w.kind = "unchanged".into(),
        Outcome::Refused(CommandError::VersionConflict { expected, current }) => {
            w.kind = "refused".into();
            w.conflict = Some((*expected, *current));
        }
        Outcome::Refused(e) => {
            w.kind = "refused".into();
            w.why = Some(e.to_string());
        }
        Outcome::RefusedEarlier(why) => {
            w.kind = "refused".into();
            w.why = Some(why.clone());
        }
        Outcome::Unreadable(why) => {
            w.kind = "unreadable".into();
            w.why = Some(why.clone());
        }
    }
    w
}

fn core_outcome(w: WireOutcome) -> Result<(String, Outcome), String> {
    let outcome = match (w.kind.as_str(), w.version, w.conflict) {
        ("applied", Some(version), _) => Outcome::Applied(Applied {
            version,
            from: w.from.unwrap_or_default(),
            to: w.to.unwrap_or_default(),
        }),
        ("unchanged", ..) => Outcome::Unchanged,
        ("refused", _, Some((expected, current))) => {
            Outcome::Refused(CommandError::VersionConflict { expected, current })
        }
        ("refused", ..) => Outcome::RefusedEarlier(w.why.unwrap_or_default()),
        ("unreadable", ..) => Outcome::Unreadable(w.why.unwrap_or_default()),
        (kind, ..) => return Err(format!("holds an outcome of unknown kind `{kind}`")),
    };
    Ok((w.id, outcome))
}

fn one() -> u64 {
    1
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRun {
    id: u64,
    plan: WirePlan,
    revision: u64,
    drill_hold_ms: Option<u64>,
    start_blue_units: u32,
    /// Named domains' blue units at the start (absent when the plan names no domain).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    start_domain_blue_units: BTreeMap<String, u32>,
    /// Every domain's map at the start, as runs, on a run that restores maps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_maps: Option<BTreeMap<String, WireRuns>>,
    status: String,
    step: usize,
    in_step: bool,
    drain: Option<u64>,
    hold_reason: Option<String>,
    hold_until_ms: Option<u64>,
    rolling_back: bool,
    pins_before: Vec<(String, Option<String>)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    step_freeze: Option<u64>,
    steps: Vec<WireStepRecord>,
    restore: Option<WireStepRecord>,
    started_ms: u64,
    started_by: String,
    reason: String,
    switched_ms: Option<u64>,
    finished_ms: Option<u64>,
    fail_reason: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireStepRecord {
    index: usize,
    started_ms: u64,
    converged_ms: Option<u64>,
    done_ms: Option<u64>,
    drain: Option<u64>,
    samples: Vec<(u64, Vec<WireZoneSample>)>,
    /// An HTTP step's attempts; absent in snapshots written before HTTP steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    calls: Vec<WireCallAttempt>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCallAttempt {
    attempt: u32,
    caller: String,
    claimed_ms: u64,
    until_ms: u64,
    done_ms: Option<u64>,
    status: Option<u16>,
    error: Option<String>,
    ok: bool,
}

fn wire_record(r: &StepRecord) -> WireStepRecord {
    WireStepRecord {
        index: r.index,
        started_ms: r.started_ms,
        converged_ms: r.converged_ms,
        done_ms: r.done_ms,
        drain: r.drain,
        samples: r.samples.iter().map(|(at, s)| (*at, wire_samples(s))).collect(),
        calls: r
            .calls
            .iter()
            .map(|a| WireCallAttempt {
                attempt: a.attempt,
                caller: a.caller.clone(),
                claimed_ms: a.claimed_ms,
                until_ms: a.until_ms,
                done_ms: a.done_ms,
                status: a.status,
                error: a.error.clone(),
                ok: a.ok,
            })
            .collect(),
    }
}

fn core_record(r: WireStepRecord) -> StepRecord {
    StepRecord {
        index: r.index,
        started_ms: r.started_ms,
        converged_ms: r.converged_ms,
        done_ms: r.done_ms,
        drain: r.drain,
        samples: r.samples.iter().map(|(at, s)| (*at, core_samples(s))).collect(),
        calls: r
            .calls
            .into_iter()
            .map(|a| CallAttempt {
                attempt: a.attempt,
                caller: a.caller,
                claimed_ms: a.claimed_ms,
                until_ms: a.until_ms,
                done_ms: a.done_ms,
                status: a.status,
                error: a.error,
                ok: a.ok,
            })
            .collect(),
    }
}

fn wire_run(r: &PlanRun, zones: &Zones) -> WireRun {
    WireRun {
        id: r.id,
        plan: WirePlan::encode(&r.plan, zones),
        revision: r.revision,
        drill_hold_ms: r.drill_hold_ms,
        start_blue_units: r.start_blue_units,
        start_domain_blue_units: r.start_domain_blue_units.clone(),
        start_maps: r.start_maps.as_ref().map(|maps| {
            maps.iter().map(|(name, map)| (name.clone(), wire_runs(map, zones))).collect()
        }),
        status: r.status.as_str().to_owned(),
        step: r.step,
        in_step: r.in_step,
        drain: r.drain,
        hold_reason: r.hold_reason.clone(),
        hold_until_ms: r.hold_until_ms,
        rolling_back: r.rolling_back,
        pins_before: r
            .pins_before
            .iter()
            .map(|(u, c)| (u.clone(), c.map(|c| zones.lane(c).to_owned())))
            .collect(),
        step_freeze: r.step_freeze,
        steps: r.steps.iter().map(wire_record).collect(),
        restore: r.restore.as_ref().map(wire_record),
        started_ms: r.started_ms,
        started_by: r.started_by.clone(),
        reason: r.reason.clone(),
        switched_ms: r.switched_ms,
        finished_ms: r.finished_ms,
        fail_reason: r.fail_reason.clone(),
    }
}

/// A unit map as runs with lanes, as the snapshot stores maps.
fn wire_runs(map: &UnitMap, zones: &Zones) -> WireRuns {
    map.runs().iter().map(|r| (r.first, r.last, zones.lane(r.zone).to_owned())).collect()
}

/// The map of [`wire_runs`], its lanes resolved in `zones`.
fn core_runs(runs: &WireRuns, zones: &Zones, units: u32) -> Result<UnitMap, String> {
    let runs = runs
        .iter()
        .map(|(first, last, lane)| {
            let zone = zones.by_lane(lane).ok_or_else(|| format!("unknown lane `{lane}`"))?;
            Ok(Run { first: *first, last: *last, zone })
        })
        .collect::<Result<Vec<_>, String>>()?;
    UnitMap::from_runs(&runs, units).map_err(|e| e.to_string())
}

fn core_run(w: WireRun, zones: &Zones, units: u32) -> Result<PlanRun, String> {
    let mut pins_before = Vec::new();
    for (user, color) in w.pins_before {
        let color = match color {
            Some(c) => Some(zones.by_lane(&c).ok_or_else(|| format!("unknown lane `{c}`"))?),
            None => None,
        };
        pins_before.push((user, color));
    }
    Ok(PlanRun {
        id: w.id,
        plan: w.plan.to_plan(zones)?,
        revision: w.revision,
        drill_hold_ms: w.drill_hold_ms,
        start_blue_units: w.start_blue_units,
        start_domain_blue_units: w.start_domain_blue_units,
        start_maps: w
            .start_maps
            .map(|maps| {
                maps.into_iter()
                    .map(|(name, runs)| {
                        let map = core_runs(&runs, zones, units)
                            .map_err(|e| format!("run {}'s start map of {name}: {e}", w.id))?;
                        Ok((name, map))
                    })
                    .collect::<Result<BTreeMap<_, _>, String>>()
            })
            .transpose()?,
        status: RunStatus::parse(&w.status)
            .ok_or_else(|| format!("unknown plan run status {}", w.status))?,
        step: w.step,
        in_step: w.in_step,
        drain: w.drain,
        hold_reason: w.hold_reason,
        hold_until_ms: w.hold_until_ms,
        rolling_back: w.rolling_back,
        pins_before,
        step_freeze: w.step_freeze,
        steps: w.steps.into_iter().map(core_record).collect(),
        restore: w.restore.map(core_record),
        started_ms: w.started_ms,
        started_by: w.started_by,
        reason: w.reason,
        switched_ms: w.switched_ms,
        finished_ms: w.finished_ms,
        fail_reason: w.fail_reason,
    })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireStoredPlan {
    plan: WirePlan,
    revision: u64,
    updated_by: String,
    updated_ms: u64,
    reason: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireAudit {
    version: u64,
    at_ms: u64,
    by: String,
    reason: String,
    action: String,
    from: String,
    to: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireDrain {
    id: u64,
    zone: String,
    color: String,
    target_blue_units: u32,
    step_units: u32,
    interval_ms: u64,
    /// The bits of the `f64`, so the snapshot restores exactly what the replay computed.
    max_error_rate_bits: u64,
    min_requests: u64,
    breaches: u32,
    on_breach: String,
    /// `maintenance` or `evacuate` (snapshots written before evacuations had only the former).
    #[serde(default = "maintenance")]
    mode: String,
    /// A named domain's drain; absent for the default domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domain: Option<String>,
    start_blue_units: u32,
    status: String,
    direction: String,
    next_due_ms: u64,
    consecutive_breaches: u32,
    hold_reason: Option<String>,
    pause_cause: Option<String>,
    steps_done: u32,
    last_step_version: Option<u64>,
    last_step_ms: u64,
    started_ms: u64,
    started_by: String,
    reason: String,
    finished_ms: Option<u64>,
    /// A loss-less drain's freeze window (absent: steps switch at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze_ms: Option<u64>,
    /// A zone drain among N: its receivers by lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    receivers: Option<Vec<String>>,
    /// A zone drain among N: the units the drained zone owned at its start (`0-24,60`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    start_units: Option<String>,
    /// The freeze of the step in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    freeze: Option<WireStepFreeze>,
    /// Finished freezes, for the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    freezes: Vec<WireFreezeRecord>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireStepFreeze {
    blue_units: u32,
    units: String,
    frozen_version: u64,
    frozen_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    switched: Option<(u64, u64)>,
    /// A zone drain's step: the moves its switch makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    moves: Option<Vec<super::entry::WireUnitMove>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WireFreezeRecord {
    step: u32,
    units: u32,
    window_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    switch_after_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

fn encode(
    replayed: &Replayed,
    position: LogPosition,
    entries: u64,
    shared: Option<WireShared>,
) -> Result<String, StoreError> {
    let table = replayed.state.table();
    let body = Body {
        format: FORMAT,
        position: position.0,
        entries,
        genesis: replayed.genesis_entry.clone(),
        version: table.version(),
        blue_units: table.blue_units(),
        zones: (!is_plain_two(table.zones())).then(|| wire_zones(table.zones())),
        unit_map: (!table.zones().is_two()
            || *table.map() != UnitMap::dial(table.units(), table.blue_units()))
        .then(|| {
            table
                .map()
                .runs()
                .iter()
                .map(|r| (r.first, r.last, table.lane(r.zone).to_owned()))
                .collect()
        }),
        domains: (!table.domains().is_empty()).then(|| {
            table
                .domains()
                .iter()
                .map(|(name, map)| {
                    let runs = map
                        .runs()
                        .iter()
                        .map(|r| (r.first, r.last, table.lane(r.zone).to_owned()))
                        .collect();
                    (name.clone(), runs)
                })
                .collect()
        }),
        frozen: (!table.frozen().is_empty()).then(|| {
            table.frozen().iter().map(|(d, units)| (d.clone(), units.to_string())).collect()
        }),
        channels: (!table.channels().is_empty()).then(|| {
            let lane = |z: &ZoneId| table.lane(*z).to_owned();
            table.channels().values().map(|c| WireChannel::encode(c, &lane)).collect()
        }),
        channel_change: replayed.state.channel_change().zip(table.channel_freeze()).map(
            |(change, freeze)| {
                let lane = |z: &ZoneId| table.lane(*z).to_owned();
                WireChannelChange {
                    name: change.name.clone(),
                    next: change.next.as_ref().map(|c| WireChannel::encode(c, &lane)),
                    frozen_version: change.phases.frozen_version,
                    frozen_ms: change.phases.frozen_ms,
                    window_ms: change.phases.window_ms,
                    switched: change.phases.switched,
                    domain: freeze.domain.clone(),
                    services: freeze.services.clone(),
                    units: freeze.units.to_string(),
                    users: freeze.users.iter().cloned().collect(),
                }
            },
        ),
        units_change: replayed.state.units_change().map(|change| {
            let lane = |z: &ZoneId| table.lane(*z).to_owned();
            WireUnitsChange {
                moves: super::entry::wire_moves(&change.moves, &lane),
                pins: super::entry::wire_pins(&change.pins, &lane),
                frozen_version: change.phases.frozen_version,
                frozen_ms: change.phases.frozen_ms,
                window_ms: change.phases.window_ms,
                switched: change.phases.switched,
                run: change.run,
                global: change.global.map(|g| super::entry::WireGlobalTarget {
                    zone: g.zone.map(|z| table.lane(z).to_owned()),
                    read_only: g.read_only,
                }),
                hold_ms: change.hold_ms,
            }
        }),
        global_writer: (table.global() != GlobalWriter::default()).then(|| WireGlobalWriter {
            zone: table.global().zone.map(|z| table.lane(z).to_owned()),
            read_only: table.global().read_only,
            frozen: table.global().frozen,
        }),
        pins: table.pins().iter().map(|(id, c)| (id.clone(), table.lane(*c).to_owned())).collect(),
        drains: replayed.state.drains().map(|d| wire_drain(d, table.zones())).collect(),
        next_drain_id: replayed.state.next_drain_id(),
        plans: replayed
            .state
            .plans()
            .map(|p| WireStoredPlan {
                plan: WirePlan::encode(&p.plan, table.zones()),
                revision: p.revision,
                updated_by: p.updated_by.clone(),
                updated_ms: p.updated_ms,
                reason: p.reason.clone(),
            })
            .collect(),
        runs: replayed.state.plan_runs().map(|r| wire_run(r, table.zones())).collect(),
        next_run_id: replayed.state.next_run_id(),
        automation: {
            let a = replayed.state.automation();
            (*a != crate::core::Automation::default()).then(|| WireAutomation {
                stopped: a.stopped,
                armed_ms: a.armed_ms,
                changed_by: a.changed_by.clone(),
                changed_ms: a.changed_ms,
                reason: a.reason.clone(),
            })
        },
        audit: replayed
            .audit
            .iter()
            .map(|a| WireAudit {
                version: a.version,
                at_ms: a.at_ms,
                by: a.by.clone(),
                reason: a.reason.clone(),
                action: a.action.to_owned(),
                from: a.from.clone(),
                to: a.to.clone(),
            })
            .collect(),
        state_hash: Some(replayed.state_hash),
        shared,
    };
    let json = serde_json::to_string(&body)?;
    Ok(format!("{:08x} {json}\n", crc32fast::hash(json.as_bytes())))
}

fn decode(data: &[u8], zones: &Zones) -> Result<Loaded, String> {
    let line = data.strip_suffix(b"\n").ok_or("is incomplete (no line end)")?;
    if line.len() < 10 || line[8] != b' ' {
        return Err("has no checksum prefix".into());
    }
    let crc = std::str::from_utf8(&line[..8])
        .ok()
        .and_then(|t| u32::from_str_radix(t, 16).ok())
        .ok_or("has a bad checksum prefix")?;
    let json = &line[9..];
    if crc32fast::hash(json) != crc {
        return Err("fails its checksum".into());
    }
    let body: Body = serde_json::from_slice(json).map_err(|e| format!("cannot be read ({e})"))?;
    if body.format != FORMAT {
        return Err(format!("has format {}, this tidegate writes {FORMAT}", body.format));
    }
    let LogEntry::Genesis { units, ref unit_mode, digits_skip, blue_units, .. } = body.genesis
    else {
        return Err("holds no genesis entry".into());
    };
    let scheme = scheme_of(units, unit_mode, digits_skip)?;
    let genesis = crate::core::Genesis { scheme, blue_units };
    // The zones: the snapshot's own list, else the genesis's, else the configured colours.
    let zones = match &body.zones {
        Some(list) => zones_of(list)?,
        None => match body.genesis.genesis_zones()? {
            Some(pinned) => pinned,
            None => Zones::two(zones.zone_of(ZoneId::BLUE), zones.zone_of(ZoneId::GREEN)),
        },
    };
    let lane = |l: &str| zones.by_lane(l).ok_or_else(|| format!("unknown lane `{l}`"));
    let pins = body
        .pins
        .into_iter()
        .map(|(id, c)| Ok((id, lane(&c)?)))
        .collect::<Result<BTreeMap<_, _>, String>>()?;
    let map_of = |runs: &[(u32, u32, String)]| -> Result<UnitMap, String> {
        let runs = runs
            .iter()
            .map(|(first, last, l)| Ok(Run { first: *first, last: *last, zone: lane(l)? }))
            .collect::<Result<Vec<_>, String>>()?;
        UnitMap::from_runs(&runs, scheme.count()).map_err(|e| e.to_string())
    };
    let map = match &body.unit_map {
        Some(runs) => map_of(runs)?,
        None => UnitMap::dial(scheme.count(), body.blue_units),
    };
    let mut domains = BTreeMap::new();
    for (name, runs) in body.domains.iter().flatten() {
        domains.insert(name.clone(), map_of(runs).map_err(|e| format!("domain {name}: {e}"))?);
    }
    let global = match &body.global_writer {
        Some(g) => GlobalWriter {
            zone: g.zone.as_deref().map(lane).transpose()?,
            read_only: g.read_only,
            frozen: g.frozen,
        },
        None => GlobalWriter::default(),
    };
    let mut frozen = BTreeMap::new();
    for (domain, units) in body.frozen.iter().flatten() {
        let set = UnitSet::parse(units, scheme.count())
            .map_err(|e| format!("frozen units of {domain}: {e}"))?;
        frozen.insert(domain.clone(), set);
    }
    let mut channels = BTreeMap::new();
    for c in body.channels.iter().flatten() {
        channels.insert(c.name.clone(), c.decode(&zones, scheme.count())?);
    }
    let mut channel_change = None;
    let mut channel_freeze = None;
    if let Some(w) = &body.channel_change {
        let units = if w.units.is_empty() {
            UnitSet::default()
        } else {
            UnitSet::parse(&w.units, scheme.count())
                .map_err(|e| format!("channel change {}: frozen units: {e}", w.name))?
        };
        channel_freeze = Some(crate::core::ChannelFreeze {
            channel: w.name.clone(),
            domain: w.domain.clone(),
            services: w.services.clone(),
            units,
            users: w.users.iter().cloned().collect(),
        });
        channel_change = Some(crate::core::ChannelChange {
            name: w.name.clone(),
            next: w.next.as_ref().map(|c| c.decode(&zones, scheme.count())).transpose()?,
            phases: crate::core::Phases {
                frozen_version: w.frozen_version,
                frozen_ms: w.frozen_ms,
                window_ms: w.window_ms,
                switched: w.switched,
            },
        });
    }
    let units_change = match &body.units_change {
        None => None,
        Some(w) => Some(crate::core::UnitsChange {
            moves: super::entry::core_moves_in(&w.moves, &zones, scheme.count())
                .map_err(|e| format!("the unit move in progress: {e}"))?,
            pins: super::entry::core_pins(&w.pins, &zones)
                .map_err(|e| format!("the unit move in progress: {e}"))?,
            phases: crate::core::Phases {
                frozen_version: w.frozen_version,
                frozen_ms: w.frozen_ms,
                window_ms: w.window_ms,
                switched: w.switched,
            },
            run: w.run,
            global: match &w.global {
                None => None,
                Some(g) => Some(GlobalWriter {
                    zone: match &g.zone {
                        None => None,
                        Some(l) => Some(zones.by_lane(l).ok_or_else(|| {
                            format!(
                                "the unit move in progress: global writer lane `{l}` is unknown"
                            )
                        })?),
                    },
                    read_only: g.read_only,
                    frozen: false,
                }),
            },
            hold_ms: w.hold_ms,
        }),
    };
    let table = RoutingTable::from_map(body.version, scheme, map, pins, zones.clone(), global)
        .and_then(|t| t.with_domains(domains))
        .and_then(|t| t.with_frozen(frozen))
        .and_then(|t| t.with_channels(channels))
        .and_then(|t| t.with_channel_freeze(channel_freeze))
        .map_err(|e| e.to_string())?;
    let zones = &zones;
    let drains = body
        .drains
        .into_iter()
        .map(|d| core_drain(d, zones))
        .collect::<Result<Vec<_>, String>>()?;
    let mut audit = VecDeque::with_capacity(body.audit.len().min(AUDIT_IN_MEMORY));
    for a in body.audit {
        let action =
            action_name(&a.action).ok_or_else(|| format!("unknown action {}", a.action))?;
        audit.push_back(AuditRecord {
            version: a.version,
            at_ms: a.at_ms,
            by: a.by,
            reason: a.reason,
            action,
            from: a.from,
            to: a.to,
        });
    }
    let plans = body
        .plans
        .into_iter()
        .map(|p| {
            Ok(StoredPlan {
                plan: p.plan.to_plan(zones)?,
                revision: p.revision,
                updated_by: p.updated_by,
                updated_ms: p.updated_ms,
                reason: p.reason,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let runs = body
        .runs
        .into_iter()
        .map(|r| core_run(r, zones, scheme.count()))
        .collect::<Result<Vec<_>, String>>()?;
    let automation = body
        .automation
        .map(|a| crate::core::Automation {
            stopped: a.stopped,
            armed_ms: a.armed_ms,
            changed_by: a.changed_by,
            changed_ms: a.changed_ms,
            reason: a.reason,
        })
        .unwrap_or_default();
    let state = State::restore(
        table,
        drains,
        body.next_drain_id,
        plans,
        runs,
        body.next_run_id,
        automation,
    )
    .with_channel_change(channel_change)
    .with_units_change(units_change);
    let state_hash = body.state_hash.ok_or("predates state digests")?;
    let shared = match body.shared {
        None => None,
        Some(shared) => {
            let outcomes =
                shared.outcomes.into_iter().map(core_outcome).collect::<Result<Outcomes, _>>()?;
            let leases = shared
                .leases
                .into_iter()
                .map(|l| {
                    let lease = Lease {
                        holder: l.holder,
                        url: l.url,
                        at_ms: l.at_ms,
                        until_ms: l.until_ms,
                    };
                    (l.name, lease)
                })
                .collect();
            Some(Shared { log_id: shared.log_id, outcomes, leases })
        }
    };
    Ok(Loaded {
        replayed: Replayed { genesis, genesis_entry: body.genesis, state, audit, state_hash },
        position: LogPosition(body.position),
        entries: body.entries,
        shared,
    })
}

fn wire_drain(d: &Drain, zones: &Zones) -> WireDrain {
    WireDrain {
        id: d.id,
        zone: d.plan.zone.clone(),
        color: zones.lane(d.plan.color).to_owned(),
        target_blue_units: d.plan.target_blue_units,
        step_units: d.plan.step_units,
        interval_ms: d.plan.interval_ms,
        max_error_rate_bits: d.plan.guard.max_error_rate.to_bits(),
        min_requests: d.plan.guard.min_requests,
        breaches: d.plan.guard.breaches,
        on_breach: d.plan.guard.on_breach.as_str().to_owned(),
        mode: d.plan.mode.as_str().to_owned(),
        domain: d.plan.domain.clone(),
        start_blue_units: d.start_blue_units,
        status: status_name(d.status).to_owned(),
        direction: match d.direction {
            Direction::Forward => "forward",
            Direction::Back => "back",
        }
        .to_owned(),
        next_due_ms: d.next_due_ms,
        consecutive_breaches: d.consecutive_breaches,
        hold_reason: d.hold_reason.clone(),
        pause_cause: d.pause_cause.map(str::to_owned),
        steps_done: d.steps_done,
        last_step_version: d.last_step_version,
        last_step_ms: d.last_step_ms,
        started_ms: d.started_ms,
        started_by: d.started_by.clone(),
        reason: d.reason.clone(),
        finished_ms: d.finished_ms,
        freeze_ms: d.plan.freeze_ms,
        receivers: super::entry::encode_receivers(&d.plan, zones),
        start_units: d.start_units.as_ref().map(ToString::to_string),
        freeze: d.freeze.as_ref().map(|f| WireStepFreeze {
            blue_units: f.blue_units,
            units: f.units.to_string(),
            frozen_version: f.frozen_version,
            frozen_ms: f.frozen_ms,
            switched: f.switched,
            moves: f
                .moves
                .as_ref()
                .map(|m| super::entry::wire_moves(m, &|z: &ZoneId| zones.lane(*z).to_owned())),
        }),
        freezes: d
            .freezes
            .iter()
            .map(|r| WireFreezeRecord {
                step: r.step,
                units: r.units,
                window_ms: r.window_ms,
                switch_after_ms: r.switch_after_ms,
                note: r.note.clone(),
            })
            .collect(),
    }
}

const STATUSES: [(DrainStatus, &str); 6] = [
    (DrainStatus::Running, "running"),
    (DrainStatus::Paused, "paused"),
    (DrainStatus::Settling, "settling"),
    (DrainStatus::Completed, "completed"),
    (DrainStatus::Aborted, "aborted"),
    (DrainStatus::RolledBack, "rolled_back"),
];

fn status_name(status: DrainStatus) -> &'static str {
    STATUSES.iter().find(|(s, _)| *s == status).map(|(_, n)| *n).unwrap_or("running")
}

fn core_drain(w: WireDrain, zones: &Zones) -> Result<Drain, String> {
    let status = STATUSES
        .iter()
        .find(|(_, n)| *n == w.status)
        .map(|(s, _)| *s)
        .ok_or_else(|| format!("unknown drain status {}", w.status))?;
    let direction = match w.direction.as_str() {
        "forward" => Direction::Forward,
        "back" => Direction::Back,
        other => return Err(format!("unknown drain direction {other}")),
    };
    let on_breach = match w.on_breach.as_str() {
        "pause" => OnBreach::Pause,
        "rollback" => OnBreach::Rollback,
        other => return Err(format!("unknown on_breach {other}")),
    };
    let pause_cause = match w.pause_cause.as_deref() {
        None => None,
        Some("guard") => Some("guard"),
        Some("convergence") => Some("convergence"),
        Some("operator") => Some("operator"),
        Some("freeze") => Some("freeze"),
        Some(other) => return Err(format!("unknown pause cause {other}")),
    };
    let freeze = match w.freeze {
        Some(f) => Some(StepFreeze {
            blue_units: f.blue_units,
            // The set was written by `UnitSet::to_string`; its units are checked against the
            // table when the table's own frozen set is restored.
            units: UnitSet::parse(&f.units, u32::MAX)
                .map_err(|e| format!("drain {}'s frozen units: {e}", w.id))?,
            frozen_version: f.frozen_version,
            frozen_ms: f.frozen_ms,
            switched: f.switched,
            moves: f
                .moves
                .as_deref()
                .map(|m| super::entry::core_moves_in(m, zones, u32::MAX))
                .transpose()
                .map_err(|e| format!("drain {}'s frozen moves: {e}", w.id))?,
        }),
        None => None,
    };
    Ok(Drain {
        id: w.id,
        plan: DrainPlan {
            mode: DrainMode::parse(&w.mode)
                .ok_or_else(|| format!("unknown drain mode {}", w.mode))?,
            zone: w.zone,
            // Snapshots written before zone drains named the colour by its default lane.
            color: zones
                .by_lane(&w.color)
                .or(match w.color.as_str() {
                    "blue" => Some(ZoneId::BLUE),
                    "green" => Some(ZoneId::GREEN),
                    _ => None,
                })
                .ok_or_else(|| format!("unknown lane `{}`", w.color))?,
            target_blue_units: w.target_blue_units,
            step_units: w.step_units,
            interval_ms: w.interval_ms,
            guard: Guard {
                max_error_rate: f64::from_bits(w.max_error_rate_bits),
                min_requests: w.min_requests,
                breaches: w.breaches,
                on_breach,
            },
            domain: w.domain,
            freeze_ms: w.freeze_ms,
            receivers: super::entry::decode_receivers(w.receivers.as_deref(), zones)
                .map_err(|e| format!("drain {}: {e}", w.id))?,
        },
        start_blue_units: w.start_blue_units,
        start_units: w
            .start_units
            .as_deref()
            .map(|text| UnitSet::parse(text, u32::MAX))
            .transpose()
            .map_err(|e| format!("drain {}'s start units: {e}", w.id))?,
        status,
        direction,
        next_due_ms: w.next_due_ms,
        consecutive_breaches: w.consecutive_breaches,
        hold_reason: w.hold_reason,
        pause_cause,
        steps_done: w.steps_done,
        last_step_version: w.last_step_version,
        last_step_ms: w.last_step_ms,
        started_ms: w.started_ms,
        started_by: w.started_by,
        reason: w.reason,
        finished_ms: w.finished_ms,
        freeze,
        freezes: w
            .freezes
            .into_iter()
            .map(|r| FreezeRecord {
                step: r.step,
                units: r.units,
                window_ms: r.window_ms,
                switch_after_ms: r.switch_after_ms,
                note: r.note,
            })
            .collect(),
    })
}

fn maintenance() -> String {
    DrainMode::Maintenance.as_str().to_owned()
}
