#!/bin/sh
# Fast start (BENCHMARKS.md, "Fast start"): exec of `svc-agent run` to exec of svc-server,
# next to a bare fork+exec of the same program by the same harness, alternating, in one run.
# The agent measured is the release build (LTO, what Yocto and Buildroot build), or
# SVC_AGENT_BIN (the static dist build, say). The harness (benches/agent.rs) is built with
# debug assertions on, as every test build (the library's test hooks need them), and
# without LTO to build in reasonable time; it only spawns and times.
# FAST_START_RUNS: starts of each (default 101).
set -eu
cd "$(dirname "$0")/.."
if [ -z "${SVC_AGENT_BIN:-}" ]; then
    cargo build --release --bin svc-agent >&2
    SVC_AGENT_BIN="$PWD/target/release/svc-agent"
fi
export SVC_AGENT_BIN
echo "agent: $SVC_AGENT_BIN; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
CARGO_PROFILE_BENCH_DEBUG_ASSERTIONS=true CARGO_PROFILE_BENCH_LTO=false CARGO_PROFILE_BENCH_CODEGEN_UNITS=16 \
    BENCH_ONLY=fast-start cargo bench --bench agent
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
