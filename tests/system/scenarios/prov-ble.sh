#!/bin/bash
# Improv Wi-Fi over BLE through BlueZ, with the hotspot disabled: two virtual LE controllers in
# one btvirt process (hci_vhci; the AF_ALG crypto modules first), Debian's bluetoothd managing
# both; the machine (`svc-agent provision`, `ble_enabled`) registers the Improv GATT service
# and its advertisement on hci0; a client on hci1 (gatttool, driven by a small Python script,
# the label secret in hand) reads the state, is refused without the authorization, authorizes
# with HMAC(label secret, nonce), scans, tries bad inputs (refused, nothing changes), then
# submits the home network; the machine saves it, ends online on the home AP and reports
# "provisioned" over GATT. No hotspot ever; no pass key or label secret in any log.
# Needs: `svc-agent provision` with `ble_enabled`; the host hook's bluez packages.
# lab-timeout: 900
set -euo pipefail
. "$LAB/lab-lib.sh"
psk="home-$(lab_run_id)"
lab_radios 2
lab_netns_radio wlan1 home
lab_ap home wlan1 lab-home "$psk" 192.168.77 internet
lab_no_ethernet

# The Bluetooth stack: Debian's packages from the host hook, unpacked there (prov-ble.host.sh
# says why not dpkg -i), two virtual controllers. Existing directory links (/bin, /lib: merged
# /usr) and directories' metadata stay as they are, as dpkg leaves them.
t_pkgs=$(lab_ms)
tar -C / --keep-directory-symlink --no-overwrite-dir -xf /lab/share/bluez.tar || lab_fail "bluez did not unpack"
# What bluez's maintainer scripts do that matters here: the group its D-Bus policy names, its
# state directory (preinst), the new libraries' cache (libasound2's and libdw1's trigger), and a
# D-Bus reload so that the policy letting bluetoothd own org.bluez is in force (postinst).
getent group bluetooth > /dev/null || groupadd --system bluetooth || lab_fail "group bluetooth"
install -m 700 -d /var/lib/bluetooth
ldconfig
systemctl reload dbus || lab_fail "D-Bus did not reload its configuration (bluez's policy)"
lab_check "bluez's D-Bus policy is in place" test -s /etc/dbus-1/system.d/bluetooth.conf
lab_log "figure: bluez unpacked and configured in $(( $(lab_ms) - t_pkgs )) ms"
for m in crc16 rfkill ecc ecdh_generic af_alg algif_hash algif_skcipher cmac ecb bluetooth hci_vhci; do
    modprobe "$m" || lab_fail "module $m"
done
# The first AF_ALG use instantiates and self-tests cmac(aes) and ecb(aes): slow under TCG, long
# enough for the kernel's 2 s HCI Reset timeout to fail a controller btvirt is creating.
python3 -c 'import socket
for t, n in (("hash", "cmac(aes)"), ("skcipher", "ecb(aes)")):
    socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET, 0).bind((t, n))' || lab_fail "AF_ALG cmac/ecb(aes)"
# Controllers bluetoothd (started by the package) has taken up: initialised ones only, its
# adapter objects, from one synchronous D-Bus call. (`bluetoothctl list` was the count once,
# but it exits on its own schedule and printed one controller of two on a loaded host, after
# both were up: the scenario failed a check it had just passed.)
ctrls() {
    busctl call org.bluez / org.freedesktop.DBus.ObjectManager GetManagedObjects 2>/dev/null |
        grep -o '"org.bluez.Adapter1"' | wc -l
}
# Two controllers up at two reads a second apart; the count that ended the wait is the one
# judged, not a third read.
two_ctrls() {
    local end=$(( $(date +%s) + 40 )) seen=0
    while [ "$(date +%s)" -lt "$end" ]; do
        n=$(ctrls)
        if [ "$n" = 2 ]; then seen=$((seen + 1)); else seen=0; fi
        [ "$seen" -ge 2 ] && return 0
        sleep 1
    done
    return 1
}
systemctl start bluetooth || lab_fail "bluetooth.service did not start"
lab_check "bluetoothd owns org.bluez on the system bus" busctl status org.bluez
n=0
for try in 1 2 3; do
    btvirt -l2 -L > /tmp/btvirt.log 2>&1 &
    btvirt=$!
    two_ctrls && break
    lab_log "btvirt try $try: $n controller(s) came up; again"
    kill "$btvirt"; wait "$btvirt" || true; sleep 3
