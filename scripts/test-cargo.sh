#!/usr/bin/env bash
# Unit and integration tests: real processes, real HTTPS on loopback with a test CA.
set -euo pipefail
cd "$(dirname "$0")/.."
# Host tools some tests run against what the agent writes (apt-config, systemd-analyze).
bash scripts/syscfg-test-deps.sh
cargo build --locked --all-targets
# Benches are built above, not run: they are measurements (cargo bench --bench NAME).
cargo test --locked --lib --bins --tests -- --test-threads=2
