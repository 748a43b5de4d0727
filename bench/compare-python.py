#!/usr/bin/env python3
"""Sift from Python beside the stores Python users know, on the same tweets and queries.

Loads the first --n generated tweets (`sift generate tweets`) into each store from the same
Python dicts, with an index on `user.id` maintained during the load, then runs the same
top-10 LOOKUPs (the newest 10 tweets of a user, as dicts) in --rounds alternated rounds.

  sift-composite, sift-lazy   sift_lsm, a composite / lazy index on user.id, put_many batches
  sift-composite-put, …-put   the same, loaded with one put() per tweet
  sqlite3                     JSON text, an expression index on json_extract(doc, '$.user.id'),
                              ORDER BY rowid DESC (WAL, synchronous=NORMAL)
  rocksdict, plyvel           an application-maintained composite index: key
                              user id ‖ inverted insertion number ‖ tweet id (RocksDB, LevelDB)

No store syncs each write (Sift and RocksDB: WAL without fsync; SQLite: WAL with
synchronous=NORMAL; LevelDB: its log without sync). Before timing, the first 200 queries must
give the same tweets in every store. Prints one JSON object per measurement and a summary.
Driven by bench/compare-python.sh.
"""

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import struct
import sys
import time
from pathlib import Path

CHUNK = 1000
TOP_K = 10
SIGN = 1 << 63
MAX_U64 = (1 << 64) - 1


def index_key(user_id: int, number: int, tweet_id: str) -> bytes:
    # Big-endian, sign bit flipped: byte order is numeric order; newest first by inversion.
    return b"i" + struct.pack(">QQ", user_id + SIGN, MAX_U64 - number) + tweet_id.encode()


class SiftStore:
    def __init__(self, root: Path, kind: str, single: bool):
        import sift_lsm

        self.name = f"sift-{kind}" + ("-put" if single else "")
        self.single = single
        self.db = sift_lsm.open(root / self.name)
        self.tweets = self.db.collection("tweets", primary_key="tweet_id")
        self.tweets.create_index("by_user", path="user.id", type="int", kind=kind)

    def load(self, documents):
        if self.single:
            # One write per tweet, as `sift bench index` loads: the binding's cost per call.
            put = self.tweets.put
            for document in documents:
                put(document)
        else:
            self.tweets.put_many(documents, chunk_size=CHUNK)

    def top(self, user_id):
        return self.tweets.lookup("by_user", user_id, TOP_K)

    def close(self):
        self.db.close()


