# Policy part of the govcore binding (included by _core.pyx): trees, proposals, decide/apply.
from libc.stdint cimport uint64_t
from libc.errno cimport EBADMSG, ENOEXEC
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

cdef extern from "policy.h" nogil:
    ctypedef struct gc_workload:
        int is_decoder             # 0 encoder, 1 decoder
        double gpu_util_pct        # 0..100, negative if unknown
        double layers
        double hidden
        double seq_len             # average tokens per sample

    ctypedef struct gc_tree_model:
        const char *name
        void (*score)(double *input, double *output)
        int n_features
        const char *const *feature_names
        int n_classes
        const double *classes_mhz
        double default_util_pct[2]
        double ffg_mhz
        const char *data_file      # provenance: training data file, its sha256, when
        const char *data_sha256
        const char *trained_utc

    ctypedef struct gc_decision:
        int policy
        double proposed_mhz        # 0 for maxn
        uint64_t level_hz          # 0 for maxn

    const gc_tree_model gc_builtin_tree
    const char gc_builtin_tree_sha256[]
    const char gc_version[]
    const char gc_git_describe[]
    const int gc_can_load_policies
    int GC_MODEL_FORMAT
    int gc_model_family(const char *model, int *is_decoder)
    int GC_MAX_FEATURES
    int GC_MAX_CLASSES
    int gc_policy_parse(const char *name, int *policy)
    int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t n)
    int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t n)
    double gc_propose_rules(const gc_workload *w)
    int gc_decide(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w, gc_decision *d)
    int gc_apply(gc_board *b, const gc_tree_model *m, int policy, const gc_workload *w,
                 const char *state_dir, gc_decision *d)
    int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t n)
    void gc_tree_close(void *handle)


MODEL_FORMAT = GC_MODEL_FORMAT


cdef str _cstr(const char *s):
    return s.decode("utf-8", "replace") if s != NULL else ""


def build_info():
    """What this extension was built from: version, git describe, and the built-in tree's
    SHA-256 (of its policy_tree.c)."""
    return {"version": gc_version.decode(), "git_describe": gc_git_describe.decode(),
            "builtin_tree_sha256": gc_builtin_tree_sha256.decode(),
            "can_load_policies": bool(gc_can_load_policies)}


cdef int check_tree_load(int rc, const char *detail) except -1:
    """gc_tree_load's refusals (policy.h) as their own exceptions; the rest as ``check``."""
    if rc >= 0:
        return 0
    msg = detail.decode("utf-8", "replace")
    if rc == -EPERM:
        raise errors.UntrustedPolicyError(msg)
    if rc == -EBADMSG:
        raise errors.ManifestMismatchError(msg)
    if rc == -ENOEXEC:
        raise errors.ForeignPolicyError(msg)
    if rc == -ENOENT:
        raise errors.PolicyLoadError(msg)
    return check(rc, detail)


def model_is_decoder(str model):
    """True for a decoder family (pythia, gpt, llama, ...), False for an encoder (bert, ...)."""
    cdef int dec = 0
    if gc_model_family(model.encode(), &dec) < 0:
        raise errors.InvalidValueError(
            f"unknown model type {model!r}: expected an encoder (bert, roberta, deberta, ...) or a "
            "decoder (pythia, gpt, llama, ...)")
    return bool(dec)


cdef gc_workload _workload(tuple w) except *:
    """(is_decoder, gpu_util_pct or None, layers, hidden, seq_len) -> gc_workload."""
    cdef gc_workload cw
    is_decoder, util, layers, hidden, seq_len = w
    cw.is_decoder = 1 if is_decoder else 0
    cw.gpu_util_pct = -1.0 if util is None else float(util)
    cw.layers = float(layers)
    cw.hidden = float(hidden)
    cw.seq_len = float(seq_len)
    return cw


cdef int _policy(str name) except -1:
    cdef int p = 0
    if gc_policy_parse(name.encode(), &p) < 0:
        raise errors.InvalidValueError(f"unknown policy {name!r}: expected mlg, ffg, rules or maxn")
    return p


