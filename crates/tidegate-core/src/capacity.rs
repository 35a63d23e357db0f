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
    let moved = f64::from(moved_units.min(source_units));
    let (added, estimated) = match &source.load_rps {
        Ok(_) if source_units == 0 => (0.0, false),
        Ok(rps) => (rps * moved / f64::from(source_units), false),
        Err(_) if moved_units == 0 => (0.0, false),
        Err(_) if receiving_units > 0 => {
            (current_rps * f64::from(moved_units) / f64::from(receiving_units), true)
        }
        Err(why) => {
            return unknown(format!(
                "the load of {} is unknown ({why}) and {} serves no users to estimate it from",
                source.zone, receiving.zone
            ));
        }
    };
    let projection = Projection {
        zone: receiving.zone.clone(),
        current_rps,
        projected_rps: current_rps + added,
        capacity_rps,
        allowed_rps: capacity_rps * (1.0 - headroom),
        estimated,
        source_note: source.load_note.clone(),
        receiving_note: receiving.load_note.clone(),
    };
    if projection.projected_rps > projection.allowed_rps {
        Verdict::Exceeds(projection)
    } else {
        Verdict::Fits(projection)
    }
}
