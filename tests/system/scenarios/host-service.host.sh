#!/bin/bash
# Host side of host-service: an HTTP server on host loopback (port chosen by the kernel),
# the stand-in for a release or management server. The guest reaches it at 10.0.2.2.
set -euo pipefail
. "$(dirname "$0")/../host-lib.sh"
mkdir -p "$LAB_WORK/www"
token="host-page-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
echo "$token" > "$LAB_WORK/www/index.html"
echo "$token" > "$LAB_SHARE/host-token"
host_http "$LAB_WORK/www"
