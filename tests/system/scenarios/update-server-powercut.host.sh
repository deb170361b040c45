#!/bin/bash
# Host side of update-server-powercut: a slow release server (256 KiB/s, with Range
# support) for svc-server 0.2.0, so that the power cut lands in the middle of the download.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
www="$LAB_WORK/www"
mkdir -p "$www"
cp "$LAB_SHARE/v2/svc-server" "$www/svc-server-0.2.0"
host_http "$www" 262144
