#!/bin/sh
# Fast start (BENCHMARKS.md, "Fast start"): from the exec of `svc-agent run` (fast start, warm
# cache, a file:// app with no answer yet) to the exec of svc-server, next to a bare
# fork+exec of the same program by the same harness, and next to a C launcher that only
# posix_spawns it (the least any launcher costs); the three alternate, in one run.
# svc-server is a small C program that writes the time it was exec'd (CLOCK_REALTIME); the
# harness (C, posix_spawn) notes the time just before each spawn.
#
#   benches/fast-start.sh [RUNS]          (default 201; the agent: target/release/svc-agent,
#                                          built if missing, or SVC_AGENT_BIN)
set -eu
cd "$(dirname "$0")/.."
runs="${1:-201}"
agent="${SVC_AGENT_BIN:-$PWD/target/release/svc-agent}"
if [ -z "${SVC_AGENT_BIN:-}" ] && [ ! -x "$agent" ]; then
    cargo build --release --bin svc-agent >&2
fi
command -v cc >/dev/null || { . scripts/lib/apt.sh && apt_need cc gcc && apt_install_needed; }
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
/* harness RUNS ROOT STAMP LAUNCHER AGENT */
int main(int argc, char **argv) {
    int n = atoi(argv[1]); const char *sf = getenv("STAMP_FILE");
    char *root = argv[2];
    char *cmds[3][5] = {{argv[5], "run", "--root", root, 0}, {argv[4], root, 0}, {argv[3], 0}};
    const char *names[3] = {"svc-agent run (fast start)", "C launcher (posix_spawn only)",
                            "floor: bare fork+exec"};
    double *r = calloc(3 * n, sizeof *r);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            unlink(sf); pid_t p; long long t0 = now();
            if (posix_spawn(&p, cmds[k][0], 0, 0, cmds[k], environ)) { perror("spawn"); return 1; }
            r[k * n + i] = (stamp(sf) - t0) / 1e6;
            kill(p, SIGTERM); waitpid(p, 0, 0);
        }
    double floor_median = 0;
    for (int k = 2; k >= 0; k--) {
        double *v = r + k * n; qsort(v, n, sizeof *v, cmp);
        if (k == 2) floor_median = v[n / 2];
        printf("| %s | %.2f ms | %.2f ms | %.2fx | %.2f ms |\n", names[k], v[n / 2],
               v[(n * 95 + 99) / 100 - 1], v[n / 2] / floor_median, v[0]);
    }
    return 0;
}
C
for p in stamp launcher harness; do cc -O2 -o "$w/$p" "$w/$p.c"; done
mkdir -p "$w/root/etc" "$w/root/app" "$w/root/opt/svc/bin"
ln -s "$w/stamp" "$w/root/opt/svc/bin/svc-server"
printf '{"cloud": {"app_address": "file://%s/app", "id": "part-1", "secret": "bench-secret-0123456789"}}' \
    "$w/root" > "$w/root/etc/svc.json"
chmod 600 "$w/root/etc/svc.json"
echo "agent: $agent ($(file -b "$agent" | cut -d, -f1-2)); $runs starts of each, alternating"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| exec of ... to exec of svc-server | median | p95 | median / floor's | least |"
echo "|---|---|---|---|---|"
STAMP_FILE="$w/stamp.out" SVC_AGENT_FAST_START=1 "$w/harness" "$runs" "$w/root" "$w/stamp" \
    "$w/launcher" "$agent" 2>/dev/null
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
