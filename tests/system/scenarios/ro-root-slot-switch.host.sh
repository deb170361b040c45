#!/bin/bash
# Host side of the read-only-root scenarios: the unit and the data-partition drop-in template
# from dist/, which the guest fills in as an image build would (lab_ro_image).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../../.." && pwd)"
cp "$repo/dist/svc-agent.service" "$repo/dist/svc-agent-data-partition.conf.in" "$LAB_SHARE/"
