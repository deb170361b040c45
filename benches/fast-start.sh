#!/bin/sh
# Fast start (BENCHMARKS.md, "Fast start"): from the exec of `svc-agent run` (fast start, warm
# cache, a file:// app with no answer yet) to the exec of svc-server, next to a bare
# fork+exec of the same program by the same harness (the floor), and next to two C launchers
# that only posix_spawn it: one linked like most programs (dynamic glibc) and one static
# (musl-gcc -static, else gcc -static; no dynamic loader), the least any launcher that
# is a program of its own can cost. All rows alternate, start by start, in one run.
# svc-server is a small C program that writes the time it was exec'd (CLOCK_REALTIME); the
# harness (C, posix_spawn) notes the time just before each spawn. The rows run in a new
# shuffled order each round (a fixed seed).
#
#   benches/fast-start.sh [RUNS] [AGENT...]
#
# RUNS defaults to 201. Each AGENT is a svc-agent binary (several: before/after in one run);
# default SVC_AGENT_BIN, else target/release/svc-agent (built if missing).
#
# Two settings, the same for every row of a run (the harness's children inherit both):
# - FAST_START_ENV=service (default): the environment a systemd service has (PATH, LANG,
#   INVOCATION_ID, JOURNAL_STREAM, SYSTEMD_EXEC_PID; here no NOTIFY_SOCKET: the harness is
#   no service manager) plus the bench's own STAMP_FILE and SVC_AGENT_FAST_START, 7 in all.
#   `shell`: the caller's whole environment plus those two (the bench before session 9:
#   ~35 variables from an interactive shell, which a daemon never has).
# - FAST_START_SCHED=fifo (default): the harness runs under `chrt -f 50` (SCHED_FIFO, root
#   only), so the starts it times are not preempted by the machine's other (SCHED_OTHER)
#   work: on a shared, loaded machine the medians are otherwise the scheduler's. No CPU is
#   pinned: the agent and the svc-server it starts may run side by side on two CPUs, as on
#   the device. `other`: the caller's scheduling (the bench before session 9).
set -eu
cd "$(dirname "$0")/.."
runs="${1:-201}"
[ $# -gt 0 ] && shift
if [ $# -eq 0 ]; then
    agent="${SVC_AGENT_BIN:-$PWD/target/release/svc-agent}"
    if [ -z "${SVC_AGENT_BIN:-}" ] && [ ! -x "$agent" ]; then
        cargo build --release --bin svc-agent >&2
    fi
    set -- "$agent"
fi
command -v cc >/dev/null || { . scripts/lib/apt.sh && apt_need cc gcc && apt_install_needed; }
command -v musl-gcc >/dev/null || { . scripts/lib/apt.sh && apt_need musl-gcc musl-tools && apt_install_needed; }
w="$(mktemp -d /tmp/svc-fast-start.XXXXXX)"
trap 'rm -rf "$w"' EXIT
cat > "$w/stamp.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(void) {
    struct timespec t; clock_gettime(CLOCK_REALTIME, &t);
    FILE *f = fopen(getenv("STAMP_FILE"), "a");
    fprintf(f, "%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec); fclose(f);
    struct timespec s = {3600, 0}; nanosleep(&s, 0); return 0;
}
C
cat > "$w/launcher.c" <<'C'
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <unistd.h>
extern char **environ;
static pid_t child;
static void term(int s) { (void)s; kill(child, SIGTERM); _exit(0); }
int main(int c, char **v) {  /* launcher ... ROOT: starts ROOT/opt/svc/bin/svc-server */
    char p[4096]; snprintf(p, sizeof p, "%s/opt/svc/bin/svc-server", v[c - 1]);
    char *av[] = {p, "--config", "x", 0};
    posix_spawnattr_t a; posix_spawnattr_init(&a);
    posix_spawnattr_setflags(&a, POSIX_SPAWN_SETPGROUP); posix_spawnattr_setpgroup(&a, 0);
    signal(SIGTERM, term); posix_spawn(&child, p, 0, &a, av, environ);
    for (;;) pause();
}
C
cat > "$w/harness.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
extern char **environ;
static long long now(void) { struct timespec t; clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec; }
static long long stamp(const char *p) {  /* waits up to 60 s for the stamp */
    for (int i = 0; i < 120000; i++) {
        FILE *f = fopen(p, "r");
        if (f) { long long v = 0; int n = fscanf(f, "%lld", &v); fclose(f); if (n == 1 && v) return v; }
        usleep(500);
    }
    printf("no stamp from %s\n", p); exit(1);
}
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y; }
/* harness RUNS ROOT STAMP LAUNCHER STATIC_LAUNCHER AGENT... */
int main(int argc, char **argv) {
    int n = atoi(argv[1]); const char *sf = getenv("STAMP_FILE");
    char *root = argv[2];
    int k_n = 3 + (argc - 6);
    char *(*cmds)[5] = calloc(k_n, sizeof *cmds);
    char **names = calloc(k_n, sizeof *names);
    cmds[0][0] = argv[3]; names[0] = "floor: bare fork+exec";
    cmds[1][0] = argv[4]; cmds[1][1] = root; names[1] = "C launcher, dynamic glibc (posix_spawn only)";
    cmds[2][0] = argv[5]; cmds[2][1] = root; names[2] = "C launcher, static musl (posix_spawn only)";
    for (int k = 3; k < k_n; k++) {
        char *a = argv[6 + k - 3];
        cmds[k][0] = a; cmds[k][1] = "run"; cmds[k][2] = "--root"; cmds[k][3] = root;
        names[k] = malloc(strlen(a) + 32); sprintf(names[k], "svc-agent run: %s", a);
    }
    double *r = calloc((size_t)k_n * n, sizeof *r);
    int *order = calloc(k_n, sizeof *order);
    srand(1);
    for (int i = 0; i < n; i++) {
        /* A new order each round (a fixed seed: the same run twice is the same order): a
           start right after an agent's stop was 0.1-0.2 ms slower, and a rotation put each
           row behind the same row every round. */
        for (int j = 0; j < k_n; j++) order[j] = j;
        for (int j = k_n - 1; j > 0; j--) { int o = rand() % (j + 1), x = order[j]; order[j] = order[o]; order[o] = x; }
        for (int j = 0; j < k_n; j++) {
            int k = order[j];
            unlink(sf); pid_t p; long long t0 = now();
            if (posix_spawn(&p, cmds[k][0], 0, 0, cmds[k], environ)) { perror("spawn"); return 1; }
            r[k * n + i] = (stamp(sf) - t0) / 1e6;
            kill(p, SIGTERM); waitpid(p, 0, 0);
        }
    }
    double floor_median = 0;
    for (int k = 0; k < k_n; k++) {
        double *v = r + k * n; qsort(v, n, sizeof *v, cmp);
        if (k == 0) floor_median = v[n / 2];
        printf("| %s | %.2f ms | %.2f ms | %.2fx | %.2f ms |\n", names[k], v[n / 2],
               v[(n * 95 + 99) / 100 - 1], v[n / 2] / floor_median, v[0]);
    }
    return 0;
}
C
for p in stamp launcher harness; do cc -O2 -o "$w/$p" "$w/$p.c"; done
musl-gcc -O2 -static -o "$w/launcher-static" "$w/launcher.c" 2>/dev/null \
    || gcc -O2 -static -o "$w/launcher-static" "$w/launcher.c"
mkdir -p "$w/root/etc" "$w/root/app" "$w/root/opt/svc/bin"
ln -s "$w/stamp" "$w/root/opt/svc/bin/svc-server"
printf '{"cloud": {"app_address": "file://%s/app", "id": "part-1", "secret": "bench-secret-0123456789"}}' \
    "$w/root" > "$w/root/etc/svc.json"
chmod 600 "$w/root/etc/svc.json"
for a in "$@"; do echo "agent: $a ($(file -b "$a" | cut -d, -f1-2))"; done
env_mode="${FAST_START_ENV:-service}"
sched="${FAST_START_SCHED:-fifo}"
set -- "$w/harness" "$runs" "$w/root" "$w/stamp" "$w/launcher" "$w/launcher-static" "$@"
case "$sched" in
    fifo) chrt -f 50 true 2>/dev/null || { echo "chrt -f failed (not root?); FAST_START_SCHED=other runs without it" >&2; exit 1; }
        set -- chrt -f 50 "$@" ;;
    other) ;;
    *) echo "FAST_START_SCHED: fifo or other" >&2; exit 2 ;;
esac
case "$env_mode" in
    service) set -- env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 INVOCATION_ID="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" \
        JOURNAL_STREAM=8:40413 SYSTEMD_EXEC_PID=$$ \
        STAMP_FILE="$w/stamp.out" SVC_AGENT_FAST_START=1 "$@" ;;
    shell) set -- env STAMP_FILE="$w/stamp.out" SVC_AGENT_FAST_START=1 "$@" ;;
    *) echo "FAST_START_ENV: service or shell" >&2; exit 2 ;;
esac
echo "$runs starts of each row, in a shuffled order each round; environment: $env_mode; scheduling: $sched"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| exec of ... to exec of svc-server | median | p95 | median / floor's | least |"
echo "|---|---|---|---|---|"
"$@" 2>/dev/null
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
