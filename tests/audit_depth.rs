//! The cost of an audit page read from the log does not grow with how deep in the history it is
//! (issue 21). Every page older than the in-memory trail used to decode the whole file and
//! replay its prefix, so a page cost about a start-up and paging a history of N entries cost
//! about N² / (2 × limit) entries; now a page decodes its own lines (`store::history`).
//!
//! Measured in one run, as ratios (no absolute thresholds: the machine is shared):
//! - pages of 100 records at three depths of a 100 000-entry file log (ending just below
//!   versions 101, 50 000 and 99 000) against the same page size at the shallowest place a log
//!   serves pages from, just below the in-memory trail of a 10 100-entry log: at most 3 times
//!   its cost (the median of several runs each);
//! - the control: the replaced algorithm (decode the file, replay the prefix: still
//!   `store::audit_before`, the reference a page must equal) measured the same way, which the
//!   same bound refuses;
//! - and paging the whole 100 000-entry history, 1 500 a page, with every page equal to the
//!   replay's.
//!
//! `AUDIT_DEPTH_BEFORE_WHOLE=1` also times paging the whole history with the replaced algorithm
//! (about a minute and a half in a debug build), for docs/src/benchmarks.md.

mod common;

use std::time::{Duration, Instant};

use tidegate::service::coordinator::Coordinator;
use tidegate::store::{AUDIT_IN_MEMORY, AuditRecord, LOG_FILE, audit_before, decode_log};

use common::audit::write_log;

/// How many times each new-path page is timed (the median counts).
const RUNS: usize = 15;
/// A deep page may cost at most this many times the shallow page.
const BOUND: f64 = 3.0;
const LIMIT: usize = 100;

struct Log {
    coordinator: Coordinator,
    data: std::path::PathBuf,
    config: tidegate::config::Config,
    _dir: tempfile::TempDir,
}

fn log_of(entries: u64) -> Log {
    let dir = tempfile::tempdir().unwrap();
    let toml = common::config_toml("");
    let data = dir.path().join("data");
    write_log(&toml, &data, entries as usize - 1);
    let config = common::config(&toml, &data);
    let coordinator = tidegate::server::open_coordinator(&config).expect("the log opens");
    assert_eq!(coordinator.state().version(), entries);
    Log { coordinator, data, config, _dir: dir }
}

/// A page as the replaced algorithm read it: the whole file decoded, the prefix replayed.
fn replay_page(log: &Log, before: u64) -> Vec<AuditRecord> {
    let bytes = std::fs::read(log.data.join(LOG_FILE)).unwrap();
    let entries = decode_log(&bytes).unwrap();
    audit_before(&entries, &log.config.zones, before, LIMIT).unwrap()
}

fn new_page(log: &Log, before: u64) -> Vec<AuditRecord> {
    log.coordinator.audit_from_log(LIMIT, before).expect("a page").records
}

/// The median of `runs` timings of `page`, the timings' "min-max" for the report, and the last
/// result.
fn timed<T>(runs: usize, mut page: impl FnMut() -> T) -> (Duration, String, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let started = Instant::now();
        last = Some(page());
        times.push(started.elapsed());
    }
    times.sort();
    let range = format!("{}-{}", ms(times[0]), ms(times[runs - 1]));
    (times[runs / 2], range, last.unwrap())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1_000.0)
}

#[test]
fn a_deep_page_costs_what_a_shallow_one_does_and_the_replay_did_not() {
    let started = Instant::now();
    let short = log_of(AUDIT_IN_MEMORY as u64 + 100);
    let long = log_of(100_000);
    println!("wrote and opened the two logs in {} ms", started.elapsed().as_millis());
    // The shallowest page a log serves from the log: just below the in-memory trail.
    let shallow_before = short.coordinator.state().version() + 1 - AUDIT_IN_MEMORY as u64;
    // The first page of each log builds its line index (a newline scan); not what is compared.
    let _ = new_page(&short, shallow_before);
    let started = Instant::now();
    let _ = new_page(&long, 101);
    println!(
        "first page of the 100 000-entry log (with its line index): {}",
        ms(started.elapsed())
    );

    let (shallow, range, page) = timed(RUNS, || new_page(&short, shallow_before));
    assert_eq!(page, replay_page(&short, shallow_before), "the page equals the replay's");
    let (old_shallow, _, _) = timed(1, || replay_page(&short, shallow_before));
    println!(
        "shallow page (100 records below version {shallow_before} of {}): median {} ({range}, {RUNS} runs); replay: {}",
        short.coordinator.state().version(),
        ms(shallow),
        ms(old_shallow)
    );
    let mut old_ratios = Vec::new();
    for before in [101, 50_000, 99_000] {
        let (deep, range, page) = timed(RUNS, || new_page(&long, before));
        let (old, _, replayed) = timed(1, || replay_page(&long, before));
        assert_eq!(page, replayed, "the page below {before} equals the replay's");
        assert_eq!(page.first().map(|r| r.version), Some(before - 1));
        let ratio = deep.as_secs_f64() / shallow.as_secs_f64();
        let old_ratio = old.as_secs_f64() / old_shallow.as_secs_f64();
        println!(
            "page of 100 below version {before} of 100 000: median {} ({range}), {ratio:.2} x the shallow page; replay: {} ({old_ratio:.1} x)",
            ms(deep),
            ms(old)
        );
        assert!(
            ratio <= BOUND,
            "a page below version {before} of 100 000 costs {ratio:.2} x the shallow page ({} against {})",
            ms(deep),
            ms(shallow)
        );
        old_ratios.push(old_ratio);
    }
    // The control: the replaced algorithm grows with the log, and the bound catches it.
    assert!(
        old_ratios.iter().all(|r| *r > BOUND),
        "the replay's deep pages should cost more than {BOUND} x its shallow page: {old_ratios:?}"
    );

    // The whole history, 1 500 a page, newest first, each page equal to the replay's.
    let started = Instant::now();
    let mut before = 100_001;
    let mut pages = Vec::new();
    while before > 1 {
        let page = long.coordinator.audit_from_log(1_500, before).unwrap();
        before = page.next_before.unwrap_or(1);
        pages.push(page.records);
    }
    let whole = started.elapsed();
    let versions: Vec<u64> = pages.iter().flatten().map(|r| r.version).collect();
    assert!(versions == (1..=100_000).rev().collect::<Vec<u64>>(), "every version once, in order");
    println!("paged all 100 000 records (1 500 a page, {} pages) in {}", pages.len(), ms(whole));
    let entries = decode_log(&std::fs::read(long.data.join(LOG_FILE)).unwrap()).unwrap();
    for i in [1, pages.len() / 2, pages.len() - 1] {
        let page = &pages[i];
        let newest = page[0].version;
        let replayed = audit_before(&entries, &long.config.zones, newest + 1, page.len()).unwrap();
        assert_eq!(page, &replayed, "page {i}");
    }

    if std::env::var_os("AUDIT_DEPTH_BEFORE_WHOLE").is_some() {
        let started = Instant::now();
        let mut before = 100_001;
        while before > 1 {
            let bytes = std::fs::read(long.data.join(LOG_FILE)).unwrap();
            let entries = decode_log(&bytes).unwrap();
            let page = audit_before(&entries, &long.config.zones, before, 1_500).unwrap();
            before = page.last().map_or(1, |r| r.version);
        }
        println!(
            "paged all 100 000 records (1 500 a page) with the replay in {}",
            ms(started.elapsed())
        );
    }
}
