/* peer.h - who may use `govcore serve`: root and the members of its group.
 *
 * With NSS (the usual build) users and groups come from getpwuid_r/getgrnam_r/getgrouplist, so
 * LDAP or sssd users count too. The static release (GC_NO_DLOPEN) cannot use NSS (glibc would
 * dlopen the libnss_* of another glibc at run time), so it reads /etc/passwd and /etc/group.
 */
#ifndef GOVCORE_PEER_H
#define GOVCORE_PEER_H

#include <sys/types.h>

#define GC_PASSWD_FILE "/etc/passwd"
#define GC_GROUP_FILE "/etc/group"

/* The gid of group name. -ENOENT if there is none. */
int gc_group_gid(const char *name, gid_t *gid);

/* 1 if a peer (uid, effective gid) may use the daemon: root, a process running with group_gid,
 * or a user whose passwd group or supplementary groups include group_gid. */
int gc_peer_allowed(uid_t uid, gid_t gid, gid_t group_gid);

/* The same from the given passwd and group files (no NSS). */
int gc_group_gid_files(const char *group_file, const char *name, gid_t *gid);
int gc_peer_allowed_files(const char *passwd_file, const char *group_file, uid_t uid, gid_t gid,
                          gid_t group_gid);

#endif
