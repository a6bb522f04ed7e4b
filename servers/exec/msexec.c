/* msexec: how every child of mallocsweep starts (servers/exec_helper.py builds the argv).
 *
 * Python must not run between fork and exec (the runner has sampler, marker and display threads:
 * a lock held by one of them at fork time stays held forever in the child). So the child's set-up
 * is this small C program, exec'ed by subprocess's own C fork/exec path, which then execs the real
 * binary under the same pid. In order:
 *
 *   1. parent-death signal (PR_SET_PDEATHSIG), then getppid() == --parent: if the runner died
 *      before the prctl took effect, nothing would ever signal us, so we exit at once (98).
 *   2. (its own process group is made by subprocess's C child code, process_group=0, before this
 *      helper runs: the runner may signal the group as soon as Popen returns.)
 *   3. resource limits (--rlimit nofile=SOFT[:HARD]).
 *   4. THP opt-out (PR_SET_THP_DISABLE, kept across exec) when asked.
 *   5. the gate: wait for one line on stdin (the runner attaches its collectors meanwhile); EOF
 *      means the runner gave up (97). stdin is then /dev/null.
 *   6. in a server root (--root): a private mount namespace (unshare(CLONE_NEWNS), / made
 *      private so nothing propagates back to the host), the --bind directories mounted at the same
 *      path inside the root, /proc mounted, chroot, chdir. Any failure: 96, before the chroot.
 *   7. the environment exactly as given, except that --preload-var's value (if any, and non-empty)
 *      becomes LD_PRELOAD only now, so that this helper never runs under the allocator.
 *   8. execvp (PATH of the given environment; inside the root, the root's files).
 *
 * Exit statuses of its own: 96 namespace/mount/chroot failure, 97 gate closed, 98 parent gone,
 * 99 bad usage or set-up failure, 127 exec failed. Each failure writes one line on stderr (the
 * child's log), "msexec: what: why".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef PR_SET_THP_DISABLE
#define PR_SET_THP_DISABLE 41
#endif

#define MAX_BINDS 16

static void die(int code, const char *what, const char *arg) {
    /* stdio is fine here: single-threaded program, nothing else runs. */
    fprintf(stderr, "msexec: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "",
            errno ? strerror(errno) : "failed");
    fflush(stderr);
    _exit(code);
}

static void usage(const char *why) {
    errno = 0;
    die(99, "usage", why);
}

static long parse_long(const char *s, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end) usage(what);
    return v;
}

static void set_rlimit(const char *spec) {
    /* name=SOFT[:HARD]; only the limits the project sets. */
    const char *eq = strchr(spec, '=');
    if (!eq) usage("--rlimit NAME=SOFT[:HARD]");
    int res;
    if (strncmp(spec, "nofile=", 7) == 0) res = RLIMIT_NOFILE;
    else if (strncmp(spec, "nproc=", 6) == 0) res = RLIMIT_NPROC;
    else if (strncmp(spec, "core=", 5) == 0) res = RLIMIT_CORE;
    else if (strncmp(spec, "memlock=", 8) == 0) res = RLIMIT_MEMLOCK;
    else usage("--rlimit: unknown limit");
    struct rlimit cur;
    if (getrlimit(res, &cur) != 0) die(99, "getrlimit", spec);
    char buf[64];
    snprintf(buf, sizeof buf, "%s", eq + 1);
    char *colon = strchr(buf, ':');
    if (colon) {
        *colon = '\0';
        cur.rlim_max = (rlim_t)parse_long(colon + 1, "--rlimit hard value");
    }
    cur.rlim_cur = (rlim_t)parse_long(buf, "--rlimit soft value");
    if (setrlimit(res, &cur) != 0) die(99, "setrlimit", spec);
}

static void wait_gate(void) {
    char c;
    for (;;) {
        ssize_t n = read(0, &c, 1);
        if (n == 1 && c == '\n') break;
        if (n == 1) continue;
        if (n < 0 && errno == EINTR) continue;
        errno = 0;
        _exit(97); /* EOF or error: the runner gave up before "go" */
    }
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0) die(99, "stdin", "/dev/null");
    close(null);
}

