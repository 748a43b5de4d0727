#!/usr/bin/env bash
# Compares Sift with RocksDB and LevelDB (Debian's packages) on the db_bench-style kv benchmark.
#
#   bench/compare-kv.sh [--n N] [--rounds R] [-- EXTRA_KV_OPTIONS...]
#
# Installs what it needs (apt packages if missing; builds `sift` and `sift-peer` in release),
# then runs R rounds (default 3) of Sift, RocksDB and LevelDB with identical settings, each in
# a fresh database directory, the engine order rotating each round. Every run prints JSON rows
# (see `sift bench kv --help`), collected in target/compare-kv/<time>/rows.jsonl. At the end:
# a table of median ops/s per engine and operation with Sift/peer ratios, then one JSON line
# per peer and operation:
#   {"peer": "rocksdb", "op": "fillrandom", "sift_ops_per_sec": ..., "peer_ops_per_sec": ...,
#    "ratio": ...}            (ratio = Sift / peer; null when a side has no result)
# Options after `--` go to every engine (for example `-- --threads 2 --compression snappy`).
# Exits non-zero when any run failed (after printing what it has).
set -euo pipefail

n=1000000
rounds=3
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --n) n="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare-kv: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$n" =~ ^[0-9]+$ && "$rounds" =~ ^[0-9]+$ && "$rounds" -ge 1 ]]; then
    echo "compare-kv: --n and --rounds take positive integers" >&2
    exit 2
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# --- System packages and builds ------------------------------------------------------------
script=compare-kv
# shellcheck source=bench/peers-setup.sh
source "$repo/bench/peers-setup.sh"

# --- Runs ------------------------------------------------------------------------------------
work="$repo/target/compare-kv/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$work"
rows="$work/rows.jsonl"
: >"$rows"
ops="fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom"
engines=(sift rocksdb leveldb)
failures=0
echo "compare-kv: n $n, $rounds rounds, ops $ops ${extra[*]:-}; results in $work" >&2

run_engine() {
    local engine="$1" round="$2"
    local db="$work/db-$engine-$round"
    local log="$work/$engine-$round.log"
    rm -rf "$db"
    local command
    if [[ "$engine" == sift ]]; then
        command=("$sift_bin" bench kv)
    else
        command=("$peer_bin" kv --engine "$engine")
    fi
    command+=(--ops "$ops" --n "$n" --db "$db" --json "${extra[@]}")
    echo "compare-kv: round $round: $engine" >&2
    if "${command[@]}" >>"$rows" 2>"$log"; then
        :
    else
        echo "compare-kv: $engine failed in round $round (exit $?); see $log:" >&2
        tail -n 5 "$log" >&2 || true
        failures=$((failures + 1))
    fi
    rm -rf "$db"
}

for ((round = 1; round <= rounds; round++)); do
    for ((slot = 0; slot < ${#engines[@]}; slot++)); do
        run_engine "${engines[$(((slot + round - 1) % ${#engines[@]}))]}" "$round"
    done
done

# --- Summary ---------------------------------------------------------------------------------
python3 - "$rows" "$ops" <<'PYTHON'
import json
import statistics
import sys

rows_path, ops = sys.argv[1], sys.argv[2].split(",")
engines = ["sift", "rocksdb", "leveldb"]
peers = ["rocksdb", "leveldb"]
ops_per_sec = {}
p99_us = {}
with open(rows_path) as rows:
    for line in rows:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        key = (row.get("engine"), row.get("op"))
        ops_per_sec.setdefault(key, []).append(row["ops_per_sec"])
        p99_us.setdefault(key, []).append(row["p99_us"])


def median(values, key):
    found = values.get(key)
    return round(statistics.median(found), 3) if found else None


def show(value, width, decimals=0):
    return f"{'-':>{width}}" if value is None else f"{value:>{width},.{decimals}f}"


print()
print("median ops/s (ratio = sift / peer)")
header = f"{'op':<12}" + "".join(f"{engine:>14}" for engine in engines)
header += "".join(f"{'sift/' + peer:>15}" for peer in peers)
print(header)
for op in ops:
    medians = {engine: median(ops_per_sec, (engine, op)) for engine in engines}
    line = f"{op:<12}" + "".join(show(medians[engine], 14) for engine in engines)
    for peer in peers:
        ratio = None
        if medians["sift"] is not None and medians[peer]:
            ratio = medians["sift"] / medians[peer]
        line += show(ratio, 15, 2)
    print(line)

print()
print("median p99 latency, us")
print(f"{'op':<12}" + "".join(f"{engine:>14}" for engine in engines))
for op in ops:
    print(f"{op:<12}" + "".join(show(median(p99_us, (engine, op)), 14, 2) for engine in engines))
print()

for peer in peers:
    for op in ops:
        sift = median(ops_per_sec, ("sift", op))
        other = median(ops_per_sec, (peer, op))
        ratio = round(sift / other, 4) if sift is not None and other else None
        print(json.dumps({
            "peer": peer,
            "op": op,
            "sift_ops_per_sec": sift,
            "peer_ops_per_sec": other,
            "ratio": ratio,
            "rounds": min(len(ops_per_sec.get(("sift", op), [])),
                          len(ops_per_sec.get((peer, op), []))),
        }))
PYTHON

if [[ $failures -gt 0 ]]; then
    echo "compare-kv: $failures run(s) failed" >&2
    exit 1
fi
