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
    Dial { blue_units: u64 },
    Pin { user: String, color: String },
}

impl Change {
    /// Text the audit's `to` field holds when this change took effect.
    fn audit_mark(&self) -> String {
        match self {
            Change::Dial { blue_units } => format!("({blue_units}/"),
            Change::Pin { user, color } => format!("user {user} pinned {color}"),
        }
    }

    /// The value the answer reports for what this change touched (`blue_units`, or the user's
    /// pin colour), as text.
    pub fn value_in(&self, routing: &serde_json::Value) -> String {
        match self {
            Change::Dial { .. } => routing["blue_units"].to_string(),
            Change::Pin { user, .. } => {
                routing["pins"][user].as_str().unwrap_or("unpinned").to_owned()
            }
        }
    }

    /// The value this change sets, in the form of [`Change::value_in`].
    fn value(&self) -> String {
        match self {
            Change::Dial { blue_units } => blue_units.to_string(),
            Change::Pin { color, .. } => color.clone(),
        }
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
                if !d.to.contains(&op.change.audit_mark()) {
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
