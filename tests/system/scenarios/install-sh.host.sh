#!/bin/bash
# Host side of install-sh: a release server on host loopback (the guest reaches it at
# 10.0.2.2) serving the published install.sh (app address and release URL filled in by
# scripts/publish-install.sh, as a management app publishes it), svc-agent-$LAB_MACHINE and its
# .sha256; and Debian's sudo package for the guest, so that the spec's command runs through
# real sudo (with Debian's default env_reset).
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
www="$LAB_WORK/www"
mkdir -p "$www"
# The guest's machine (x86_64 or aarch64: tests/system/run.sh), named as install.sh asks.
bin="svc-agent-${LAB_MACHINE:?}"
cp "$LAB_WORK/stage/bin/svc-agent" "$www/$bin"
(cd "$www" && sha256sum "$bin" > "$bin.sha256")
host_http "$www"
port="$(sed -n 's/^HOST_PORT=//p' "$LAB_SHARE/host.env")"
"$repo/scripts/publish-install.sh" --app-address "file:///var/lib/lab/mgmt" \
    --release-url "http://10.0.2.2:$port" -o "$www/install.sh"
# The guest is bookworm, like the host: the matching package for the guest's architecture.
# Unpacked here (host_debs_tar), extracted by the guest: dpkg -i's maintainer scripts
# (update-rc.d, a daemon-reload) took seconds of TCG and install nothing the scenario uses.
mkdir -p "$LAB_WORK/debs"
host_guest_debs "$LAB_WORK/debs" sudo
host_debs_tar "$LAB_SHARE/sudo.tar" "$LAB_WORK"/debs/sudo_*.deb
