//! Several routing domains on one coordinator (issue 22), on the real binary: a `search` domain
//! added as a copy of the default one, a linked change that moves both domains in one version
//! (or, with one bad move, neither), tags per domain agreeing between the coordinator, the edge
//! (`?domain=`, the gate's `x-tidegate-domain`, OFREP's one flag per domain) and a `Router`,
//! users agreeing across domains wherever the maps do, an evacuation emptying the zone in every
//! domain, and a restart replaying it all.

mod common;

use common::gateway::{Edge, free_port};
use common::*;
use serde_json::{Value, json};

fn routing(url: &str) -> Value {
    get_json(&format!("{url}/v1/routing")).1
}

fn version(url: &str) -> u64 {
    routing(url)["version"].as_u64().unwrap()
}

fn lanes(url: &str, domain: Option<&str>, users: &[String]) -> Vec<String> {
    let mut body = json!({"user_ids": users});
    if let Some(d) = domain {
        body["domain"] = json!(d);
    }
    let mut response = agent().post(&format!("{url}/v1/tag")).send_json(body).unwrap();
    let status = response.status();
    let body: Value = response.body_mut().read_json().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["domain"].as_str(), domain, "{}", body["domain"]);
    body["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["color"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_linked_change_moves_two_domains_in_one_version_and_every_reader_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tidegate.toml");
    std::fs::write(&file, config_toml("initial_blue_percent = 50\n[zones.az-c]\nlane = \"red\"\n"))
        .unwrap();
    let data = dir.path().join("data");
    let server = Server::start(&file, &data);
    let url = server.url.clone();
    let edge_config = dir.path().join("edge.toml");
    std::fs::write(&edge_config, "").unwrap();
    let edge = Edge::start(&edge_config, &url, &dir.path().join("edge.json"), free_port());
    let users: Vec<String> = (0..10_000).map(|i| format!("shopper-{i}")).collect();

    // A new domain starts as a copy: every user's zone agrees across the two.
    let (status, body) = post_json(
        &format!("{url}/v1/domains"),
        OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": version(&url), "reason": "search traffic"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["domains"]["search"]["unit_map"], body["unit_map"]);
    assert_eq!(lanes(&url, None, &users), lanes(&url, Some("search"), &users));
    let (status, body) = post_json(
        &format!("{url}/v1/domains"),
        OPERATOR_TOKEN,
        json!({"name": "search", "expected_version": version(&url), "reason": "again"}),
    );
    assert_eq!((status, body["error"].as_str()), (409, Some("domain_exists")), "{body}");

    // A linked change with one bad move changes neither domain.
    let before = version(&url);
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-19", "zone": "az-c"},
                         {"units": "0-19", "zone": "az-c", "domain": "serach"}],
               "expected_version": before, "reason": "typo"}),
    );
    assert_eq!((status, body["error"].as_str()), (400, Some("unknown_domain")), "{body}");
    assert!(body["detail"].as_str().unwrap().starts_with("moves[1].domain"), "{body}");
    assert_eq!(version(&url), before, "nothing moved");

    // The linked change: the default domain gives 0-19 to az-c, search gives 50-69 to az-c.
    let (status, body) = put_json(
        &format!("{url}/v1/units"),
        OPERATOR_TOKEN,
        json!({"moves": [{"units": "0-19", "zone": "az-c"},
                         {"units": "50-69", "zone": "az-c", "domain": "search"}],
               "expected_version": before, "reason": "linked move"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"].as_u64(), Some(before + 1), "one version for both domains");
    assert_eq!(body["moved_units"], 40);
    let (_, audit) = get_json(&format!("{url}/v1/audit?limit=1"));
    let record = &audit["entries"][0];
    assert_eq!(record["action"], "units_move");
    assert!(record["to"].as_str().unwrap().contains("domain search"), "{record}");

    // Every reader agrees per domain, and the domains agree wherever their maps do.
    edge.wait_for_version(before + 1);
    let table = tidegate::client::decode_table(&routing(&url)).unwrap();
    let router = tidegate::client::Router::fixed(table.clone());
    for domain in [None, Some("search")] {
        let server = lanes(&url, domain, &users);
        let at_edge = lanes(&edge.url, domain, &users);
        let local: Vec<String> = users
            .iter()
            .map(|u| router.tag_in(domain.unwrap_or("default"), u).unwrap().lane.into_owned())
            .collect();
        assert_eq!(server, at_edge, "edge, domain {domain:?}");
        assert_eq!(server, local, "Router, domain {domain:?}");
    }
    let (default, search) = (lanes(&url, None, &users), lanes(&url, Some("search"), &users));
    let scheme = table.scheme();
    let mut agree = 0;
    for (i, user) in users.iter().enumerate() {
        let unit = scheme.unit_of(user).unwrap().0;
        let same_owner = !(0..20).contains(&unit) && !(50..70).contains(&unit);
        assert_eq!(default[i] == search[i], same_owner, "{user} (unit {unit})");
        agree += usize::from(same_owner);
    }
    println!("{agree} of {} users agree across domains (60 of 100 units)", users.len());
    let (status, body) = get_json(&format!("{url}/v1/tag?user_id=a&domain=nope"));
    assert_eq!((status, body["error"].as_str()), (400, Some("unknown_domain")), "{body}");

    // The gate and OFREP take the domain too.
    let probe = users.iter().position(|_| true).unwrap();
    for (domain, expected) in [(None, &default[probe]), (Some("search"), &search[probe])] {
        let mut request =
            agent().get(&format!("{}/v1/gate", edge.url)).header("x-user-id", &users[probe]);
        if let Some(d) = domain {
            request = request.header("x-tidegate-domain", d);
        }
        let response = request.call().unwrap();
        assert_eq!(response.headers().get("x-tidegate-color").unwrap(), expected.as_str());
    }
    let mut response = agent()
        .post(&format!("{}/ofrep/v1/evaluate/flags", edge.url))
        .send_json(json!({"context": {"targetingKey": users[probe]}}))
        .unwrap();
    assert_eq!(response.status(), 200);
    let flags: Value = response.body_mut().read_json().unwrap();
    let flags = flags["flags"].as_array().unwrap();
    assert_eq!(flags.len(), 2, "{flags:?}");
    assert_eq!(flags[1]["key"], "tidegate-color.search");
    assert_eq!(flags[1]["value"].as_str(), Some(search[probe].as_str()));

    // Evacuating az-c empties it in every domain, in one version.
    let v = version(&url);
    let (status, body) = post_json(
        &format!("{url}/v1/units/evacuate"),
        OPERATOR_TOKEN,
        json!({"zone": "az-c", "expected_version": v, "reason": "az-c down"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"].as_u64(), Some(v + 1));
    assert!(!lanes(&url, None, &users).contains(&"red".to_owned()));
    assert!(!lanes(&url, Some("search"), &users).contains(&"red".to_owned()));

    // A restart replays the domains.
    let last = routing(&url);
    drop(server);
    let server = Server::start(&file, &data);
    let replayed = routing(&server.url);
    for key in ["version", "unit_map", "domains"] {
        assert_eq!(replayed[key], last[key], "{key}");
    }
}
