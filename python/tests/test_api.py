"""Each method of the binding, its arguments and its errors, against hand-computed answers."""

import json
import math
from datetime import datetime, timedelta, timezone

import pytest

import sift_lsm


@pytest.fixture
def tweets(db):
    collection = db.collection("tweets", primary_key="id")
    collection.create_index("by_user", path="user.id", type="int", kind="composite")
    collection.create_index("by_email", path="email", type="string", kind="composite", unique=True)
    collection.create_index("by_time", path="at", type="time", kind="lazy")
    collection.create_index("by_place", path="place", type="geo", kind="next")
    return collection


def last_sequence(db):
    return db.stats()["engine"]["last_sequence"]


BAD_DOCUMENTS = [
    ([1, 2], "must be a dict, found list"),
    ("x", "must be a dict, found str"),
    (None, "must be a dict, found NoneType"),
    (7, "must be a dict, found int"),
    ({"id": "t9", "score": float("nan")}, "NaN and infinities are not JSON) at $.score"),
    ({"id": "t9", "deep": {"x": [1, float("inf")]}}, "at $.deep.x[1]"),
    ({"id": "t9", "tags": {"a", "b"}}, "a set has no JSON form"),
    ({"id": "t9", "at": datetime(2020, 1, 1, tzinfo=timezone.utc)}, "RFC 3339 string or as epoch milliseconds"),
    ({"id": "t9", "blob": b"\x00"}, "a bytes has no JSON form"),
    ({"id": "t9", 5: "five"}, "object key 5 is a int, not a str"),
    ({"id": "t9", "big": 2**64}, "outside the 64-bit range"),
    ({"id": "t9", "user": {"id": "seven"}}, "attribute `user.id` must be of type int"),
    ({"user": {"id": 7}}, "no primary key field `id`"),
    ({"id": 1.5}, "must be a non-empty string or an integer"),
    ({"id": "t9", "email": 3}, "attribute `email` must be of type string"),
    ({"id": "t9", "place": [200, 0]}, "bad geo point"),
    ({"id": "t9", "at": "yesterday"}, "bad time"),
]


@pytest.mark.parametrize("document,message", BAD_DOCUMENTS, ids=[m for _, m in BAD_DOCUMENTS])
def test_a_bad_document_raises_invalid_document_and_stores_nothing(db, tweets, document, message):
    tweets.put({"id": "t9", "user": {"id": 1}, "email": "a@example.com"})
    before = last_sequence(db)
    with pytest.raises(sift_lsm.InvalidDocument) as raised:
        tweets.put(document)
    assert message in str(raised.value)
    assert isinstance(raised.value, sift_lsm.Error)
    assert last_sequence(db) == before
    assert tweets.get("t9") == {"id": "t9", "user": {"id": 1}, "email": "a@example.com"}
    assert [d["id"] for d in tweets.lookup("by_user", 1)] == ["t9"]


def test_nesting_deeper_than_the_limit_is_refused(tweets):
    document = {"id": "deep"}
    inner = document
    for _ in range(200):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(sift_lsm.InvalidDocument, match="nesting deeper than 127"):
        tweets.put(document)
    assert tweets.get("deep") is None


def test_hits_are_the_documents_exactly_as_stored(tweets):
    document = {
        "id": "t1",
        "zeta": 1,
        "alpha": [0.1, 1e300, -2.5, 2**63 - 1, -(2**63), 2**64 - 1, True, None],
        "user": {"id": 42, "name": "Zoë 🐍", "quote": 'a "b" \\ c\n'},
        "empty": {},
    }
    tweets.put(document)
    (hit,) = tweets.lookup("by_user", 42)
    assert hit == document
    assert list(hit) == list(document), "key order is the order written"
    assert json.dumps(hit) == json.dumps(document)
    assert tweets.get("t1") == document


