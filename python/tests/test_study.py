"""``load_results`` / ``results_frame`` on a hand-written results.json of the documented
layout (docs/study-results.schema.json)."""

import importlib.util
import json

import pytest

import sift_lsm

RESULTS = {
    "schema_version": 1,
    "tool": "sift study",
    "experiments": [
        {
            "id": "static",
            "title": "Static workload",
            "measurements": [
                {"configuration": "composite", "op": "PUT", "metric": "throughput", "unit": "ops/s", "value": 1200.0},
                {"configuration": "lazy", "op": "PUT", "metric": "throughput", "unit": "ops/s", "value": 1500.0},
            ],
            "verdicts": [
                {
                    "claim": "lazy writes faster",
                    "outcome": "reproduced",
                    "evidence": "1500 vs 1200",
                    "numbers": {"lazy_ops_per_s": 1500.0, "composite_ops_per_s": 1200.0},
                }
            ],
        },
        {"id": "next", "title": "NEXT", "measurements": [], "verdicts": []},
    ],
}


@pytest.fixture
def results_dir(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    return tmp_path


def test_measurement_rows_carry_their_experiment(results_dir):
    rows = sift_lsm.load_results(results_dir)
    assert rows == [
        {"experiment": "static", "experiment_title": "Static workload", **RESULTS["experiments"][0]["measurements"][0]},
        {"experiment": "static", "experiment_title": "Static workload", **RESULTS["experiments"][0]["measurements"][1]},
    ]
    assert sift_lsm.load_results(results_dir / "results.json") == rows


def test_verdict_rows_flatten_their_numbers(results_dir):
    (row,) = sift_lsm.load_results(results_dir, table="verdicts")
    assert row["outcome"] == "reproduced" and row["number.lazy_ops_per_s"] == 1500.0
    assert "numbers" not in row


def test_bad_arguments_and_files(results_dir, tmp_path):
    with pytest.raises(ValueError, match="table='x'"):
        sift_lsm.load_results(results_dir, table="x")
    (tmp_path / "other.json").write_text("[]")
    with pytest.raises(ValueError, match="not a sift study"):
        sift_lsm.load_results(tmp_path / "other.json")


def test_results_frame_with_or_without_pandas(results_dir):
    if importlib.util.find_spec("pandas") is None:
        with pytest.raises(ImportError, match="pip install pandas"):
            sift_lsm.results_frame(results_dir)
    else:
        frame = sift_lsm.results_frame(results_dir)
        assert list(frame["value"]) == [1200.0, 1500.0]
