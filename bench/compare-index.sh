#!/usr/bin/env bash
# Compares Sift's secondary indexes with SQLite and RocksDB on the tweet index benchmark.
#
#   bench/compare-index.sh [--n N] [--rounds R] [--workload W] [--index path:kind[:maintenance]]...
#                          [-- EXTRA_INDEX_BENCH_OPTIONS...]
#
# Installs what it needs (apt packages if missing; builds `sift` and `sift-peer` in release),
# then runs R rounds (default 3) of Sift (`sift bench index`), SQLite (JSON expression
# indexes, WAL, synchronous=NORMAL) and RocksDB (composite index column families maintained
# in the document's WriteBatch) with identical options, each in a fresh directory, the engine
# order rotating each round. Sift is skipped, with a message, while `sift bench index` does
# not exist. --index is passed to every engine (peers index the attribute their one way);
# default: the benchmark's default indexes. Every run prints JSON rows (see
# `sift-peer index --help`), collected in target/compare-index/<time>/rows.jsonl. At the end:
# a table of medians per engine and measurement, then one JSON line per peer and measurement:
#   {"peer": "sqlite", "op": "LOOKUP", "attribute": "user.id", "top_k": 10, "selectivity": null,
#    "sift_ops_per_sec": ..., "peer_ops_per_sec": ..., "ratio": ..., "sift_p50_us": ...,
#    "peer_p50_us": ...}      (ratio = Sift / peer ops/s; null when a side has no result)
# Options after `--` go to every engine (for example `-- --max-seconds 2 --top-k 10`).
# Exits non-zero when any run failed (after printing what it has).
set -euo pipefail

n=1000000
rounds=3
workload=static
indexes=()
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --n) n="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --workload) workload="$2"; shift 2 ;;
        --index) indexes+=(--index "$2"); shift 2 ;;
        --) shift; extra=("$@"); break ;;
        -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare-index: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$n" =~ ^[0-9]+$ && "$rounds" =~ ^[0-9]+$ && "$rounds" -ge 1 ]]; then
    echo "compare-index: --n and --rounds take positive integers" >&2
    exit 2
fi

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# --- System packages and builds ------------------------------------------------------------
script=compare-index
# shellcheck source=bench/peers-setup.sh
source "$repo/bench/peers-setup.sh"

engines=(sqlite rocksdb)
if "$sift_bin" bench index --help >/dev/null 2>&1; then
    engines=(sift sqlite rocksdb)
else
    echo "compare-index: \`sift bench index\` does not exist yet (Sift's index layer is not" \
         "in this build): running the peers only; Sift's columns and ratios stay empty" >&2
fi

# --- Runs ------------------------------------------------------------------------------------
work="$repo/target/compare-index/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$work"
rows="$work/rows.jsonl"
: >"$rows"
failures=0
echo "compare-index: n $n, $rounds rounds, workload $workload ${indexes[*]:-} ${extra[*]:-};" \
     "results in $work" >&2

run_engine() {
    local engine="$1" round="$2"
    local db="$work/db-$engine-$round"
    local log="$work/$engine-$round.log"
    rm -rf "$db"
    local command
    if [[ "$engine" == sift ]]; then
        command=("$sift_bin" bench index)
    else
        command=("$peer_bin" index --engine "$engine")
    fi
    command+=(--n "$n" --workload "$workload" --db "$db" --json "${indexes[@]}" "${extra[@]}")
    echo "compare-index: round $round: $engine" >&2
    if "${command[@]}" >>"$rows" 2>"$log"; then
        :
    else
        echo "compare-index: $engine failed in round $round (exit $?); see $log:" >&2
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
python3 - "$rows" <<'PYTHON'
import json
import statistics
import sys

engines = ["sift", "sqlite", "rocksdb"]
peers = ["sqlite", "rocksdb"]
ops_per_sec, p50_us, order = {}, {}, []
with open(sys.argv[1]) as rows:
    for line in rows:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("slice") is not None:
            continue  # the throughput curve: kept in rows.jsonl, not summarized
        measurement = (row["phase"], row["op"], row.get("attribute"),
                       json.dumps(row.get("top_k")), row.get("selectivity"))
        if row["op"] in ("PUT", "UPDATE", "MIXED"):
            measurement = (row["phase"], row["op"], None, "null", None)
        if measurement not in order:
            order.append(measurement)
        key = (row["engine"], measurement)
        ops_per_sec.setdefault(key, []).append(row["ops_per_sec"])
        p50_us.setdefault(key, []).append(row["p50_us"])


def median(values, key):
    found = values.get(key)
    return round(statistics.median(found), 3) if found else None


def show(value, width, decimals=0):
    return f"{'-':>{width}}" if value is None else f"{value:>{width},.{decimals}f}"


def label(measurement):
    phase, op, attribute, top_k, selectivity = measurement
    text = f"{phase} {op}"
    if attribute:
        text += f" {attribute}"
    if top_k != "null":
        text += f" K={json.loads(top_k)}"
    if selectivity is not None:
        text += f" sel={selectivity}"
    return text


print()
print("median ops/s and p50 latency (us); ratio = sift / peer ops/s")
header = f"{'measurement':<44}" + "".join(f"{engine + ' ops/s':>15}" for engine in engines)
header += "".join(f"{engine + ' p50':>13}" for engine in engines)
header += "".join(f"{'sift/' + peer:>13}" for peer in peers)
print(header)
for measurement in order:
    line = f"{label(measurement):<44}"
    line += "".join(show(median(ops_per_sec, (e, measurement)), 15) for e in engines)
    line += "".join(show(median(p50_us, (e, measurement)), 13, 1) for e in engines)
    sift = median(ops_per_sec, ("sift", measurement))
    for peer in peers:
        other = median(ops_per_sec, (peer, measurement))
        line += show(sift / other if sift is not None and other else None, 13, 2)
    print(line)
print()

for peer in peers:
    for measurement in order:
        phase, op, attribute, top_k, selectivity = measurement
        sift = median(ops_per_sec, ("sift", measurement))
        other = median(ops_per_sec, (peer, measurement))
        print(json.dumps({
            "peer": peer,
            "phase": phase,
            "op": op,
            "attribute": attribute,
            "top_k": json.loads(top_k),
            "selectivity": selectivity,
            "sift_ops_per_sec": sift,
            "peer_ops_per_sec": other,
            "ratio": round(sift / other, 4) if sift is not None and other else None,
            "sift_p50_us": median(p50_us, ("sift", measurement)),
            "peer_p50_us": median(p50_us, (peer, measurement)),
            "rounds": min(len(ops_per_sec.get(("sift", measurement), [])),
                          len(ops_per_sec.get((peer, measurement), []))),
        }))
PYTHON

if [[ $failures -gt 0 ]]; then
    echo "compare-index: $failures run(s) failed" >&2
    exit 1
fi
