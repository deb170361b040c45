#!/usr/bin/env bash
# Host tools that tests/it/syscfg.rs runs against what agent-syscfg writes: apt-config (package
# apt) and systemd-analyze (package systemd). Idempotent: installs only what is missing.
set -euo pipefail
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
apt_need apt-config apt
apt_need systemd-analyze systemd
apt_install_needed