def test_with_meta_gives_pairs_and_sequence_numbers_grow(tweets):
    tweets.put({"id": "a", "user": {"id": 1}})
    tweets.put({"id": "b", "user": {"id": 1}})
    pairs = tweets.lookup("by_user", 1, with_meta=True)
    assert [(doc["id"], meta["pk"]) for doc, meta in pairs] == [("b", "b"), ("a", "a")]
    assert pairs[0][1]["seq"] > pairs[1][1]["seq"] > 0


def test_integer_primary_keys_keep_their_json_type(db):
    ratings = db.collection("ratings", primary_key="rid")
    ratings.put({"rid": 42, "stars": 5})
    ratings.put({"rid": -7, "stars": 1})
    assert ratings.get(42) == {"rid": 42, "stars": 5}
    assert ratings.get(-7)["rid"] == -7
    assert 42 in ratings and 43 not in ratings
    assert ratings.delete(42) is True
    assert ratings.delete(42) is False
    assert ratings.get(42) is None
    for bad in (True, 1.5, None, b"42", "", [42]):
        with pytest.raises(sift_lsm.InvalidArgument, match="primary key"):
            ratings.get(bad)


def test_unique_index_refuses_a_taken_value_and_writes_nothing(db, tweets):
    tweets.put({"id": "a", "email": "x@example.com"})
    tweets.put({"id": "a", "email": "x@example.com", "v": 2})  # its own value: allowed
    before = last_sequence(db)
    with pytest.raises(sift_lsm.UniqueViolation, match="x@example.com"):
        tweets.put({"id": "b", "email": "x@example.com"})
    assert last_sequence(db) == before
    assert tweets.get("b") is None
    tweets.delete("a")
    tweets.put({"id": "b", "email": "x@example.com"})  # free again once deleted
    assert [d["id"] for d in tweets.lookup("by_email", "x@example.com")] == ["b"]


def test_names_that_do_not_exist_and_names_taken(db, tweets):
    with pytest.raises(sift_lsm.IndexNotFound, match="no index `nope`"):
        tweets.lookup("nope", 1)
    with pytest.raises(sift_lsm.CollectionNotFound, match='primary_key="field"'):
        db.collection("missing")
    with pytest.raises(sift_lsm.InvalidArgument, match="keyed by `id`, not `uid`"):
        db.collection("tweets", primary_key="uid")
    assert db.collection("tweets").primary_key == "id"
    with pytest.raises(sift_lsm.AlreadyExists):
        tweets.create_index("by_user", path="user.id", type="int")
    with pytest.raises(sift_lsm.InvalidArgument, match="expected composite, eager"):
        tweets.create_index("x", path="x", type="int", kind="btree")
    with pytest.raises(sift_lsm.InvalidArgument, match="unknown"):
        tweets.create_index("x", path="x", type="integer")
    with pytest.raises(sift_lsm.InvalidArgument, match="sync-full, sync-insert"):
        tweets.create_index("x", path="x", type="int", maintenance="later")
    with pytest.raises(sift_lsm.InvalidArgument, match="composite indexes only"):
        tweets.create_index("x", path="x", type="int", kind="eager", maintenance="async-simple")
    assert db.collections() == ["tweets"]


def test_indexes_and_drop_index(tweets):
    described = tweets.indexes()
    assert [i["name"] for i in described] == ["by_user", "by_email", "by_time", "by_place"]
    assert described[1] == {
        "name": "by_email",
        "path": "email",
        "type": "string",
        "kind": "composite",
        "maintenance": "sync-full",
        "unique": True,
        "state": "ready",
    }
    assert described[2]["kind"] == "lazy" and described[3]["kind"] == "next"
    tweets.drop_index("by_time")
    assert "by_time" not in [i["name"] for i in tweets.indexes()]
    with pytest.raises(sift_lsm.IndexNotFound):
        tweets.range("by_time", 0, 10)


