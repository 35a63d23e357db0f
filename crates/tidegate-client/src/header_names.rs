//! The names of the `x-tidegate-*` headers a tag travels in between hops, in a file of their
//! own so that `headers.rs` (reading them back) and `write.rs` (answering a forwarded write)
//! both use them without importing each other.

pub const COLOR_HEADER: &str = "x-tidegate-color";
pub const VERSION_HEADER: &str = "x-tidegate-version";
