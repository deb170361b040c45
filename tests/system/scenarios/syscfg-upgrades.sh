#!/bin/bash
# agent-syscfg OS upgrades on Debian bookworm with unattended-upgrades: `apt-config dump` shows
# the effective values for `all`, `security` and `none` (the distribution's origin list is
# replaced, not appended to), unattended-upgrade itself sees the allowed origins, and disabling
# the subsystem restores exactly the distribution's values without touching its files.
# Needs: `svc-agent syscfg-apply --root / --config FILE` (src/syscfg/cli.rs).
# lab-timeout: 600
set -euo pipefail
. "$LAB/lab-lib.sh"

ours=(/etc/apt/apt.conf.d/20svc-auto-upgrades /etc/apt/apt.conf.d/52svc-unattended-upgrades)
dump() { apt-config dump | grep -E '^(APT::Periodic::|Unattended-Upgrade::(Origins-Pattern|Allowed-Origins))' || true; }
patterns() { apt-config dump | sed -n 's/^Unattended-Upgrade::Origins-Pattern:: //p'; }
config() { # TYPE: a machine config with upgrades.type TYPE
    printf '{"components": [], "modules": [], "agent": {"agent-syscfg": {"attributes": {"upgrades": {"type": "%s"}}}}}\n' "$1" > "/tmp/$1.json"
}

lab_check "unattended-upgrades is installed" sh -c "dpkg-query -W -f='\${Status}' unattended-upgrades | grep -qx 'install ok installed'"
lab_log "apt.conf.d: $(ls /etc/apt/apt.conf.d | tr '\n' ' ')"
for f in "${ours[@]}"; do lab_check "no $f before the test" test ! -e "$f"; done
before="$(dump)"
distro_sums="$(sha256sum /etc/apt/apt.conf.d/* | grep -v svc)"
lab_log "distribution values:"; echo "$before"

config all
out="$(svc-agent syscfg-apply --root / --config /tmp/all.json)"; echo "$out"
lab_check "all: applied" grep -q '^upgrades: applied' <<<"$out"
lab_check "all: Unattended-Upgrade 1" sh -c 'apt-config dump | grep -qx "APT::Periodic::Unattended-Upgrade \"1\";"'
lab_check "all: Update-Package-Lists 1" sh -c 'apt-config dump | grep -qx "APT::Periodic::Update-Package-Lists \"1\";"'
lab_check "all: the only origin pattern is origin=*" test "$(patterns)" = '"origin=*";'
uu="$(timeout 300 unattended-upgrade --dry-run --debug 2>&1 || true)"
echo "$uu" | grep -E 'Allowed origins|Initial blacklist|No packages' || true
lab_check "unattended-upgrade itself allows every origin" bash -c 'grep -F "Allowed origins are:" <<<"$0" | grep -Fq "origin=*"' "$uu"

config security
out="$(svc-agent syscfg-apply --root / --config /tmp/security.json)"; echo "$out"
lab_check "security: applied" grep -q '^upgrades: applied' <<<"$out"
lab_check "security: Unattended-Upgrade 1" sh -c 'apt-config dump | grep -qx "APT::Periodic::Unattended-Upgrade \"1\";"'
expected='"codename=${distro_codename}-security";
"archive=${distro_codename}-security";
"codename=${distro_codename},label=Debian-Security";'
lab_check "security: only the security origins" test "$(patterns)" = "$expected"

out="$(svc-agent syscfg-apply --root / --config /tmp/security.json)"; echo "$out"
lab_check "security again: unchanged" grep -q '^upgrades: unchanged' <<<"$out"

config none
out="$(svc-agent syscfg-apply --root / --config /tmp/none.json)"; echo "$out"
lab_check "none: applied" grep -q '^upgrades: applied' <<<"$out"
lab_check "none: Unattended-Upgrade 0" sh -c 'apt-config dump | grep -qx "APT::Periodic::Unattended-Upgrade \"0\";"'
lab_check "none: no origins file" test ! -e /etc/apt/apt.conf.d/52svc-unattended-upgrades
lab_check "none: the distribution's origins are back" test "$(dump | grep Origins)" = "$(grep Origins <<<"$before")"

printf '{"components": [], "modules": [], "agent": {"agent-syscfg": {"disable_subsystem": true, "attributes": {"upgrades": {"type": "all"}}}}}\n' > /tmp/off.json
out="$(svc-agent syscfg-apply --root / --config /tmp/off.json)"; echo "$out"
lab_check "disable: reverted" grep -q '^upgrades: reverted' <<<"$out"
for f in "${ours[@]}"; do lab_check "$f is gone" test ! -e "$f"; done
lab_check "apt-config dump equals the distribution's values again" test "$(dump)" = "$before"
lab_check "the distribution's files are byte for byte unchanged" test "$(sha256sum /etc/apt/apt.conf.d/* | grep -v svc)" = "$distro_sums"
lab_check "the record is empty" python3 -c "import json,sys; sys.exit(0 if json.load(open('/opt/svc/syscfg-state.json'))['files']==[] else 1)"
