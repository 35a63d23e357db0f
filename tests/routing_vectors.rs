//! Golden vectors of the whole published rule (issues 22 and 24): `tests/fixtures/routing_vectors.json`,
//! written by `scripts/routing_vectors.py` from `scripts/reference_tag.py` (no tidegate code), holds
//! a published table with three zones, a non-dial unit map, pins to three lanes, a second domain and
//! two release channels (`global` and `reject` fallbacks), as published and with both channels
//! suspended, and 2 080 tags over users, domains and services. The table decodes as any client
//! decodes it (`client::decode_table`) and the core's `tag_service` must give every row. The Go and
//! Java clients check the same file.

use serde_json::Value;
use tidegate::core::{Rule, TagError};

#[test]
fn every_row_of_the_golden_routing_vectors_is_the_cores_answer() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/routing_vectors.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for fixture in doc["tables"].as_array().unwrap() {
        let name = fixture["name"].as_str().unwrap();
        let table = tidegate::client::decode_table(&fixture["table"])
            .unwrap_or_else(|e| panic!("{name}: the published table does not decode: {e}"));
        for row in fixture["rows"].as_array().unwrap() {
            let row = row.as_array().unwrap();
            let user = row[0].as_str().unwrap();
            let (domain, service) = (row[1].as_str(), row[2].as_str());
            let case = format!("{name}: user {user:?}, domain {domain:?}, service {service:?}");
            let got = table.tag_service(domain, user, service);
            if let Some(error) = row[8].as_str() {
                assert_eq!(error, "channel_unavailable", "{case}");
                assert!(matches!(got, Err(TagError::ChannelUnavailable(_))), "{case}: {got:?}");
                *reasons.entry(error.to_owned()).or_default() += 1;
                checked += 1;
                continue;
            }
            let (tag, rule) = got.unwrap_or_else(|e| panic!("{case}: {e}")).expect("domain exists");
            assert_eq!(table.lane(tag.color), row[3].as_str().unwrap(), "{case}: lane");
            assert_eq!(table.zone_of(tag.color), row[4].as_str().unwrap(), "{case}: zone");
            if let Some(unit) = row[5].as_u64() {
                assert_eq!(u64::from(tag.unit.0), unit, "{case}: unit");
            }
            assert_eq!(tag.pinned, row[6].as_bool().unwrap(), "{case}: pinned");
            let reason = rule.describe();
            assert_eq!(reason, row[7].as_str().unwrap(), "{case}: reason");
            assert_eq!(matches!(rule, Rule::Pin), tag.pinned, "{case}");
            *reasons.entry(reason.into_owned()).or_default() += 1;
            checked += 1;
        }
    }
    eprintln!("[figures] routing vectors: {checked} rows agree: {reasons:?}");
    assert_eq!(checked, 2080);
    // The file covers what it says it covers.
    for reason in ["pin", "unit", "channel:orders-v2", "channel:billing-v3", "channel_unavailable"]
    {
        assert!(reasons.get(reason).is_some_and(|n| *n > 0), "no row decided by {reason}");
    }
}

/// The freeze of a channel change that the write-check variants add to each table: `orders` and
/// `billing` writes in the default domain of units 0-49 and of `alice`. Go and Java use the same.
static CHANNEL_FREEZE: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    serde_json::json!({"channel": "orders-v2", "domain": "default", "services": ["billing", "orders"],
                       "units": "0-49", "users": ["alice"]})
});

