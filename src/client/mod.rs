//! The library services embed: decode and evaluate the routing table locally, and the MQ lane
//! membership calls.

pub mod lanes;
pub mod wire;

pub use wire::{DecodeError, decode_table};
