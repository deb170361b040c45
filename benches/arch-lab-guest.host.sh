#!/bin/bash
# Host side of benches/arch-lab-guest.sh: with ARCH_LAB_RELEASE (a stripped `release` profile
# svc-agent, from benches/arch-lab.sh), hands it and benches/profile-size.sh to the guest.
set -euo pipefail
[ -n "${ARCH_LAB_RELEASE:-}" ] || exit 0
mkdir -p "$LAB_SHARE/profile"
cp "$ARCH_LAB_RELEASE" "$LAB_SHARE/profile/svc-agent-release"
cp "$(dirname "$0")/profile-size.sh" "$LAB_SHARE/profile/"
