//! Bad configuration stops start-up, naming the key and the reason.

mod common;

use std::process::Command;

/// Runs `tidegate serve` on `toml` and returns its stderr; it must fail to start.
fn start_failure(toml: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, toml).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(!output.status.success(), "started with {toml:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn each_bad_value_names_its_key() {
    let cases = [
        ("[units]\ncount = 1", "units.count"),
        ("[drain]\ninterval = \"18446744073709551615ms\"", "drain.interval"),
        ("[units]\ncount = 64\nmode = \"digits\"", "units.mode"),
        ("[units]\nmode = \"modulo\"", "units.mode"),
        ("initial_blue_percent = 150", "initial_blue_percent"),
        ("initial_blue_percent = 33.3", "initial_blue_percent"),
        ("fallback = \"guess\"", "fallback"),
        ("[colors]\nblue = \"az-a\"\ngreen = \"az-a\"", "colors.green"),
        ("[colors]\nblue = \"zone b!\"", "colors.blue"),
        ("[server]\naddress = \"localhost:80\"", "server.address"),
        ("[server]\nport = 70000", "port"),
        ("[[operators]]\nname = \"a\"\ntoken_sha256 = \"abc\"", "operators[0].token_sha256"),
        (
            "[[operators]]\nname = \"a\"\ntoken_sha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\nrole = \"admin\"",
            "operators[0].role",
        ),
        ("unts = 5", "unts"),
        ("[limits]\nmax_batch = 0", "limits.max_batch"),
        ("[drain.evacuate]\non_breach = \"flee\"", "drain.evacuate.on_breach"),
        ("[drain.evacuate]\nstep_percent = 0", "drain.evacuate.step_percent"),
        ("[zones.az-c]\ncapacity_rps = 100", "zones.az-c"),
        ("[zones.az-a]\ncapacity_rps = -1", "zones.az-a.capacity_rps"),
        ("[zones.az-a]\ncapacity_query = \"up\"", "zones.az-a.capacity_query"),
        ("[capacity]\nheadroom = 1.0", "capacity.headroom"),
        ("[node]\nid = \"r1\"\nzone = \"az-a\"\nurl = \"ftp://a:1\"", "node.url"),
        ("[node]\nid = \"r1\"\nzone = \"az-a\"\nurl = \"http://\"", "node.url"),
        ("[node]\nid = \"r 1\"\nzone = \"az-a\"", "node.id"),
    ];
    for (toml, key) in cases {
        let stderr = start_failure(toml);
        assert!(stderr.contains(key), "{toml:?} should name `{key}`, got: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn environment_overrides_the_file_and_flags_override_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.toml");
    std::fs::write(&path, "initial_blue_percent = 20\n[units]\ncount = 1000\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--port", "0", "--config"])
        .arg(&path)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("TIDEGATE_INITIAL_BLUE_PERCENT", "12.5")
        .env("TIDEGATE_UNITS__COUNT", "7")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // 12.5 % is not representable with the 7 units from the environment: the env won over the
    // file's 1000 units (where 12.5 % would be fine).
    assert!(stderr.contains("initial_blue_percent") && stderr.contains("7 units"), "{stderr}");
}

#[test]
fn missing_config_file_is_an_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_tidegate"))
        .args(["serve", "--config", "/nonexistent/tidegate.toml"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not exist"));
}
