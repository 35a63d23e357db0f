//! The metric names the client library reports under (through the `metrics` facade: a service
//! that installs no recorder pays nothing). The server's `telemetry` describes them too.

/// Writes the ownership check refused, by the colour that owns the user (`unknown` without a table).
pub const CLIENT_MISROUTED: &str = "tidegate_client_misrouted_total";
/// Write checks by answer (`owned`, `misrouted`, `behind`, `frozen`).
pub const CLIENT_WRITE_CHECKS: &str = "tidegate_client_write_checks_total";
/// Messages a lane producer had acknowledged, by topic and colour (the `kafka` feature).
pub const LANE_PRODUCED: &str = "tidegate_lane_produced_total";
/// Messages handed to a lane consumer's application, by group, topic and zone (the `kafka`
/// feature).
pub const LANE_CONSUMED: &str = "tidegate_lane_consumed_total";
/// Handovers a lane consumer made, by group, topic, zone and outcome (`released` once every
/// other partition had passed the version, `timed_out` after the consumer's `handover` bound).
pub const LANE_HANDOVERS: &str = "tidegate_lane_handovers_total";
