#!/bin/sh
# The operator walkthrough of docs/hawkbit.md, which includes this file verbatim; the test
# command runs it (tests/it/hawkbit_goosebit.rs, the_walkthrough_in_the_docs_runs), so it
# stays true. From nothing to a rolled-out update with gooseBit 0.2.12 on one machine.
# Set these (the test sets its own):
#   GB       gooseBit's venv (made here when missing)   WORK     a working folder
#   PORT     gooseBit's port, bound to 127.0.0.1        DEVICE   the device's root: / on a device
#   BUILD    the svc-server build to publish            ID       the device's controller id
set -eu
mkdir -p "$WORK" && cd "$WORK"

# 1. gooseBit in a venv; its database migrated (aerich) before the first start.
[ -x "$GB/bin/python" ] || { python3 -m venv "$GB" && "$GB/bin/pip" install goosebit==0.2.12; }
pkg=$("$GB/bin/python" -c 'import goosebit, os; print(os.path.dirname(goosebit.__file__))')
printf '[tool.aerich]\ntortoise_orm = "goosebit.db.config.TORTOISE_CONF"\nlocation = "%s/db/migrations"\nsrc_folder = "./."\n' "$pkg" >pyproject.toml
export GOOSEBIT_DB_URI="sqlite://$WORK/db.sqlite3" GOOSEBIT_ARTIFACTS_DIR="$WORK/artifacts"
export GOOSEBIT_POLL_TIME=00:00:05 # how often devices poll; gooseBit's default is a minute
"$GB/bin/aerich" upgrade
"$GB/bin/python" -m uvicorn goosebit:app --host 127.0.0.1 --port "$PORT" >goosebit.log 2>&1 &
echo $! >goosebit.pid
trap 'kill "$(cat "$WORK/goosebit.pid")"' EXIT
S=http://127.0.0.1:$PORT
# Ready once it is the one listening on PORT (another server there would answer a curl too).
n=0
until ss -Hltnp "sport = :$PORT" | grep -q "pid=$(cat goosebit.pid)," && curl -fsS "$S/DEFAULT/controller/v1/$ID" >/dev/null 2>&1; do
	kill -0 "$(cat goosebit.pid)" 2>/dev/null || { echo "gooseBit exited (port $PORT taken?): $WORK/goosebit.log" >&2; exit 1; }
	n=$((n + 1)); [ $n -lt 240 ] || { echo "gooseBit did not start: $WORK/goosebit.log" >&2; exit 1; }
	sleep 0.5
done
json() { "$GB/bin/python" -c "import json, sys; print(json.load(sys.stdin)$1)"; }

# 2. The first user (once): its access_token is the API's bearer token.
T=$(curl -fsS -X POST "$S/setup" -H 'Content-Type: application/x-www-form-urlencoded' \
	-d 'username=admin%40example.org&password=walkthrough-pw' | json '["access_token"]')

# 3. The vendor key: the private half stays with the vendor, the public half is in the
#    device's image (/etc/svc-signing.pub).
svc-release keygen "$WORK/vendor.key"
cp "$WORK/vendor.key.pub" "$DEVICE/etc/svc-signing.pub"

# 4. The device joins (as root on the device; gooseBit 0.2.12 takes any token).
(umask 077 && echo goosebit-takes-any-token >"$WORK/token")
svc-agent hawkbit join --root "$DEVICE" --url "$S" --tenant DEFAULT \
	--controller-id "$ID" --token-file "$WORK/token"
svc-agent doctor --root "$DEVICE" | grep -E 'hawkbit|backend'

# 5. A signed build as an SWUpdate image, uploaded; the answer's id is the software's.
svc-release swu --key "$WORK/vendor.key" --out "$WORK/update.swu" "$BUILD"
SW=$(curl -fsS -X PUT "$S/api/v1/software" -H "Authorization: Bearer $T" \
	-F "file=@$WORK/update.swu;type=application/octet-stream" | json '["id"]')

# 6. Assigned to the device once gooseBit has its hardware: the device registers at its first
#    poll and sends its config data (model, revision, version) next. Assigned before that, the
#    device still counts as "default" hardware and gooseBit refuses the image (HTTP 422).
#    dev prints the device's state, its version and the assigned software's version.
dev() {
	curl -fsS "$S/api/v1/devices" -H "Authorization: Bearer $T" | "$GB/bin/python" -c "
import json, sys
d = [d for d in json.load(sys.stdin)['devices'] if d['id'] == '$ID'] or [{'last_state': 'Absent'}]
print(d[0]['last_state'], d[0].get('sw_version'), (d[0].get('assigned_software') or {}).get('version'))"
}
n=0
until dev | { read -r _ version _ && [ "$version" != None ]; }; do
	n=$((n + 1)); [ $n -lt 240 ] || { echo "the device never registered: $(dev)" >&2; exit 1; }
	sleep 0.5
done
curl -fsS -X PUT "$S/api/v1/devices" -H "Authorization: Bearer $T" \
	-H 'Content-Type: application/json' -d "{\"devices\": [\"$ID\"], \"software\": \"$SW\"}"

# 7. Watched: Running (the log shows "Downloaded N%"), then Finished once the new build is
#    through its probation (600 s by default: docs/hawkbit.md, "Time to success"). gooseBit
#    saves the state and the new version one after the other: done when both are there.
n=0
while :; do
	read -r state version assigned <<-EOF
	$(dev)
	EOF
	case "$state" in
	Finished) [ "$version" != "$assigned" ] || { echo "rolled out: $state $version"; break; } ;;
	Error) echo "failed: $state $version" >&2; exit 1 ;;
	esac
	n=$((n + 1)); [ $n -lt 2400 ] || { echo "not finished: $state $version" >&2; exit 1; }
	sleep 0.5
done
curl -fsS "$S/api/v1/devices/$ID/log" -H "Authorization: Bearer $T" | json '["log"]'

# 8. After an Error, Force update offers the same action again:
#    curl -fsS -X PUT "$S/api/v1/devices" -H "Authorization: Bearer $T" \
#      -H 'Content-Type: application/json' -d "{\"devices\": [\"$ID\"], \"force_update\": true}"
