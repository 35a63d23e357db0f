//! The history checker of the replica fault tests: a pure function from what writers were told
//! and what every replica applied to a verdict.
//!
//! Inputs: every change a writer sent (its command id, expected version, the change, and the
//! answer: acknowledged with a version and a value, refused with a code, or unknown), every
//! replica's decided history (its audit, each record naming the command id in its reason), and
//! `(version, state hash)` samples taken from the replicas during the run. It proves that every
//! acknowledged change is in the decided history exactly once, at the version after the one it
//! expected, with the value the writer was told; that no refused or no-op change took effect;
//! that each writer's acknowledged changes are in the order it made them; that every replica
//! decided the same history; and that all replicas had the same state hash at every version.

use std::collections::{BTreeMap, HashMap};

/// A change a writer asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    Dial {
        blue_units: u64,
    },
    Pin {
        user: String,
        color: String,
    },
    /// A linked two-domain move (`PUT /v1/units`): unit `unit` of the default domain to the zone
    /// of lane `lane`, and unit `search_unit` of the `search` domain to lane `search_lane`, in
    /// one version.
    Linked {
        unit: u32,
        lane: String,
        search_unit: u32,
        search_lane: String,
    },
}

/// The domain every linked change moves besides the default one.
pub const LINKED_DOMAIN: &str = "search";

impl Change {
    /// Whether an audit record's `to` field says this change took effect: the dial's count, the
    /// user's pin, or, for a linked move, both units in their lanes in one record.
    pub fn took_effect_in(&self, to: &str) -> bool {
        match self {
            // A dial-form map reads `... (N/100 units blue)`; a map made of runs by linked moves
            // is described run by run, and its blue units are counted.
            Change::Dial { blue_units } => {
                to.contains(&format!("({blue_units}/"))
                    || lane_count(to.split("; domain ").next().unwrap_or_default(), "blue")
                        == Some(*blue_units)
            }
            Change::Pin { user, color } => to.contains(&format!("user {user} pinned {color}")),
            Change::Linked { unit, lane, search_unit, search_lane } => {
                let marker = format!("; domain {LINKED_DOMAIN}: ");
                let Some((default, rest)) = to.split_once(&marker) else { return false };
                let search = rest.split("; domain ").next().unwrap_or_default();
                lane_in_text(default, *unit).as_deref() == Some(lane.as_str())
                    && lane_in_text(search, *search_unit).as_deref() == Some(search_lane.as_str())
            }
        }
    }

    /// The value the answer reports for what this change touched (`blue_units`, the user's pin
    /// colour, or the lanes of a linked move's two units), as text.
    pub fn value_in(&self, routing: &serde_json::Value) -> String {
        match self {
            Change::Dial { .. } => routing["blue_units"].to_string(),
            Change::Pin { user, .. } => {
                routing["pins"][user].as_str().unwrap_or("unpinned").to_owned()
            }
            Change::Linked { unit, search_unit, .. } => format!(
                "{}/{}",
                lane_in_map(&routing["unit_map"], *unit).unwrap_or_default(),
                lane_in_map(&routing["domains"][LINKED_DOMAIN]["unit_map"], *search_unit)
                    .unwrap_or_default()
            ),
        }
    }

    /// The value this change sets, in the form of [`Change::value_in`].
    pub fn value(&self) -> String {
        match self {
            Change::Dial { blue_units } => blue_units.to_string(),
            Change::Pin { color, .. } => color.clone(),
            Change::Linked { lane, search_lane, .. } => format!("{lane}/{search_lane}"),
        }
    }
}

/// The lane of `unit` in a unit map as `GET /v1/routing` has it (`[{"units": "0-49", "lane"}]`).
pub fn lane_in_map(unit_map: &serde_json::Value, unit: u32) -> Option<String> {
    unit_map.as_array()?.iter().find_map(|run| {
        let (first, last) = range(run["units"].as_str()?)?;
        (first..=last).contains(&unit).then(|| run["lane"].as_str().map(str::to_owned))?
    })
}

/// The lane of `unit` in an audit description of a map (`units 0-49 blue, 50 green, 51-99 blue`).
fn lane_in_text(text: &str, unit: u32) -> Option<String> {
    text.trim().strip_prefix("units ")?.split(", ").find_map(|run| {
        let (units, lane) = run.trim().split_once(' ')?;
        let (first, last) = range(units)?;
        (first..=last).contains(&unit).then(|| lane.to_owned())
    })
}

