//! End-to-end: `sift within` on memory and composite geo indexes, checked against a
//! brute-force box filter of the imported file; and its errors.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::sift;

#[test]
fn within_matches_brute_force_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("places.jsonl");
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    // A 20 x 20 grid of points 0.5 degrees apart around New York, so boxes have points on
    // their edges.
    let mut points = Vec::new();
    let mut lines = Vec::new();
    for i in 0..400 {
        let lon = -79.0 + f64::from(i % 20) * 0.5;
        let lat = 38.0 + f64::from(i / 20) * 0.5;
        points.push((i, lon, lat));
        lines.push(format!(
            r#"{{"id": {i}, "place": {{"coordinates": [{lon}, {lat}]}}}}"#
        ));
    }
    std::fs::write(&file, lines.join("\n")).unwrap();
    let (ok, _, err) = sift(&[
        "import",
        "--db",
        db,
        "--collection",
        "c",
        "--pk",
        "id",
        file.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    for kind in ["memory", "composite", "lazy"] {
        let (ok, _, err) = sift(&[
            "index",
            "create",
            "--db",
            db,
            "--collection",
            "c",
            "--name",
            &format!("geo_{kind}"),
            "--path",
            "place.coordinates",
            "--type",
            "geo",
            "--kind",
            kind,
        ]);
        assert!(ok, "{err}");
    }
    // Import order = sequence order, so newest first is descending id.
    let (min_lon, min_lat, max_lon, max_lat) = (-77.0, 39.5, -75.5, 41.0);
    let mut want: Vec<i32> = points
        .iter()
        .filter(|(_, lon, lat)| {
            (min_lon..=max_lon).contains(lon) && (min_lat..=max_lat).contains(lat)
        })
        .map(|(i, _, _)| *i)
        .collect();
    want.reverse();
    assert_eq!(want.len(), 16, "4 x 4 grid points, edges included");
    for index in ["geo_memory", "geo_composite"] {
        for limit in [None, Some("5")] {
            let mut args = vec![
                "within",
                "--db",
                db,
                "--collection",
                "c",
                "--index",
                index,
                "--bbox",
                "-77,39.5,-75.5,41",
                "--json",
            ];
            if let Some(limit) = limit {
                args.extend(["--limit", limit]);
            }
            let (ok, out, err) = sift(&args);
            assert!(ok, "{err}");
            let got: Vec<i32> = out
                .lines()
                .map(|line| {
                    let row: serde_json::Value = serde_json::from_str(line).unwrap();
                    row["pk"].as_str().unwrap().parse().unwrap()
                })
                .collect();
            let expected: Vec<i32> = want
                .iter()
                .copied()
                .take(limit.map_or(usize::MAX, |l| l.parse().unwrap()))
                .collect();
            assert_eq!(got, expected, "{index} limit {limit:?}");
        }
    }
    let failing = |bbox: &str, index: &str| {
        let (ok, out, err) = sift(&[
            "within",
            "--db",
            db,
            "--collection",
            "c",
            "--index",
            index,
            "--bbox",
            bbox,
        ]);
        assert!(!ok && out.is_empty(), "{bbox} on {index} should fail");
        err
    };
    assert!(failing("1,2,3", "geo_memory").contains("3 numbers instead of 4"));
    assert!(failing("-75,40,-76,41", "geo_memory").contains("greater than max_lon"));
    assert!(failing("0,0,1,91", "geo_memory").contains("outside -90..=90"));
    assert!(failing("-77,39,-75,41", "geo_lazy").contains("not supported by kind lazy"));
    let (ok, _, err) = sift(&[
        "lookup",
        "--db",
        db,
        "--collection",
        "c",
        "--index",
        "geo_memory",
        "--value=-77,40",
    ]);
    assert!(!ok && err.contains("within"), "{err}");
}
