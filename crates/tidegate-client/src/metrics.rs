//! The metric names the client library reports under (through the `metrics` facade: a service
//! that installs no recorder pays nothing). The server's `telemetry` describes them too.

/// Writes the ownership check refused, by the colour that owns the user (`unknown` without a table).
pub const CLIENT_MISROUTED: &str = "tidegate_client_misrouted_total";

/// Write checks by answer (`owned`, `misrouted`, `behind`, `frozen`).
pub const CLIENT_WRITE_CHECKS: &str = "tidegate_client_write_checks_total";
