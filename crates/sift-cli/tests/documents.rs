//! End-to-end: the document and index commands of the `sift` binary, checked against a
//! brute-force reading of the imported file.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;

mod common;

use common::sift;

#[test]
fn import_index_and_query_match_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("docs.jsonl");
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let mut lines = Vec::new();
    for i in 0..300u32 {
        lines.push(format!(
            r#"{{"id": {i}, "group": {}, "name": "n{}"}}"#,
            i % 7,
            i % 5
        ));
    }
    // A rewrite of document 3 (it becomes the newest, in group 6) and two bad lines.
    lines.push(r#"{"id": 3, "group": 6, "name": "rewritten"}"#.to_owned());
    lines.push(r#"{"id": 400, "group": "#.to_owned());
    lines.push(r#"{"id": 401, "group": "seven"}"#.to_owned());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let file = file.to_str().unwrap();

    let (ok, out, err) = sift(&[
        "import",
        "--db",
        db,
        "--collection",
        "c",
        "--pk",
        "id",
        file,
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("imported 302 documents"), "{out}");
    assert!(
        err.contains("line 302") && !err.contains("line 303"),
        "only the bad JSON line is skipped before an index exists: {err}"
    );

    let (ok, _, err) = sift(&[
        "index",
        "create",
        "--db",
        db,
        "--collection",
        "c",
        "--name",
        "by_group",
        "--path",
        "group",
        "--type",
        "int",
        "--kind",
        "composite",
    ]);
    assert!(ok, "{err}");

    let (ok, out, err) = sift(&[
        "lookup",
        "--db",
        db,
        "--collection",
        "c",
        "--index",
        "by_group",
        "--value",
        "6",
        "--json",
    ]);
    assert!(ok, "{err}");
    let ids: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["doc"]["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    // Brute force: documents in group 6, newest write first; document 3 was rewritten last.
    let mut expected: Vec<u64> = (0..300u64).filter(|i| i % 7 == 6 && *i != 3).collect();
    expected.reverse();
    expected.insert(0, 3);
    assert_eq!(ids, expected);

    let (ok, out, _) = sift(&[
        "range",
        "--db",
        db,
        "--collection",
        "c",
        "--index",
        "by_group",
        "--from",
        "0",
        "--to",
        "1",
        "--limit",
        "4",
        "--json",
    ]);
    assert!(ok);
    let ids: Vec<u64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["doc"]["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, vec![295, 294, 288, 287]);

    // Bad input: clear errors, non-zero exit, nothing changed.
    let (ok, _, err) = sift(&[
        "range",
        "--db",
        db,
        "--collection",
        "c",
        "--index",
        "by_group",
        "--from",
        "5",
        "--to",
        "1",
    ]);
    assert!(!ok && err.contains("sift: error"), "{err}");
    let (ok, _, err) = sift(&[
        "put",
        "--db",
        db,
        "--collection",
        "c",
        "--doc",
        r#"{"id": 1, "group": "x"}"#,
    ]);
    assert!(!ok && err.contains("group"), "{err}");
    let (ok, out, _) = sift(&[
        "get",
        "--db",
        db,
        "--collection",
        "c",
        "--pk",
        "1",
        "--json",
    ]);
    assert!(ok && out.contains(r#""group":1"#), "{out}");
    let (ok, _, err) = sift(&[
        "lookup",
        "--db",
        db,
        "--collection",
        "nope",
        "--index",
        "by_group",
        "--value",
        "1",
    ]);
    assert!(!ok && err.contains("nope"), "{err}");
    assert!(Path::new(db).join("CURRENT").exists());
}