done
[ "$n" = 2 ] || lab_fail "two virtual controllers ($n came up in three tries)"
# Controllers only (hci0, hci1), not their connections (hci0:11).
hcis() {
    for d in /sys/class/bluetooth/hci*; do
        b=${d##*/}
        case "$b" in hci|hci*[!0-9]*) ;; *) echo "$b" ;; esac
    done | sort -V
}
dev=$(hcis | sed -n 1p); cli=$(hcis | sed -n 2p)
lab_log "ok: two virtual controllers: $dev (the machine) and $cli (the client)"
btmgmt --index "${cli#hci}" power on > /dev/null
addr=$(busctl get-property org.bluez "/org/bluez/$dev" org.bluez.Adapter1 Address | cut -d'"' -f2)
[ -n "$addr" ] || lab_fail "no address for $dev"
lab_log "$dev (the machine) is $addr"

rm -f /etc/svc.json
# Memory with BLE disabled and with BLE up, in this guest, one after the other, otherwise the
# same (DPP on so that both have something to provision with; the hotspot off): each run's PSS
# once its channels are up, then SIGTERM (the enrollee stops, the GATT service unregisters).
lab_wait 60 "NetworkManager's wpa_supplicant has a control socket for wlan0" test -S /run/wpa_supplicant/wlan0
mem_run() { # BLE(true|false) -> /tmp/pss-BLE (KiB)
    printf '{"hotspot_enabled": false, "dpp_enabled": true, "ble_enabled": %s, "offline_timeout_secs": 600}\n' "$1" > /etc/svc-defaults.json
    svc-agent provision > "/tmp/mem-$1.log" 2>&1 &
    local p=$!
    lab_wait 120 "provisioning with ble_enabled=$1: DPP listening" grep -q "DPP: listening" "/tmp/mem-$1.log"
    if [ "$1" = true ]; then
        lab_wait 120 "provisioning with ble_enabled=true: the Improv service registered" grep -q "BLE: Improv service registered on /org/bluez/$dev" /tmp/mem-true.log
    fi
    sleep 3
    awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" > "/tmp/pss-$1"
    kill -TERM "$p"
    wait "$p" || true
}
mem_run false
mem_run true
lab_check "no BLE without ble_enabled" sh -c '! grep -q "BLE" /tmp/mem-false.log'
rm -rf /opt/svc/dpp
cat > /etc/svc-defaults.json <<JSON
{"hotspot_enabled": false, "ble_enabled": true, "check_url": "http://192.168.200.1:8080/",
 "offline_timeout_secs": 600}
JSON
t_start=$(lab_ms)
svc-agent provision --until-online > /tmp/provision.log 2>&1 &
prov=$!
lab_wait 120 "the Improv service is registered and advertised" grep -q "BLE: Improv service registered on /org/bluez/$dev" /tmp/provision.log
t_up=$(lab_ms)
lab_check "the label secret is 0600" test "$(stat -c %a /opt/svc/improv/label-secret)" = 600
btmgmt --index "${dev#hci}" advinfo || true
sleep 3
pss=$(awk '/^Pss:/ {print $2}' "/proc/$prov/smaps_rollup")
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$prov/status")

