#!/usr/bin/env bash
# The stock-image check: puts this machine's qemu packages back the way the stock image of
# this machine kind ships them (qemu-utils from bookworm-backports, no qemu-system-x86; the
# conflict that once made apt remove qemu-utils), then runs the lab's install step
# (scripts/lab-prereqs.sh) and fails loudly when any tool is missing afterwards or any
# package of the stock image's list went missing. Run by scripts/test-all.sh before the tiers
# that install packages, so every run starts from the stock conflict, not from a machine
# someone fixed by hand.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "stock: $*" >&2; }
fail() { echo "stock: ERROR: $*" >&2; echo "stock: 0 passed, 1 failed"; exit 1; }
[ "$(id -u)" = 0 ] || fail "must run as root (apt)"
# The stock image's package list, where this workplace provides it (first line: the kinds).
STOCK_LIST="${STOCK_LIST:-/usr/share/package-lists/installed-rust.txt}"

# 1. qemu-utils from bookworm-backports, as on the stock image. apt's own lists here know
#    only bookworm, so the backports list goes into a private state folder.
bpo="$(mktemp -d)"
trap 'rm -rf "$bpo"' EXIT
mkdir -p "$bpo/lists/partial" "$bpo/archives/partial"
# The machine's own Debian mirror (the first URI of its bookworm sources), with the
# backports suite the stock image took qemu-utils from.
mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 !~ /security/ { print $1; exit }')"
[ -n "$mirror" ] || mirror="$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
[ -n "$mirror" ] || fail "no Debian mirror in this machine's apt sources"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm-backports main" \
    > "$bpo/sources.list"
aptbpo=(-o "Dir::Etc::SourceList=$bpo/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$bpo/lists" -o "Dir::Cache::Archives=$bpo/archives")
apt-get "${aptbpo[@]}" update >&2 || fail "bookworm-backports package list not reachable"
want="$(apt-cache "${aptbpo[@]}" policy qemu-utils | sed -n 's/^ *Candidate: *//p')"
case "$want" in *bpo*) ;; *) fail "no backports qemu-utils (candidate: ${want:-none})" ;; esac
have="$(dpkg-query -W -f '${Version}' qemu-utils 2>/dev/null || true)"
if [ "$have" != "$want" ]; then
    log "installing the stock image's qemu-utils $want (now: ${have:-none})"
    (cd "$bpo" && apt-get "${aptbpo[@]}" download "qemu-utils=$want" >&2) || fail "download of qemu-utils $want"
    # This removes qemu-system-x86 and friends where they are installed: the stock state.
    DEBIAN_FRONTEND=noninteractive apt-get install -y --allow-downgrades "$bpo"/qemu-utils_*.deb >&2 \
        || fail "install of the backports qemu-utils"
fi
DEBIAN_FRONTEND=noninteractive apt-get remove -y qemu-system-x86 qemu-system-common >&2 || true
command -v qemu-system-x86_64 >/dev/null && fail "qemu-system-x86_64 still present; not the stock state"
log "stock state: qemu-utils $(dpkg-query -W -f '${Version}' qemu-utils), no qemu-system-x86"

# 2. The lab's install step, from that state.
"$root/scripts/lab-prereqs.sh" || fail "scripts/lab-prereqs.sh failed from the stock state"
for c in qemu-system-x86_64 qemu-img; do
    "$c" --version >/dev/null 2>&1 || fail "$c does not run after the install step"
done
sv="$(qemu-system-x86_64 --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')"
iv="$(qemu-img --version | sed -n '1s/.*version \([0-9.]*\).*/\1/p')"
[ "$sv" = "$iv" ] || fail "qemu-system-x86_64 $sv and qemu-img $iv are not lined up"
log "lab install step ok: qemu-system-x86_64 and qemu-img $sv"

# 3. Nothing of the stock image was removed (by this step or any tier before it).
if [ -f "$STOCK_LIST" ]; then
    gone="$(awk -F'\t' '$1 == "apt" { sub(/:.*/, "", $2); print $2 }' "$STOCK_LIST" | sort -u |
        comm -23 - <(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort -u) |
        tr '\n' ' ')"
    [ -z "$gone" ] || fail "packages of the stock image are no longer installed: $gone"
    log "every package of $STOCK_LIST is still installed"
else
    log "no stock package list at $STOCK_LIST on this machine: step 3 checked nothing"
fi
echo "stock: 1 passed, 0 failed"
