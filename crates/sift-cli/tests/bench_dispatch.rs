//! End-to-end: `sift bench index --next-suite`, whose runner lives in `sift-study` while the
//! rest of `sift bench index` is the engine-neutral harness's, is reached from the CLI.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::sift;

#[test]
fn next_suite_runs_from_the_cli_and_refuses_pinning() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, out, err) = sift(&[
        "bench",
        "index",
        "--next-suite",
        "windows",
        "--window-kinds",
        "next",
        "--n",
        "600",
        "--range-lookups",
        "2",
        "--max-seconds",
        "1",
        "--json",
        "--db",
        db.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!rows.is_empty(), "{out}");
    assert!(
        rows.iter().all(|row| row.to_string().contains("next")),
        "{out}"
    );
    let (ok, _, err) = sift(&[
        "bench",
        "index",
        "--next-suite",
        "windows",
        "--client-cpus",
        "0",
    ]);
    assert!(!ok && err.contains("--next-suite"), "{err}");
}
