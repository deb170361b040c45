#!/usr/bin/env bash
# Unit and integration tests: real processes, real HTTPS on loopback with a test CA.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --all-targets
cargo test --locked --all-targets -- --test-threads=2
