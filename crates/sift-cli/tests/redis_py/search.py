"""redis-py's search helpers against `sift serve`: hashes and JSON documents written through
`hset` and `r.json()`, indexes created with `r.ft(name).create_index(...)` (on existing data, so
they back-fill), searched with `Query(...)` (numeric ranges, tags, geo radius, conjunctions,
sorting, paging, NOCONTENT, RETURN), updated and deleted; every answer compared with a brute-force
filter over a dict model.

    python search.py PORT SEED OPERATIONS

Run by crates/sift-cli/tests/serve.rs in a virtual environment with redis-py installed.
"""

import json
import math
import random
import sys
import time

import redis
from redis.commands.search.field import GeoField, NumericField, TagField
from redis.commands.search.query import Query

try:
    from redis.commands.search.index_definition import IndexDefinition, IndexType
except ImportError:  # redis-py before 6
    from redis.commands.search.indexDefinition import IndexDefinition, IndexType

port, seed, operations = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
COLORS = ["red", "Red", "blue", "green", "dark blue"]
# key -> (kind, fields or document, stamp); newest first = highest stamp.
model = {}
stamp = 0


def connect():
    protocol = rng.choice([2, 3])
    return redis.Redis(port=port, protocol=protocol, decode_responses=True), protocol


def haversine(lon1, lat1, lon2, lat2):
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * 6372797.560856 * math.asin(math.sqrt(a))


def random_fields():
    return {
        "price": str(rng.randrange(100)),
        "color": rng.choice(COLORS),
        "place": f"{rng.uniform(2.0, 3.0):.5f},{rng.uniform(48.5, 49.5):.5f}",
        "name": f"n{rng.randrange(1000)}",
    }


def write(r, key):
    global stamp
    fields = random_fields()
    if key.startswith("doc:"):
        r.hset(key, mapping=fields)
        previous = model.get(key, ("hash", {}, 0))[1]
        merged = dict(previous)
        merged.update(fields)
        stamp += 1
        model[key] = ("hash", merged, stamp)
    else:
        document = {
            "price": int(fields["price"]),
            "color": fields["color"],
            "place": fields["place"],
            "nested": {"list": [1, 2]},
        }
        assert r.json().set(key, "$", document) is True
        stamp += 1
        model[key] = ("json", document, stamp)


def values(key):
    kind, body, _ = model[key]
    price = float(body["price"])
    lon, lat = (float(x) for x in body["place"].split(","))
    return price, body["color"].lower(), (lon, lat)


def wait_ready(r, name):
    for _ in range(2000):
        info = r.ft(name).info()
        if str(info["indexing"]) == "0":
            return info
        time.sleep(0.01)
    raise AssertionError(f"{name} still indexing")


r, protocol = connect()
r.flushdb()
for i in range(60):
    write(r, f"doc:{i}")
    write(r, f"jdoc:{i}")

# Created on existing data: back-filled in the background.
r.ft("hashes").create_index(
    (NumericField("price", sortable=True), TagField("color", separator=","), GeoField("place")),
    definition=IndexDefinition(prefix=["doc:"], index_type=IndexType.HASH, score=1.0),
)
r.ft("documents").create_index(
    (
        NumericField("$.price", as_name="price"),
        TagField("$.color", as_name="color"),
        GeoField("$.place", as_name="place"),
    ),
    definition=IndexDefinition(prefix=["jdoc:"], index_type=IndexType.JSON),
)
for name, prefix in (("hashes", "doc:"), ("documents", "jdoc:")):
    info = wait_ready(r, name)
    assert int(info["num_docs"]) == sum(1 for k in model if k.startswith(prefix)), info
assert sorted(r.ft().execute_command("FT._LIST")) == ["documents", "hashes"]

