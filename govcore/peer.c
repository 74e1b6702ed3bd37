/* peer.c - who may use `govcore serve` (see peer.h). */
#include "peer.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192  /* longer passwd/group lines are not ours to judge: skipped */
#define MAX_GROUPS 1024      /* supplementary groups looked at per user (NSS) */

/* Split "a:b:c" in place into at most n fields; the number found. */
static int split(char *line, char **f, int n)
{
    int k = 0;

    f[k++] = line;
    for (; *line && k < n; line++)
        if (*line == ':') {
            *line = '\0';
            f[k++] = line + 1;
        }
    return k;
}

/* A whole-number field. */
static int parse_id(const char *s, unsigned long *out)
{
    char *end;

    if (!*s)
        return -1;
    errno = 0;
    *out = strtoul(s, &end, 10);
    return (errno || *end) ? -1 : 0;
}

static FILE *open_db(const char *path)
{
    return fopen(path, "re");
}

/* Next line without its newline; 0 at the end. Lines too long are skipped. */
static int next_line(FILE *f, char *buf, size_t len)
{
    size_t n;

    while (fgets(buf, (int)len, f)) {
        n = strlen(buf);
        if (n && buf[n - 1] == '\n') {
            buf[n - 1] = '\0';
            return 1;
        }
        if (!feof(f)) { /* too long: drop the rest */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        return 1;
    }
    return 0;
}

int gc_group_gid_files(const char *group_file, const char *name, gid_t *gid)
{
    char line[LINE_MAX_BYTES], *f[4];
    unsigned long id;
    FILE *db = open_db(group_file);
    int rc = -ENOENT;

    if (!db)
        return -errno;
    while (rc == -ENOENT && next_line(db, line, sizeof line))
        if (split(line, f, 4) == 4 && strcmp(f[0], name) == 0 && parse_id(f[2], &id) == 0) {
            *gid = (gid_t)id;
            rc = 0;
        }
    fclose(db);
    return rc;
}

int gc_peer_allowed_files(const char *passwd_file, const char *group_file, uid_t uid, gid_t gid,
                          gid_t group_gid)
{
    char line[LINE_MAX_BYTES], user[256] = "", *f[7], *m, *save = NULL;
    unsigned long id, pw_gid = 0;
    FILE *db;
    int found = 0, allowed = 0;

    if (uid == 0 || gid == group_gid)
        return 1;
    if (!(db = open_db(passwd_file)))
        return 0;
    while (!found && next_line(db, line, sizeof line))
        if (split(line, f, 7) >= 4 && parse_id(f[2], &id) == 0 && id == uid &&
            parse_id(f[3], &pw_gid) == 0 && strlen(f[0]) < sizeof user) {
            strcpy(user, f[0]);
            found = 1;
        }
    fclose(db);
    if (!found)
        return 0;
    if (pw_gid == group_gid)
        return 1;
    if (!(db = open_db(group_file)))
        return 0;
    while (!allowed && next_line(db, line, sizeof line)) {
        if (split(line, f, 4) != 4 || parse_id(f[2], &id) != 0 || id != group_gid)
            continue;
        for (m = strtok_r(f[3], ",", &save); m && !allowed; m = strtok_r(NULL, ",", &save))
            allowed = strcmp(m, user) == 0;
    }
    fclose(db);
    return allowed;
}

#ifdef GC_NO_DLOPEN
int gc_group_gid(const char *name, gid_t *gid)
{
    return gc_group_gid_files(GC_GROUP_FILE, name, gid);
}

int gc_peer_allowed(uid_t uid, gid_t gid, gid_t group_gid)
{
    return gc_peer_allowed_files(GC_PASSWD_FILE, GC_GROUP_FILE, uid, gid, group_gid);
}
#else
int gc_group_gid(const char *name, gid_t *gid)
{
    struct group gr, *res = NULL;
    char buf[LINE_MAX_BYTES];

    if (getgrnam_r(name, &gr, buf, sizeof buf, &res) != 0 || !res)
        return -ENOENT;
    *gid = gr.gr_gid;
    return 0;
}

int gc_peer_allowed(uid_t uid, gid_t gid, gid_t group_gid)
{
    struct passwd pw, *res = NULL;
    char buf[LINE_MAX_BYTES];
    gid_t groups[MAX_GROUPS];
    int n = MAX_GROUPS, i;

    if (uid == 0 || gid == group_gid)
        return 1;
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
        return 0;
    if (pw.pw_gid == group_gid)
        return 1;
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
        n = MAX_GROUPS; /* more groups than we look at: the first MAX_GROUPS were filled */
    for (i = 0; i < n && i < MAX_GROUPS; i++)
        if (groups[i] == group_gid)
            return 1;
    return 0;
}
#endif
