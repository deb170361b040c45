"""One client of a guest's QEMU human monitor ($WORK/monitor.sock), for the harness (run.sh:
saving the guest) and host hooks (host-lib.sh: USB hot-plug).

    hmp.py WORK COMMAND     sends one command, prints QEMU's answer; exits 1 with no monitor
"""
import os
import re
import socket
import sys
import time


def reply(s):
    """Everything QEMU writes up to its next prompt, without terminal escapes."""
    out = b""
    while not out.endswith(b"(qemu) "):
        chunk = s.recv(4096)
        if not chunk:
            break
        out += chunk
    return re.sub(rb"\x1b\[[0-9;]*[A-Za-z]", b"", out).decode(errors="replace")


def connect(work, tries=150, timeout=10):
    """A connection past QEMU's banner, or None after `tries` attempts 0.2 s apart."""
    os.chdir(work)  # a relative socket path: no sun_path length limit on deep folders
    for _ in range(tries):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(timeout)
            s.connect("monitor.sock")
        except OSError:
            time.sleep(0.2)
            continue
        reply(s)
        return s
    return None


def command(s, c):
    """QEMU's answer to one command. QEMU echoes the command as typed (a character at a
    time); its answer follows the last echo."""
    s.sendall((c + "\n").encode())
    return reply(s).replace("(qemu) ", "").rsplit(c, 1)[-1].strip()


if __name__ == "__main__":
    conn = connect(sys.argv[1], tries=100, timeout=60)
    if conn is None:
        sys.exit("no QEMU monitor at " + os.path.join(sys.argv[1], "monitor.sock"))
    print(command(conn, sys.argv[2]))
    conn.close()
