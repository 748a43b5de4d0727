//! `sift advise` as a user runs it: the example workload gets a recommendation per attribute
//! from the built-in figures (a unique attribute gets a sync-full index), `--json` is valid
//! JSON, `--print-costs` names its source, and bad files or results fail with the field named.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

fn sift(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sift"))
        .arg("advise")
        .args(arguments)
        .output()
        .unwrap()
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/advise-example.json")
        .to_str()
        .unwrap()
        .to_owned()
}

#[test]
fn advises_each_attribute_of_the_example() {
    let output = sift(&["--workload", &example()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for attribute in ["user.id", "created_at", "handle"] {
        assert!(
            stdout.contains(&format!("attribute {attribute} (")),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains("cost figures: built-in figures"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("  choose ").count(), 3, "{stdout}");
    assert!(stdout.contains("runner-up"), "{stdout}");

    let output = sift(&["--workload", &example(), "--json"]);
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let advice = json["advice"].as_array().unwrap();
    assert_eq!(advice.len(), 3);
    let handle = advice.iter().find(|a| a["attribute"] == "handle").unwrap();
    // Unique: only a sync-full composite or eager index qualifies.
    assert_eq!(handle["maintenance"], "sync-full", "{handle}");
    assert!(["composite", "eager"].contains(&handle["kind"].as_str().unwrap()));
    let user = advice.iter().find(|a| a["attribute"] == "user.id").unwrap();
    // Read-your-writes is needed on user.id: async-simple is excluded with its reason.
    assert!(user["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["configuration"] == "composite:async-simple"
            && e["reason"].as_str().unwrap().contains("read-your-writes")));
    assert!((json["workload"]["mix"]["put"].as_f64().unwrap() - 0.55).abs() < 1e-9);

    let output = sift(&["--print-costs"]);
    assert!(output.status.success());
    let costs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(costs["source"].as_str().unwrap().contains("sift study"));
    assert!(costs["entries"].as_array().unwrap().len() >= 8);
}

#[test]
fn bad_files_fail_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "top_k": "ten"}]}"#,
            "attributes[0].top_k: expected a whole number",
        ),
        (
            r#"{"mix": {"puts": 1}, "attributes": [{"path": "a"}]}"#,
            "mix.puts: unknown field",
        ),
        (r#"{"attributes": [{"path": "a"}]}"#, "mix: missing"),
        (r#"{"mix": {"put": 1}"#, "not valid JSON"),
    ];
    for (position, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("w{position}.json"));
        std::fs::write(&path, text).unwrap();
        let output = sift(&["--workload", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{text}");
        assert!(stderr.contains(expected), "{text}: {stderr}");
        assert!(stderr.contains(&format!("w{position}.json")), "{stderr}");
    }
    let missing = sift(&["--workload", "/nonexistent/w.json"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("cannot read the workload"));
    // A results file that is not a study's.
    let not_results = dir.path().join("results.json");
    std::fs::write(&not_results, r#"{"schema_version": 1}"#).unwrap();
    let output = sift(&[
        "--workload",
        &example(),
        "--results",
        not_results.to_str().unwrap(),
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a `sift study` results.json"));
    // --workload is required (unless --print-costs).
    assert!(!sift(&[]).status.success());
}
