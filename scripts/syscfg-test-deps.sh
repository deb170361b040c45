#!/usr/bin/env bash
# Host tools the cargo tests run: apt-config and systemd-analyze against what agent-syscfg
# writes and the shipped unit, ip and curl for the portal's network-namespace test. Idempotent: installs only what is missing.
set -euo pipefail
# shellcheck source=scripts/lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
apt_need apt-config apt
apt_need systemd-analyze systemd
# The portal's network-namespace test (tests/it/provisioning_netns.rs).
apt_need ip iproute2
apt_need curl curl
apt_install_needed
