//! Capacity: the receiving zone's load after a change that moves users, against its capacity.
//!
//! Pure. The caller reads each zone's current load (requests per second, from outcomes or
//! Prometheus) and capacity (config or a PromQL query) and asks [`judge`] whether moving
//! `moved_units` of the source zone's units fits. Load moves with the share of users moved: the
//! receiving zone gains the source zone's load times `moved_units / source_units`.
//!
//! Unknown is never fine: an unknown capacity or an unknown receiving load gives
//! [`Verdict::Unknown`], which holds a drain and refuses a dial like an overload does. A zone
//! without a configured capacity is not checked ([`Verdict::Unchecked`]).

/// What is known about a zone's capacity.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// No capacity is configured for the zone: it is not checked.
    Unchecked,
    /// A capacity is configured but could not be read (a failed or empty query).
    Unknown { why: String },
    /// Requests per second the zone can serve.
    Rps(f64),
}

/// One zone's load and capacity, as read by the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct ZoneLoad {
    pub zone: String,
    /// Requests per second now, or why it is unknown.
    pub load_rps: Result<f64, String>,
    pub capacity: Capacity,
    /// Where `load_rps` came from when it is not a current reading (a silent zone's last known
    /// load), for the explanation.
    pub load_note: Option<String>,
}

/// The receiving zone's projected load, when it could be computed.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    pub zone: String,
    pub current_rps: f64,
    pub projected_rps: f64,
    pub capacity_rps: f64,
    /// Capacity less the headroom: the most the zone may carry.
    pub allowed_rps: f64,
    /// The source zone's load was unknown, so its users were assumed to weigh what the receiving
    /// zone's users weigh.
    pub estimated: bool,
    /// The source zone's load is its last known one (it is silent now), said how.
    pub source_note: Option<String>,
    /// How the receiving zone's load was taken when it is not its load now (its peak, or the
    /// load a drain's earlier steps moved onto it).
    pub receiving_note: Option<String>,
}

/// Whether a move fits the receiving zone.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Unchecked,
    Fits(Projection),
    Exceeds(Projection),
    Unknown { zone: String, why: String },
}

impl Verdict {
    /// Whether the move must be held (or refused): over capacity, or unknown.
    pub fn blocks(&self) -> bool {
        matches!(self, Verdict::Exceeds(_) | Verdict::Unknown { .. })
    }

    /// The sentence an operator reads when the move is held or refused.
    pub fn explain(&self) -> String {
        match self {
            Verdict::Unchecked => "no capacity is configured for the receiving zone".into(),
            Verdict::Fits(p) | Verdict::Exceeds(p) => {
                let verb = if matches!(self, Verdict::Fits(_)) { "within" } else { "above" };
                format!(
                    "{} would carry {:.0} rps after the move ({} {:.0} rps{}), {verb} its allowed {:.0} rps (capacity {:.0} rps less headroom)",
                    p.zone,
                    p.projected_rps,
                    match &p.receiving_note {
                        Some(note) => format!("{note}; from"),
                        None => "now".to_owned(),
                    },
                    p.current_rps,
                    match (&p.source_note, p.estimated) {
                        (Some(note), _) => format!("; {note}"),
                        (None, true) => "; the source zone's load is unknown, estimated per user from the receiving zone".to_owned(),
                        (None, false) => String::new(),
                    },
                    p.allowed_rps,
                    p.capacity_rps
                )
            }
            Verdict::Unknown { zone, why } => {
                format!("cannot project {zone}'s load against its capacity: {why}")
            }
        }
    }
}

/// Judges moving `moved_units` units from the source zone (which has `source_units` now) to the
/// receiving zone (which has `receiving_units` now). `headroom` (0..1) is the fraction of the
/// capacity kept free.
pub fn judge(
    moved_units: u32,
    source_units: u32,
    receiving_units: u32,
    source: &ZoneLoad,
    receiving: &ZoneLoad,
    headroom: f64,
) -> Verdict {
    judge_gains(&[Gain { moved_units, source_units, source }], receiving_units, receiving, headroom)
}

