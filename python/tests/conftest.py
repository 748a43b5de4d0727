"""Shared fixtures: a fresh database directory per test, and the operation-count knob."""

import os

import pytest

import sift_lsm

# Small memtables make the operation streams reach flushes and compactions quickly.
SMALL_MEMTABLE_BYTES = 64 * 1024


def operations(default: int) -> int:
    """The length of randomized streams: SIFT_PY_MODEL_OPERATIONS, else `default`."""
    return int(os.environ.get("SIFT_PY_MODEL_OPERATIONS", default))


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db"


@pytest.fixture
def db(db_path):
    database = sift_lsm.open(db_path, memtable_bytes=SMALL_MEMTABLE_BYTES)
    yield database
    database.close()