def test_query_arguments_are_checked(tweets):
    tweets.put({"id": "a", "user": {"id": 1}, "at": 5, "place": [2.35, 48.86]})
    assert tweets.lookup("by_user", 1, limit=0) == []
    with pytest.raises(sift_lsm.InvalidArgument, match="limit=-1"):
        tweets.lookup("by_user", 1, limit=-1)
    with pytest.raises(sift_lsm.InvalidArgument, match="a bool is not an index value"):
        tweets.lookup("by_user", True)
    with pytest.raises(sift_lsm.InvalidArgument, match=r"index `by_user` \(int\)"):
        tweets.lookup("by_user", "1")
    with pytest.raises(sift_lsm.InvalidArgument, match="lower bound"):
        tweets.range("by_user", 5, 1)
    with pytest.raises(sift_lsm.InvalidArgument, match="no greatest value"):
        tweets.range("by_email", "a", None)
    with pytest.raises(sift_lsm.InvalidArgument, match="within"):
        tweets.lookup("by_place", [2.35, 48.86])
    with pytest.raises(sift_lsm.InvalidArgument, match="4 numbers, found 3"):
        tweets.within("by_place", (0, 0, 1))
    with pytest.raises(sift_lsm.InvalidArgument, match="bad bounding box"):
        tweets.within("by_place", (0, 0, 500, 1))
    with pytest.raises(sift_lsm.InvalidArgument, match="cannot answer"):
        tweets.within("by_user", (0, 0, 1, 1))
    assert [d["id"] for d in tweets.within("by_place", (2, 48, 3, 49))] == ["a"]
    assert tweets.within("by_place", [-10, -10, 0, 0]) == []


