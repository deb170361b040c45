#!/bin/sh
# Log queue benchmark (figures in BENCHMARKS.md, section "Logs that survive").
# SVC_BENCH_DIR: scratch directory on the disk to measure (default: system temp dir).
set -eu
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2
exec cargo bench --bench logqueue "$@"
