//! tidegate: a blue-green, same-city active-active traffic coordinator.
//!
//! See ARCHITECTURE.md for the bird's-eye view. The modules are layers, each using only the ones
//! above it in this list (`tests/tidy.rs` checks it):
//!
//! 1. [`core`]: the pure model (units, routing table, dial, drains, lane maths). No I/O.
//! 2. [`telemetry`], [`duration`], [`config`]: metric names and handles, parsing, settings.
//! 3. [`store`]: the durable log of commands; state is the replay of the log.
//! 4. [`service`]: the stateful services between the log and the edges: the coordinator, the
//!    drain runner, subscribers, lane membership, zone health.
//! 5. Edges: [`http`] (Rocket), [`http_fast`] (the tag path on hyper alone), [`mq`] (rdkafka),
//!    [`client`] (the library services embed), [`cli`], [`edge`] (`tidegate edge`, the local evaluator for gateways and OpenFeature), plus
//!    [`server`] and [`demo`], which wire them together.

#![forbid(unsafe_code)]

// Layer 1: pure.
pub mod core;
// Layer 2: below everything that reports to it or reads settings.
pub mod config;
pub mod duration;
pub mod telemetry;
// Layer 3: durability.
pub mod store;
// Layer 4: stateful services.
pub mod service;
// Layer 5: edges and wiring.
pub mod cli;
pub mod client;
pub mod demo;
pub mod edge;
pub mod http;
pub mod http_fast;
pub mod mq;
pub mod server;
