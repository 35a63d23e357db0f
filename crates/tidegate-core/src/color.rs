//! The two lanes (colours) and the zone each one runs in.

use std::fmt;
use std::str::FromStr;

/// A logical cluster. Every user belongs to exactly one colour at any routing version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Color {
    Blue,
    Green,
}

impl Color {
    pub const ALL: [Color; 2] = [Color::Blue, Color::Green];

    pub fn as_str(self) -> &'static str {
        match self {
            Color::Blue => "blue",
            Color::Green => "green",
        }
    }

    pub fn other(self) -> Color {
        match self {
            Color::Blue => Color::Green,
            Color::Green => Color::Blue,
        }
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a colour: expected `blue` or `green`")]
pub struct ParseColorError(pub String);

impl FromStr for Color {
    type Err = ParseColorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "blue" => Ok(Color::Blue),
            "green" => Ok(Color::Green),
            other => Err(ParseColorError(other.to_owned())),
        }
    }
}

/// Which availability zone each colour is deployed in (from configuration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColorZones {
    pub blue: String,
    pub green: String,
}

impl ColorZones {
    pub fn zone_of(&self, color: Color) -> &str {
        match color {
            Color::Blue => &self.blue,
            Color::Green => &self.green,
        }
    }

    /// The colour deployed in `zone`, if the zone is one of ours.
    pub fn color_in(&self, zone: &str) -> Option<Color> {
        if zone == self.blue {
            Some(Color::Blue)
        } else if zone == self.green {
            Some(Color::Green)
        } else {
            None
        }
    }
}

impl Default for ColorZones {
    /// The layout of the source design: blue in zone B, green in zone A.
    fn default() -> Self {
        ColorZones { blue: "az-b".into(), green: "az-a".into() }
    }
}
