#!/usr/bin/env bash
# Host tools that tests/syscfg.rs runs against what agent-syscfg writes: apt-config (package
# apt) and systemd-analyze (package systemd). Idempotent: installs only what is missing.
set -euo pipefail
missing=()
command -v apt-config >/dev/null 2>&1 || missing+=(apt)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
[ ${#missing[@]} -eq 0 ] && exit 0
command -v apt-get >/dev/null || { echo "syscfg-test-deps: need ${missing[*]} and there is no apt-get" >&2; exit 1; }
echo "syscfg-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
