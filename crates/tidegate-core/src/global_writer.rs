//! The global writer: the zone that takes writes to global data (data of no user), as the
//! routing table publishes it. Its own file so that the staged changes can name it without
//! the table (`staged.rs` is below `table.rs`).

use crate::zone::ZoneId;

/// The zone that takes writes to global data (the GZone), whether global data is read-only
/// (an operator stopped global writes), and whether global writes are frozen by a move of the
/// global writer in progress (freeze -> switch -> unfreeze, as a unit move).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GlobalWriter {
    pub zone: Option<ZoneId>,
    pub read_only: bool,
    pub frozen: bool,
}
