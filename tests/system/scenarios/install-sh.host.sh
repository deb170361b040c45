#!/bin/bash
# Host side of install-sh: a release server on host loopback (the guest reaches it at
# 10.0.2.2) serving the published install.sh (app address and release URL filled in by
# scripts/publish-install.sh, as a management app publishes it), svc-agent-x86_64 and its
# .sha256; and Debian's sudo package for the guest, so that the spec's command runs through
# real sudo (with Debian's default env_reset).
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
www="$LAB_WORK/www"
mkdir -p "$www"
cp "$LAB_WORK/stage/bin/svc-agent" "$www/svc-agent-x86_64"
(cd "$www" && sha256sum svc-agent-x86_64 > svc-agent-x86_64.sha256)
host_http "$www"
port="$(sed -n 's/^HOST_PORT=//p' "$LAB_SHARE/host.env")"
"$repo/scripts/publish-install.sh" --app-address "file:///var/lib/lab/mgmt" \
    --release-url "http://10.0.2.2:$port" -o "$www/install.sh"
# The guest is bookworm, like the host: the host's apt gives the matching package.
mkdir -p "$LAB_WORK/debs"
(cd "$LAB_WORK/debs" && { apt-get download sudo >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download sudo; }; })
cp "$LAB_WORK"/debs/sudo_*.deb "$LAB_SHARE/"
