#!/bin/bash
# The runner of the snapshot's lab disk (run.sh --snapshot): instead of a scenario, it frees
# the lab disk, tells the harness the guest is up (@@LAB-READY@@), and waits. The harness
# saves the guest at that moment; every restored copy of it finds a scenario's lab disk
# (label "lab") in place of the waiting one (label "labwait") and runs that disk's runner,
# as a freshly booted guest would.
set -u
if [ "${1:-}" != --detached ]; then
    # Run from /run, so that the lab disk can be unmounted under us.
    cp /lab/guest-run.sh /run/lab-wait.sh
    exec bash /run/lab-wait.sh --detached
fi
cd /
# The serial console the harness reads (ttyS0 on amd64, ttyAMA0 on arm64).
tty="/dev/$(sed -n 's/.*console=\([a-zA-Z0-9]*\).*/\1/p' /proc/cmdline)"
umount /lab || { echo "@@LAB-ERROR@@ snapshot: the waiting disk cannot be unmounted" > "$tty"; exit 1; }
sync
echo "@@LAB-READY@@" > "$tty"

# The ext4 volume label: 16 bytes at 1024 + 120. Read past the page cache (O_DIRECT): the
# disk behind /dev/vdb changes under the kernel when the guest is restored.
label() {
    dd if=/dev/vdb bs=4096 count=1 iflag=direct 2>/dev/null | tail -c +1145 | head -c 16 | tr -d '\0'
}
while [ "$(label)" != lab ]; do sleep 0.2; done

# Nothing cached of the waiting disk may be read as the scenario's.
blockdev --flushbufs /dev/vdb
echo 3 > /proc/sys/vm/drop_caches
mount -t ext4 /dev/vdb /lab || { echo "@@LAB-ERROR@@ restored: the lab disk cannot be mounted" > "$tty"; exit 1; }
# The saved guest's clock stopped when it was saved: take the host's (certificates made for
# the scenario must not lie in the guest's future), and make this copy's randomness its own.
date -s "@$(cat /lab/host-epoch)" > /dev/null
cat /lab/run-id > /dev/urandom
exec bash /lab/guest-run.sh
