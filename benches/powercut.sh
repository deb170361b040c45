#!/usr/bin/env bash
# The process-level power-cut campaign (issue 24): the real svc-agent in sandboxes, SIGKILLed
# at random moments of svc-server updates (also on a small file system filling up part-way),
# a broken build's rollback, the agent's self-update and boot guard, config apply, and log
# queue appends and shipping; each cut followed by a convergence check. See
# tests/it/powercut_campaign.rs. Needs root (the small file system is a tmpfs mount).
#
#   benches/powercut.sh [CUTS] [SEED]       defaults: 1000 cuts, seed 1
#
# SVC_CAMPAIGN_WORKERS (default 4) machines run side by side; SVC_CAMPAIGN_SECS stops drawing
# new cuts after that many seconds (the summary says how many were reached). Prints one line
# per cut and a summary: cuts by scenario and phase, time per cut, failures.
# The machine-level campaign is benches/powercut-lab.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export SVC_CAMPAIGN_CUTS="${1:-1000}" SVC_CAMPAIGN_SEED="${2:-1}"
exec cargo test --test it powercut_campaign::power_cut_campaign_full -- --ignored --nocapture --test-threads=1
