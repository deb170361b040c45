#!/usr/bin/env bash
# The main job, locally, with no cloud account: svc-agent installs svc-server, a release the
# vendor signed and published with svc-release, and manages it (it runs a sample module) in
# a sandbox under target/demo, driven by a file:// management directory, the embedded
# default. Ctrl-C stops the agent, which stops svc-server and its modules.
#
# Try, in another terminal, while it runs:
#   cat target/demo/root/opt/svc/status.json          # what the agent reports
#   edit a config and sign it into the directory:      # applied live (the sandbox has a
#     target/debug/svc-release publish --key target/demo/vendor.key --config FILE \
#       --target "$(uname -m)" target/demo/app         # vendor key: unsigned configs are refused)
#   tail -f target/demo/app/logs.jsonl                 # the logs the agent ships
#
# `scripts/demo.sh --check` runs the same demo unattended for a while, checks that the
# example module came up under svc-server under the agent, and stops it (exit 0 on success);
# the test command runs it so that this README command stays true.
set -euo pipefail
check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "demo: needs Rust (rustup) on PATH" >&2; exit 2; }
# shellcheck source=scripts/lib/toolchain.sh
. scripts/lib/toolchain.sh
toolchain_ensure . || exit 2

# The dev profile, and the test command's own build (all targets: features unify across them,
# so `--bins` alone would compile 13 crates again): the demo needs no optimisation, and
# after the unit+integration tier this builds nothing (a release build here cost 105 s).
echo "demo: building..."
cargo build --locked --all-targets 2>&1 | tail -1
bin=$PWD/target/debug
demo=$PWD/target/demo
root=$demo/root
app=$demo/app
rm -rf "$demo"
mkdir -p "$root/etc" "$app"

# The vendor's side (docs/releases.md): a key pair made once, its public half installed on
# the device as /etc/svc-signing.pub (so the device accepts signed releases only), and the
# release published into the management directory with svc-release.
"$bin/svc-release" keygen "$demo/vendor.key" > /dev/null
cp "$demo/vendor.key.pub" "$root/etc/svc-signing.pub"
module=$PWD/examples/modules/logenv/bin/module
cat > "$root/etc/svc.json" <<JSON
{"cloud": {"app_address": "file://$app", "id": "demo-part", "secret": "demo-secret-not-for-production"}}
JSON
chmod 600 "$root/etc/svc.json"
cat > "$app/poll.json" <<JSON
{
  "poll_interval_secs": 5,
  "config": {
    "components": [
      {"name": "greeter", "model": "demo:logenv:greeter", "type": "generic", "namespace": "rdk",
       "attributes": {"greeting": "hello from the demo"}}
    ],
    "modules": [
      {"type": "local", "name": "logenv", "module_id": "demo:logenv",
       "executable_path": "$module",
       "env": {"GREETING_PATH": "/opt/demo/bin:\${environment.PATH}"}}
    ],
    "agent": {"svc-server": {"attributes": {"fast_start": true}}}
  }
}
JSON
# A device image without svc-server: the agent installs the signed release from the app.
# publish signs the config above too (a device with a vendor key refuses an unsigned one).
"$bin/svc-release" publish --key "$demo/vendor.key" "$app" "$bin/svc-server"

echo "demo: sandbox at $root; management directory at $app"
if [ "$check" = 0 ]; then
    echo "demo: starting svc-agent (Ctrl-C to stop)"
    exec "$bin/svc-agent" run --root "$root"
fi

# --check: the same, unattended.
log=$demo/agent.log
"$bin/svc-agent" run --root "$root" 2> "$log" &
agent=$!
environ=""
ok=0
for _ in $(seq 1 120); do
    # $SVC_MODULE_DATA = $SVC_HOME/module-data/<machine id>/<module name>
    environ=$(find "$root/opt/svc/home/module-data" -path '*/logenv/environ' 2>/dev/null | head -n 1 || true)
    if grep -q "module demo:logenv version local" "$log" && [ -s "$environ" ] \
        && grep -q "svc-server .* downloaded and verified" "$log" \
        && [ -s "$app/status.json" ]; then ok=1; break; fi
    sleep 0.5
done
kill -TERM "$agent"; wait "$agent" || true
# ours_running: a module process of this demo still runs (its SVC_HOME is under $root; another
# run of the example module elsewhere, a bench's, is not ours).
ours_running() {
    local pid
    for pid in $(pgrep -f "$module"); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "SVC_HOME=$root/opt/svc/home" && return 0
    done
    return 1
}
if [ "$ok" = 1 ] && grep -q '^GREETING_PATH=/opt/demo/bin:' "$environ" && ! ours_running; then
    echo "demo: ok: svc-agent installed the signed svc-server release, which ran the example module with its environment; all stopped"
    exit 0
fi
echo "demo: FAILED; agent log:" >&2
cat "$log" >&2
ls -la "$app" >&2 || true
exit 1