cdef class Tree:
    """A decision-tree policy: the one built in, or one compiled by `pydvfs train` (model_dir)."""
    cdef gc_tree_model m
    cdef void *handle

    def __cinit__(self, model_dir=None):
        cdef char err[512]
        cdef bytes d
        self.handle = NULL
        err[0] = 0
        if model_dir is None:
            self.m = gc_builtin_tree
        else:
            d = str(model_dir).encode()
            check_tree_load(gc_tree_load(d, &self.m, &self.handle, err, sizeof(err)), err)

    def __dealloc__(self):
        gc_tree_close(self.handle)

    @property
    def name(self):
        return self.m.name.decode()

    @property
    def provenance(self):
        """data_file, data_sha256 and trained_utc of the tree."""
        return {"data_file": _cstr(self.m.data_file), "data_sha256": _cstr(self.m.data_sha256),
                "trained_utc": _cstr(self.m.trained_utc)}

    @property
    def feature_names(self):
        return tuple(self.m.feature_names[i].decode() for i in range(self.m.n_features))

    @property
    def classes_mhz(self):
        return tuple(self.m.classes_mhz[i] for i in range(self.m.n_classes))

    @property
    def ffg_mhz(self):
        return self.m.ffg_mhz

    @property
    def default_util_pct(self):
        return (self.m.default_util_pct[0], self.m.default_util_pct[1])

    def features(self, tuple workload):
        """The feature vector the tree sees (float32-rounded, as scikit-learn compares)."""
        cdef gc_workload w = _workload(workload)
        cdef double out[16]
        cdef char err[512]
        check(gc_features(&self.m, &w, out, err, sizeof(err)), err)
        return tuple(out[i] for i in range(self.m.n_features))

    def propose(self, tuple workload):
        """The clock (MHz) the tree proposes for a workload."""
        cdef gc_workload w = _workload(workload)
        cdef double mhz = 0
        cdef char err[512]
        check(gc_propose_tree(&self.m, &w, &mhz, err, sizeof(err)), err)
        return mhz

    def predict_features(self, rows):
        """Class (MHz) for each raw feature vector, through the C tree. For golden tests."""
        cdef double x[16]
        cdef double p[32]
        cdef int i, j, best
        cdef int nf = self.m.n_features
        out = []
        for row in rows:
            if len(row) != nf:
                raise errors.InvalidValueError(f"expected {nf} features, got {len(row)}")
            for j in range(nf):
                x[j] = <double>(<float>row[j])
            self.m.score(x, p)
            best = 0
            for i in range(1, self.m.n_classes):
                if p[i] > p[best]:
                    best = i
            out.append(self.m.classes_mhz[best])
        return out


    def time_propose_ns(self, tuple workload, long n):
        """Mean ns of one gc_propose_tree call, over n calls in a C loop (for bench/)."""
        cdef gc_workload w = _workload(workload)
        cdef double mhz = 0
        cdef char err[512]
        cdef long i
        cdef timespec t0, t1
        if n < 1:
            raise errors.InvalidValueError("n must be >= 1")
        with nogil:
            clock_gettime(CLOCK_MONOTONIC, &t0)
            for i in range(n):
                gc_propose_tree(&self.m, &w, &mhz, err, sizeof(err))
            clock_gettime(CLOCK_MONOTONIC, &t1)
        return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n


def propose_rules(tuple workload):
    """The clock (MHz) the paper's published rules propose."""
    cdef gc_workload w = _workload(workload)
    return gc_propose_rules(&w)


def decide(Board board, Tree tree, str policy, tuple workload):
    """(proposed_mhz, level_hz) for a policy on this board; nothing is written."""
    cdef gc_workload w = _workload(workload)
    cdef int p = _policy(policy)
    cdef gc_decision d
    check(gc_decide(&board.b, &tree.m, p, &w, &d), board.b.err)
    return d.proposed_mhz, d.level_hz


def apply(Board board, Tree tree, str policy, tuple workload, state_dir=None):
    """Decide and pin (maxn: restore). Returns (proposed_mhz, level_hz)."""
    cdef gc_workload w = _workload(workload)
    cdef int p = _policy(policy)
    cdef gc_decision d
    cdef bytes sd = _opt(state_dir)
    cdef const char *c_sd = sd
    cdef int rc
    with nogil:
        rc = gc_apply(&board.b, &tree.m, p, &w, c_sd, &d)
    check(rc, board.b.err)
    return d.proposed_mhz, d.level_hz
