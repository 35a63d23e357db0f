//! Criterion benchmark for the client library's local `Router::tag`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use tidegate::client::Router;
use tidegate::core::{Genesis, State, UnitMode, UnitScheme, Zones};

fn bench(c: &mut Criterion) {
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let state = State::genesis(Genesis { scheme, blue_units: 50 }, Zones::default()).unwrap();
    let router = Router::fixed(state.table().clone());
    let ids: Vec<String> = (0..1024).map(|i| format!("user-{}", i * 7919)).collect();
    let mut i = 0usize;
    c.bench_function("router.tag/100 units", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            router.tag(black_box(&ids[i]))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
