//! The dial: the blue share expressed as a whole number of units, and its percent form.
//!
//! Why units and not percent: the routing table can only move whole units, so the share is kept
//! as the count of blue units. A percent is accepted only when it names a whole number of units,
//! and the error lists the nearest values that do, so an operator is never silently rounded.

/// The blue share of a table with `units` units: `blue_units / units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub blue_units: u32,
    pub units: u32,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DialError {
    #[error("blue_percent must be a number between 0 and 100, got {0}")]
    PercentOutOfRange(f64),
    #[error(
        "blue_percent {percent} is not a whole number of the {units} units; the nearest values are {below} and {above} (steps of {step})"
    )]
    NotRepresentable { percent: f64, units: u32, below: f64, above: f64, step: f64 },
    #[error("blue_units must be between 0 and {units}, got {blue_units}")]
    UnitsOutOfRange { blue_units: u64, units: u32 },
}

impl Share {
    /// The share for `percent`, when it is a whole number of units.
    pub fn from_percent(percent: f64, units: u32) -> Result<Share, DialError> {
        if !percent.is_finite() || !(0.0..=100.0).contains(&percent) {
            return Err(DialError::PercentOutOfRange(percent));
        }
        let exact = percent * f64::from(units) / 100.0;
        let rounded = exact.round();
        // A tolerance far below one unit, but above float noise such as 0.1 + 0.2.
        if (exact - rounded).abs() > 1e-6 {
            let below = exact.floor();
            let above = exact.ceil();
            return Err(DialError::NotRepresentable {
                percent,
                units,
                below: percent_of(below as u32, units),
                above: percent_of(above as u32, units),
                step: percent_of(1, units),
            });
        }
        Ok(Share { blue_units: rounded as u32, units })
    }

    pub fn from_units(blue_units: u64, units: u32) -> Result<Share, DialError> {
        if blue_units > u64::from(units) {
            return Err(DialError::UnitsOutOfRange { blue_units, units });
        }
        Ok(Share { blue_units: blue_units as u32, units })
    }

    pub fn blue_percent(&self) -> f64 {
        percent_of(self.blue_units, self.units)
    }

    pub fn green_units(&self) -> u32 {
        self.units - self.blue_units
    }
}

/// `count / units` as a percent, rounded to 6 decimals so that JSON shows `14.285714`, not noise.
pub(crate) fn percent_of(count: u32, units: u32) -> f64 {
    let raw = f64::from(count) * 100.0 / f64::from(units);
    (raw * 1e6).round() / 1e6
}
