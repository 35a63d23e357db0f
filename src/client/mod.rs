//! The library services embed: decode and evaluate the routing table locally.

pub mod wire;

pub use wire::{DecodeError, decode_table};
