#!/usr/bin/env bash
# The Vinyl microbenchmark on Sift (`sift bench vinyl`: deferred, deferred-fast-path,
# sync-full) and on Tarantool 2.6's vinyl engine (bench/peers/tarantool-vinyl.lua: deferred
# DELETEs on, and off through an on_replace trigger), with identical parameters, in one script
# so that the ratios compare runs made under the same machine load.
#
#   bench/vinyl-tarantool.sh [--keys N] [--seconds S] [--batch-max B] [--clients C]
#                            [--settings "a b"] [--rounds R] [--seed X]
#                            [--cache-bytes BYTES] [--evict-ms MS] [--cold-tarantool-cache]
#
# Defaults: 250000 keys (all preloaded), 15 measured seconds per run, batches of 1..500,
# 4 clients, settings a and b, 1 round. Each run (one engine and scheme) is a fresh directory:
# preload (not timed), dump to disk, then the measurement.
#   a: default options of both engines, data in the page cache; Tarantool reads every key once
#      after the preload (not timed) so its tuple cache holds the data as the page cache holds
#      Sift's (--cold-tarantool-cache skips that: then each non-deferred read of a key not yet
#      cached goes to a vinyl read thread and the long transactions abort on conflicts).
#   b: disk-bound. Sift: O_DIRECT table reads, a --cache-bytes block cache (default 1 MiB).
#      Tarantool has no direct-I/O reads: vinyl_cache (its tuple cache) = --cache-bytes,
#      vinyl_memory = 64 MiB (Sift's default memtable size, also given to Sift), and a fiber
#      drops its data files from the OS page cache every --evict-ms (default 10) ms.
# Runs alternate: in odd rounds Sift first, in even rounds Tarantool first.
# Installs the Debian package tarantool if missing and builds `sift` (release) if needed.
# Output: target/vinyl-tarantool/<time>/*.jsonl (every interval and summary line) and a table:
# average / median / max statements per second per engine and scheme, and the ratios
# deferred / sync-full (Sift) and deferred / non-deferred (Tarantool) per setting and round.
set -euo pipefail

keys=250000
seconds=15
batch_max=500
clients=4
settings="a b"
rounds=1
seed=7
cache_bytes=$((1 << 20))
evict_ms=10
warm=1
memtable_bytes=$((64 << 20))
while [[ $# -gt 0 ]]; do
    case "$1" in
        --keys) keys="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --batch-max) batch_max="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --settings) settings="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --cache-bytes) cache_bytes="$2"; shift 2 ;;
        --evict-ms) evict_ms="$2"; shift 2 ;;
        --cold-tarantool-cache) warm=0; shift ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "vinyl-tarantool: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for value in "$keys" "$batch_max" "$clients" "$rounds" "$seed" "$cache_bytes" "$evict_ms"; do
    if ! [[ "$value" =~ ^[0-9]+$ && "$value" -ge 1 ]]; then
        echo "vinyl-tarantool: numeric options take positive integers (got $value)" >&2
        exit 2
    fi
done
for setting in $settings; do
    if [[ "$setting" != a && "$setting" != b ]]; then
        echo "vinyl-tarantool: --settings takes a, b or \"a b\"" >&2
        exit 2
    fi
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

# --- Tarantool and Sift ------------------------------------------------------------------------
if ! command -v tarantool >/dev/null 2>&1; then
    echo "vinyl-tarantool: installing the Debian package tarantool" >&2
    if [[ "$(id -u)" -eq 0 ]]; then sudo=(); else sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq tarantool >/dev/null
fi
echo "vinyl-tarantool: $(tarantool --version | head -1)" >&2
sift_bin="${SIFT_BIN:-$repo/target/release/sift}"
if ! [[ -x "$sift_bin" ]] || ! "$sift_bin" bench vinyl --help 2>/dev/null | grep -q deferred-fast-path; then
    echo "vinyl-tarantool: building sift (release)" >&2
    cargo build --release -j 1 -p sift-cli >&2
    sift_bin="$repo/target/release/sift"
fi

out="$repo/target/vinyl-tarantool/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "vinyl-tarantool: results in $out" >&2

