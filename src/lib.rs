//! tidegate: a blue-green, same-city active-active traffic coordinator.
//!
//! See ARCHITECTURE.md for the bird's-eye view. The layers are crates where the compiler can
//! keep them apart, and modules of this crate above that, each using only the ones above it in
//! this list (`tests/tidy.rs` checks it):
//!
//! 1. [`core`] (the `tidegate-core` crate): the pure model (units, routing table, dial, drains,
//!    plans, lane maths). No I/O.
//! 2. [`client`] (the `tidegate-client` crate): the library services embed (Router, headers,
//!    TLS, the lane membership calls). No Rocket, no rdkafka, no async runtime; its `kafka`
//!    feature (enabled here) adds the lane producer and consumer, which [`mq`] re-exports.
//! 3. [`telemetry`], [`logging`], [`duration`], [`config`]: metric names and handles, logs,
//!    parsing, settings.
//! 4. [`store`]: the durable log of commands; state is the replay of the log.
//! 5. [`service`]: the stateful services between the log and the edges: the coordinator, the
//!    drain runner, subscribers, lane membership, zone health.
//! 6. Edges: [`http`] (Rocket), [`http_fast`] (the tag path on hyper alone), [`mq`] (rdkafka),
//!    [`cli`], [`edge`] (`tidegate edge`, the local evaluator for gateways and OpenFeature),
//!    [`fence`] (`tidegate fence`, the ownership fence at the database), plus
//!    [`server`] and [`demo`], which wire them together.

#![forbid(unsafe_code)]

// Layer 1: pure (the `tidegate-core` crate, so the compiler keeps it free of I/O crates).
pub use tidegate_core as core;
// Layer 2: the library services embed (the `tidegate-client` crate: no Rocket; rdkafka only
// in its `kafka` feature, the lane producer and consumer).
pub use tidegate_client as client;
// Layer 3: below everything that reports to it or reads settings.
pub mod config;
pub mod duration;
pub mod logging;
pub mod telemetry;
// Layer 4: durability.
pub mod store;
// Layer 5: stateful services.
pub mod service;
// Layer 6: edges and wiring.
pub mod cli;
pub mod demo;
pub mod edge;
pub mod fence;
pub mod http;
pub mod http_fast;
pub mod mq;
pub mod server;
