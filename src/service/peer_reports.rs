//! How long what another replica reported counts: the one freshness rule the gates share
//! (`gate_view.rs` sends and merges the reports; `health`, `lane_membership` and `subscribers`
//! count a peer's part only while it is this fresh). Its own file, so those three need not
//! import `gate_view.rs`, which imports them.

/// A peer's inputs count for this long after it sent them (four of `gate_view::GATES_EVERY`).
pub const PEER_FRESH_MS: u64 = 2_000;
