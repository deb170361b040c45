#!/usr/bin/env bash
# The main job, locally, with no cloud account: svc-agent manages svc-server (which runs a
# sample module) in a sandbox under target/demo, driven by a file:// management directory,
# the embedded default. Ctrl-C stops the agent, which stops svc-server and its modules.
#
# Try, in another terminal, while it runs:
#   cat target/demo/root/opt/svc/status.json          # what the agent reports
#   edit target/demo/app/poll.json                     # change the config: applied live
#   tail -f target/demo/app/logs.jsonl                 # the logs the agent ships
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "demo: needs Rust (rustup) on PATH" >&2; exit 2; }

echo "demo: building (release)..."
cargo build --release --locked --bins 2>&1 | tail -1
demo=$PWD/target/demo
root=$demo/root
app=$demo/app
rm -rf "$demo"
mkdir -p "$root/etc" "$app" "$root/opt/svc/cache" "$root/opt/svc/bin"

version=$(target/release/svc-server version --json | sed -n 's/.*"version":"\([^"]*\)".*/\1/p')
# The release the "app" offers: svc-server as an artifact with its sha256 and size.
cp target/release/svc-server "$app/svc-server-$version"
sha=$(sha256sum "$app/svc-server-$version" | cut -d' ' -f1)
size=$(stat -c %s "$app/svc-server-$version")
# First boot of a device image: svc-server pre-installed at the same version.
cp target/release/svc-server "$root/opt/svc/cache/svc-server-$version"
ln -sfn "../cache/svc-server-$version" "$root/opt/svc/bin/svc-server"

module=$PWD/examples/modules/hello-module.sh
cat > "$root/etc/svc.json" <<JSON
{"cloud": {"app_address": "file://$app", "id": "demo-part", "secret": "demo-secret-not-for-production"}}
JSON
chmod 600 "$root/etc/svc.json"
cat > "$app/poll.json" <<JSON
{
  "poll_interval_secs": 5,
  "targets": {"svc-server": {"version": "$version", "url": "svc-server-$version", "sha256": "$sha", "size": $size}},
  "config": {
    "components": [
      {"name": "greeter", "model": "demo:hello:greeter", "type": "generic", "namespace": "rdk",
       "attributes": {"greeting": "hello from the demo"}}
    ],
    "modules": [
      {"type": "local", "name": "demo_hello", "module_id": "demo:hello",
       "executable_path": "$module",
       "env": {"GREETING_PATH": "/opt/demo/bin:\${environment.PATH}"}}
    ],
    "agent": {"svc-server": {"attributes": {"fast_start": true}}}
  }
}
JSON

echo "demo: sandbox at $root; management directory at $app"
echo "demo: starting svc-agent (Ctrl-C to stop)"
exec target/release/svc-agent run --root "$root"
