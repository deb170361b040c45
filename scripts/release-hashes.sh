#!/bin/sh
# Prints the checksum lines a release adds to the packages, for the binaries in DIR
# (svc-agent-x86_64, svc-agent-aarch64, as scripts/build-static.sh builds them):
# Buildroot's svc-agent.hash lines and the Yocto svc-agent-bin variables.
#   scripts/release-hashes.sh DIR
set -eu
dir="${1:?usage: $0 DIR}"
for arch in x86_64 aarch64; do
	f="$dir/svc-agent-$arch"
	[ -f "$f" ] || { echo "release-hashes: $f missing" >&2; exit 1; }
done
echo "# buildroot-package/package/svc-agent/svc-agent.hash"
for arch in x86_64 aarch64; do
	printf 'sha256  %s  svc-agent-%s\n' "$(sha256sum "$dir/svc-agent-$arch" | cut -d' ' -f1)" "$arch"
done
echo "# meta-svc (local.conf or a product layer)"
for arch in x86_64 aarch64; do
	upper=$(echo "$arch" | tr '[:lower:]' '[:upper:]')
	printf 'SVC_AGENT_SHA256_%s = "%s"\n' "$upper" "$(sha256sum "$dir/svc-agent-$arch" | cut -d' ' -f1)"
done
