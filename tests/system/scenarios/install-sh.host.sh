#!/bin/bash
# Host side of install-sh: a release server on host loopback (the guest reaches it at
# 10.0.2.2) serving install.sh, svc-agent-x86_64 and its .sha256, like a real release.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
www="$LAB_WORK/www"
mkdir -p "$www"
cp "$repo/install.sh" "$www/install.sh"
cp "$LAB_WORK/stage/bin/svc-agent" "$www/svc-agent-x86_64"
(cd "$www" && sha256sum svc-agent-x86_64 > svc-agent-x86_64.sha256)
host_http "$www"
