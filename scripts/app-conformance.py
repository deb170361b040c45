#!/usr/bin/env python3
"""Conformance check of a management app against the rules svc-agent relies on
(docs/protocol.md, "Writing an app: the checklist"), run from outside, as the agent would:
python3's ssl and http.client only, one request per connection, as svc-agent sends them.

usage: app-conformance.py --app https://HOST[:PORT][/PREFIX] --part-id ID
                          (--secret S | --api-key KEYID:KEY) [--ca CA.pem]
                          [--hold SECS] [--no-auth-check]

  --hold SECS      the app holds polls: check the held-poll rules with `Prefer: wait=SECS`
                   (a few seconds is enough; the check waits up to SECS + 30 s)
  --no-auth-check  skip "a wrong secret is refused" (a lab app that checks no secret)

Each rule prints PASS, FAIL (with what was seen) or SKIP (with why); exit 1 if any failed.
The machine's records it sends to the log endpoint say `conformance check` in the message.
What it cannot see from outside (your storage, replicas sharing the status, proxy timeouts
under load, certificates on other devices' stores) stays for you to tick off by hand.
"""
import argparse, http.client, json, ssl, sys, threading, time, urllib.parse

POLL, LOGS = "/api/v1/agent/poll", "/api/v1/agent/logs"
MAX_ANSWER = 8 * 1024 * 1024
results = []


def report(ok, rule, detail=""):
    word = {True: "PASS", False: "FAIL", None: "SKIP"}[ok]
    results.append(ok)
    print(f"{word}  {rule}" + (f"\n      {detail}" if detail else ""), flush=True)


class App:
    def __init__(self, a):
        u = urllib.parse.urlsplit(a.app.rstrip("/"))
        if u.scheme not in ("https", "http"):
            sys.exit("--app must be an https:// (or explicit http://) URL")
        self.https, self.host, self.prefix = u.scheme == "https", u.hostname, u.path
        self.port = u.port or (443 if self.https else 80)
        self.ctx = ssl.create_default_context(cafile=a.ca) if self.https else None
        if self.ctx:
            self.ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        self.session = None
        self.auth = (f"Secret {a.secret}" if a.secret else f"ApiKey {a.api_key}")
        self.part = a.part_id

    def request(self, path, body=b"", headers=None, auth=None, timeout=60, resume=False):
        """One request on a new connection: (status, headers dict lowercased, body, secs,
        (TLS version, resumed))."""
        h = {"X-Svc-Part-Id": self.part, "Authorization": auth or self.auth,
             "Content-Type": "application/json", "User-Agent": "svc-agent-conformance/1"}
        h.update(headers or {})
        if self.https:
            c = Resuming(self.host, self.port, context=self.ctx, timeout=timeout,
                         session=self.session if resume else None)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        t0 = time.monotonic()
        c.connect()
        c.request("POST", self.prefix + path, body=body, headers=h)
        r = c.getresponse()
        data = r.read(MAX_ANSWER + 1)
        secs = time.monotonic() - t0
        tls = (None, False)
        if self.https:
            self.session = c.sock.session
            tls = (c.sock.version(), bool(c.sock.session_reused))
        info = (r.status, {k.lower(): v for k, v in r.getheaders()}, data, secs, tls)
        c.close()
        return info


class Resuming(http.client.HTTPSConnection):
    """An HTTPS connection that offers a saved TLS session (http.client has no argument)."""

    def __init__(self, *a, session=None, **k):
        super().__init__(*a, **k)
        self.saved = session

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host,
                                              session=self.saved)


STATUS = {"agent": {"version": "0.0.0-conformance", "uptime_secs": 1},
          "svc_server": {"state": "running"}, "host": {"arch": "x86_64"}}


