#!/usr/bin/env bash
# The Python binding's tests, as a user gets the package: `pip install ./python` into a fresh
# virtual environment (maturin builds it into cargo's target directory, so a tree already
# built by `cargo test --release` is reused where the features agree), then pytest.
# Part of README.md's test command. SIFT_PY_MODEL_OPERATIONS lengthens the model streams.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
venv="$CARGO_TARGET_DIR/python-test-venv"
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "pytest>=7"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$root/python"
# From the tests folder, so that `import sift_lsm` finds the installed package, not the
# source folder (which has no compiled module).
cd "$root/python/tests"
"$venv/bin/python" -m pytest -q -p no:cacheprovider .