class SqliteStore:
    name = "sqlite3"

    def __init__(self, root: Path):
        self.connection = sqlite3.connect(root / "sqlite.db", isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.execute("CREATE TABLE tweets (tweet_id TEXT PRIMARY KEY, doc TEXT NOT NULL)")
        self.connection.execute("CREATE INDEX by_user ON tweets (json_extract(doc, '$.user.id'))")

    def load(self, documents):
        cursor = self.connection.cursor()
        for start in range(0, len(documents), CHUNK):
            cursor.execute("BEGIN")
            cursor.executemany(
                "INSERT INTO tweets VALUES (?, ?)",
                [(d["tweet_id"], json.dumps(d)) for d in documents[start : start + CHUNK]],
            )
            cursor.execute("COMMIT")

    def top(self, user_id):
        rows = self.connection.execute(
            "SELECT doc FROM tweets WHERE json_extract(doc, '$.user.id') = ? ORDER BY rowid DESC LIMIT ?",
            (user_id, TOP_K),
        )
        return [json.loads(doc) for (doc,) in rows]

    def close(self):
        self.connection.close()


class RocksdictStore:
    name = "rocksdict"

    def __init__(self, root: Path):
        from rocksdict import Options, Rdict

        self.db = Rdict(str(root / "rocksdict"), Options(raw_mode=True))
        self.number = 0

    def load(self, documents):
        from rocksdict import WriteBatch

        for start in range(0, len(documents), CHUNK):
            batch = WriteBatch(raw_mode=True)
            for document in documents[start : start + CHUNK]:
                self.number += 1
                tweet_id = str(document["tweet_id"])
                batch.put(b"d" + tweet_id.encode(), json.dumps(document).encode())
                batch.put(index_key(document["user"]["id"], self.number, tweet_id), b"")
            self.db.write(batch)

    def top(self, user_id):
        prefix = b"i" + struct.pack(">Q", user_id + SIGN)
        iterator = self.db.iter()
        iterator.seek(prefix)
        hits = []
        while iterator.valid() and len(hits) < TOP_K:
            key = iterator.key()
            if not key.startswith(prefix):
                break
            hits.append(json.loads(self.db[b"d" + key[17:]]))
            iterator.next()
        return hits

    def close(self):
        self.db.close()


class PlyvelStore:
    name = "plyvel"

    def __init__(self, root: Path):
        import plyvel

        self.db = plyvel.DB(str(root / "plyvel"), create_if_missing=True)
        self.number = 0

    def load(self, documents):
        for start in range(0, len(documents), CHUNK):
            with self.db.write_batch() as batch:
                for document in documents[start : start + CHUNK]:
                    self.number += 1
                    tweet_id = str(document["tweet_id"])
                    batch.put(b"d" + tweet_id.encode(), json.dumps(document).encode())
                    batch.put(index_key(document["user"]["id"], self.number, tweet_id), b"")

    def top(self, user_id):
        prefix = b"i" + struct.pack(">Q", user_id + SIGN)
        hits = []
        for key in self.db.iterator(prefix=prefix, include_value=False):
            hits.append(json.loads(self.db.get(b"d" + key[17:])))
            if len(hits) == TOP_K:
                break
        return hits

    def close(self):
        self.db.close()


def make_store(name: str, root: Path):
    if name.startswith("sift-"):
        kind = name.removeprefix("sift-")
        return SiftStore(root, kind.removesuffix("-put"), kind.endswith("-put"))
    return {"sqlite3": SqliteStore, "rocksdict": RocksdictStore, "plyvel": PlyvelStore}[name](root)


def emit(record):
    print(json.dumps(record), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tweets", required=True, type=Path, help="a JSON-lines file of generated tweets")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=5000, help="top-10 LOOKUPs per store and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, required=True, help="scratch directory (emptied)")
    parser.add_argument(
        "--stores",
        default="sift-composite,sift-lazy,sqlite3,rocksdict,plyvel,sift-composite-put,sift-lazy-put",
        help="comma-separated; sift-KIND-put loads with one put() per tweet instead of put_many",
    )
    parser.add_argument("--seed", type=int, default=301)
    args = parser.parse_args()

    documents = []
    with open(args.tweets, encoding="utf-8") as file:
        for line in file:
            if len(documents) == args.n:
                break
            documents.append(json.loads(line))
    if len(documents) < args.n:
        sys.exit(f"{args.tweets} has {len(documents)} tweets, fewer than --n {args.n}")
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)

    stores = []
    for name in args.stores.split(","):
        store = make_store(name, args.dir)
        start = time.perf_counter()
        store.load(documents)
        elapsed = time.perf_counter() - start
        emit({"store": store.name, "phase": "load", "n": len(documents), "elapsed_s": round(elapsed, 3),
              "ops_per_sec": round(len(documents) / elapsed, 1)})
        stores.append(store)

    rng = random.Random(args.seed)
    # Users drawn as a random tweet's author: as skewed as the data (Zipf).
    users = [rng.choice(documents)["user"]["id"] for _ in range(args.lookups)]
    for user_id in users[:200]:
        answers = {store.name: [d["tweet_id"] for d in store.top(user_id)] for store in stores}
        if len({tuple(a) for a in answers.values()}) != 1:
            sys.exit(f"stores disagree on user {user_id}: {answers}")

    throughput = {store.name: [] for store in stores}
    for round_ in range(1, args.rounds + 1):
        for store in stores if round_ % 2 else list(reversed(stores)):
            start = time.perf_counter()
            for user_id in users:
                store.top(user_id)
            elapsed = time.perf_counter() - start
            throughput[store.name].append(len(users) / elapsed)
            emit({"store": store.name, "phase": "lookup", "top_k": TOP_K, "round": round_,
                  "n": len(users), "ops_per_sec": round(len(users) / elapsed, 1)})
    for store in stores:
        emit({"store": store.name, "phase": "lookup", "top_k": TOP_K, "round": "median",
              "ops_per_sec": round(statistics.median(throughput[store.name]), 1),
              "spread": [round(x, 1) for x in sorted(throughput[store.name])]})
        store.close()


if __name__ == "__main__":
    main()