def check_answer(body):
    """The poll answer's members, as the agent reads them; a list of problems."""
    try:
        v = json.loads(body)
    except ValueError as e:
        return [f"not JSON: {e}"]
    if not isinstance(v, dict):
        return ["not a JSON object"]
    bad = []
    for key in ("targets", "commands"):
        if key in v and not isinstance(v[key], list):
            bad.append(f"`{key}` is {type(v[key]).__name__}, not an array (never null)")
    for t in v.get("targets") or []:
        if not (isinstance(t, dict) and isinstance(t.get("version"), str)
                and isinstance(t.get("url"), str)):
            bad.append(f"target without a string `version` and `url`: {t}")
    ids = [c.get("id") for c in v.get("commands") or [] if isinstance(c, dict)]
    if len(ids) != len(set(ids)):
        bad.append("two commands with one id")
    p = v.get("poll_interval_secs")
    if p is not None and not (isinstance(p, int) and p >= 0):
        bad.append(f"`poll_interval_secs` is {p!r}, not an integer >= 0")
    if "config" in v and not isinstance(v["config"], (dict, type(None))):
        bad.append("`config` is not an object")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--app", required=True)
    ap.add_argument("--part-id", required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--secret")
    g.add_argument("--api-key")
    ap.add_argument("--ca")
    ap.add_argument("--hold", type=int, default=0)
    ap.add_argument("--no-auth-check", action="store_true")
    a = ap.parse_args()
    app = App(a)
    status = json.dumps(STATUS).encode()

    # Connections and TLS
    try:
        st, h, body, secs, sock = app.request(POLL, status, {"Prefer": "wait=0"}, timeout=30)
    except (OSError, ssl.SSLError) as e:
        report(False, "the app answers a poll over a verified connection", str(e))
        return 1
    report(True, "the server certificate verifies (system store or --ca)" if app.https else
           "plain http (written so explicitly)")
    if app.https:
        report(sock[0] == "TLSv1.3", "TLS 1.3", f"negotiated {sock[0]}")
        try:
            st2, _, _, _, sock2 = app.request(POLL, status, {"Prefer": "wait=0"}, resume=True,
                                              timeout=30)
            report(sock2[1], "TLS session tickets: a second connection resumes",
                   "" if sock2[1] else "a full handshake again (no ticket, or "
                   "not accepted)")
        except (OSError, ssl.SSLError) as e:
            report(False, "TLS session tickets: a second connection resumes", str(e))
    report(secs <= 30, "a plain poll (wait=0) is answered within 30 s", f"{secs:.1f} s")

    # Polls
    report(st == 200, "a first poll (no If-None-Match) is answered 200", f"got {st}")
    if st != 200:
        return finish()
    tag = h.get("etag")
    report(tag is not None, "every 200 carries an ETag")
    report(len(body) <= MAX_ANSWER, "the answer is under 8 MiB", f"{len(body)} bytes")
    problems = check_answer(body)
    report(not problems, "the answer's members are of the shapes the agent reads",
           "; ".join(problems))
    if tag:
        st, h2, body2, _, _ = app.request(POLL, status, {"Prefer": "wait=0",
                                                         "If-None-Match": tag}, timeout=30)
        report(st == 304, "the same ETag (unchanged) is answered 304",
               f"got {st}" + (" (the answer changed meanwhile?)" if st == 200 else ""))
        if st == 304:
            report(not body2, "a 304 has no body", f"{len(body2)} bytes")
            report(h2.get("etag") in (None, tag), "a 304 repeats the ETag or none",
                   f"ETag {h2.get('etag')!r}")
        st, _, _, _, _ = app.request(POLL, status, {"Prefer": "wait=0",
                                                    "If-None-Match": '"conformance-other"'},
                                     timeout=30)
        report(st == 200, "a different ETag is answered 200 (byte-for-byte comparison)",
               f"got {st}")
    if a.no_auth_check:
        report(None, "a wrong secret is refused with 401/403", "--no-auth-check")
    else:
        st, _, _, _, _ = app.request(POLL, status, {"Prefer": "wait=0"},
                                     auth="Secret conformance-wrong-secret", timeout=30)
        report(st in (401, 403), "a wrong secret is refused with 401/403", f"got {st}")

    # Held polls
    if a.hold and tag:
        n = a.hold
        hdr = {"Prefer": f"wait={n}", "If-None-Match": tag}
        st, h3, _, secs, _ = app.request(POLL, status, hdr, timeout=n + 30)
        applied = "wait" in (h3.get("preference-applied") or "")
        report(applied, "Preference-Applied: wait on the answer to a poll with Prefer",
               f"status {st}, headers {h3}")
        report(st == 304, "an unchanged held poll ends 304", f"got {st}")
        report(secs <= n + 1, f"a held poll is answered by N seconds (N={n})", f"{secs:.1f} s")
        report(secs >= n * 0.5, "an unchanged poll with wait=N is held (not answered at once)",
               f"{secs:.1f} s")
        # A second, plain poll while one is held: both answered.
        out = {}
        t = threading.Thread(target=lambda: out.update(held=app.request(
            POLL, b"", dict(hdr, **{"X-Svc-Status": "unchanged"}), timeout=n + 30)))
        t.start()
        time.sleep(min(1.0, n / 3))
        st4, h4, _, _, _ = app.request(POLL, status, {"Prefer": "wait=0", "If-None-Match": tag},
                                       timeout=30)
        t.join()
        held = out.get("held")
        report(st4 in (200, 304) and held is not None and held[0] in (200, 304),
               "a plain poll while one is held: both answered",
               f"plain {st4}, held {held[0] if held else None}")
        report("wait" in (h4.get("preference-applied") or ""),
               "Preference-Applied: wait on a 304 to wait=0 as well",
               f"headers {h4}")
    else:
        report(None, "held polls", "--hold not given (an app that does not hold polls)")

    # Log batches
    rec = {"id": 1, "ts": "2026-01-01T00:00:00.000Z", "level": "info",
           "subsystem": "agent", "message": "conformance check"}
    batch = json.dumps({"records": [rec]}).encode()
    st, _, _, _, _ = app.request(LOGS, batch, timeout=30)
    report(200 <= st < 300, "a log batch is acknowledged with a 2xx", f"got {st}")
    st, _, _, _, _ = app.request(LOGS, batch, timeout=30)
    report(200 <= st < 300, "a re-sent batch (same ids) is acknowledged too", f"got {st}")
    st, _, _, _, _ = app.request(LOGS, b'{"records": [{"id": "x"}]}', timeout=30)
    report(st in (400, 413, 422) or 200 <= st < 300,
           "a batch with a malformed record is refused only with 400/413/422 (or taken)",
           f"got {st}: any other 4xx pauses the machine's shipping for an hour")
    return finish()


def finish():
    failed = sum(1 for r in results if r is False)
    print(f"\n{sum(1 for r in results if r)} passed, {failed} failed, "
          f"{sum(1 for r in results if r is None)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