/// How many units an audit description of a map (`units 0-49 blue, 50 green, 51-99 blue`)
/// gives to `lane`; `None` when it is not such a description.
fn lane_count(text: &str, lane: &str) -> Option<u64> {
    let mut count = 0;
    for run in text.trim().strip_prefix("units ")?.split(", ") {
        let (units, in_lane) = run.trim().split_once(' ')?;
        let (first, last) = range(units)?;
        if in_lane == lane {
            count += u64::from(last - first + 1);
        }
    }
    Some(count)
}

/// `"25-49"` or `"50"` as an inclusive range.
fn range(units: &str) -> Option<(u32, u32)> {
    match units.split_once('-') {
        Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
        None => units.parse().ok().map(|u| (u, u)),
    }
}

/// The final answer a writer got for one command id (after its retries with the same id).
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// 200: the table's version in the answer, whether the change took effect (`changed`), and
    /// the value the answer shows for what the change touched.
    Acked { version: u64, changed: bool, value: String },
    /// 4xx/5xx with a decided refusal (`version_conflict`, ...).
    Refused { code: String },
    /// No decided answer (connection lost, replica killed, `outcome_unknown`, timeouts).
    Unknown,
}

/// One change as the writer saw it. `seq` orders a writer's changes (each waits for the last).
#[derive(Clone, Debug)]
pub struct Op {
    pub writer: usize,
    pub seq: u64,
    pub id: String,
    pub expected_version: u64,
    pub change: Change,
    pub answer: Answer,
}

/// One applied record of a replica's audit. `id` is the command id named in the reason.
#[derive(Clone, Debug, PartialEq)]
pub struct Decided {
    pub version: u64,
    pub id: Option<String>,
    pub to: String,
}

/// A replica's state hash at a version, as sampled.
#[derive(Clone, Debug)]
pub struct Sample {
    pub replica: String,
    pub version: u64,
    pub hash: String,
}

/// What the checked history held.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub acked: usize,
    pub acked_unchanged: usize,
    pub refused: usize,
    pub unknown: usize,
    /// Unknown answers whose change did take effect (once).
    pub unknown_applied: usize,
    pub versions: u64,
    pub hash_versions: usize,
}

/// The reason a writer sends: the command id in brackets, so the audit names it.
pub fn reason_for(id: &str) -> String {
    format!("ha fault test [id={id}]")
}

/// The command id a [`reason_for`] reason names.
pub fn id_in_reason(reason: &str) -> Option<String> {
    let rest = reason.rsplit_once("[id=")?.1;
    Some(rest.strip_suffix(']')?.to_owned())
}

