/* version.c - what this build is. The build passes GC_VERSION (pydvfs/__init__.py),
 * GC_GIT_DESCRIBE (`git describe` when built from a clone), GC_TREE_SHA256 (the SHA-256 of
 * the policy_tree.c compiled in), GC_POLICIES_SHA256 (that of gen_policies_builtin.c) and
 * GC_RANGES_SHA256 (that of gen_policy_ranges.c: what the family says of each built-in's classes);
 * govcore/Makefile and setup.py compute them alike. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"

#ifndef GC_VERSION
#define GC_VERSION "unknown"
#endif
#ifndef GC_GIT_DESCRIBE
#define GC_GIT_DESCRIBE ""
#endif
#ifndef GC_TREE_SHA256
#define GC_TREE_SHA256 ""
#endif
#ifndef GC_POLICIES_SHA256
#define GC_POLICIES_SHA256 ""
#endif
#ifndef GC_RANGES_SHA256
#define GC_RANGES_SHA256 ""
#endif

const char gc_version[] = GC_VERSION;
const char gc_git_describe[] = GC_GIT_DESCRIBE;
const char gc_builtin_tree_sha256[] = GC_TREE_SHA256;
#ifdef GC_NO_DLOPEN
const int gc_can_load_policies = 0;
#else
const int gc_can_load_policies = 1;
#endif

/* fmt appended to out[*used..len); *used counts past len when it does not fit. */
static void put(char *out, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(out + (*used < len ? *used : len - 1), *used < len ? len - *used : 1, fmt, ap);
    va_end(ap);
    *used += n > 0 ? (size_t)n : 0;
}

static const char *or_unknown(const char *s)
{
    return s && s[0] ? s : "?";
}

#ifndef GC_BUILTIN_TREE_ONLY
/* "board: measure, measure (data sha256 PREFIX[, PREFIX])": the board's built-in trees, read
 * from gc_builtin_policies in its order. */
static void put_board(char *out, size_t len, size_t *used, int first)
{
    const char *board = gc_builtin_policies[first].board_id;
    int i, j, n = 0;

    put(out, len, used, "          %s:", board);
    for (i = first; i < gc_n_builtin_policies; i++)
        if (strcmp(gc_builtin_policies[i].board_id, board) == 0)
            put(out, len, used, "%s %s", n++ ? "," : "", gc_builtin_policies[i].measure);
    put(out, len, used, " (data sha256");
    for (i = first, n = 0; i < gc_n_builtin_policies; i++) {
        const char *sha = or_unknown(gc_builtin_policies[i].tree->data_sha256);

        if (strcmp(gc_builtin_policies[i].board_id, board) != 0)
            continue;
        for (j = first; j < i; j++) /* each of the board's data sets once */
            if (strcmp(gc_builtin_policies[j].board_id, board) == 0 &&
                strcmp(or_unknown(gc_builtin_policies[j].tree->data_sha256), sha) == 0)
                break;
        if (j == i)
            put(out, len, used, "%s %.12s", n++ ? "," : "", sha);
    }
    put(out, len, used, ")\n");
}
#endif

int gc_version_text(char *out, size_t len)
{
    size_t used = 0;

    if (!len)
        return -ENOSPC;
    out[0] = '\0';
#ifdef GC_BUILTIN_TREE_ONLY /* a release built with its own POLICY: that tree, on every board */
    {
        const gc_tree_model *t = &gc_builtin_tree;

        put(out, len, &used, "tree      %s\n", t->name);
        put(out, len, &used, "data      %s", or_unknown(t->data_file));
        if (t->data_sha256 && t->data_sha256[0])
            put(out, len, &used, " (sha256 %s)", t->data_sha256);
        put(out, len, &used, "\ntrained   %s\n", or_unknown(t->trained_utc));
        put(out, len, &used, "tree hash sha256 %s (its policy_tree.c)\n", or_unknown(gc_builtin_tree_sha256));
    }
#else
    {
        int i, j;

        put(out, len, &used, "policies  %d built-in trees, one per board and energy measure "
                             "(gen_policies_builtin.c, sha256 %s):\n", gc_n_builtin_policies,
            or_unknown(GC_POLICIES_SHA256));
        for (i = 0; i < gc_n_builtin_policies; i++) {
            for (j = 0; j < i; j++)
                if (strcmp(gc_builtin_policies[j].board_id, gc_builtin_policies[i].board_id) == 0)
                    break;
            if (j == i) /* a board's first tree: all of the board's on one line */
                put_board(out, len, &used, i);
        }
        put(out, len, &used, "          any other board: %s's\n", gc_builtin_fallback_board);
        put(out, len, &used, "ranges    the family's saving ranges and trained GPU loads (gen_policy_ranges.c, "
                             "sha256 %s)\n", or_unknown(GC_RANGES_SHA256));
    }
#endif
    put(out, len, &used, "build     %s\n",
        gc_can_load_policies ? "dynamic: --model-dir loads a trained policy.so"
#ifdef GC_BUILTIN_TREE_ONLY
                             : "static, tree compiled in: no loader, no --model-dir");
#else
                             : "static, policies compiled in: no loader, no --model-dir");
#endif
    return used < len ? 0 : -ENOSPC;
}
