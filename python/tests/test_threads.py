"""Threads: readers and a writer at once, the GIL released during engine calls, and a
database closed while other threads query it (an error in those threads, never a crash)."""

import json
import threading
import time

import pytest

import sift_lsm


def test_readers_see_consistent_answers_while_a_writer_runs(db):
    docs = db.collection("docs", primary_key="id")
    docs.create_index("by_group", path="group", type="int", kind="composite")
    docs.create_index("by_n", path="n", type="int", kind="lazy")
    total = 3000
    done = threading.Event()
    failures = []

    def writer():
        try:
            for start in range(0, total, 100):
                if start % 200 == 0:
                    docs.put_many({"id": i, "group": i % 10, "n": i} for i in range(start, start + 100))
                else:
                    for i in range(start, start + 100):
                        docs.put({"id": i, "group": i % 10, "n": i})
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(f"writer: {error!r}")
        finally:
            done.set()

    def reader(group):
        seen = 0
        try:
            while True:
                finished = done.is_set()
                hits = docs.lookup("by_group", group)
                ids = [d["id"] for d in hits]
                # Each id is written once, in increasing order: newest first is descending.
                assert ids == sorted(ids, reverse=True), ids[:10]
                assert all(d["group"] == group for d in hits)
                assert len(ids) >= seen, "an answer lost documents"
                seen = len(ids)
                window = docs.range("by_n", 1000, 1099)
                assert all(1000 <= d["n"] <= 1099 for d in window)
                assert len({d["id"] for d in window}) == len(window)
                if finished:
                    assert seen == total // 10
                    return
        except Exception as error:  # noqa: BLE001 - reported below
            failures.append(f"reader {group}: {error!r}")

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(g,)) for g in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads)
    assert len(docs.range("by_n", 0, total)) == total


def test_engine_calls_release_the_gil(tmp_path, db):
    """A thread counting in Python keeps counting while another thread is inside a long
    engine call; with the GIL held through the call it could not run at all."""
    path = tmp_path / "many.jsonl"
    with open(path, "w") as file:
        for i in range(150_000):
            file.write(json.dumps({"id": i, "text": "x" * 200, "v": i % 100}) + "\n")
    docs = db.collection("docs", primary_key="id")
    docs.create_index("by_v", path="v", type="int", kind="composite")
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    counter = threading.Thread(target=count)
    counter.start()
    time.sleep(0.05)
    start = time.perf_counter()
    # One batch: one engine call that reads and writes the whole file.
    docs.import_jsonl(path, chunk_size=150_000)
    end = time.perf_counter()
    stop.set()
    counter.join()
    assert end - start > 0.1, "the call was too short to tell"
    inside = [t for t in ticks if start + 0.02 < t < end - 0.02]
    assert len(inside) > 1000, f"{len(inside)} ticks during a {end - start:.2f} s engine call"


@pytest.mark.parametrize("round_", range(3))
def test_closing_while_other_threads_query_raises_database_closed(db_path, round_):
    db = sift_lsm.open(db_path)
    docs = db.collection("docs", primary_key="id")
    docs.create_index("by_v", path="v", type="int", kind="lazy")
    docs.put_many({"id": i, "v": i % 50, "pad": "y" * 100} for i in range(20_000))
    started = threading.Barrier(5)
    outcomes = []

    def query(kind):
        started.wait()
        try:
            while True:
                if kind == "range":
                    docs.range("by_v", 0, 49)
                elif kind == "scan":
                    for _ in docs.scan():
                        pass
                elif kind == "write":
                    docs.put({"id": -1, "v": 1})
                else:
                    docs.lookup("by_v", 7)
        except sift_lsm.DatabaseClosed:
            outcomes.append("closed")
        except Exception as error:  # noqa: BLE001 - reported below
            outcomes.append(repr(error))

    threads = [threading.Thread(target=query, args=(k,)) for k in ("range", "scan", "write", "lookup")]
    for thread in threads:
        thread.start()
    started.wait()
    time.sleep(0.05 * (round_ + 1))
    db.close()
    for thread in threads:
        thread.join(timeout=120)
    assert outcomes == ["closed"] * 4, outcomes
    # Reopened: everything written before the close is there.
    with sift_lsm.open(db_path) as again:
        assert len(again.collection("docs").lookup("by_v", 7)) == 400


def all_at_once(call, count):
    """Runs `call` in `count` threads released together; each one's result or repr(error)."""
    barrier = threading.Barrier(count)
    outcomes = []

    def run():
        barrier.wait()
        try:
            outcomes.append(call())
        except Exception as error:  # noqa: BLE001 - returned to the test
            outcomes.append(repr(error))

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_threads_creating_one_collection_at_once_all_get_it(db):
    outcomes = all_at_once(lambda: db.collection("shared", primary_key="id").name, 8)
    assert outcomes == ["shared"] * 8


def test_two_closes_at_once_both_return_after_the_close(db_path):
    db = sift_lsm.open(db_path)
    docs = db.collection("docs", primary_key="id")
    docs.put_many({"id": i, "pad": "z" * 200} for i in range(50_000))
    assert all_at_once(db.close, 2) == [None, None]
    # Whichever returned first, the directory is free: no DatabaseLocked.
    with sift_lsm.open(db_path) as again:
        assert again.collection("docs").get(49_999)["id"] == 49_999
