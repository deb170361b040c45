#!/usr/bin/env bash
# The process-level power-cut campaign (issue 24): the real svc-agent in sandboxes, SIGKILLed
# at random moments of svc-server updates (also on a small file system filling up part-way),
# a broken build's rollback, the agent's self-update and boot guard, config apply, and log
# queue appends and shipping, OS updates through the RAUC stand-in (issue 43) and updates by
# delta of svc-server and the agent (issue 44); each cut followed by a convergence check. See
# tests/it/powercut_campaign.rs. Needs root (the small file system is a tmpfs mount).
#
#   benches/powercut.sh [CUTS] [SEED] [RECORD]    defaults: 1000 cuts, seed 1,
#                                                  target/powercut/process-seedSEED-CUTS.jsonl
#
# SVC_CAMPAIGN_SCENARIOS (comma-separated, e.g. `hawkbit` or `os,delta,delta-agent`) draws those scenarios only (the
# default record's name says which). SVC_CAMPAIGN_WORKERS (default 4) machines run side by side; SVC_CAMPAIGN_SECS stops drawing
# new cuts after that many seconds (a sitting). Every cut is appended to RECORD as it ends; run
# the same command again (same code, seed and cuts) to resume the run where it stopped: the
# summary is the whole record's. Prints one line per cut and a summary: cuts by scenario and
# phase and by the issue's phases, time per cut, failures.
# The machine-level campaign is benches/powercut-lab.py.
set -euo pipefail
cd "$(dirname "$0")/.."
cuts="${1:-1000}" seed="${2:-1}"
only="${SVC_CAMPAIGN_SCENARIOS:+-${SVC_CAMPAIGN_SCENARIOS//,/+}}"
record="${3:-target/powercut/process-seed$seed-$cuts$only.jsonl}"
mkdir -p "$(dirname "$record")"
# The code's identity (its sources, not the commit: a later commit of figures or docs does not
# change it): a record is resumed only by the code that made it.
code="$(git rev-parse HEAD:src HEAD:tests HEAD:Cargo.toml HEAD:Cargo.lock | sha256sum | cut -c1-12)"
if ! git diff --quiet HEAD -- src tests Cargo.toml Cargo.lock; then
    code="$code-dirty-$(git diff HEAD -- src tests Cargo.toml Cargo.lock | sha256sum | cut -c1-12)"
fi
record_path="$(realpath "$record")"
export SVC_CAMPAIGN_CUTS="$cuts" SVC_CAMPAIGN_SEED="$seed" SVC_CAMPAIGN_RECORD="$record_path" \
    SVC_CAMPAIGN_CODE="$code"
echo "powercut: record $SVC_CAMPAIGN_RECORD, code $code" >&2
# The run uses copies of the test binary and of the agent: a build in this tree during a long
# run (which replaces both) must not change the code under it.
exe="$(cargo test --test it --no-run 2>&1 | tee /dev/stderr | sed -n 's/.*Executable tests\/it\/main.rs (\(.*\))$/\1/p' | tail -n1)"
[ -x "$exe" ] || { echo "powercut: no test binary built" >&2; exit 1; }
snap="target/powercut/bin-$code"
mkdir -p "$snap"
cp "$exe" "$snap/it"
cp target/debug/svc-agent "$snap/svc-agent"
agent_path="$(realpath "$snap/svc-agent")"
export SVC_CAMPAIGN_AGENT="$agent_path"
exec "$snap/it" powercut_campaign::power_cut_campaign_full --ignored --exact --nocapture --test-threads=1
