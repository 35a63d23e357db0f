//! Memory stays flat under tag load when nothing scrapes `/metrics` (the recorder's upkeep runs
//! on its own timer). Alone in its file: it reads the process's resident size.

use std::time::Duration;

use tidegate::core::{Genesis, State, UnitMode, UnitScheme, Zones};
use tidegate::telemetry::{self, TagCounters};

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[test]
fn memory_stays_flat_under_tag_load_without_scrapes() {
    let _handle = telemetry::install();
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let state = State::genesis(Genesis { scheme, blue_units: 50 }, Zones::default()).unwrap();
    let counters = TagCounters::new(state.table());
    let round = |n: usize| {
        for i in 0..n {
            counters.time(1e-6 * (i % 100) as f64);
        }
        std::thread::sleep(telemetry::UPKEEP_INTERVAL + Duration::from_millis(300));
    };
    // Warm up the allocator, then record 5 x 500 k samples (20 MB if they were all kept).
    round(500_000);
    let before = resident_bytes();
    for _ in 0..5 {
        round(500_000);
    }
    let grown = resident_bytes().saturating_sub(before);
    assert!(grown < 6 << 20, "resident memory grew by {} MiB over 2.5 M tags", grown >> 20);
}
