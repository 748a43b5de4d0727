#!/usr/bin/env bash
# Sift's Python binding beside sqlite3, rocksdict and plyvel, and beside Sift's own Rust numbers.
#
#   bench/compare-python.sh [--n N] [--lookups Q] [--rounds R]
#
# Builds `sift` and installs `sift_lsm` (pip install ./python), rocksdict and plyvel into a venv
# under target/; generates N tweets (`sift generate tweets`, seed 301); runs
# bench/compare-python.py (load from the same Python dicts with a user.id index maintained, then
# top-10 LOOKUPs in R alternated rounds); then `sift bench index` on the same N tweets for a
# composite and a lazy index (the Rust throughput of the same load and top-10 LOOKUPs). Prints
# the medians and the ratios the Python binding is judged by: Sift's Python load vs sqlite3's,
# Sift's Python top-10 vs sqlite3's, Sift's Python vs Sift's Rust. Results:
# target/compare-python/<time>/.
set -euo pipefail

n=1000000
lookups=5000
rounds=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --n) n="$2"; shift 2 ;;
        --lookups) lookups="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "compare-python: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
cargo build --release --quiet -p sift-cli
sift_bin="$CARGO_TARGET_DIR/release/sift"
venv="$CARGO_TARGET_DIR/compare-python-venv"
if [[ ! -x "$venv/bin/python" ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check rocksdict plyvel
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$repo/python"

work="$CARGO_TARGET_DIR/compare-python/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$work"
tweets="$CARGO_TARGET_DIR/compare-python/tweets-$n.jsonl"
[[ -f "$tweets" ]] || "$sift_bin" generate tweets --n "$n" --seed 301 --out "$tweets"
echo "compare-python: $n tweets, $lookups top-10 lookups x $rounds rounds; results in $work" >&2

"$venv/bin/python" "$repo/bench/compare-python.py" --tweets "$tweets" --n "$n" --lookups "$lookups" \
    --rounds "$rounds" --dir "$work/stores" | tee "$work/python.jsonl"
rm -rf "$work/stores"
for kind in composite lazy; do
    "$sift_bin" bench index --n "$n" --index "user.id:$kind" --top-k 10 --gets 0 --range-lookups 0 \
        --lookups "$lookups" --max-seconds 60 --json --db "$work/rust-$kind" 2>/dev/null \
        | grep -E '"slice":null|"op":"LOOKUP"' | tee -a "$work/rust.jsonl"
    rm -rf "$work/rust-$kind"
done

"$venv/bin/python" - "$work/python.jsonl" "$work/rust.jsonl" <<'EOF' | tee "$work/summary.txt"
import json, sys
python = [json.loads(line) for line in open(sys.argv[1])]
rust = [json.loads(line) for line in open(sys.argv[2])]
load = {r["store"]: r["ops_per_sec"] for r in python if r["phase"] == "load"}
top = {r["store"]: r["ops_per_sec"] for r in python if r["phase"] == "lookup" and r["round"] == "median"}
rust_load = {r["index_kind"]: r["ops_per_sec"] for r in rust if r["phase"] == "load"}
rust_top = {r["index_kind"]: r["ops_per_sec"] for r in rust if r["op"] == "LOOKUP"}
print(f"{'store':16} {'load/s':>10} {'top-10/s':>10}")
for store in load:
    print(f"{store:16} {load[store]:>10.0f} {top[store]:>10.0f}")
for kind in ("composite", "lazy"):
    print(f"{'rust-' + kind:16} {rust_load[kind]:>10.0f} {rust_top[kind]:>10.0f}")
print()
for kind in ("composite", "lazy"):
    store = f"sift-{kind}"
    print(f"{store}: load {load[store] / load['sqlite3']:.2f}x sqlite3 (target >= 2), "
          f"top-10 {top[store] / top['sqlite3']:.2f}x sqlite3 (target >= 1); "
          f"Python / Rust: load one put per tweet {load[store + '-put'] / rust_load[kind]:.2f}, "
          f"top-10 {top[store] / rust_top[kind]:.2f} (target >= 0.5)")
EOF