static void enter_root(const char *root, char **binds, int nbinds, const char *cwd) {
    char target[4096];
    if (unshare(CLONE_NEWNS) != 0) die(96, "unshare", "CLONE_NEWNS");
    /* Nothing we mount may propagate back to the host's namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die(96, "mount --make-rprivate", "/");
    for (int i = 0; i < nbinds; i++) {
        if (snprintf(target, sizeof target, "%s%s", root, binds[i]) >= (int)sizeof target) {
            errno = ENAMETOOLONG;
            die(96, "bind", binds[i]);
        }
        if (mount(binds[i], target, NULL, MS_BIND, NULL) != 0) die(96, "bind", target);
    }
    if (snprintf(target, sizeof target, "%s/proc", root) >= (int)sizeof target) {
        errno = ENAMETOOLONG;
        die(96, "proc", root);
    }
    if (mount("proc", target, "proc", 0, NULL) != 0) die(96, "mount proc", target);
    if (chroot(root) != 0) die(96, "chroot", root);
    if (chdir(cwd && *cwd ? cwd : "/") != 0 && chdir("/") != 0) die(96, "chdir", cwd);
}

int main(int argc, char **argv) {
    int pdeathsig = 0, thp_disable = 0, gate = 0;
    long parent = -1;
    const char *root = NULL, *cwd = NULL, *preload_var = NULL;
    char *binds[MAX_BINDS];
    int nbinds = 0;
    char *rlimits[8];
    int nrlimits = 0;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) { i++; break; }
        if (i + 1 >= argc && strcmp(a, "--thp-disable") && strcmp(a, "--gate"))
            usage(a);
        if (strcmp(a, "--pdeathsig") == 0) pdeathsig = (int)parse_long(argv[++i], a);
        else if (strcmp(a, "--parent") == 0) parent = parse_long(argv[++i], a);
        else if (strcmp(a, "--thp-disable") == 0) thp_disable = 1;
        else if (strcmp(a, "--gate") == 0) gate = 1;
        else if (strcmp(a, "--rlimit") == 0) {
            if (nrlimits == 8) usage("too many --rlimit");
            rlimits[nrlimits++] = argv[++i];
        } else if (strcmp(a, "--root") == 0) root = argv[++i];
        else if (strcmp(a, "--bind") == 0) {
            if (nbinds == MAX_BINDS) usage("too many --bind");
            binds[nbinds++] = argv[++i];
        } else if (strcmp(a, "--chdir") == 0) cwd = argv[++i];
        else if (strcmp(a, "--preload-var") == 0) preload_var = argv[++i];
        else usage(a);
    }
    if (i >= argc) usage("no command after --");

    if (pdeathsig) {
        if (prctl(PR_SET_PDEATHSIG, pdeathsig, 0, 0, 0) != 0) die(99, "prctl", "PR_SET_PDEATHSIG");
        /* The runner may have died between fork and the prctl: then no signal will ever come. */
        if (parent > 0 && getppid() != (pid_t)parent) {
            errno = 0;
            die(98, "parent exited before start", NULL);
        }
    }
    for (int r = 0; r < nrlimits; r++) set_rlimit(rlimits[r]);
    if (thp_disable && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0) die(99, "prctl", "PR_SET_THP_DISABLE");
    if (gate) wait_gate();
    if (root) enter_root(root, binds, nbinds, cwd);
    else if (cwd && chdir(cwd) != 0) die(99, "chdir", cwd);
    if (preload_var) {
        const char *v = getenv(preload_var);
        char *copy = v && *v ? strdup(v) : NULL;
        unsetenv(preload_var);
        if (copy && setenv("LD_PRELOAD", copy, 1) != 0) die(99, "setenv", "LD_PRELOAD");
    }
    execvp(argv[i], &argv[i]);
    die(127, "exec", argv[i]);
    return 127;
}