/// The write check of a write by a service on the same tables, as published and with units 0-49
/// frozen in both domains: a release channel that selects the user owns their writes of that
/// service (owned in its zone, misrouted elsewhere), a suspended `reject` channel leaves them
/// without an owner, a newer caller is behind, and every other write is the map's check. One
/// freeze rule: a freeze covers every write of the users it names, whichever rule routes them
/// (pin, channel or map), so with units 0-49 frozen, or with a channel change's freeze
/// ([`CHANNEL_FREEZE`]), the writes it covers are frozen with the row's zone as owner, and every
/// other write is answered as published. The Go and Java clients check the same rule on the
/// same rows.
#[test]
fn a_services_write_check_follows_the_rows_channel_or_the_maps_check() {
    use tidegate::core::WriteCheck;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/routing_vectors.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for fixture in doc["tables"].as_array().unwrap() {
        for variant in ["published", "frozen", "channel freeze"] {
            let frozen = variant == "frozen";
            let mut raw = fixture["table"].clone();
            if frozen {
                raw["frozen"] = serde_json::json!({"default": "0-49", "search": "0-49"});
            }
            if variant == "channel freeze" {
                raw["channel_freeze"] = CHANNEL_FREEZE.clone();
            }
            let table = tidegate::client::decode_table(&raw).unwrap();
            for row in fixture["rows"].as_array().unwrap() {
                let row = row.as_array().unwrap();
                let Some(service) = row[2].as_str() else { continue };
                let (user, domain) = (row[0].as_str().unwrap(), row[1].as_str());
                let case = format!("{variant}: user {user:?}, domain {domain:?}, {service}");
                let unit = table.tag_in(table.map_of(domain).unwrap(), user).unwrap().unit.0;
                let reason = row[7].as_str().unwrap_or("");
                // The channel freeze covers orders and billing writes in the default domain of
                // units 0-49 and of `alice`; the map freeze every write of units 0-49 in both
                // domains; either whichever rule routes the user.
                let covered = (variant == "channel freeze"
                    && domain.is_none()
                    && ["orders", "billing"].contains(&service)
                    && (unit < 50 || user == "alice"))
                    || (frozen && unit < 50 && matches!(domain, None | Some("default" | "search")));
                for zone in table.zones().ids() {
                    let version = Some(table.version());
                    let got = table.check_write_for(domain, Some(service), user, zone, version);
                    if row[8].as_str().is_some() {
                        assert!(
                            matches!(got, Err(TagError::ChannelUnavailable(_))),
                            "{case}: {got:?}"
                        );
                        *seen.entry("channel_unavailable".into()).or_default() += 1;
                        continue;
                    }
                    let got = got.unwrap().unwrap();
                    if covered {
                        match got {
                            WriteCheck::Frozen { owner, .. } => {
                                assert_eq!(table.zone_of(owner), row[4].as_str().unwrap(), "{case}")
                            }
                            other => panic!("{case}: {other:?}"),
                        }
                        let rule = match reason {
                            "pin" => "pin",
                            r if r.starts_with("channel:") => "channel",
                            _ => "map",
                        };
                        *seen.entry(format!("{variant}/{rule}")).or_default() += 1;
                        continue;
                    }
                    if reason.starts_with("channel:") {
                        let owned = table.zone_of(zone) == row[4].as_str().unwrap();
                        match got {
                            WriteCheck::Owned => assert!(owned, "{case}"),
                            WriteCheck::Misrouted { owner } => {
                                assert!(!owned, "{case}");
                                assert_eq!(
                                    table.zone_of(owner),
                                    row[4].as_str().unwrap(),
                                    "{case}"
                                );
                            }
                            other => panic!("{case}: {other:?}"),
                        }
                        *seen.entry(format!("channel/{}", got.as_str())).or_default() += 1;
                    } else {
                        let by_map =
                            table.check_write(domain, user, zone, version).unwrap().unwrap();
                        assert_eq!(got, by_map, "{case}");
                        assert!(!matches!(got, WriteCheck::Frozen { .. }), "{case}");
                        *seen.entry(format!("map/{}", got.as_str())).or_default() += 1;
                    }
                }
                if row[8].is_null() {
                    let newer = Some(table.version() + 1);
                    let zone = table.zones().ids().next().unwrap();
                    let got = table.check_write_for(domain, Some(service), user, zone, newer);
                    assert!(matches!(got, Ok(Some(WriteCheck::Behind { .. }))), "{case}: {got:?}");
                }
            }
        }
    }
    eprintln!("[figures] service write checks: {seen:?}");
    for key in [
        "channel/owned",
        "channel/misrouted",
        "map/owned",
        "map/misrouted",
        "channel_unavailable",
        "frozen/map",
        "frozen/channel",
        "channel freeze/channel",
        "channel freeze/map",
        "channel freeze/pin",
    ] {
        assert!(seen.get(key).is_some_and(|n| *n > 0), "no check answered {key}: {seen:?}");
    }
}

/// The global write check, a row per case of `tests/fixtures/global_write_checks.json` on
/// `tests/fixtures/routing_base.json` with the row's global writer: behind, frozen, read-only,
/// misrouted, owned, in that order. The Go and Java clients run the same rows.
#[test]
fn every_global_write_check_row_is_the_cores_answer() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let read = |name: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/{name}")).unwrap()).unwrap()
    };
    let base = read("routing_base.json");
    let doc = read("global_write_checks.json");
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let mut raw = base.clone();
        raw["version"] = case["table_version"].clone();
        raw["global_writer"] = serde_json::json!({
            "zone": case["writer"], "read_only": case["read_only"], "frozen": case["frozen"]
        });
        let table = tidegate::client::decode_table(&raw).unwrap();
        let local = table.zones().resolve(case["local"].as_str().unwrap()).unwrap();
        let got = table.check_global_write(local, case["incoming"].as_u64());
        assert_eq!(got.as_str(), case["expect"].as_str().unwrap(), "{name}: {got:?}");
        // Owned names the local zone: it is the global writer.
        let owner = match got {
            tidegate::core::GlobalWriteCheck::Owned => Some(table.zone_of(local).to_owned()),
            _ => got.owner().map(|z| table.zone_of(z).to_owned()),
        };
        assert_eq!(owner.as_deref(), case["owner"].as_str(), "{name}: {got:?}");
        // A copy whose lease ran out never answers owned.
        if got.as_str() == "owned" {
            assert_eq!(got.leased(false).as_str(), "unconfirmed", "{name}");
        }
        *seen.entry(got.as_str().to_owned()).or_default() += 1;
    }
    eprintln!("[figures] global write checks: {seen:?}");
    assert_eq!(seen.len(), 5, "every answer is exercised: {seen:?}");
}
