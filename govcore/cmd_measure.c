/* cmd_measure.c - `govcore measure -- CMD`: run a command while the sampler thread integrates
 * the rails' energy, then report it (cli_text.c). */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* One line on stderr per rail whose readings were bad. */
static void warn_quality(const gc_sampler *s, const gc_window *w, int strict)
{
    int i;

    for (i = 0; i < w->n_rails; i++)
        if (w->interpolated_pct[i] > GC_SAMPLER_MAX_INTERPOLATED_PCT || w->negative_readings[i])
            fprintf(stderr, "govcore: %s: rail %s: %llu failed reads, %.1f %% of the time "
                            "interpolated or held, %llu negative readings (counted as 0 W)\n",
                    strict ? "error" : "warning", gc_sampler_rail_name(s, i),
                    (unsigned long long)w->failed_reads[i], w->interpolated_pct[i],
                    (unsigned long long)w->negative_readings[i]);
}

/* Start argv; wait for it. -errno (with *exec_err) if it could not be started. A CLOEXEC pipe
 * carries the child's exec errno back: if exec succeeds the pipe just closes. */
static int run_child(char **argv, int *status)
{
    int fds[2], child_errno = 0, rc;
    ssize_t n;
    pid_t pid;
    struct sigaction ign, old_int, old_quit;

    if (pipe2(fds, O_CLOEXEC) < 0)
        return -errno;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        close(fds[0]);
        close(fds[1]);
        return rc;
    }
    if (pid == 0) {
        close(fds[0]);
        /* the command keeps stdout and stderr (as under time(1)): the report goes to stderr or -o */
        execvp(argv[0], argv);
        child_errno = errno;
        if (write(fds[1], &child_errno, sizeof child_errno) < 0)
            _exit(127);
        _exit(127);
    }
    close(fds[1]);
    /* Like time(1): Ctrl-C goes to the command, and we still report what it used. */
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    do {
        n = read(fds[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    return n == (ssize_t)sizeof child_errno ? -child_errno : 0;
}

int cmd_measure(const struct options *o)
{
    gc_sampler_config cfg = {0};
    gc_sampler *s;
    gc_snapshot a, z;
    gc_window w;
    gc_board b;
    int rc, i, status = 0, exit_status, strict = 0;
    const char *out_path = NULL;
    FILE *out = stderr; /* the report: stderr, or -o FILE; CMD keeps stdout */

    for (i = 0; i < o->argc; i++) {
        if (strcmp(o->argv[i], "--strict") == 0) {
            strict = 1;
        } else if ((strcmp(o->argv[i], "-o") == 0 || strcmp(o->argv[i], "--output") == 0) &&
                   i + 1 < o->argc) {
            out_path = o->argv[++i];
        } else if (strcmp(o->argv[i], "--rate") == 0 && i + 1 < o->argc) {
            char *end;
            errno = 0;
            cfg.rate_hz = strtod(o->argv[++i], &end);
            if (errno || *end || !(cfg.rate_hz >= GC_SAMPLER_MIN_RATE_HZ) ||
                cfg.rate_hz > GC_SAMPLER_MAX_RATE_HZ)
                return fail("--rate takes a rate in Hz, %g <= HZ <= %.0f", GC_SAMPLER_MIN_RATE_HZ,
                            GC_SAMPLER_MAX_RATE_HZ);
        } else {
            return fail("measure: unexpected '%s' (usage: govcore measure [--rate HZ] [--strict] "
                        "[-o FILE] -- CMD...)",
                        o->argv[i]);
        }
    }
    if (o->cmd_argc == 0)
        return fail("measure needs a command after `--`, e.g. `govcore measure -- sleep 1`");
    if ((rc = open_board(o, &b)) != 0)
        return rc;
    if ((rc = gc_sampler_create(&s, &b, &cfg)) < 0)
        return fail_board(&b, rc);
    if (out_path) { /* a new file, made before CMD runs: an existing one is not ours to replace */
        int fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);

        if (fd < 0 || !(out = fdopen(fd, "w"))) {
            rc = errno;
            if (fd >= 0)
                close(fd);
            gc_sampler_free(s);
            return fail("-o %s: %s%s", out_path, strerror(rc),
                        rc == EEXIST ? " (give a new file name)" : "");
        }
    }
    if (b.warning[0])
        fprintf(stderr, "govcore measure: warning: %s\n", b.warning);
    if ((rc = gc_sampler_start(s)) < 0) {
        gc_sampler_free(s);
        if (out != stderr)
            fclose(out);
        return fail("cannot start the sampler thread: %s", strerror(-rc));
    }
    gc_sampler_snapshot(s, &a);
    rc = run_child(o->cmd_argv, &status);
    gc_sampler_snapshot(s, &z);
    gc_sampler_stop(s);
    if (rc < 0) {
        gc_sampler_free(s);
        if (out != stderr)
            fclose(out);
        return fail("cannot run '%s': %s", o->cmd_argv[0], strerror(-rc));
    }
    gc_window_diff(&a, &z, &w);
    exit_status = WIFEXITED(status) ? WEXITSTATUS(status)
                  : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    print_measure(out, o, s, &w, exit_status);
    if (out != stderr) {
        if (fclose(out) != 0)
            fprintf(stderr, "govcore measure: error: cannot write %s: %s\n", out_path, strerror(errno));
    } else {
        fflush(stderr);
    }
    if (!w.readings_ok) {
        warn_quality(s, &w, strict);
        if (strict)
            exit_status = EXIT_BAD_READINGS;
    }
    gc_sampler_free(s);
    return exit_status;
}
