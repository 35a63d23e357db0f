//! The Helm chart (deploy/helm/tidegate) renders the manual's topology (issue 26): `helm template`
//! for the file-log values and the Kafka values (scripts/helm.sh installs helm from the Go module
//! proxy and renders both), parsed here, and checked for what docs/src/ha.md and
//! docs/src/helm.md promise: three coordinator replicas spread one per zone over two zones and the
//! third site, probes on /readyz and /healthz, the edge as a DaemonSet that knows every replica,
//! tokens only from Secrets, a PrometheusRule equal to dashboards/rules/tidegate.rules.yml, the
//! dashboards ConfigMap equal to dashboards/*.json, and coordinator configs the code accepts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde_json::Value;
use tidegate::config::{Config, Overrides, Settings};

const CHART: &str = "deploy/helm/tidegate";
const NAMESPACE: &str = "tidegate";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The helm binary (scripts/helm.sh installs it once and prints its path).
fn helm() -> PathBuf {
    let out = Command::new("bash")
        .arg(root().join("scripts/helm.sh"))
        .output()
        .expect("bash runs scripts/helm.sh");
    assert!(
        out.status.success(),
        "scripts/helm.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `helm template` of the chart with a values file and extra `--set`s, as parsed documents.
fn render(values: &str, sets: &[&str]) -> Vec<Value> {
    let chart = root().join(CHART);
    let mut cmd = Command::new(helm());
    cmd.args(["template", "tidegate"]).arg(&chart).args(["--namespace", NAMESPACE]);
    cmd.arg("-f").arg(chart.join(values));
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm template -f {values} {sets:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&String::from_utf8(out.stdout).unwrap())
}

fn parse(text: &str) -> Vec<Value> {
    let mut docs = Vec::new();
    for part in text.split("\n---") {
        let yaml: serde_norway::Value = serde_norway::from_str(part).expect("rendered YAML parses");
        if yaml.is_null() {
            continue;
        }
        docs.push(serde_json::to_value(yaml).expect("YAML as JSON"));
    }
    assert!(docs.len() > 5, "only {} documents rendered", docs.len());
    docs
}

fn all<'d>(docs: &'d [Value], kind: &str) -> Vec<&'d Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn one<'d>(docs: &'d [Value], kind: &str) -> &'d Value {
    let found = all(docs, kind);
    assert_eq!(found.len(), 1, "expected one {kind}, found {}", found.len());
    found[0]
}

fn named<'d>(docs: &'d [Value], kind: &str, name: &str) -> &'d Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} named {name}"))
}

fn container<'d>(workload: &'d Value, name: &str) -> &'d Value {
    workload["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name} in {}", workload["metadata"]["name"]))
}

fn kafka() -> Vec<Value> {
    render("values-kafka.yaml", &[])
}

fn file_log() -> Vec<Value> {
    render("values.yaml", &[])
}

/// Whether `selector` (matchLabels) selects pods labelled `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().expect("matchLabels is a map");
    !selector.is_empty() && selector.iter().all(|(k, v)| &labels[k] == v)
}

