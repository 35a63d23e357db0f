//! Digits mode, driven by the table in the workspace's `tests/fixtures/digits_cases.json` (the Go
//! and Java clients run the same table).

use serde_json::Value;
use tidegate_core::{SchemeError, UnitError, UnitMode, UnitScheme};

#[test]
fn digits_mode_cases() {
    let doc: Value = serde_json::from_str(include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/digits_cases.json"
    )))
    .unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let units = case["units"].as_u64().unwrap() as u32;
        let skip = case["skip"].as_u64().unwrap() as u8;
        let user_id = case["user_id"].as_str().unwrap();
        let scheme = UnitScheme::new(units, UnitMode::Digits { skip }).unwrap();
        let got = scheme.unit_of(user_id);
        match case.get("unit") {
            Some(unit) => {
                assert_eq!(got.map(|u| u64::from(u.0)), Ok(unit.as_u64().unwrap()), "{case}")
            }
            None => assert!(matches!(got, Err(UnitError::NotNumeric { .. })), "{case}: {got:?}"),
        }
    }
}

#[test]
fn digits_mode_needs_a_power_of_ten() {
    assert_eq!(
        UnitScheme::new(64, UnitMode::Digits { skip: 0 }),
        Err(SchemeError::CountNotPowerOfTen(64))
    );
    assert!(UnitScheme::new(1, UnitMode::Hash).is_err());
    assert!(UnitScheme::new(10_001, UnitMode::Hash).is_err());
    assert!(UnitScheme::new(2, UnitMode::Hash).is_ok());
    assert!(UnitScheme::new(10_000, UnitMode::Hash).is_ok());
}