run_sift() {
    local setting="$1" round="$2"
    local args=(--keys "$keys" --seconds "$seconds" --batch-max "$batch_max" --threads "$clients"
                --seed "$seed" --maintenance deferred,deferred-fast-path,sync-full --json
                --db "$out/sift-$setting-$round")
    if [[ "$setting" == b ]]; then
        args+=(--disk-bound --cache-bytes "$cache_bytes" --memtable-bytes "$memtable_bytes")
    fi
    echo "vinyl-tarantool: setting $setting round $round: sift ${args[*]}" >&2
    "$sift_bin" bench vinyl "${args[@]}" > "$out/$setting-r$round-sift.jsonl"
    rm -rf "$out/sift-$setting-$round"
}

run_tarantool() {
    local setting="$1" round="$2" mode="$3"
    local dir="$out/tarantool-$setting-$round-$mode"
    local args=(--dir "$dir" --mode "$mode" --keys "$keys" --seconds "$seconds"
                --batch-max "$batch_max" --clients "$clients" --seed "$seed")
    if [[ "$setting" == b ]]; then
        args+=(--vinyl-cache "$cache_bytes" --vinyl-memory "$memtable_bytes"
               --evict-page-cache-ms "$evict_ms")
    else
        args+=(--warm-cache "$warm")
    fi
    echo "vinyl-tarantool: setting $setting round $round: tarantool ${args[*]}" >&2
    tarantool "$repo/bench/peers/tarantool-vinyl.lua" "${args[@]}" \
        > "$out/$setting-r$round-tarantool-$mode.jsonl"
    rm -rf "$dir"
}

for setting in $settings; do
    for round in $(seq 1 "$rounds"); do
        if (( round % 2 == 1 )); then
            run_sift "$setting" "$round"
            run_tarantool "$setting" "$round" deferred
            run_tarantool "$setting" "$round" non-deferred
        else
            run_tarantool "$setting" "$round" non-deferred
            run_tarantool "$setting" "$round" deferred
            run_sift "$setting" "$round"
        fi
    done
done

# --- Table -----------------------------------------------------------------------------------
python3 - "$out" <<'EOF'
import glob, json, os, re, statistics, sys
out = sys.argv[1]
runs = {}  # (setting, round) -> {name: summary}
for path in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    match = re.match(r"([ab])-r(\d+)-(.*)\.jsonl$", os.path.basename(path))
    if not match:
        continue
    setting, round_ = match.group(1), int(match.group(2))
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        row = json.loads(line)
        if "average" not in row:
            continue
        name = ("sift " + row["maintenance"]) if "maintenance" in row else ("tarantool " + row["mode"])
        runs.setdefault((setting, round_), {})[name] = row
labels = {"a": "(a) default options, data in the page cache",
          "b": "(b) disk-bound (small caches)"}
ratios = {}
for (setting, round_), rows in sorted(runs.items()):
    print(f"\n{labels[setting]}, round {round_}")
    print(f"{'engine / scheme':<32}{'average':>10}{'median':>10}{'max':>10}  statements/s")
    for name in ["sift deferred", "sift deferred-fast-path", "sift sync-full",
                 "tarantool deferred", "tarantool non-deferred"]:
        row = rows.get(name)
        if row is None:
            print(f"{name:<32}{'-':>10}{'-':>10}{'-':>10}  (no result)")
            continue
        extra = ""
        if row.get("aborted_transactions"):
            extra = (f"  ({row['aborted_transactions']} transactions / "
                     f"{row['aborted_statements']} statements aborted by conflicts)")
        print(f"{name:<32}{row['average']:>10.0f}{row['median']:>10.0f}{row['max']:>10.0f}{extra}")
    def ratio(a, b):
        if a in rows and b in rows and rows[b]["average"] > 0:
            return rows[a]["average"] / rows[b]["average"]
        return None
    pairs = [("sift deferred / sync-full", "sift deferred", "sift sync-full"),
             ("sift deferred-fast-path / sync-full", "sift deferred-fast-path", "sift sync-full"),
             ("sift deferred-fast-path / deferred", "sift deferred-fast-path", "sift deferred"),
             ("tarantool deferred / non-deferred", "tarantool deferred", "tarantool non-deferred")]
    for label, a, b in pairs:
        value = ratio(a, b)
        ratios.setdefault((setting, label), []).append(value)
        print(f"  ratio {label:<40} {'-' if value is None else f'{value:.2f}x'} (averages)")
print()
for (setting, label), values in sorted(ratios.items()):
    values = [v for v in values if v is not None]
    if len(values) > 1:
        print(f"setting {setting}: median over rounds of {label}: {statistics.median(values):.2f}x")
EOF