def test_time_values_take_epoch_ms_rfc3339_and_aware_datetimes(tweets):
    moment = datetime(2021, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    ms = int(moment.timestamp() * 1000)
    tweets.put({"id": "ms", "at": ms})
    tweets.put({"id": "text", "at": "2021-03-04T05:06:07Z"})
    tweets.put({"id": "later", "at": ms + 60_000})
    assert [d["id"] for d in tweets.lookup("by_time", ms)] == ["text", "ms"]
    assert [d["id"] for d in tweets.lookup("by_time", moment)] == ["text", "ms"]
    assert [d["id"] for d in tweets.lookup("by_time", "2021-03-04T05:06:07Z")] == ["text", "ms"]
    paris = timezone(timedelta(hours=1))
    assert len(tweets.range("by_time", moment.astimezone(paris), None)) == 3
    assert [d["id"] for d in tweets.range("by_time", ms + 1, None)] == ["later"]
    with pytest.raises(sift_lsm.InvalidArgument, match="without a timezone"):
        tweets.lookup("by_time", datetime(2021, 3, 4))


def test_ranges_with_open_ends(db):
    numbers = db.collection("numbers", primary_key="id")
    numbers.create_index("by_n", path="n", type="int")
    numbers.create_index("by_x", path="x", type="float", kind="memory")
    numbers.create_index("by_s", path="s", type="string", kind="eager")
    for i, (n, x, s) in enumerate([(-(2**63), -math.inf, ""), (0, 0.5, "m"), (2**63 - 1, math.inf, "zz")]):
        numbers.put({"id": i, "n": n, "x": x if math.isfinite(x) else (-1e308 if x < 0 else 1e308), "s": s})
    assert [d["id"] for d in numbers.range("by_n", None, None)] == [2, 1, 0]
    assert [d["id"] for d in numbers.range("by_n", None, 0)] == [1, 0]
    assert [d["id"] for d in numbers.range("by_x", 0.0, None)] == [2, 1]
    assert [d["id"] for d in numbers.range("by_s", None, "m")] == [1, 0]


def test_put_many_stores_in_chunks_and_names_a_bad_document(db, tweets):
    stored = tweets.put_many(({"id": f"t{i}", "user": {"id": i % 7}} for i in range(2500)), chunk_size=1000)
    assert stored == 2500
    assert len(tweets.lookup("by_user", 3)) == len([i for i in range(2500) if i % 7 == 3])
    documents = [{"id": f"u{i}", "user": {"id": 1}} for i in range(250)]
    documents[230] = {"id": "u230", "user": {"id": "one"}}
    with pytest.raises(sift_lsm.InvalidDocument) as raised:
        tweets.put_many(documents, chunk_size=100)
    message = str(raised.value)
    assert "document 230 of put_many" in message and "must be of type int" in message
    assert "200 documents before the batch were" in message
    assert tweets.get("u199") is not None and tweets.get("u200") is None
    documents[230] = [1]
    with pytest.raises(sift_lsm.InvalidDocument, match="document 230 of put_many must be a dict"):
        tweets.put_many(documents, chunk_size=1000)
    with pytest.raises(sift_lsm.InvalidDocument, match="iterable of dicts, found int"):
        tweets.put_many(5)
    with pytest.raises(sift_lsm.InvalidArgument, match="chunk_size=0"):
        tweets.put_many([], chunk_size=0)
    assert tweets.put_many([]) == 0


def test_import_jsonl_loads_in_batches_and_names_a_bad_line(tmp_path, tweets, capsys):
    path = tmp_path / "tweets.jsonl"
    lines = [json.dumps({"id": f"j{i}", "user": {"id": i % 5}}) for i in range(2200)]
    lines.insert(100, "")  # blank lines are skipped
    path.write_text("\n".join(lines) + "\n")
    reports = []
    count = tweets.import_jsonl(path, chunk_size=500, progress=lambda *args: reports.append(args))
    assert count == 2200
    assert [r[0] for r in reports] == [500, 1000, 1500, 2000, 2200]
    assert reports[-1][1] == reports[-1][2] == path.stat().st_size
    assert len(tweets.lookup("by_user", 4)) == 440

    lines[1700] = '{"id": "bad", "user": {"id": 1}'  # line 1701, unterminated
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    collection = tweets
    with pytest.raises(sift_lsm.InvalidDocument) as raised:
        collection.import_jsonl(bad, chunk_size=500)
    message = str(raised.value)
    assert f"{bad} line 1701" in message and "invalid JSON" in message
    assert "1500 documents before the batch were" in message

    tweets.import_jsonl(path, progress=True)
    # Written through sys.stderr (so notebooks show it), which capsys replaces.
    assert "imported 2200 documents (100.0 % of the file)" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        tweets.import_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(sift_lsm.InvalidArgument, match="progress="):
        tweets.import_jsonl(path, progress="yes")


def test_scan_pages_through_every_document_in_key_order(db):
    items = db.collection("items", primary_key="k")
    keys = sorted(f"k{i:04}" for i in range(700))
    items.put_many({"k": key} for key in reversed(keys))
    assert [d["k"] for d in items.scan()] == keys
    assert [d["k"] for d in items.scan("k0650")] == keys[650:]


def test_range_iter_yields_what_range_returns(tweets):
    tweets.put_many({"id": f"t{i}", "user": {"id": i % 3}} for i in range(600))
    iterator = tweets.range_iter("by_user", 1, 2)
    assert iterator.__length_hint__() == 400
    assert list(iterator) == tweets.range("by_user", 1, 2)
    pairs = list(tweets.range_iter("by_user", 0, 0, limit=5, with_meta=True))
    assert [meta["pk"] for _, meta in pairs] == [d["id"] for d in tweets.lookup("by_user", 0, 5)]


def test_reopen_keeps_documents_and_indexes_of_every_kind(db_path):
    kinds = ["composite", "eager", "lazy", "memory", "embedded", "sst-local", "next"]
    with sift_lsm.open(db_path) as db:
        docs = db.collection("docs", primary_key="id")
        for kind in kinds:
            docs.create_index(kind, path="v", type="int", kind=kind)
        docs.put_many({"id": i, "v": i % 4} for i in range(300))
        docs.delete(8)
        db.flush()
        docs.put({"id": 1000, "v": 0})
    assert db.closed
    with sift_lsm.open(db_path) as db:
        docs = db.collection("docs")
        want = [1000] + [i for i in reversed(range(300)) if i % 4 == 0 and i != 8]
        for kind in kinds:
            assert [d["id"] for d in docs.lookup(kind, 0)] == want, kind


def test_a_closed_database_raises_database_closed(db_path):
    db = sift_lsm.open(db_path)
    docs = db.collection("docs", primary_key="id")
    scan = docs.scan()
    db.close()
    db.close()  # twice is fine
    assert db.closed and "closed" in repr(db)
    for call in (
        lambda: docs.get(1),
        lambda: docs.put({"id": 1}),
        lambda: docs.lookup("x", 1),
        lambda: db.collection("docs"),
        lambda: db.stats(),
        lambda: next(scan),
    ):
        with pytest.raises(sift_lsm.DatabaseClosed, match="is closed"):
            call()


def test_a_second_open_of_the_same_directory_is_refused(db_path):
    with sift_lsm.open(db_path):
        with pytest.raises(sift_lsm.DatabaseLocked, match="locked"):
            sift_lsm.open(db_path)
    with sift_lsm.open(db_path):
        pass


def test_open_options_are_checked(db_path):
    with pytest.raises(sift_lsm.InvalidArgument, match="memtable_bytes=10"):
        sift_lsm.open(db_path, memtable_bytes=10)
    with sift_lsm.open(db_path, memtable_bytes=1 << 20, block_cache_bytes=1 << 20, sync_writes=True) as db:
        db.collection("c", primary_key="id").put({"id": 1})
        assert db.stats()["engine"]["wal_syncs"] >= 1


def test_a_session_reads_its_writes_and_ends(db):
    docs = db.collection("docs", primary_key="id")
    docs.create_index("by_v", path="v", type="int", maintenance="async-session")
    with db.session() as session:
        mine = session.collection("docs")
        for i in range(200):
            mine.put({"id": i, "v": i % 2})
            assert mine.lookup("by_v", i % 2)[0]["id"] == i
        assert session.consistency == "read-your-writes"
        with pytest.raises(sift_lsm.CollectionNotFound):
            session.collection("nope")
    with pytest.raises(sift_lsm.SessionExpired, match="ended"):
        mine.get(1)
    assert db.wait_until_indexed(timeout=60) is True
    assert len(docs.lookup("by_v", 0)) == 100
    with pytest.raises(sift_lsm.InvalidArgument, match="timeout=-1"):
        db.wait_until_indexed(timeout=-1)


def test_stats_describe_engine_and_collections(db, tweets):
    tweets.put_many({"id": f"t{i}", "user": {"id": i}} for i in range(100))
    db.flush()
    stats = db.stats()
    assert stats["collections"]["tweets"]["primary_key"] == "id"
    assert [i["name"] for i in stats["collections"]["tweets"]["indexes"]] == [
        "by_user", "by_email", "by_time", "by_place"
    ]
    assert stats["engine"]["writes"] >= 100 and stats["engine"]["flushes"] >= 1
    assert any(sum(tree["files_per_level"]) > 0 for tree in stats["engine"]["trees"].values())
    assert stats["async_index"]["queue_length"] == 0


def test_errors_form_one_hierarchy():
    for name in (
        "InvalidDocument", "UniqueViolation", "CollectionNotFound", "IndexNotFound", "AlreadyExists",
        "InvalidArgument", "Corruption", "DatabaseClosed", "DatabaseLocked", "StorageError",
        "SessionExpired",
    ):
        error = getattr(sift_lsm, name)
        assert issubclass(error, sift_lsm.Error) and error.__doc__, name
    assert issubclass(sift_lsm.Error, Exception)


def test_a_unique_clash_inside_put_many_names_its_batch(db, tweets):
    documents = [{"id": f"e{i}", "email": f"{i}@example.com"} for i in range(2500)]
    documents[2100]["email"] = "5@example.com"
    with pytest.raises(sift_lsm.UniqueViolation) as raised:
        tweets.put_many(documents, chunk_size=1000)
    message = str(raised.value)
    assert "documents 2000 to 2999 of put_many" not in message
    assert "documents 2000 to 2499 of put_many" in message
    assert "nothing of its batch was stored (2000 documents before the batch were)" in message
    assert tweets.get("e1999") is not None and tweets.get("e2000") is None


def test_the_deepest_document_accepted_reads_back(tweets):
    def nested(levels):
        document = {"id": "deep"}
        inner = document
        for _ in range(levels - 1):
            inner["x"] = {}
            inner = inner["x"]
        return document

    tweets.put(nested(127))
    assert tweets.get("deep") == nested(127)
    with pytest.raises(sift_lsm.InvalidDocument, match="nesting deeper than 127"):
        tweets.put(nested(128))


@pytest.mark.parametrize(
    "line,reason",
    [
        ('{"id": "s", "text": "\\ud800"}', "hex escape"),
        ('{"id": "n", "score": 1e400}', "number out of range"),
        ('{"id": "d", "x": ' + "[" * 200 + "]" * 200 + "}", "recursion limit exceeded"),
    ],
    ids=["lone-surrogate", "huge-number", "too-deep"],
)
def test_import_refuses_lines_that_would_not_read_back(tmp_path, tweets, line, reason):
    path = tmp_path / "odd.jsonl"
    path.write_text('{"id": "ok1"}\n' + line + '\n{"id": "ok2"}\n')
    with pytest.raises(sift_lsm.InvalidDocument) as raised:
        tweets.import_jsonl(path)
    assert f"{path} line 2: invalid JSON" in str(raised.value) and reason in str(raised.value)
    assert tweets.get("ok1") is None and tweets.get("ok2") is None
    assert list(tweets.scan()) == []


def test_import_refuses_an_endless_line_without_reading_it_whole(tmp_path, tweets):
    path = tmp_path / "one-line.jsonl"
    with open(path, "w") as file:
        file.write('{"id": "ok"}\n{"id": "big", "text": "')
        file.write("x" * (20 << 20))
    with pytest.raises(sift_lsm.InvalidDocument, match="line 2: longer than the"):
        tweets.import_jsonl(path)


def test_primary_key_paths_compare_by_segments(db):
    db.collection("nested", primary_key="user.id")
    assert db.collection("nested", primary_key="/user/id").primary_key == "user.id"
    with pytest.raises(sift_lsm.InvalidArgument, match="keyed by"):
        db.collection("nested", primary_key="/user.id")


def test_keys_and_boxes_out_of_bounds(tweets):
    import itertools

    with pytest.raises(sift_lsm.InvalidArgument, match="longer than the 1024-byte limit"):
        tweets.delete("k" * 2000)
    with pytest.raises(sift_lsm.InvalidArgument, match="4 numbers, found more"):
        tweets.within("by_place", itertools.count())


def test_huge_timeouts_wait_without_a_deadline(db):
    assert db.wait_until_indexed(timeout=1e20) is True
    assert db.wait_until_indexed(timeout=1e9) is True


def test_an_ended_session_refuses_every_call(db, tweets):
    session = db.session()
    mine = session.collection("tweets")
    session.end()
    for call in (
        lambda: mine.put({"id": "x"}),
        lambda: mine.get("x"),
        lambda: mine.lookup("by_user", 1),
        lambda: mine.within("by_place", (0, 0, 1, 1)),
        lambda: mine.scan(),
        lambda: mine.indexes(),
        lambda: mine.create_index("z", path="z", type="int"),
        lambda: mine.drop_index("by_user"),
        lambda: session.collection("tweets"),
    ):
        with pytest.raises(sift_lsm.SessionExpired):
            call()