/// Units one receiving zone gains from one source zone in a move.
#[derive(Clone, Copy, Debug)]
pub struct Gain<'a> {
    pub moved_units: u32,
    /// Units the source zone owns before the move.
    pub source_units: u32,
    pub source: &'a ZoneLoad,
}

/// Judges a move that gives the receiving zone units from one or more source zones (a unit-set
/// move on an N-zone table): each source adds its load per unit times the units it gives.
pub fn judge_gains(
    gains: &[Gain<'_>],
    receiving_units: u32,
    receiving: &ZoneLoad,
    headroom: f64,
) -> Verdict {
    let unknown = |why: String| Verdict::Unknown { zone: receiving.zone.clone(), why };
    let capacity_rps = match &receiving.capacity {
        Capacity::Unchecked => return Verdict::Unchecked,
        Capacity::Unknown { why } => return unknown(format!("its capacity is unknown ({why})")),
        Capacity::Rps(rps) => *rps,
    };
    let current_rps = match &receiving.load_rps {
        Ok(rps) => *rps,
        Err(why) => return unknown(format!("its current load is unknown ({why})")),
    };
    let mut added_total = 0.0;
    let mut estimated_any = false;
    let mut source_note = None;
    for g in gains {
        let moved = f64::from(g.moved_units.min(g.source_units));
        let (added, estimated) = match &g.source.load_rps {
            Ok(_) if g.source_units == 0 => (0.0, false),
            Ok(rps) => (rps * moved / f64::from(g.source_units), false),
            Err(_) if g.moved_units == 0 => (0.0, false),
            Err(_) if receiving_units > 0 => {
                (current_rps * f64::from(g.moved_units) / f64::from(receiving_units), true)
            }
            Err(why) => {
                return unknown(format!(
                    "the load of {} is unknown ({why}) and {} serves no users to estimate it from",
                    g.source.zone, receiving.zone
                ));
            }
        };
        added_total += added;
        estimated_any |= estimated;
        if source_note.is_none() {
            source_note = g.source.load_note.clone();
        }
    }
    let projection = Projection {
        zone: receiving.zone.clone(),
        current_rps,
        projected_rps: current_rps + added_total,
        capacity_rps,
        allowed_rps: capacity_rps * (1.0 - headroom),
        estimated: estimated_any,
        source_note,
        receiving_note: receiving.load_note.clone(),
    };
    if projection.projected_rps > projection.allowed_rps {
        Verdict::Exceeds(projection)
    } else {
        Verdict::Fits(projection)
    }
}

/// How many of `units` units (each carrying `per_unit_rps`) each receiver takes when an
/// evacuation spreads them by headroom: in proportion to each receiver's free room (`allowed -
/// current`, at least 0), largest remainders first, ties to the lower index. Receivers without a
/// known room (`None`, an unchecked capacity) count as having the room of the roomiest known
/// receiver, or share evenly when none is known. The counts sum to `units`.
pub fn spread_by_headroom(units: u32, rooms: &[Option<f64>]) -> Vec<u32> {
    if rooms.is_empty() {
        return Vec::new();
    }
    let known_max =
        rooms.iter().flatten().fold(None, |m: Option<f64>, r| Some(m.map_or(*r, |m| m.max(*r))));
    let weights: Vec<f64> = rooms
        .iter()
        .map(|r| match (r, known_max) {
            (Some(r), _) => r.max(0.0),
            (None, Some(m)) => m.max(0.0),
            (None, None) => 1.0,
        })
        .collect();
    let total: f64 = weights.iter().sum();
    let weights: Vec<f64> = if total > 0.0 { weights } else { vec![1.0; rooms.len()] };
    let total: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| f64::from(units) * w / total).collect();
    let mut counts: Vec<u32> = exact.iter().map(|e| e.floor() as u32).collect();
    let mut left = units - counts.iter().sum::<u32>();
    let mut order: Vec<usize> = (0..rooms.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (exact[a] - exact[a].floor(), exact[b] - exact[b].floor());
        rb.partial_cmp(&ra).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    for i in order {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str, load: f64, capacity: f64) -> ZoneLoad {
        ZoneLoad {
            zone: name.into(),
            load_rps: Ok(load),
            capacity: Capacity::Rps(capacity),
            load_note: None,
        }
    }

    #[test]
    fn gains_from_two_sources_add_up() {
        let (a, b, r) = (zone("a", 1000.0, 0.0), zone("b", 500.0, 0.0), zone("r", 100.0, 2000.0));
        let v = judge_gains(
            &[
                Gain { moved_units: 10, source_units: 20, source: &a },
                Gain { moved_units: 5, source_units: 50, source: &b },
            ],
            10,
            &r,
            0.1,
        );
        let Verdict::Fits(p) = v else { panic!("{v:?}") };
        assert_eq!(p.projected_rps, 100.0 + 500.0 + 50.0);
        assert_eq!(p.allowed_rps, 1800.0);
        let one = judge(10, 20, 10, &a, &zone("r", 1400.0, 2000.0), 0.1);
        assert!(one.blocks(), "1400 + 500 > 1800");
    }

    #[test]
    fn spreading_follows_free_room_and_sums_to_the_units() {
        assert_eq!(spread_by_headroom(30, &[Some(2000.0), Some(1000.0)]), vec![20, 10]);
        assert_eq!(spread_by_headroom(31, &[Some(1000.0), Some(1000.0)]), vec![16, 15]);
        assert_eq!(spread_by_headroom(10, &[Some(-5.0), Some(100.0)]), vec![0, 10]);
        assert_eq!(spread_by_headroom(9, &[None, None, None]), vec![3, 3, 3]);
        assert_eq!(spread_by_headroom(10, &[Some(0.0), Some(0.0)]), vec![5, 5]);
        assert_eq!(spread_by_headroom(10, &[None, Some(300.0)]), vec![5, 5]);
    }
}

/// What an evacuation knows of a zone that could receive units.
#[derive(Clone, Debug, PartialEq)]
pub enum ReceiverHealth {
    /// Outcomes known, error rate within the guard.
    Healthy,
    /// Outcomes known, error rate over the guard.
    Failing { error_rate: f64 },
    /// No outcomes, a silent reporter, a failed query: dead and idle look the same.
    Unknown { why: String },
    /// A drain is moving this zone's users away.
    Draining,
}

/// The receivers an evacuation that names none gives units to, and the ones it skips with why.
///
/// The rule (issue 47): a failing zone and a zone being drained never receive; a zone of unknown
/// health (dead, silent, or idle: owning nothing, it reports no outcomes) receives only when no
/// candidate is known healthy. An empty `chosen` means no zone may receive: the caller refuses
/// and names the skipped ones.
pub fn choose_receivers<Z: Copy>(
    candidates: &[(Z, String, ReceiverHealth)],
    max_error_rate: f64,
) -> (Vec<Z>, Vec<(Z, String)>) {
    let any_healthy = candidates.iter().any(|(_, _, h)| *h == ReceiverHealth::Healthy);
    let (mut chosen, mut skipped) = (Vec::new(), Vec::new());
    for (zone, name, health) in candidates {
        let why = match health {
            ReceiverHealth::Healthy => None,
            ReceiverHealth::Failing { error_rate } => Some(format!(
                "{name}: failing ({:.1}% errors, over the {:.1}% guard)",
                error_rate * 100.0,
                max_error_rate * 100.0
            )),
            ReceiverHealth::Draining => Some(format!("{name}: being drained")),
            ReceiverHealth::Unknown { why } if any_healthy => {
                Some(format!("{name}: health unknown ({why}) while another zone is healthy"))
            }
            ReceiverHealth::Unknown { .. } => None,
        };
        match why {
            None => chosen.push(*zone),
            Some(why) => skipped.push((*zone, why)),
        }
    }
    (chosen, skipped)
}