/// Checks a run: `ops` from the writers, `histories` one decided history per replica (each
/// complete from version 2, every replica having caught up), `samples` from the whole run.
pub fn check(
    ops: &[Op],
    histories: &[(String, Vec<Decided>)],
    samples: &[Sample],
) -> Result<Report, Vec<String>> {
    let mut errors = Vec::new();
    let mut report = Report::default();
    let Some((first_name, reference)) = histories.first() else {
        return Err(vec!["no replica history to check against".into()]);
    };
    // Every replica decided the same history, numbered 2, 3, ... without a gap.
    for (name, history) in histories {
        for (i, d) in history.iter().enumerate() {
            if d.version != i as u64 + 2 {
                errors.push(format!("{name}: record {i} has version {}, not {}", d.version, i + 2));
                break;
            }
        }
        if history != reference {
            let at = history.iter().zip(reference).position(|(a, b)| a != b);
            errors.push(format!(
                "{name} decided a different history from {first_name} ({} vs {} records, first difference at {at:?})",
                history.len(),
                reference.len()
            ));
        }
    }
    report.versions = reference.len() as u64 + 1;
    // Each command id took effect at most once.
    let mut by_id: HashMap<&str, Vec<&Decided>> = HashMap::new();
    for d in reference {
        if let Some(id) = &d.id {
            by_id.entry(id).or_default().push(d);
        }
    }
    for (id, records) in &by_id {
        if records.len() > 1 {
            let versions: Vec<u64> = records.iter().map(|d| d.version).collect();
            errors.push(format!(
                "command {id} took effect {} times (versions {versions:?})",
                records.len()
            ));
        }
    }
    let mut last_acked: HashMap<usize, (u64, u64)> = HashMap::new();
    let mut ordered: Vec<&Op> = ops.iter().collect();
    ordered.sort_by_key(|op| (op.writer, op.seq));
    for op in ordered {
        let decided = by_id.get(op.id.as_str()).and_then(|r| r.first());
        match &op.answer {
            Answer::Acked { version, changed: true, value } => {
                report.acked += 1;
                let want = op.expected_version + 1;
                let Some(d) = decided else {
                    errors.push(format!(
                        "lost: {} was acknowledged at version {version} but no replica applied it",
                        op.id
                    ));
                    continue;
                };
                if d.version != want {
                    errors.push(format!(
                        "{} expected version {} but took effect at {}",
                        op.id, op.expected_version, d.version
                    ));
                }
                if *version < d.version {
                    errors.push(format!(
                        "{} was acknowledged with version {version}, before its own version {}",
                        op.id, d.version
                    ));
                }
                if !op.change.took_effect_in(&d.to) {
                    errors.push(format!(
                        "wrong value: {} asked for {:?} but the log holds {:?}",
                        op.id, op.change, d.to
                    ));
                }
                // The answer shows the change's own state when nothing came after it.
                if *version == d.version && *value != op.change.value() {
                    errors.push(format!(
                        "wrong value: {} was told {value} at version {version}, but set {}",
                        op.id,
                        op.change.value()
                    ));
                }
                if let Some((seq, at)) = last_acked.get(&op.writer)
                    && *at >= d.version
                {
                    errors.push(format!("out of order: writer {}'s change #{} took effect at {}, after its earlier #{seq} at {at}", op.writer, op.seq, d.version));
                }
                last_acked.insert(op.writer, (op.seq, d.version));
            }
            Answer::Acked { changed: false, .. } => {
                report.acked_unchanged += 1;
                if let Some(d) = decided {
                    errors.push(format!(
                        "{} was answered as a no-op but took effect at version {}",
                        op.id, d.version
                    ));
                }
            }
            Answer::Refused { code } => {
                report.refused += 1;
                if let Some(d) = decided {
                    errors.push(format!(
                        "{} was refused ({code}) but took effect at version {}",
                        op.id, d.version
                    ));
                }
            }
            Answer::Unknown => {
                report.unknown += 1;
                if decided.is_some() {
                    report.unknown_applied += 1;
                }
            }
        }
    }
    // Records that name an id no writer sent: someone else wrote to the log.
    for d in reference {
        if let Some(id) = &d.id
            && !ops.iter().any(|op| &op.id == id)
        {
            errors.push(format!(
                "version {} was made by command {id}, which no writer sent",
                d.version
            ));
        }
    }
    // The same state hash at every version, on every replica and at every sample.
    let mut hashes: BTreeMap<u64, (&str, &str)> = BTreeMap::new();
    for s in samples {
        match hashes.get(&s.version) {
            None => {
                hashes.insert(s.version, (&s.replica, &s.hash));
            }
            Some((replica, hash)) if *hash != s.hash => {
                errors.push(format!(
                    "diverged at version {}: {replica} had hash {hash}, {} had {}",
                    s.version, s.replica, s.hash
                ));
            }
            Some(_) => {}
        }
    }
    report.hash_versions = hashes.len();
    if errors.is_empty() { Ok(report) } else { Err(errors) }
}

/// What [`own_answers`] checked.
#[derive(Debug, Default, PartialEq)]
pub struct OwnAnswers {
    /// Answers of changes that took effect.
    pub changes: usize,
    /// Answers of changes that were already in place (no version spent).
    pub no_ops: usize,
}

/// Every 200 describes its own change, never a later state: a change that took effect is
/// answered with exactly the version its record was decided at and the value it set; a no-op is
/// answered with the version it expected (none was spent) and the value it asked for (already
/// there). Stricter than [`check`], which accepts an answer from after the change as long as it
/// is not from before it. `reference` is a decided history every replica agreed on.
pub fn own_answers(ops: &[Op], reference: &[Decided]) -> Result<OwnAnswers, Vec<String>> {
    let versions: HashMap<&str, u64> =
        reference.iter().filter_map(|d| Some((d.id.as_deref()?, d.version))).collect();
    let mut errors = Vec::new();
    let mut report = OwnAnswers::default();
    for op in ops {
        let Answer::Acked { version, changed, value } = &op.answer else { continue };
        let own = if *changed {
            report.changes += 1;
            match versions.get(op.id.as_str()) {
                Some(v) => *v,
                None => {
                    errors.push(format!("{} was acknowledged but never decided", op.id));
                    continue;
                }
            }
        } else {
            report.no_ops += 1;
            op.expected_version
        };
        if *version != own || *value != op.change.value() {
            errors.push(format!(
                "{} ({:?}, writer {}) was answered with version {version} and {value}, not its own version {own} and {}",
                op.id,
                op.change,
                op.writer,
                op.change.value()
            ));
        }
    }
    if errors.is_empty() { Ok(report) } else { Err(errors) }
}
