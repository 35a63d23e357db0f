//! Criterion benchmarks for the tagging hot path: `unit_of` and a full table lookup.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tidegate::core::{
    Audit, Command, Envelope, Genesis, State, UnitMode, UnitScheme, ZoneId, Zones, validate_user_id,
};

fn state(units: u32, mode: UnitMode, pins: usize) -> State {
    let scheme = UnitScheme::new(units, mode).unwrap();
    let mut state =
        State::genesis(Genesis { scheme, blue_units: units / 2 }, Zones::default()).unwrap();
    for i in 0..pins {
        let env = Envelope {
            expected_version: state.version(),
            command: Command::Pin { user_id: format!("{}", 9_000_000 + i), color: ZoneId::BLUE },
            audit: Audit { by: "bench".into(), at_ms: 0, reason: "bench".into() },
        };
        state = state.apply(&env).unwrap().unwrap().0;
    }
    state
}

fn bench(c: &mut Criterion) {
    let ids: Vec<String> = (0..1024).map(|i| format!("2088{:012}", i * 7919)).collect();
    let mut i = 0usize;
    let mut next = || {
        i = (i + 1) & 1023;
        ids[i].as_str()
    };

    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    c.bench_function("unit_of/hash/100", |b| b.iter(|| scheme.unit_of(black_box(next()))));

    let plain = state(100, UnitMode::Hash, 0);
    c.bench_function("tag/hash/100 units/no pins", |b| {
        b.iter(|| {
            let id = black_box(next());
            validate_user_id(id).unwrap();
            plain.table().tag(id)
        })
    });

    let pinned = state(10_000, UnitMode::Hash, 1000);
    c.bench_function("tag/hash/10000 units/1000 pins", |b| {
        b.iter(|| pinned.table().tag(black_box(next())))
    });

    let digits = state(100, UnitMode::Digits { skip: 0 }, 0);
    c.bench_function("tag/digits/100 units", |b| b.iter(|| digits.table().tag(black_box(next()))));
}

criterion_group!(benches, bench);
criterion_main!(benches);
