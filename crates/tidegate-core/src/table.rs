//! The versioned routing table: which colour every unit and every pinned user belongs to.
//!
//! Architecture invariant: unit `u` is blue exactly when `u < blue_units`. The units therefore
//! change colour in one fixed order (ascending for blue -> green moves out of the top, i.e. the
//! highest blue unit turns green first), so any sequence of dial moves is monotone and sticky:
//! moving from `a` to `b` blue units flips exactly the units between them, and `a -> b -> a`
//! restores the original table. Clients in other languages need only this rule and the hash.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::color::{Color, ColorZones};
use super::dial::Share;
use super::unit::{Unit, UnitError, UnitScheme};

/// What a request without a user ID gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// A colour drawn at random, weighted by the current blue share.
    Random,
    /// A client error: untagged requests are a bug in the caller.
    Reject,
}

/// The answer to "which colour is this user?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    pub color: Color,
    pub unit: Unit,
    /// True when a pin, not the unit, decided the colour.
    pub pinned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TagError {
    #[error(transparent)]
    InvalidUserId(#[from] UnitError),
    #[error("the request has no user_id and the fallback is `reject`")]
    Untagged,
}

/// One immutable version of the routing state. Cheap to clone only through `Arc`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingTable {
    pub(crate) version: u64,
    pub(crate) scheme: UnitScheme,
    pub(crate) blue_units: u32,
    pub(crate) pins: Arc<BTreeMap<String, Color>>,
    pub(crate) zones: ColorZones,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("blue_units {blue_units} exceeds the {units} units")]
    BlueUnitsOutOfRange { blue_units: u32, units: u32 },
    #[error("pinned user id is invalid: {0}")]
    InvalidPin(UnitError),
}

impl RoutingTable {
    /// A table from its parts, as a client decodes it from the watch stream or `GET /v1/routing`.
    /// The coordinator never builds tables this way: its tables come from `State::apply`.
    pub fn from_parts(
        version: u64,
        scheme: UnitScheme,
        blue_units: u32,
        pins: BTreeMap<String, Color>,
        zones: ColorZones,
    ) -> Result<RoutingTable, TableError> {
        if blue_units > scheme.count() {
            return Err(TableError::BlueUnitsOutOfRange { blue_units, units: scheme.count() });
        }
        for user_id in pins.keys() {
            super::validate_user_id(user_id).map_err(TableError::InvalidPin)?;
        }
        Ok(RoutingTable { version, scheme, blue_units, pins: Arc::new(pins), zones })
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn scheme(&self) -> &UnitScheme {
        &self.scheme
    }

    pub fn units(&self) -> u32 {
        self.scheme.count()
    }

    pub fn share(&self) -> Share {
        Share { blue_units: self.blue_units, units: self.units() }
    }

    pub fn blue_units(&self) -> u32 {
        self.blue_units
    }

    pub fn blue_percent(&self) -> f64 {
        self.share().blue_percent()
    }

    pub fn zones(&self) -> &ColorZones {
        &self.zones
    }

    pub fn zone_of(&self, color: Color) -> &str {
        self.zones.zone_of(color)
    }

    pub fn pins(&self) -> &BTreeMap<String, Color> {
        &self.pins
    }

    #[inline]
    pub fn color_of_unit(&self, unit: Unit) -> Color {
        if unit.0 < self.blue_units { Color::Blue } else { Color::Green }
    }

    /// The colour of every unit, in unit order.
    pub fn unit_colors(&self) -> impl Iterator<Item = Color> + '_ {
        (0..self.units()).map(|u| self.color_of_unit(Unit(u)))
    }

    /// Tags a user: a pin wins over the unit. The ID must be valid (see `validate_user_id`).
    #[inline]
    pub fn tag(&self, user_id: &str) -> Result<Tag, UnitError> {
        let unit = self.scheme.unit_of(user_id)?;
        // The emptiness check keeps the common no-pins case free of a map lookup.
        if !self.pins.is_empty()
            && let Some(&color) = self.pins.get(user_id)
        {
            return Ok(Tag { color, unit, pinned: true });
        }
        Ok(Tag { color: self.color_of_unit(unit), unit, pinned: false })
    }

    /// The colour for a request without a user ID. `draw` is a uniform sample in `[0, 1)`,
    /// supplied by the caller because the core draws no random numbers itself.
    pub fn untagged(&self, fallback: Fallback, draw: f64) -> Result<Color, TagError> {
        match fallback {
            Fallback::Reject => Err(TagError::Untagged),
            Fallback::Random => {
                let blue = f64::from(self.blue_units) / f64::from(self.units());
                Ok(if draw < blue { Color::Blue } else { Color::Green })
            }
        }
    }

    /// The same table under a different colour-to-zone mapping (the mapping is configuration,
    /// not logged state, so it is attached after replay).
    pub fn with_zones(mut self, zones: ColorZones) -> RoutingTable {
        self.zones = zones;
        self
    }
}
