"""redis-py against `sift serve`: random strings, hashes and JSON documents through redis-py's
own helpers (`r.json()`, pipelines, `scan_iter`), every answer compared with a dict model.

    python model.py PORT SEED OPERATIONS

Run by crates/sift-cli/tests/serve.rs in a virtual environment with redis-py installed.
"""

import json
import random
import sys

import redis

port, seed, operations = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
model = {}


def key():
    return rng.choice(["a", "b", "user:1", "user:2", "doc:1", "doc:2", "h:1", "h:2"]) + str(rng.randrange(4))


def connect():
    protocol = rng.choice([2, 3])
    return redis.Redis(port=port, protocol=protocol, decode_responses=True), protocol


r, protocol = connect()
r.flushdb()
for step in range(operations):
    where = f"seed {seed} step {step} (RESP{protocol})"
    k = key()
    op = rng.randrange(10)
    if op == 0:
        value = f"v{rng.randrange(1000)}"
        assert r.set(k, value) is True, where
        model[k] = ("string", value)
    elif op == 1:
        current = model.get(k)
        if current is None:
            assert r.get(k) is None, where
        elif current[0] == "string":
            assert r.get(k) == current[1], where
        else:
            try:
                r.get(k)
                raise AssertionError(f"{where}: GET of a {current[0]} must fail")
            except redis.ResponseError as error:
                assert str(error).startswith("WRONGTYPE"), where
    elif op == 2:
        fields = {f"f{rng.randrange(4)}": str(rng.randrange(100)) for _ in range(rng.randrange(1, 4))}
        current = model.get(k)
        if current is not None and current[0] != "hash":
            try:
                r.hset(k, mapping=fields)
                raise AssertionError(f"{where}: HSET on a {current[0]} must fail")
            except redis.ResponseError as error:
                assert str(error).startswith("WRONGTYPE"), where
        else:
            old = dict(current[1]) if current else {}
            added = r.hset(k, mapping=fields)
            assert added == len(set(fields) - set(old)), where
            old.update(fields)
            model[k] = ("hash", old)
    elif op == 3:
        current = model.get(k)
        if current is None or current[0] == "hash":
            expected = current[1] if current else {}
            assert r.hgetall(k) == expected, where
            assert r.hlen(k) == len(expected), where
    elif op == 4:
        document = {"n": rng.randrange(-9, 9), "name": rng.choice(["x", "ü y", 'q"uote']), "list": [1, {"b": None}]}
        current = model.get(k)
        if current is not None and current[0] != "json":
            try:
                r.json().set(k, "$", document)
                raise AssertionError(f"{where}: JSON.SET on a {current[0]} must fail")
            except redis.ResponseError as error:
                assert str(error).startswith("WRONGTYPE"), where
        else:
            assert r.json().set(k, "$", document) is True, where
            model[k] = ("json", document)
    elif op == 5:
        current = model.get(k)
        if current is None:
            assert r.json().get(k) is None, where
        elif current[0] == "json":
            assert r.json().get(k) == current[1], where
            assert r.json().get(k, "$.n") == [current[1]["n"]], where
            assert r.json().get(k, "$.list[1].b") == [None], where
    elif op == 6:
        keys = [key() for _ in range(3)]
        expected = sum(1 for x in set(keys) if x in model)
        assert r.delete(*keys) == expected, where
        for x in keys:
            model.pop(x, None)
    elif op == 7:
        # redis-py's default pipeline is a MULTI/EXEC transaction.
        transaction = rng.random() < 0.5
        pipe = r.pipeline(transaction=transaction)
        keys = [key() for _ in range(5)]
        for x in keys:
            pipe.exists(x)
        written = f"p{rng.randrange(1000)}"
        target = key()
        pipe.set(target, written)
        expected = [int(x in model) for x in keys] + [True]
        assert pipe.execute() == expected, where
        model[target] = ("string", written)
    elif op == 8:
        assert r.dbsize() == len(model), where
        assert sorted(r.scan_iter(match="user:*", count=3)) == sorted(x for x in model if x.startswith("user:")), where
        types = {"string": "string", "hash": "hash", "json": "ReJSON-RL"}
        for x, (kind, _) in model.items():
            assert r.type(x) == types[kind], where
    else:
        r.close()
        r, protocol = connect()

r.close()
print(f"redis-py model: {operations} operations, {len(model)} keys at the end")
