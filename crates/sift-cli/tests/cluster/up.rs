//! `sift cluster up`, `status`, `create-collection` and the `--cluster` document commands,
//! as a user runs them.

use crate::processes::free_port;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

fn sift(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Three consecutive free ports (checked by binding them).
fn free_port_run() -> u16 {
    for _ in 0..100 {
        let base = free_port();
        if base > 65_000 {
            continue;
        }
        if (1..3).all(|i| std::net::TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no three consecutive free ports");
}

#[test]
fn cluster_up_serves_documents_and_reports_status_and_stops_every_node_on_sigterm() {
    let root = tempfile::tempdir().unwrap();
    let base = free_port_run();
    let mut up = Command::new(env!("CARGO_BIN_EXE_sift"))
        .args([
            "cluster",
            "up",
            "--nodes",
            "3",
            "--base-port",
            &base.to_string(),
            "--dir",
        ])
        .arg(root.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = up.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = sender.send(line);
        }
    });
    let mut printed = Vec::new();
    while !printed.iter().any(|l: &String| l.starts_with("stop:")) {
        printed.push(
            receiver
                .recv_timeout(Duration::from_secs(90))
                .expect("cluster up output"),
        );
    }
    let pids: Vec<i32> = printed
        .iter()
        .filter_map(|l| l.split("(pid ").nth(1))
        .map(|rest| rest.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3, "{printed:?}");

    let at = format!("127.0.0.1:{}", base + 1);
    let (ok, out, err) = sift(&[
        "cluster",
        "create-collection",
        "--at",
        &at,
        "--name",
        "docs",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("ready"), "{out}");
    let (ok, _, err) = sift(&[
        "put",
        "--cluster",
        &at,
        "--collection",
        "docs",
        "--doc",
        r#"{"id":"a","n":1}"#,
    ]);
    assert!(ok, "{err}");
    let third = format!("127.0.0.1:{}", base + 2);
    let (ok, out, err) = sift(&[
        "get",
        "--cluster",
        &third,
        "--collection",
        "docs",
        "--pk",
        "a",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "a\t{\"id\":\"a\",\"n\":1}");
    let (ok, _, err) = sift(&[
        "get",
        "--cluster",
        &third,
        "--collection",
        "docs",
        "--pk",
        "b",
    ]);
    assert!(!ok);
    assert!(err.contains("no document with primary key \"b\""), "{err}");
    let (ok, _, err) = sift(&[
        "put",
        "--cluster",
        &at,
        "--collection",
        "docs",
        "--doc",
        "[1]",
    ]);
    assert!(!ok);
    assert!(
        err.contains("object"),
        "a bad document is refused with a reason: {err}"
    );
    let (ok, _, err) = sift(&["stats", "--cluster", &at]);
    assert!(!ok);
    assert!(err.contains("does not take --cluster yet"), "{err}");

    // Import (a bad line is skipped and named), an index, and queries through the cluster.
    let lines: Vec<String> = (0..500)
        .map(|i| {
            format!(
                r#"{{"id":"t{i:03}","user":{},"at":"2020-01-01T00:00:{:02}Z"}}"#,
                i % 7,
                i % 60
            )
        })
        .chain(std::iter::once("{broken".to_string()))
        .collect();
    let file = root.path().join("tweets.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file = file.to_str().unwrap();
    let (ok, out, err) = sift(&[
        "import",
        "--cluster",
        &at,
        "--collection",
        "tweets",
        "--pk",
        "id",
        file,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("imported 500 documents"), "{out}");
    assert!(out.contains("1 bad lines skipped"), "{out}");
    assert!(err.contains("line 501 skipped"), "{err}");
    let create = |name: &str, path: &str, kind_type: [&str; 2]| {
        sift(&[
            "index",
            "create",
            "--cluster",
            &at,
            "--collection",
            "tweets",
            "--name",
            name,
            "--path",
            path,
            "--type",
            kind_type[1],
            "--kind",
            kind_type[0],
        ])
    };
    let (ok, _, err) = create("by_user", "user", ["lazy", "int"]);
    assert!(ok, "{err}");
    let (ok, _, err) = create("by_at", "at", ["next", "time"]);
    assert!(ok, "{err}");
    let (ok, out, err) = sift(&[
        "lookup",
        "--cluster",
        &third,
        "--collection",
        "tweets",
        "--index",
        "by_user",
        "--value",
        "3",
        "--limit",
        "2",
    ]);
    assert!(ok, "{err}");
    let pks: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(pks, ["t493", "t486"], "newest first: {out}");
    let (ok, out, err) = sift(&[
        "range",
        "--cluster",
        &at,
        "--collection",
        "tweets",
        "--index",
        "by_at",
        "--from",
        "2020-01-01T00:00:58Z",
        "--to",
        "2020-01-01T00:00:59Z",
    ]);
    assert!(ok, "{err}");
    // Seconds 58 and 59 of every minute-cycle of 60: ids 58, 59, 118, 119, ... 479.
    assert_eq!(out.lines().count(), 16, "{out}");
    assert!(err.contains("16 hits"), "{err}");
    let (ok, _, err) = sift(&[
        "index",
        "drop",
        "--cluster",
        &at,
        "--collection",
        "tweets",
        "--name",
        "nope",
    ]);
    assert!(!ok);
    assert!(err.contains("has no index \"nope\""), "{err}");

    let (ok, out, err) = sift(&["cluster", "status", "--at", &at]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("127.0.0.1:")).collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(
        rows.iter().filter(|l| l.contains(" leader ")).count(),
        1,
        "{out}"
    );
    assert_eq!(
        rows.iter().filter(|l| l.contains(" follower ")).count(),
        2,
        "{out}"
    );
    let (ok, out, err) = sift(&["cluster", "status", "--at", &at, "--json"]);
    assert!(ok, "{err}");
    for line in out.lines() {
        let node: serde_json::Value = serde_json::from_str(line).unwrap();
        let region = &node["regions"][0];
        assert_eq!(region["members"].as_array().unwrap().len(), 3, "{line}");
        assert_eq!(region["applied_index"], region["last_log_index"], "{line}");
    }

    let up_pid = i32::try_from(up.id()).unwrap();
    // SAFETY: kill(2) on our own child's pid.
    let signalled = unsafe { libc::kill(up_pid, libc::SIGTERM) };
    assert_eq!(signalled, 0);
    let status = up.wait().unwrap();
    assert!(status.success(), "cluster up exited with {status}");
    for pid in pids {
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "node process {pid} outlived cluster up");
    }
}
