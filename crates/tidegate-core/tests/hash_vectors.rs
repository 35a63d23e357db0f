//! `unit_of` against golden vectors from the reference XXH3 implementation (see the fixture).

use serde_json::Value;
use tidegate_core::{UnitMode, UnitScheme, hash_user_id, validate_user_id};

fn vectors() -> Vec<Value> {
    let text = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/unit_hash_vectors.json"
    ));
    let doc: Value = serde_json::from_str(text).expect("fixture is JSON");
    doc["vectors"].as_array().expect("vectors array").clone()
}

#[test]
fn hash_matches_reference_vectors() {
    let vectors = vectors();
    assert!(vectors.len() >= 30, "the fixture lost its vectors");
    for v in vectors {
        let user_id = v["user_id"].as_str().unwrap();
        validate_user_id(user_id).unwrap();
        let expected: u64 = v["xxh3_64"].as_str().unwrap().parse().unwrap();
        assert_eq!(hash_user_id(user_id), expected, "hash of {user_id:?}");
        for (units, unit) in v["units"].as_object().unwrap() {
            let scheme = UnitScheme::new(units.parse().unwrap(), UnitMode::Hash).unwrap();
            assert_eq!(
                u64::from(scheme.unit_of(user_id).unwrap().0),
                unit.as_u64().unwrap(),
                "unit of {user_id:?} with {units} units"
            );
        }
    }
}

#[test]
fn units_are_spread_evenly() {
    // 100 000 synthetic IDs over 100 units: every unit within 15% of the mean. A broken reduction
    // (say, using only the low byte) would leave units empty or doubled.
    let scheme = UnitScheme::new(100, UnitMode::Hash).unwrap();
    let mut counts = [0u32; 100];
    for i in 0..100_000 {
        counts[scheme.unit_of(&format!("user-{i}")).unwrap().0 as usize] += 1;
    }
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(*min > 850 && *max < 1150, "min {min}, max {max}");
}