# The client (a phone): gatttool on hci1, one connection per operation, as a script.
cat > /tmp/improv-client.py <<'PY'
import hashlib, hmac, re, subprocess, sys, time
addr, psk, cli, secret = sys.argv[1], sys.argv[2], sys.argv[3], open("/opt/svc/improv/label-secret").read().strip()
base = ["gatttool", "-i", cli, "-b", addr, "-t", "public"]
def run(*a):
    for attempt in range(5):  # a busy emulated controller can refuse a connection
        p = subprocess.run(base + list(a), capture_output=True, text=True, timeout=60)
        text = (p.stdout + p.stderr).lower()
        if p.returncode == 0 and "error" not in text and "failed" not in text:
            return p.stdout
        print("gatttool retry:", (p.stdout + p.stderr).strip(), flush=True)
        time.sleep(2)
    sys.exit("gatttool failed: " + " ".join(a))
chars = {}
for line in run("--characteristics").splitlines():
    m = re.search(r"char value handle = (0x[0-9a-f]+), uuid = (\S+)", line)
    if m:
        chars[m.group(2)[-4:]] = m.group(1)
U = "00467768-6228-2272-4663-27747826"
assert all(k in chars for k in ["8001", "8002", "8003", "8004", "8005"]), chars
def read(c):
    out = run("--char-read", "-a", chars[c])
    return bytes.fromhex(out.split(":", 1)[1].replace(" ", "").strip())
def frame(cmd, data=b""):
    f = bytes([cmd, len(data)]) + data
    return f + bytes([sum(f) & 0xFF])
def rpc(f):
    for i in range(0, len(f), 20):
        run("--char-write-req", "-a", chars["8003"], "-n", f[i:i + 20].hex())
def settings(ssid, key):
    return frame(1, bytes([len(ssid)]) + ssid + bytes([len(key)]) + key)
def read_until(c, ok):
    # The machine answers a write once it is taken, and acts on it after (its values are
    # notified, which gatttool's one-shot connections cannot wait for): read until the value
    # is the one wanted, at most 20 s; the last read is returned either way.
    deadline = time.monotonic() + 20
    got = read(c)
    while not ok(got) and time.monotonic() < deadline:
        time.sleep(0.5)
        got = read(c)
    return got
def expect(what, c, want):
    got = read_until(c, lambda v: v == want)
    print(("ok: " if got == want else "FAIL: ") + f"{what}: {got.hex()} (want {want.hex()})", flush=True)
    if got != want:
        sys.exit(1)
expect("state: authorization required", "8001", b"\x01")
rpc(frame(3))
info = read_until("8004", lambda v: v[:1] == b"\x03")
print("device info:", info, flush=True)
assert info[0] == 3 and b"svc-agent" in info, info
rpc(settings(b"lab-home", psk.encode()))
expect("Wi-Fi settings without authorization: not authorized", "8002", b"\x04")
expect("...and nothing is being provisioned", "8001", b"\x01")
rpc(frame(0xA0))
r = read_until("8004", lambda v: v[:1] == b"\xa0")
assert r[0] == 0xA0 and r[1] == 17 and r[2] == 16, r.hex()
rpc(frame(0xA0, hmac.new(b"not-the-label-secret", r[3:19], hashlib.sha256).digest()))
expect("a wrong label secret: not authorized", "8002", b"\x04")
rpc(frame(0xA0))
old_nonce = r
r = read_until("8004", lambda v: v[:1] == b"\xa0" and v != old_nonce)
assert r[0] == 0xA0 and r != old_nonce, r.hex()
rpc(frame(0xA0, hmac.new(secret.encode(), r[3:19], hashlib.sha256).digest()))
expect("the label secret's answer: authorized", "8001", b"\x02")
# An RPC Improv does not define (a portal form it has no equivalent of, such as the
# machine's credentials): unknown RPC, nothing changes.
rpc(frame(0x7F, b'{"cloud": {}}'))
expect("an unknown RPC: unknown RPC", "8002", b"\x02")
expect("...and still authorized", "8001", b"\x02")
rpc(frame(4))
print("last scan result:", read("8004"), flush=True)
# The portal's bad inputs, over BLE: each refused (invalid RPC) and nothing provisioned.
bad = {
    "a short pass key": settings(b"lab-home", b"short"),
    "an invalid UTF-8 SSID": settings(b"\xff\xfe", psk.encode()),
    "a control byte in the pass key": settings(b"lab-home", b"pass\nword-1"),
    "a bad checksum": settings(b"lab-home", psk.encode())[:-1] + b"\x00",
}
for what, f in bad.items():
    rpc(f)
    expect(what + ": invalid RPC", "8002", b"\x01")
    expect(what + ": still authorized, nothing provisioned", "8001", b"\x02")
