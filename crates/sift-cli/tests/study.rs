//! End-to-end: `sift study` as a user runs it — a small run writes the report files, and a
//! Ctrl-C (SIGINT) after the first experiment keeps it, exits non-zero and prints the
//! `--only` command that runs the rest into the same folder.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn study_writes_the_report_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let output = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args([
            "study",
            "--preset",
            "tiny",
            "--n",
            "300",
            "--configs",
            "lazy,hologram",
        ])
        .args(["--only", "static,next", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("finished in"), "{stderr}");
    for file in ["index.html", "results.json", "static.csv", "next.csv"] {
        assert!(out.join(file).is_file(), "{file} missing; {stderr}");
    }
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(html.contains("hologram") && html.contains("not measured"));
    let bad = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args(["study", "--only", "eighth", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown experiment"));
}

#[test]
fn ctrl_c_keeps_finished_experiments_and_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let child = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args([
            "study",
            "--preset",
            "tiny",
            "--n",
            "1500",
            "--configs",
            "lazy,composite",
        ])
        .args(["--only", "static,queries,mixed,bloom-compression"])
        .args(["--out", out.to_str().unwrap()])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt as soon as the first experiment's results are written (the three others take
    // far longer than delivering the signal).
    let started = Instant::now();
    while !out.join("static.csv").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "experiment 1 never finished"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains("Resume with"), "{stderr}");
    assert!(stderr.contains("--only"), "{stderr}");
    assert!(
        !stderr.contains("--only static"),
        "experiment 1 finished: {stderr}"
    );
    assert!(stderr.contains("bloom-compression"), "{stderr}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["experiments"][0]["id"], "static");
}
