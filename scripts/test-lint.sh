#!/usr/bin/env bash
# Formatting and clippy, warnings as errors; the layer table and the function length rule
# of docs/architecture.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
python3 scripts/check-layers.py
python3 scripts/check-fn-length.py
