#!/usr/bin/env bash
# Renders a `sift study` report with headless Chromium and checks that every figure listed in
# results.json is present in the rendered page with one non-empty <svg> (marks, and not the
# plots' "no data measured").
#
#   bench/check-report.sh DIR      # DIR holds index.html and results.json (e.g. study/)
#
# Needs chromium (Debian: apt-get install -y chromium) and python3. Exit status 0 when every
# figure renders, 1 with the list of missing or empty figures otherwise.
set -euo pipefail

dir="${1:?usage: bench/check-report.sh DIR (with index.html and results.json)}"
dir="$(cd "$dir" && pwd)"
[ -f "$dir/index.html" ] || { echo "no $dir/index.html" >&2; exit 1; }
[ -f "$dir/results.json" ] || { echo "no $dir/results.json" >&2; exit 1; }

browser=""
for candidate in chromium chromium-browser google-chrome; do
  if command -v "$candidate" >/dev/null 2>&1; then browser="$candidate"; break; fi
done
[ -n "$browser" ] || { echo "chromium not found (apt-get install -y chromium)" >&2; exit 1; }

profile="$(mktemp -d)"
dom="$(mktemp)"
trap 'rm -rf "$profile" "$dom"' EXIT
# --dump-dom prints the DOM after the page loaded; a page that needed the network would lack
# whatever it fetched (background networking is off).
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-background-networking \
  --disable-component-update --disable-sync --no-first-run --user-data-dir="$profile" \
  --dump-dom "file://$dir/index.html" >"$dom" 2>/dev/null

python3 - "$dir/results.json" "$dom" <<'PY'
import json, re, sys

results = json.load(open(sys.argv[1]))
dom = open(sys.argv[2], encoding="utf-8").read()
if "</html>" not in dom:
    sys.exit("chromium returned no complete page")
expected = [f["id"] for e in results["experiments"] for f in e["figures"]]
problems = []
for figure_id in expected:
    match = re.search(r'<figure[^>]*id="fig-%s"[^>]*>(.*?)</figure>' % re.escape(figure_id), dom, re.S)
    if not match:
        problems.append(f"{figure_id}: figure missing")
        continue
    body = match.group(1)
    svgs = re.findall(r"<svg\b.*?</svg>", body, re.S)
    if len(svgs) != 1:
        problems.append(f"{figure_id}: {len(svgs)} svg elements")
        continue
    # The axes are lines too, so marks alone cannot tell an empty plot: the plots write
    # "no data measured" when they have no value (crates/sift-study/src/report/svg.rs).
    marks = len(re.findall(r"<(?:circle|polyline|rect|line)\b", svgs[0]))
    if marks == 0 or "no data measured" in svgs[0]:
        problems.append(f"{figure_id}: svg has no data marks")
rendered = len(re.findall(r'<figure[^>]*class="plot"', dom))
if problems:
    print("check-report: %d of %d figures have problems:" % (len(problems), len(expected)))
    for problem in problems:
        print("  " + problem)
    sys.exit(1)
print("check-report: %d figures rendered, each with a non-empty svg (%d figures in the page)" % (len(expected), rendered))
PY
