#!/bin/sh
# Size and idle PSS of svc-agent builds side by side (issue 47): the `release` profile that
# Yocto's and Buildroot's from-source recipes build, stripped as those systems strip
# (`strip --remove-section=.comment --remove-section=.note --strip-unneeded`), beside the
# shipped `dist` binary. Each runs alone, idle, in a sandbox (a file:// app, `sleep` as
# svc-server) for IDLE seconds; PSS from /proc/PID/smaps_rollup.
#
# usage: benches/profile-size.sh BINARY...   (e.g. target/release/svc-agent
#        target/x86_64-unknown-linux-musl/dist/svc-agent); IDLE=30 by default.
# Size only (another architecture's binary, or no run): SIZE_ONLY=1; another architecture's
# strip: STRIP=aarch64-linux-gnu-strip. STRIPPED=DIR keeps the stripped copies there as
# DIR/bin1, DIR/bin2, ... (benches/arch-lab.sh runs them in a lab guest).
set -eu
idle=${IDLE:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '| binary | as built | stripped | idle PSS |\n|---|---|---|---|\n'
n=0
for bin in "$@"; do
    n=$((n + 1))
    cp "$bin" "$work/bin$n"
    "${STRIP:-strip}" --remove-section=.comment --remove-section=.note --strip-unneeded "$work/bin$n"
    built=$(stat -c %s "$bin")
    stripped=$(stat -c %s "$work/bin$n")
    [ -z "${STRIPPED:-}" ] || cp "$work/bin$n" "$STRIPPED/bin$n"
    pss=-
    if [ "${SIZE_ONLY:-0}" != 1 ]; then
        root="$work/root$n"
        mkdir -p "$root/etc" "$root/opt/svc/bin" "$root/app"
        printf '#!/bin/sh\nexec sleep 1000000\n' >"$root/opt/svc/bin/svc-server"
        chmod 755 "$root/opt/svc/bin/svc-server"
        printf '{"cloud":{"app_address":"file://%s","id":"p","secret":"bench-secret-1234"}}' \
            "$root/app" >"$root/etc/svc.json"
        chmod 600 "$root/etc/svc.json"
        "$work/bin$n" run --root "$root" 2>"$root/agent.log" &
        pid=$!
        # The first poll done: status.json written in the app directory.
        i=0
        while [ ! -e "$root/app/status.json" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
        [ -e "$root/app/status.json" ] || { echo "$bin: no first poll" >&2; exit 1; }
        sleep "$idle"
        pss=$(awk '/^Pss:/ {print $2 " KiB"}' "/proc/$pid/smaps_rollup")
        kill -TERM "$pid"
        wait "$pid" || true
    fi
    printf '| %s | %s B | %s B | %s |\n' "$bin" "$built" "$stripped" "$pss"
done