#[test]
fn kafka_mode_runs_three_coordinators_one_per_site_spread_by_zone() {
    let docs = kafka();
    let sts = one(&docs, "StatefulSet");
    assert_eq!(sts["spec"]["replicas"], 3, "three coordinator replicas");
    let pod = &sts["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    assert!(selects(&sts["spec"]["selector"]["matchLabels"], labels));

    let spread = pod["spec"]["topologySpreadConstraints"].as_array().expect("spread constraints");
    let by_zone = spread
        .iter()
        .find(|c| c["topologyKey"] == "topology.kubernetes.io/zone")
        .expect("a spread constraint by topology.kubernetes.io/zone");
    assert_eq!(by_zone["maxSkew"], 1);
    assert_eq!(by_zone["whenUnsatisfiable"], "DoNotSchedule", "a hard spread, not a preference");
    assert!(
        selects(&by_zone["labelSelector"]["matchLabels"], labels),
        "the spread constraint counts the coordinator pods themselves: {by_zone}"
    );

    // Only the two business zones and the third site, so three replicas with skew 1 land one
    // on each: losing any one site leaves two replicas (and two of three Kafka controllers).
    let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let expr = &terms[0]["matchExpressions"][0];
    assert_eq!(expr["key"], "topology.kubernetes.io/zone");
    assert_eq!(expr["operator"], "In");
    let zones: Vec<&str> =
        expr["values"].as_array().unwrap().iter().map(|z| z.as_str().unwrap()).collect();
    assert_eq!(zones, ["az-a", "az-b", "site-c"]);

    // The colours run in the two business zones, never on the third site.
    let config = coordinator_config(&docs);
    assert_eq!(config["colors"]["blue"], "az-b");
    assert_eq!(config["colors"]["green"], "az-a");
    assert_eq!(config["store"]["kind"], "kafka");
    let bootstrap = config["store"]["kafka"]["bootstrap"].as_str().unwrap();
    assert_eq!(bootstrap.split(',').count(), 3, "three brokers: {bootstrap}");

    // Each replica names itself ([node]) through the downward API: its pod name, the zone label
    // Kubernetes copies from its node onto the pod, its URL under the headless Service. No init
    // container (so no kubectl image) and no access to the Kubernetes API.
    assert!(pod["spec"].get("initContainers").is_none(), "an init container: {}", pod["spec"]);
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    let coordinator = container(sts, "coordinator");
    let env: Vec<&Value> = coordinator["env"].as_array().unwrap().iter().collect();
    let var = |name: &str| -> usize {
        env.iter()
            .position(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in the coordinator's env"))
    };
    let (id, zone, url) =
        (var("TIDEGATE_NODE__ID"), var("TIDEGATE_NODE__ZONE"), var("TIDEGATE_NODE__URL"));
    assert_eq!(env[id]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
    assert_eq!(
        env[zone]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.labels['topology.kubernetes.io/zone']"
    );
    let headless = sts["spec"]["serviceName"].as_str().unwrap();
    assert_eq!(
        env[url]["value"],
        format!("http://$(TIDEGATE_NODE__ID).{headless}.{NAMESPACE}.svc:8080")
    );
    assert!(id < url, "$(TIDEGATE_NODE__ID) expands only in a variable listed after it");
    assert_eq!(
        coordinator["args"],
        serde_json::json!(["serve", "--config", "/etc/tidegate/coordinator.toml"])
    );
    let pdb = one(&docs, "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "drain one replica at a time");
}

#[test]
fn file_log_mode_runs_one_coordinator_on_a_volume_and_refuses_more() {
    let docs = file_log();
    let sts = one(&docs, "StatefulSet");
    assert_eq!(sts["spec"]["replicas"], 1, "a file log has one writer");
    let claim = &sts["spec"]["volumeClaimTemplates"][0];
    let mount = container(sts, "coordinator")["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == claim["metadata"]["name"])
        .expect("the data volume is mounted")
        .clone();
    let config = coordinator_config(&docs);
    assert_eq!(config["store"]["kind"], "file");
    assert_eq!(config["data_dir"], mount["mountPath"], "the log lives on the persistent volume");
    assert!(sts["spec"]["template"]["spec"].get("initContainers").is_none());

    let chart = root().join(CHART);
    let out = Command::new(helm())
        .args(["template", "tidegate"])
        .arg(&chart)
        .arg("-f")
        .arg(chart.join("values.yaml"))
        .args(["--set", "coordinator.replicas=3"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "three replicas on one file log rendered");
    assert!(String::from_utf8_lossy(&out.stderr).contains("coordinator.replicas must be 1"));
}

fn probe_path(c: &Value, probe: &str) -> String {
    let get = &c[probe]["httpGet"];
    let port = get["port"].as_str().expect("a named probe port");
    assert!(
        c["ports"].as_array().unwrap().iter().any(|p| p["name"] == port),
        "{probe} targets port {port}, which the container does not declare"
    );
    get["path"].as_str().expect("an HTTP probe").to_owned()
}

#[test]
fn probes_use_readyz_for_readiness_and_healthz_for_liveness() {
    for docs in [kafka(), file_log()] {
        let sts = one(&docs, "StatefulSet");
        let ds = one(&docs, "DaemonSet");
        for c in [container(sts, "coordinator"), container(ds, "edge")] {
            assert_eq!(probe_path(c, "readinessProbe"), "/readyz", "{}", c["name"]);
            assert_eq!(probe_path(c, "livenessProbe"), "/healthz", "{}", c["name"]);
        }
        // Both paths exist on the coordinator (src/http/openapi.json lists its routes).
        let api: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("src/http/openapi.json")).unwrap(),
        )
        .unwrap();
        assert!(api["paths"]["/readyz"]["get"].is_object());
        assert!(api["paths"]["/healthz"]["get"].is_object());
    }
}

#[test]
fn the_edge_is_a_daemonset_that_knows_every_replica() {
    let docs = kafka();
    let ds = one(&docs, "DaemonSet");
    let edge = container(ds, "edge");
    let args: Vec<&str> =
        edge["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(args[0], "edge");
    let urls = args[args.iter().position(|a| *a == "--coordinator").unwrap() + 1];
    let sts = one(&docs, "StatefulSet");
    let sts_name = sts["metadata"]["name"].as_str().unwrap();
    let headless = named(&docs, "Service", sts["spec"]["serviceName"].as_str().unwrap());
    assert_eq!(headless["spec"]["clusterIP"], "None");
    assert!(selects(&headless["spec"]["selector"], &sts["spec"]["template"]["metadata"]["labels"]));
    let port = container(sts, "coordinator")["ports"][0]["containerPort"].as_u64().unwrap();
    let expected: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "http://{sts_name}-{i}.{}.{NAMESPACE}.svc:{port}",
                headless["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(urls.split(',').collect::<Vec<_>>(), expected, "the edge's coordinator list");
    // Gateways reach the edge on their own node.
    let service = named(&docs, "Service", ds["metadata"]["name"].as_str().unwrap());
    assert_eq!(service["spec"]["internalTrafficPolicy"], "Local");
    assert!(selects(&service["spec"]["selector"], &ds["spec"]["template"]["metadata"]["labels"]));
}

/// Env names that carry a credential: they must come from a Secret.
fn is_credential(name: &str) -> bool {
    ["TOKEN", "SECRET", "KEY", "OPERATORS", "PASSWORD"].iter().any(|w| name.contains(w))
}

#[test]
fn tokens_and_keys_come_only_from_secrets() {
    let token = "tg_probe_edge_token_0123456789";
    let hash = "ab".repeat(32);
    let tag_key = "cd".repeat(32);
    let sets = [
        format!("secrets.edgeToken={token}"),
        format!("secrets.edgeTagKey={tag_key}"),
        format!("secrets.serviceTokensSha256[0]={hash}"),
        "secrets.operators[0].name=alice".to_owned(),
        format!("secrets.operators[0].tokenSha256={hash}"),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    for values in ["values.yaml", "values-kafka.yaml"] {
        let docs = render(values, &sets);
        let secrets: BTreeSet<&str> =
            all(&docs, "Secret").iter().map(|s| s["metadata"]["name"].as_str().unwrap()).collect();
        let mut credentials = 0;
        for workload in all(&docs, "StatefulSet").into_iter().chain(all(&docs, "DaemonSet")) {
            let spec = &workload["spec"]["template"]["spec"];
            let containers = spec["containers"].as_array().unwrap().iter();
            let inits = spec["initContainers"].as_array().into_iter().flatten();
            for c in containers.chain(inits) {
                for env in c["env"].as_array().into_iter().flatten() {
                    let name = env["name"].as_str().unwrap();
                    if !is_credential(name) {
                        continue;
                    }
                    credentials += 1;
                    assert!(
                        env.get("value").is_none(),
                        "{name} is a literal value in {}",
                        c["name"]
                    );
                    let secret = env["valueFrom"]["secretKeyRef"]["name"]
                        .as_str()
                        .unwrap_or_else(|| panic!("{name} is not read from a Secret: {env}"));
                    assert!(secrets.contains(secret), "{name} reads Secret {secret}, not rendered");
                }
            }
        }
        assert!(credentials >= 6, "{values}: only {credentials} credential variables");
        // The literal token, hash and key appear in the Secret and nowhere else.
        for doc in &docs {
            let text = doc.to_string();
            for literal in [token, hash.as_str(), tag_key.as_str()] {
                if text.contains(literal) {
                    assert_eq!(
                        doc["kind"], "Secret",
                        "{values}: {literal} leaks into a {}",
                        doc["kind"]
                    );
                }
            }
        }
        let secret = one(&docs, "Secret");
        assert_eq!(secret["stringData"]["edge-token"], token);
        // What the Secret holds for TIDEGATE_OPERATORS and TIDEGATE_SERVICE_TOKENS_SHA256 is
        // what the binary reads from those variables (figment parses their values).
        let settings: Settings = Figment::from(Serialized::defaults(Settings::default()))
            .merge(("operators", toml_inline(&secret["stringData"]["operators"])))
            .merge((
                "service_tokens_sha256",
                toml_inline(&secret["stringData"]["service-tokens-sha256"]),
            ))
            .extract()
            .expect("the Secret's operators and service tokens load");
        assert_eq!(settings.operators.len(), 1);
        assert_eq!(settings.operators[0].name, "alice");
        assert_eq!(settings.operators[0].role, "operator");
        assert_eq!(settings.service_tokens_sha256, vec![hash.clone()]);
    }
}

/// A TOML inline value (as the Secret holds it) parsed the way figment parses an env variable.
fn toml_inline(value: &Value) -> figment::value::Value {
    let text = value.as_str().expect("a string in the Secret");
    let doc: figment::value::Value = Figment::from(Toml::string(&format!("v = {text}")))
        .extract_inner("v")
        .unwrap_or_else(|e| panic!("{text} is not a TOML value: {e}"));
    doc
}

/// The coordinator's tidegate.toml from the rendered ConfigMap, as JSON.
fn coordinator_toml(docs: &[Value]) -> String {
    all(docs, "ConfigMap")
        .into_iter()
        .find_map(|c| c["data"]["coordinator.toml"].as_str())
        .expect("a ConfigMap with coordinator.toml")
        .to_owned()
}

fn coordinator_config(docs: &[Value]) -> Value {
    Figment::from(Toml::string(&coordinator_toml(docs)))
        .extract()
        .expect("coordinator.toml is TOML")
}

#[test]
fn the_rendered_configs_are_accepted_by_the_code() {
    for (values, docs) in [("values.yaml", file_log()), ("values-kafka.yaml", kafka())] {
        let mut toml = coordinator_toml(&docs);
        if values == "values-kafka.yaml" {
            // What TIDEGATE_NODE__ID, _ZONE and _URL give replica 1 in zone az-b.
            toml.push_str(
                "\n[node]\nid = \"tidegate-coordinator-1\"\nzone = \"az-b\"\n\
                 url = \"http://tidegate-coordinator-1.tidegate-coordinator-headless.tidegate.svc:8080\"\n",
            );
        }
        let figment =
            Figment::from(Serialized::defaults(Settings::default())).merge(Toml::string(&toml));
        let dir = tempfile::tempdir().unwrap();
        let overrides =
            Overrides { data_dir: Some(dir.path().to_path_buf()), ..Overrides::default() };
        if let Err(e) = Config::from_figment(figment, &overrides) {
            panic!("{values}: the rendered coordinator.toml is refused: {e}\n{toml}");
        }
        // Integers stay integers (Helm's toToml would write units.count = 100.0).
        assert!(toml.contains("count = 100\n") || toml.ends_with("count = 100"), "{toml}");
    }
}

fn rules_file() -> Value {
    let text = std::fs::read_to_string(root().join("dashboards/rules/tidegate.rules.yml")).unwrap();
    let yaml: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    serde_json::to_value(yaml).unwrap()
}

#[test]
fn the_prometheus_rule_holds_every_rule_of_the_repository() {
    let file = rules_file();
    let alerts: BTreeSet<String> = file["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_owned))
        .collect();
    assert!(alerts.contains("TidegateZoneHealthUnknown") && alerts.len() >= 10, "{alerts:?}");
    for docs in [file_log(), kafka()] {
        let rule = one(&docs, "PrometheusRule");
        assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
        let rendered: BTreeMap<String, &Value> = rule["spec"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap())
            .filter_map(|r| r["alert"].as_str().map(|a| (a.to_owned(), r)))
            .collect();
        let missing: Vec<&String> = alerts.iter().filter(|a| !rendered.contains_key(*a)).collect();
        assert!(missing.is_empty(), "alerts missing from the PrometheusRule: {missing:?}");
        // Not only the names: every group and rule (expressions, durations, labels, the
        // annotations' {{ $labels }} templates) as in the file.
        assert_eq!(
            rule["spec"]["groups"], file["groups"],
            "the PrometheusRule differs from the rules file"
        );

        // The scrape jobs the rules select are the ones the ServiceMonitors set.
        let text = file.to_string();
        let selected: BTreeSet<String> = ["tidegate", "tidegate-edge"]
            .iter()
            .filter(|j| text.contains(&format!("job=\\\"{j}\\\"")))
            .map(|j| j.to_string())
            .collect();
        assert_eq!(selected.len(), 2, "the rules select both jobs");
        let jobs: BTreeSet<String> = all(&docs, "ServiceMonitor")
            .iter()
            .flat_map(|m| m["spec"]["endpoints"].as_array().unwrap())
            .flat_map(|e| e["relabelings"].as_array().unwrap())
            .filter(|r| r["targetLabel"] == "job")
            .map(|r| r["replacement"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(jobs, selected);
    }
}

#[test]
fn the_dashboards_config_map_holds_every_dashboard() {
    let dir = root().join("dashboards");
    let mut boards: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    boards.sort();
    assert!(boards.len() >= 4, "{boards:?}");
    let docs = kafka();
    let map = all(&docs, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["labels"]["grafana_dashboard"] == "1")
        .expect("a dashboards ConfigMap labelled for Grafana's sidecar");
    let data = map["data"].as_object().unwrap();
    assert_eq!(data.len(), boards.len(), "{:?}", data.keys().collect::<Vec<_>>());
    for board in &boards {
        let name = board.file_name().unwrap().to_str().unwrap();
        let want = std::fs::read_to_string(board).unwrap();
        assert_eq!(data[name].as_str(), Some(want.as_str()), "{name} differs");
        serde_json::from_str::<Value>(&want).expect("a dashboard is JSON");
    }
    assert!(Path::new(&root().join(CHART).join("files/dashboards")).is_symlink());
}