for step in range(operations):
    where = f"seed {seed} step {step} (RESP{protocol})"
    op = rng.randrange(10)
    if op < 3:
        write(r, rng.choice(["doc:", "jdoc:"]) + str(rng.randrange(80)))
    elif op == 3:
        key = rng.choice(["doc:", "jdoc:"]) + str(rng.randrange(80))
        deleted = r.delete(key)
        assert deleted == (1 if model.pop(key, None) else 0), where
    elif op == 4:
        r.close()
        r, protocol = connect()
    else:
        name, prefix = rng.choice([("hashes", "doc:"), ("documents", "jdoc:")])
        clauses, tests = [], []
        for _ in range(rng.randrange(1, 3)):
            which = rng.randrange(3)
            if which == 0:
                lo, hi = sorted(rng.randrange(-5, 105) for _ in range(2))
                lo_open, hi_open = rng.random() < 0.3, rng.random() < 0.3
                clauses.append(f"@price:[{'(' if lo_open else ''}{lo} {'(' if hi_open else ''}{hi}]")
                tests.append(lambda v, lo=lo, hi=hi, a=lo_open, b=hi_open: (v[0] > lo if a else v[0] >= lo) and (v[0] < hi if b else v[0] <= hi))
            elif which == 1:
                tags = rng.sample(COLORS, rng.randrange(1, 3))
                clauses.append("@color:{" + " | ".join(t.replace(" ", "\\ ") for t in tags) + "}")
                lowered = {t.lower() for t in tags}
                tests.append(lambda v, lowered=lowered: v[1] in lowered)
            else:
                lon, lat, km = rng.uniform(2.0, 3.0), rng.uniform(48.5, 49.5), rng.uniform(1, 40)
                clauses.append(f"@place:[{lon} {lat} {km} km]")
                tests.append(lambda v, lon=lon, lat=lat, km=km: haversine(lon, lat, *v[2]) <= km * 1000)
        query = Query(" ".join(clauses))
        offset, count = rng.randrange(5), rng.randrange(1, 30)
        query.paging(offset, count)
        sort = rng.choice([None, True, False])
        if sort is not None:
            query.sort_by("price", asc=sort)
        no_content = rng.random() < 0.3
        if no_content:
            query.no_content()
        returned = rng.random() < 0.3 and not no_content
        if returned:
            query.return_fields("price")
        matches = [k for k in model if k.startswith(prefix) and all(t(values(k)) for t in tests)]
        matches.sort(key=lambda k: -model[k][2])
        if sort is not None:
            matches.sort(key=lambda k: values(k)[0], reverse=not sort)
        result = r.ft(name).search(query)
        if protocol == 3:
            # redis-py hands RESP3 search replies over unparsed: RediSearch 2.8's map.
            total = result["total_results"]
            docs = [(hit["id"], hit.get("extra_attributes", {})) for hit in result["results"]]
        else:
            total = result.total
            docs = [(doc.id, {k: v for k, v in doc.__dict__.items() if k not in ("id", "payload")}) for doc in result.docs]
            docs = [(i, {("$" if k == "json" else k): v for k, v in fields.items()}) for i, fields in docs]
        assert total == len(matches), f"{where}: {query.query_string()} total {total} != {len(matches)}"
        ids = [i for i, _ in docs]
        assert ids == matches[offset:offset + count], f"{where}: {query.query_string()} {ids} != {matches[offset:offset + count]}"
        for key, fields in docs:
            kind, body, _ = model[key]
            if no_content:
                assert fields == {}, f"{where}: {fields}"
            elif returned:
                assert fields == {"price": str(body["price"])}, f"{where}: {fields}"
            elif kind == "hash":
                assert fields == body, f"{where}: {fields}"
            else:
                assert set(fields) == {"$"} and json.loads(fields["$"]) == body, f"{where}: {fields}"

info = r.ft("hashes").info()
assert int(info["num_docs"]) == sum(1 for k in model if k.startswith("doc:")), info
r.ft("documents").dropindex(delete_documents=True)
assert not any(r.exists(k) for k in model if k.startswith("jdoc:")), "DD deleted the documents"
assert r.ft().execute_command("FT._LIST") == ["hashes"]
r.close()
print(f"redis-py search: {operations} operations, {len(model)} keys at the end")
