//! Release channels as a fixture table (`tests/fixtures/channels.json`, a row per case): the
//! precedence pin > channel > unit map, one channel per service and domain, expiry, evacuation
//! suspending a channel and the restore resuming it, and bad input naming its field.

use serde_json::Value;
use tidegate_core::{
    Audit, ChannelFallback, ChannelSpec, Command, Envelope, Genesis, State, UnitMode, UnitMove,
    UnitScheme, UnitSet, ZoneClass, ZoneSpec, Zones, share_units,
};

const NOW_MS: u64 = 1_000;

fn start() -> State {
    let zones = Zones::from_specs(vec![
        ZoneSpec::new("az-b", "blue", ZoneClass::Rzone),
        ZoneSpec::new("az-a", "green", ZoneClass::Rzone),
        ZoneSpec::new("az-c", "red", ZoneClass::Rzone),
    ])
    .unwrap();
    let scheme = UnitScheme::new(100, UnitMode::Digits { skip: 0 }).unwrap();
    let state = State::genesis(Genesis { scheme, blue_units: 50 }, zones).unwrap();
    apply(&state, Command::AddDomain { name: "search".into() }).unwrap().0
}

/// Applies a command at the fixture's clock: the next state and the audit's "after" text.
fn apply(state: &State, command: Command) -> Result<(State, String), String> {
    let envelope = Envelope {
        expected_version: state.version(),
        command,
        audit: Audit { by: "test".into(), at_ms: NOW_MS, reason: "fixture".into() },
    };
    match state.apply(&envelope) {
        Ok(Some((next, applied))) => Ok((next, applied.to)),
        Ok(None) => Ok((state.clone(), String::new())),
        Err(e) => Err(e.to_string()),
    }
}

fn spec(state: &State, c: &Value) -> ChannelSpec {
    let zones = state.table().zones();
    let text = |k: &str| c[k].as_str().map(str::to_owned);
    ChannelSpec {
        name: text("name").unwrap(),
        domain: text("domain"),
        services: c["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().into())
            .collect(),
        zone: zones.by_lane(c["zone"].as_str().unwrap()).unwrap(),
        percent: c["percent"].as_f64(),
        units: text("units").map(|u| UnitSet::parse(&u, 100).unwrap()),
        users: c["users"]
            .as_array()
            .map(|a| a.iter().map(|u| u.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default(),
        fallback: text("fallback")
            .map_or(ChannelFallback::Global, |f| ChannelFallback::parse(&f).unwrap()),
        expires_at_ms: c["expires_at_ms"].as_u64(),
    }
}

fn command(state: &State, step: &Value) -> Result<Command, String> {
    let zones = state.table().zones();
    if let Some(c) = step.get("channel") {
        let channel = spec(state, c).resolve(100, NOW_MS).map_err(|e| e.to_string())?;
        return Ok(Command::PutChannel { channel });
    }
    if let Some(m) = step.get("move") {
        let units = UnitSet::parse(m[0].as_str().unwrap(), 100).unwrap();
        let zone = zones.by_lane(m[1].as_str().unwrap()).unwrap();
        let domain = m.get(2).and_then(Value::as_str).map(str::to_owned);
        return Ok(Command::MoveUnits { moves: vec![UnitMove { units, zone, domain }] });
    }
    if let Some(p) = step.get("pin") {
        let color = zones.by_lane(p[1].as_str().unwrap()).unwrap();
        return Ok(Command::Pin { user_id: p[0].as_str().unwrap().into(), color });
    }
    if let Some(name) = step.get("delete") {
        return Ok(Command::DeleteChannel { name: name.as_str().unwrap().into(), expired: false });
    }
    if let Some(name) = step.get("expire") {
        return Ok(Command::DeleteChannel { name: name.as_str().unwrap().into(), expired: true });
    }
    if let Some(lane) = step.get("retire") {
        return Ok(Command::RetireZone { zone: zones.by_lane(lane.as_str().unwrap()).unwrap() });
    }
    panic!("unknown step {step}");
}

#[test]
fn precedence_rows() {
    let fixture: Value = serde_json::from_str(include_str!("fixtures/channels.json")).unwrap();
    let cases = fixture["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut state = start();
        for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
            let result = command(&state, step).and_then(|c| apply(&state, c));
            match (step["error"].as_str(), result) {
                (Some(expected), Err(got)) => {
                    assert!(got.contains(expected), "{name}: step {i}: `{got}` lacks `{expected}`")
                }
                (Some(expected), Ok(_)) => {
                    panic!("{name}: step {i} was accepted, wanted `{expected}`")
                }
                (None, Err(got)) => panic!("{name}: step {i} refused: {got}"),
                (None, Ok((next, to))) => {
                    if let Some(audit) = step["audit"].as_str() {
                        assert!(
                            to.contains(audit),
                            "{name}: step {i}: audit `{to}` lacks `{audit}`"
                        );
                    }
                    state = next;
                }
            }
        }
        let table = state.table();
        for ask in case["asks"].as_array().into_iter().flatten() {
            let (user, service, domain) =
                (ask[0].as_str().unwrap(), ask[1].as_str(), ask[2].as_str());
            let expected = ask[3].as_str().unwrap();
            let got = match table.tag_service(domain, user, service) {
                Ok(Some((tag, rule))) => format!("{}@{}", table.lane(tag.color), rule.describe()),
                Ok(None) => "no domain".to_owned(),
                Err(e) => format!("!{e}"),
            };
            if let Some(refusal) = expected.strip_prefix('!') {
                assert!(got.starts_with('!') && got.contains(refusal), "{name}: {ask}: got {got}");
            } else {
                assert_eq!(got, expected, "{name}: {ask}");
            }
        }
        if let Some(suspended) = case["suspended"].as_array() {
            let got: Vec<&str> = table
                .channels()
                .values()
                .filter(|c| c.suspended)
                .map(|c| c.name.as_str())
                .collect();
            let want: Vec<&str> = suspended.iter().map(|s| s.as_str().unwrap()).collect();
            assert_eq!(got, want, "{name}: suspended channels");
        }
        if let Some(share) = case["share"].as_array() {
            let channel = &table.channels()[share[0].as_str().unwrap()];
            let count = share[1].as_u64().unwrap() as u32;
            assert_eq!(channel.units.len(), count, "{name}");
            assert_eq!(channel.units, share_units(&channel.name, 100, count), "{name}");
            // Only selected users of the channel's own order move, and 10 of 100 units do.
            let moved = (0..100u32)
                .filter(|u| {
                    let user = format!("10{u:02}");
                    let (tag, _) = table.tag_service(None, &user, Some("orders")).unwrap().unwrap();
                    tag.color != table.map().owner(*u)
                })
                .count();
            assert!(moved <= count as usize && moved > 0, "{name}: {moved} moved");
        }
    }
}

#[test]
fn without_a_service_or_a_channel_tag_service_is_tag() {
    let state = start();
    let table = state.table();
    for u in 0..100u32 {
        let user = format!("77{u:02}");
        let (tag, rule) = table.tag_service(None, &user, Some("orders")).unwrap().unwrap();
        assert_eq!(tag, table.tag(&user).unwrap());
        assert_eq!(rule.describe(), "unit");
    }
}