t = time.time()
print(f"SUBMIT {int(t * 1000)}", flush=True)
rpc(settings(b"lab-home", psk.encode()))
for _ in range(120):
    s = read("8001")
    if s == b"\x04":
        print(f"PROVISIONED {int(time.time() * 1000)}", flush=True)
        expect("the result after provisioning", "8004", frame(1))
        break
    time.sleep(1)
else:
    sys.exit("never provisioned")
PY
python3 /tmp/improv-client.py "$addr" "$psk" "$cli" > /tmp/client.log 2>&1 || { cat /tmp/client.log; tail -30 /tmp/provision.log; lab_fail "the Improv client failed"; }
cat /tmp/client.log
online() { iw dev wlan0 link | grep -q 'SSID: lab-home' && curl -fsS --max-time 10 http://192.168.200.1:8080/ | grep -q lab-home; }
lab_check "provisioning ends online" wait "$prov"
lab_wait 120 "online through lab-home" online
keyfile=/etc/NetworkManager/system-connections/svc-user-lab-home.nmconnection
lab_check "the network is a NetworkManager profile, 0600" test "$(stat -c %a $keyfile)" = 600
lab_check "no hotspot was ever started" sh -c '! grep -q "state: hotspot" /tmp/provision.log && ! nmcli -t -f NAME con show | grep -qx svc-hotspot'
lab_check "one network received over BLE" test "$(grep -c 'BLE: network "lab-home" received' /tmp/provision.log)" = 1
journalctl --sync
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
secret=$(cat /opt/svc/improv/label-secret)
# The journal read once for the three secrets (each read is seconds under TCG).
journalctl -b -o cat > /tmp/journal-1.txt
for s in "$psk" "$(hex "$psk")" "$secret"; do
    if grep -qi -- "$s" /tmp/provision.log /tmp/journal-1.txt; then
        lab_fail "a secret (the pass key or the label secret) reached the logs"
    fi
done
cat /tmp/provision.log

# A standard Improv client (#45): Home Assistant's own library, py-improv-ble-client on bleak
# (the host hook's wheels, unpacked into a folder: the guest has no pip), on hci1 through
# bluetoothd as Home Assistant runs it, against a machine whose defaults file names a button:
# a uinput device ("svc-lab-button", KEY_WPS_BUTTON) that the client's script makes and
# presses once the client sees "authorization required". The machine reads the press as the
# kernel's input events. The home network is forgotten first, so the machine is offline again.
# The client's wheels, unpacked by the host hook.
lab_check "Home Assistant's Improv client imports" env PYTHONPATH=/lab/share/improv-client python3 -c 'import improv_ble_client, bleak'
modprobe uinput || lab_fail "module uinput"
nmcli con delete id "$(sed -n 's/^id=//p' "$keyfile")" > /dev/null
lab_wait 60 "the machine left lab-home (its profile deleted)" sh -c '! iw dev wlan0 link | grep -q "SSID: lab-home"'
cat > /etc/svc-defaults.json <<JSON
{"hotspot_enabled": false, "ble_enabled": true, "check_url": "http://192.168.200.1:8080/",
 "offline_timeout_secs": 600, "improv_button": {"name": "svc-lab-button", "key": "KEY_WPS_BUTTON"}}
JSON
cat > /tmp/improv-ha.py <<'PY'
import asyncio, fcntl, logging, os, struct, sys, time
from bleak import BleakScanner
from bleak.exc import BleakError
from bleak_retry_connector import BleakConnectionError
from improv_ble_client import ImprovBLEClient, State, device_filter
from improv_ble_client.errors import Disconnected, NotConnected, ProvisioningFailed
from improv_ble_client.protocol import Error
addr, ssid, psk, adapter, provlog = sys.argv[1:6]
logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # DEBUG would log the pass key
def ms():
    return int(time.time() * 1000)
def say(*a):
    print(*a, flush=True)
def wait_log(what, line, secs):
    end = time.monotonic() + secs
    while line not in open(provlog, errors="replace").read():
        if time.monotonic() > end:
            sys.exit(f"the machine never logged {line!r} ({what}) in {secs} s")
        time.sleep(0.5)
    say("ok:", what)

# The machine's button: a uinput device (linux/uinput.h's ioctls), kept while the script runs.
EV_SYN, EV_KEY, KEY_WPS_BUTTON, BUS_VIRTUAL = 0, 1, 0x211, 6
def ioc(write, nr, size):
    return (write << 30) | (size << 16) | (ord("U") << 8) | nr
fd = os.open("/dev/uinput", os.O_WRONLY)
fcntl.ioctl(fd, ioc(1, 100, 4), EV_KEY)  # UI_SET_EVBIT
fcntl.ioctl(fd, ioc(1, 101, 4), KEY_WPS_BUTTON)  # UI_SET_KEYBIT
# UI_DEV_SETUP: struct uinput_setup {struct input_id id; char name[80]; __u32 ff_effects_max}
fcntl.ioctl(fd, ioc(1, 3, 92), struct.pack("4H80sI", BUS_VIRTUAL, 1, 1, 1, b"svc-lab-button", 0))
fcntl.ioctl(fd, ioc(0, 1, 0))  # UI_DEV_CREATE
say("ok: button: uinput device svc-lab-button")
def event(typ, code, value):  # struct input_event: struct timeval, type, code, value
    os.write(fd, struct.pack("llHHi", 0, 0, typ, code, value))
def press():
    for v in (1, 0):
        event(EV_KEY, KEY_WPS_BUTTON, v)
        event(EV_SYN, 0, 0)

async def main():
    wait_log("the Improv service is registered", "BLE: Improv service registered", 120)
    wait_log("the machine reads the button", "Improv button: waiting for key", 60)
    found = asyncio.get_running_loop().create_future()
    def seen(dev, adv):
        if dev.address.upper() == addr.upper() and device_filter(adv) and not found.done():
            found.set_result((dev, adv))
    async with BleakScanner(seen, bluez={"adapter": adapter}):
        try:
            dev, adv = await asyncio.wait_for(found, 120)
        except asyncio.TimeoutError:
            sys.exit(f"no Improv advertisement from {addr} on {adapter} in 120 s")
    say("ok: found the machine's Improv advertisement on", adapter)
    # The emulated controllers sometimes drop a link (the first one often at once), and
    # bleak's client object then refuses to connect again ("already connected"): a fresh
    # client, as a user's retry in Home Assistant makes one. Five tries a connection.
    async def connect():
        for attempt in range(5):
            client = ImprovBLEClient(dev, adv)
            try:
                return client, await client.need_authorization()
            except Exception as e:
                say(f"connection try {attempt + 1} failed: {e!r}")
                await asyncio.sleep(2)
        sys.exit("no connection to the machine in five tries")
    want = [State.AUTHORIZATION_REQUIRED, State.AUTHORIZED, State.PROVISIONING, State.PROVISIONED]
    def watcher():
        states, events = [], {s: asyncio.Event() for s in State}
        def on_state(s):
            say(f"STATE {s.name} {ms()}")
            if not states or states[-1] != s:
                states.append(s)
            events[s].set()
        return states, events, on_state
    received = 'BLE: network "lab-home" received'
    # A dropped link shows as one of these (the library's own, bleak's, or its DISCONNECTED
    # state notified while a step waits), whichever layer noticed first.
    class Dropped(Exception):
        pass
    link_lost = (BleakError, BleakConnectionError, Disconnected, NotConnected, Dropped)
    async def until(events, state, secs, what):
        waits = [asyncio.ensure_future(events[s].wait()) for s in (state, State.DISCONNECTED)]
        await asyncio.wait(waits, timeout=secs, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        if events[state].is_set():
            return
        if events[State.DISCONNECTED].is_set():
            raise Dropped(f"the link dropped waiting for {state.name}")
        sys.exit(what)
    # A user's go: connect, press the button when asked, submit. A link that drops before
    # the machine has the network is a new go (a fresh client, a new press: authorization
    # is per connection); one that drops after it is reconnected to read the result.
    for go in range(3):
        client, need = await connect()
        states, events, on_state = watcher()
        if not need:
            sys.exit("the client did not see 'authorization required'")
        try:
            await client.subscribe_state_updates(on_state)  # the current state, then changes
            await until(events, State.AUTHORIZATION_REQUIRED, 10, "no 'authorization required' within 10 s of subscribing")
            say(f"PRESS {ms()}")
            press()
            await until(events, State.AUTHORIZED, 60, "not authorized within 60 s of the press")
            say(f"SUBMIT {ms()}")
            await asyncio.wait_for(client.provision(ssid, psk, None), 300)
            await until(events, State.PROVISIONED, 60, "no 'provisioned' within 60 s of the machine's answer")
            say(f"PROVISIONED {ms()}")
            if states != want:
                sys.exit(f"states {[s.name for s in states]}, want {[s.name for s in want]}")
            say("ok: states as the client saw them:", " -> ".join(s.name for s in states))
            return
        except (*link_lost, ProvisioningFailed) as e:
            # The library retries a command whose link dropped on a new connection, which the
            # machine has not authorized (authorization is per connection: a second phone gets
            # none): "not authorized" after a drop is that retry, not the machine's answer to
            # the authorized go. Any other refusal fails.
            retried = isinstance(e, ProvisioningFailed) and e.error == Error.NOT_AUTHORIZED \
                and events[State.DISCONNECTED].is_set()
            if isinstance(e, ProvisioningFailed) and not retried:
                sys.exit(f"the machine refused the network: {e!r}")
            if received not in open(provlog, errors="replace").read():
                say(f"go {go + 1}: the link dropped before the machine had the network: {e!r}")
                await asyncio.sleep(2)
                continue
            # The emulated controllers drop links (TCG): the machine's own log says whether it
            # finished; the client's states up to the drop must be the start of the right ones.
            say(f"go {go + 1}: the link dropped after the machine had the network: {e!r}")
            seen = [s for s in states if s != State.DISCONNECTED]
            if seen != want[:len(seen)]:
                sys.exit(f"states before the drop {[s.name for s in seen]}, want a start of {[s.name for s in want]}")
            wait_log("provisioned (the machine's log; the client's link dropped)",
                     'BLE: network "lab-home" joined: provisioned', 120)
            return
    sys.exit("the link dropped in three goes before the machine had the network")
asyncio.run(main())
PY
# The gatttool client's links left bluetoothd's hci1 holding the machine as connected, and
# bleak refused ("Client is already connected"): a phone that never met the machine has none.
# RemoveDevice drops that link, after the call returns; the machine advertises again only
# once it is gone (the kernel does not advertise connectably beside a peripheral link that
# the controller's LE states do not allow, and re-enables the old instance when it drops).
# Twice (stop 51's CI run, a clean clone after it) the standard client saw no advertisement
# in 120 s; whether a link was left then is not known (the next run had none), so a failure
# now prints the links, the advertising instances and the controller. Links: hciN:M in sysfs.
links() { for l in /sys/class/bluetooth/hci*:*; do [ -e "$l" ] && printf '%s ' "${l##*/}"; done; true; }
no_links() { [ -z "$(links)" ]; }
lab_log "LE links before: $(links)"
busctl call org.bluez "/org/bluez/$cli" org.bluez.Adapter1 RemoveDevice o "/org/bluez/$cli/dev_$(echo "$addr" | tr : _)" > /dev/null 2>&1 || true
lab_wait 30 "no LE link left between the two controllers" no_links
t_ha=$(lab_ms)
svc-agent provision --until-online > /tmp/provision-ha.log 2>&1 &
prov=$!
PYTHONPATH=/lab/share/improv-client python3 /tmp/improv-ha.py "$addr" lab-home "$psk" "$cli" /tmp/provision-ha.log > /tmp/client-ha.log 2>&1 ||
    { cat /tmp/client-ha.log; tail -40 /tmp/provision-ha.log; echo "LE links: $(links)"
      btmgmt --index "${dev#hci}" advinfo || true; btmgmt --index "${dev#hci}" info || true
      lab_fail "Home Assistant's Improv client failed"; }
cat /tmp/client-ha.log
lab_check "provisioning by the standard client ends online" wait "$prov"
lab_wait 120 "online through lab-home again" online
lab_check "the press authorized the waiting connection" grep -q "BLE: button pressed: connection authorized" /tmp/provision-ha.log
lab_check "one network received over BLE from the standard client" test "$(grep -c 'BLE: network "lab-home" received' /tmp/provision-ha.log)" = 1
lab_check "no hotspot this time either" sh -c '! grep -q "state: hotspot" /tmp/provision-ha.log'
journalctl --sync
journalctl -b -o cat > /tmp/journal-2.txt
for s in "$psk" "$(hex "$psk")" "$secret"; do
    if grep -qi -- "$s" /tmp/provision-ha.log /tmp/journal-2.txt; then
        lab_fail "a secret (the pass key or the label secret) reached the logs"
    fi
done
cat /tmp/provision-ha.log
t_submit=$(awk '/^SUBMIT/ {print $2}' /tmp/client.log)
t_prov=$(awk '/^PROVISIONED/ {print $2}' /tmp/client.log)
lab_log "figure: provisioning start to Improv service registered: $(( t_up - t_start )) ms"
lab_log "figure: BLE submit (Wi-Fi settings written) to provisioned read over GATT (online): $(( t_prov - t_submit )) ms"
lab_log "figure: provisioning PSS with the Improv BLE service up: $pss KiB (RSS $rss KiB)"
lab_log "figure: provisioning PSS, DPP on, BLE disabled: $(cat /tmp/pss-false) KiB; BLE up: $(cat /tmp/pss-true) KiB"
ha_press=$(awk '/^PRESS/ {t = $2} END {print t}' /tmp/client-ha.log)
ha_submit=$(awk '/^SUBMIT/ {t = $2} END {print t}' /tmp/client-ha.log)
ha_prov=$(awk '/^PROVISIONED/ {t = $2} END {print t}' /tmp/client-ha.log)
if [ -n "$ha_prov" ]; then
    lab_log "figure: standard client (py-improv-ble-client): press to authorized $(( ha_submit - ha_press )) ms; submit to provisioned $(( ha_prov - ha_submit )) ms; agent start to provisioned $(( ha_prov - t_ha )) ms"
else # the emulated link dropped before the client heard "provisioned" (the machine's log said it)
    lab_log "figure: standard client (py-improv-ble-client): press to authorized $(( ha_submit - ha_press )) ms; submit to provisioned: not heard by the client (its link dropped)"
fi
