#!/usr/bin/env bash
# Compares `sift serve`'s FT.SEARCH with Debian's redis-server + redis-redisearch.
#
#   bench/compare-search.sh [--documents N] [--seconds S] [--rounds R] [--clients C] [--pipeline P]
#
# Installs redis-server, redis-tools and redis-redisearch if missing; builds `sift` and the load
# driver `resp-load` (crates/sift-bench/src/bin/resp-load.rs) in release. Each round starts both
# servers on loopback ports, the order alternating per round (Redis without persistence; Sift
# with --fsync everysec on a fresh database), creates an index with two NUMERIC fields (`uid`
# and `price`), loads N documents `doc:<i>` with uid uniform below N/10 (about ten documents
# per uid) and price uniform below 1,000,000, then runs for S seconds each:
#   top10: FT.SEARCH idx "@uid:[u u]" LIMIT 0 10            (about 10 matches: the newest 10)
#   range: FT.SEARCH idx "@price:[p p+W]" LIMIT 0 10        (W such that about 100 match)
# Debian's module is RediSearch 1.2.2, whose FT.CREATE has no ON/PREFIX and which indexes
# documents added with FT.ADD, not HSET; Sift gets HSET and FT.CREATE … ON HASH PREFIX 1 doc:.
# Both answer the same query text. Recorded per round: load rate (indexed writes/s), queries/s,
# the mean `total` of the replies (both servers must agree), resident memory after the load
# (and Sift's files). At the end: medians, ratios and memory per million documents, as a table
# and one JSON line per measure. Results and logs: target/compare-search/<time>/.
set -euo pipefail

documents=1000000
seconds=10
rounds=3
clients=50
pipeline=16
while [[ $# -gt 0 ]]; do
    case "$1" in
        --documents) documents="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --pipeline) pipeline="$2"; shift 2 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare-search: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
module=/usr/lib/redis/modules/redisearch.so
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null || [[ ! -f "$module" ]]; then
    echo "compare-search: installing redis-server, redis-tools and redis-redisearch" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y redis-server redis-tools redis-redisearch >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y redis-server redis-tools redis-redisearch >/dev/null; }
fi
cargo build --release --quiet -p sift-cli -p sift-bench --bin sift --bin resp-load
sift_bin="$repo/target/release/sift"
load="$repo/target/release/resp-load"

work="$repo/target/compare-search/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$work"
results="$work/results.csv"
echo "round,server,measure,value" >"$results"
uids=$(( documents / 10 > 0 ? documents / 10 : 1 ))
width=$(( 100 * 1000000 / documents ))
echo "compare-search: $documents documents, $seconds s per query test, $rounds rounds, $clients clients, pipeline $pipeline; results in $work" >&2

source "$repo/bench/server-common.sh"

record() { echo "$1,$2,$3,$4" >>"$results"; }

field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

run_server() {
    local server="$1" round="$2" port pid out
    port="$(free_port)"
    if [[ "$server" == sift ]]; then
        rm -rf "$work/db-$round"
        "$sift_bin" serve --db "$work/db-$round" --port "$port" --fsync everysec 2>"$work/sift-$round.log" &
        pid=$!
        wait_for "$port"
        redis-cli -p "$port" FT.CREATE idx ON HASH PREFIX 1 doc: SCHEMA uid NUMERIC price NUMERIC >/dev/null
        out=$("$load" --port "$port" --connections "$clients" --pipeline "$pipeline" --requests "$documents" \
            -- HSET 'doc:{i}' uid "{rand:$uids}" price '{rand:1000000}')
    else
        redis-server --port "$port" --save "" --appendonly no --daemonize no \
            --loadmodule "$module" >"$work/redis-$round.log" 2>&1 &
        pid=$!
        wait_for "$port"
        redis-cli -p "$port" FT.CREATE idx SCHEMA uid NUMERIC price NUMERIC >/dev/null
        out=$("$load" --port "$port" --connections "$clients" --pipeline "$pipeline" --requests "$documents" \
            -- FT.ADD idx 'doc:{i}' 1.0 FIELDS uid "{rand:$uids}" price '{rand:1000000}')
    fi
    echo "$out" >"$work/$server-$round-load.json"
    [[ "$(field "$out" errors)" == 0 ]] || { echo "compare-search: $server load had errors" >&2; exit 1; }
    record "$round" "$server" load_per_sec "$(field "$out" requests_per_sec)"
    record "$round" "$server" rss_bytes "$(( $(ps -o rss= -p "$pid") * 1024 ))"
    if [[ "$server" == sift ]]; then
        record "$round" "$server" file_bytes "$(du -sb "$work/db-$round" | cut -f1)"
    fi
    for test in top10 range; do
        if [[ "$test" == top10 ]]; then
            query="@uid:[{rand:$uids} {rand:$uids+0}]"
        else
            query="@price:[{rand:1000000} {rand:1000000+$width}]"
        fi
        out=$("$load" --port "$port" --connections "$clients" --pipeline "$pipeline" --seconds "$seconds" \
            -- FT.SEARCH idx "$query" LIMIT 0 10)
        echo "$out" >"$work/$server-$round-$test.json"
        [[ "$(field "$out" errors)" == 0 ]] || { echo "compare-search: $server $test had errors" >&2; exit 1; }
        record "$round" "$server" "${test}_per_sec" "$(field "$out" requests_per_sec)"
        record "$round" "$server" "${test}_mean_total" "$(field "$out" mean_first_integer)"
    done
    kill -TERM "$pid"
    wait "$pid" || true
}

for round in $(seq 1 "$rounds"); do
    if (( round % 2 == 1 )); then order=(sift redis); else order=(redis sift); fi
    for server in "${order[@]}"; do
        echo "compare-search: round $round, $server" >&2
        run_server "$server" "$round"
    done
done

python3 - "$results" "$documents" <<'PY'
import csv, json, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
documents = int(sys.argv[2])
measures = ["load_per_sec", "top10_per_sec", "range_per_sec", "top10_mean_total", "range_mean_total", "rss_bytes", "file_bytes"]
print(f"{'measure':<18} {'sift':>14} {'redisearch':>14} {'sift/redisearch':>16}")
for measure in measures:
    median = {}
    for server in ("sift", "redis"):
        values = [float(r["value"]) for r in rows if r["measure"] == measure and r["server"] == server]
        median[server] = statistics.median(values) if values else None
    if measure in ("rss_bytes", "file_bytes"):
        for server in median:
            if median[server] is not None:
                median[server] = median[server] * 1_000_000 / documents
        measure = measure.replace("_bytes", "_bytes_per_million_documents")
    ratio = median["sift"] / median["redis"] if median["sift"] and median["redis"] else None
    print(f"{measure:<18} {median['sift'] or 0:>14.1f} {median['redis'] or 0:>14.1f} {(f'{ratio:.2f}' if ratio else '-'):>16}")
    print(json.dumps({"measure": measure, "sift": median["sift"], "redisearch": median["redis"], "ratio": ratio}))
PY
