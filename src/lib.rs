//! tidegate: a blue-green, same-city active-active traffic coordinator.
//!
//! See ARCHITECTURE.md for the bird's-eye view. In short: [`core`] is the pure model, [`store`]
//! makes changes durable, [`coordinator`] serialises them and publishes snapshots, [`http`] is the
//! Rocket edge, [`lanes`] and [`mq`] put message-queue traffic on the same split, and [`cli`] is
//! the command line.

#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod config;
pub mod coordinator;
pub mod core;
pub mod demo;
pub mod drain_runner;
pub mod duration;
pub mod health;
pub mod http;
pub mod lanes;
pub mod mq;
pub mod server;
pub mod snapshot;
pub mod store;
pub mod subscribers;
pub mod telemetry;
