/* version.c - what this build is. The build passes GC_VERSION (pydvfs/__init__.py),
 * GC_GIT_DESCRIBE (`git describe` when built from a clone) and GC_TREE_SHA256 (the SHA-256 of
 * the policy_tree.c compiled in); govcore/Makefile and setup.py compute them alike. */
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

const char gc_version[] = GC_VERSION;
const char gc_git_describe[] = GC_GIT_DESCRIBE;
const char gc_builtin_tree_sha256[] = GC_TREE_SHA256;
#ifdef GC_NO_DLOPEN
const int gc_can_load_policies = 0;
#else
const int gc_can_load_policies = 1;
#endif
