//! The stateful services between the log and the edges.
//!
//! Each service keeps state in memory and does its I/O through injected sources (the log, the
//! clock, a `LagSource`, a health source), so none of them knows Rocket or rdkafka. Edges
//! (`http`, `mq`, `client`, `cli`) call into them; they never call an edge.

pub mod bearer;
pub mod capacity;
pub mod channel_expiry;
pub mod connections;
pub mod coordinator;
pub mod drain_runner;
pub mod edge;
pub mod gate_view;
pub mod health;
pub mod lane_authority;
pub mod lane_membership;
pub mod login_limit;
pub mod member_key;
pub mod peer_reports;
pub mod plan_config;
pub mod plan_runner;
pub mod plan_start;
pub mod plan_trigger;
pub mod preconditions;
pub mod presence;
pub mod receivers;
pub mod routing_frames;
pub mod staged_changes;
pub mod subscribers;
pub mod table_source;
pub mod tag_answer;
pub mod ui_sessions;
pub mod write_watch;
pub mod zone_history;
