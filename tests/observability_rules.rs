//! `promtool check rules` and `promtool test rules` on the shipped rules (Debian's promtool).

use std::path::Path;
use std::process::Command;

fn promtool(args: &[&str], dir: &Path) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("promtool is required (scripts/test.sh installs it): {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn rules_pass_promtool_check_and_unit_tests() {
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards/rules");
    let checked = promtool(&["check", "rules", "tidegate.rules.yml"], &rules);
    assert!(checked.contains("SUCCESS"), "{checked}");
    let mut tests: Vec<String> = std::fs::read_dir(rules.join("tests"))
        .unwrap()
        .map(|e| format!("tests/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|n| n.ends_with(".yml"))
        .collect();
    tests.sort();
    assert!(!tests.is_empty());
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    let tested = promtool(&args, &rules);
    assert!(tested.contains("SUCCESS") && !tested.contains("FAILED"), "{tested}");
    // Every alert has a firing and a not-firing case in the tests.
    let rule_text = std::fs::read_to_string(rules.join("tidegate.rules.yml")).unwrap();
    let test_text: String =
        tests.iter().map(|t| std::fs::read_to_string(rules.join(t)).unwrap()).collect();
    for line in rule_text.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")) {
        let cases: Vec<&str> =
            test_text.split("alertname: ").skip(1).filter(|c| c.starts_with(line)).collect();
        assert!(cases.iter().any(|c| c.contains("exp_alerts: []")), "{line}: no not-firing case");
        assert!(cases.iter().any(|c| c.contains("exp_labels")), "{line}: no firing case");
    }
}
