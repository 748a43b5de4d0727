#!/usr/bin/env bash
# Compares `sift serve` with Debian's in-memory `redis-server` under `redis-benchmark`.
#
#   bench/compare-server.sh [--requests N] [--clients C] [--pipeline P] [--rounds R] [--fsync POLICY]
#
# Installs redis-server and redis-tools if missing and builds `sift` in release. Each round
# starts both servers on loopback ports (Redis without persistence: `--save "" --appendonly no`;
# Sift with `--fsync POLICY`, default everysec, on a fresh database), runs
# `redis-benchmark -t set,get -P P -c C -n N` against each, the server order alternating
# per round, and records requests per second. Hashes are measured with one small hash per key
# (`HSET h:<random> name <random>`, then HGET), not with redis-benchmark's own `hset` test, which
# grows ONE hash to 100,000 fields: Sift stores a hash as one document (so that indexes can
# read it), and rewrites it whole on every HSET. At the end: the median per server and test and
# the ratio Sift / Redis, as a table and as one JSON line per test:
#   {"test": "SET", "sift_requests_per_sec": ..., "redis_requests_per_sec": ..., "ratio": ...}
# Results and server logs are kept in target/compare-server/<time>/.
set -euo pipefail

requests=1000000
clients=50
pipeline=16
rounds=3
fsync=everysec
while [[ $# -gt 0 ]]; do
    case "$1" in
        --requests) requests="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --fsync) fsync="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare-server: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    echo "compare-server: installing redis-server and redis-tools" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y redis-server redis-tools >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y redis-server redis-tools >/dev/null; }
fi
cargo build --release --quiet -p sift-cli
sift_bin="$repo/target/release/sift"

work="$repo/target/compare-server/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$work"
results="$work/results.csv"
echo "round,server,test,requests_per_sec" >"$results"
echo "compare-server: $requests requests, $clients clients, pipeline $pipeline, $rounds rounds, sift --fsync $fsync; results in $work" >&2

source "$repo/bench/server-common.sh"

run_server() {
    local server="$1" round="$2" port pid
    port="$(free_port)"
    if [[ "$server" == sift ]]; then
        rm -rf "$work/db-$round"
        "$sift_bin" serve --db "$work/db-$round" --port "$port" --fsync "$fsync" 2>"$work/sift-$round.log" &
    else
        redis-server --port "$port" --save "" --appendonly no --daemonize no >"$work/redis-$round.log" 2>&1 &
    fi
    pid=$!
    wait_for "$port"
    local bench=(redis-benchmark -p "$port" -P "$pipeline" -c "$clients" -n "$requests" -r 100000 --csv)
    {
        "${bench[@]}" -t set,get | tail -n +2
        "${bench[@]}" HSET 'h:__rand_int__' name '__rand_int__' | tail -n +2 | sed 's/^"[^"]*"/"HSET"/'
        "${bench[@]}" HGET 'h:__rand_int__' name | tail -n +2 | sed 's/^"[^"]*"/"HGET"/'
    } >"$work/$server-$round.csv"
    kill -TERM "$pid"
    wait "$pid" || true
    # "SET","123456.78",... (newer redis-benchmark adds latency columns)
    tr -d '"' <"$work/$server-$round.csv" | awk -F, -v r="$round" -v s="$server" \
        '{ print r "," s "," $1 "," $2 }' >>"$results"
}

for round in $(seq 1 "$rounds"); do
    if (( round % 2 == 1 )); then order=(sift redis); else order=(redis sift); fi
    for server in "${order[@]}"; do
        echo "compare-server: round $round, $server" >&2
        run_server "$server" "$round"
    done
done

python3 - "$results" <<'PY'
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tests = sorted({row["test"] for row in rows})
print(f"{'test':<8} {'sift req/s':>14} {'redis req/s':>14} {'sift/redis':>10}")
for test in tests:
    median = {}
    for server in ("sift", "redis"):
        values = [float(r["requests_per_sec"]) for r in rows if r["test"] == test and r["server"] == server]
        median[server] = statistics.median(values) if values else None
    ratio = median["sift"] / median["redis"] if median["sift"] and median["redis"] else None
    shown = f"{ratio:.2f}" if ratio else "-"
    print(f"{test:<8} {median['sift'] or 0:>14.0f} {median['redis'] or 0:>14.0f} {shown:>10}")
    print(json.dumps({"test": test, "sift_requests_per_sec": median["sift"],
                      "redis_requests_per_sec": median["redis"], "ratio": ratio}))
PY
