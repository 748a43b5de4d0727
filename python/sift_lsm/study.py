"""A study's ``results.json`` (``sift study --out DIR``) as rows, for analysis in Python.

The file's layout is specified by ``docs/study-results.schema.json``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Union

PathLike = Union[str, "os.PathLike[str]"]


def _results_path(path: PathLike) -> str:
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    return path


def load_results(path: PathLike, *, table: str = "measurements") -> List[Dict[str, Any]]:
    """Rows of a study's results: ``path`` is ``results.json`` or the ``--out`` directory.

    ``table="measurements"`` gives one row per measurement (its fields, plus ``experiment``
    and ``experiment_title``); ``table="verdicts"`` one row per verdict (claim, outcome,
    evidence, and each deciding number as ``number.<name>``).
    """
    with open(_results_path(path), encoding="utf-8") as file:
        results = json.load(file)
    if not isinstance(results, dict) or "experiments" not in results:
        raise ValueError(f"{_results_path(path)} is not a sift study's results.json")
    rows: List[Dict[str, Any]] = []
    for experiment in results["experiments"]:
        context = {"experiment": experiment["id"], "experiment_title": experiment.get("title")}
        if table == "measurements":
            for measurement in experiment.get("measurements", []):
                rows.append({**context, **measurement})
        elif table == "verdicts":
            for verdict in experiment.get("verdicts", []):
                row = {**context, **{k: v for k, v in verdict.items() if k != "numbers"}}
                for name, value in verdict.get("numbers", {}).items():
                    row[f"number.{name}"] = value
                rows.append(row)
        else:
            raise ValueError(f"table={table!r}: expected 'measurements' or 'verdicts'")
    return rows


def results_frame(path: PathLike, *, table: str = "measurements") -> Any:
    """``load_results`` as a pandas DataFrame (needs pandas: ``pip install pandas``)."""
    try:
        import pandas
    except ImportError as error:
        raise ImportError(
            "results_frame needs pandas (pip install pandas); load_results gives plain rows"
        ) from error
    return pandas.DataFrame(load_results(path, table=table))
