# Policy part of the govcore binding (included by _core.pyx): trees, proposals, decide/apply.
from libc.stdint cimport uint64_t
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

    ctypedef struct gc_decision:
        int policy
        double proposed_mhz        # 0 for maxn
        uint64_t level_hz          # 0 for maxn

    ctypedef struct gc_roofline:
        double k_gauge             # proxy-FLOPs per Gcycle
        double q_gcyc              # the fitted board constants: pydvfs/policy/roofline.py
        double m_s
        double h0_s
        double h1_s
        double p_idle_w
        double c_w
        double c_idle_w
        double e_mem_j
        int n_vf
        double vf_mhz[32]
        double vf_v[32]

    const gc_tree_model gc_builtin_tree
    int gc_roofline_load(const char *path, gc_roofline *out, char *err, size_t n)
    double gc_roofline_energy_j(const gc_roofline *r, const gc_workload *w, double mhz)
    int gc_propose_roofline(const gc_roofline *r, const gc_workload *w, const uint64_t *levels_hz, int n,
                            double *mhz)
    int gc_model_family(const char *model, int *is_decoder)
    int GC_MAX_FEATURES
    int GC_MAX_CLASSES
    int gc_policy_parse(const char *name, int *policy)
    int gc_features(const gc_tree_model *m, const gc_workload *w, double *out, char *err, size_t n)
    int gc_propose_tree(const gc_tree_model *m, const gc_workload *w, double *mhz, char *err, size_t n)
    double gc_propose_rules(const gc_workload *w)
    int gc_decide(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                  const gc_workload *w, gc_decision *d)
    int gc_apply(gc_board *b, const gc_tree_model *m, const gc_roofline *rl, int policy,
                 const gc_workload *w, const char *state_dir, gc_decision *d)
    int gc_tree_load(const char *model_dir, gc_tree_model *out, void **handle, char *err, size_t n)
    void gc_tree_close(void *handle)


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
        raise errors.InvalidValueError(f"unknown policy {name!r}: expected mlg, ffg, rules, maxn or roofline")
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
            check(gc_tree_load(d, &self.m, &self.handle, err, sizeof(err)), err)

    def __dealloc__(self):
        gc_tree_close(self.handle)

    @property
    def name(self):
        return self.m.name.decode()

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


cdef class Roofline:
    """The roofline policy's board constants, read (strictly, in C) from a roofline.txt."""
    cdef gc_roofline r

    def __cinit__(self, path):
        cdef char err[512]
        cdef bytes p = str(path).encode()
        err[0] = 0
        check(gc_roofline_load(p, &self.r, err, sizeof(err)), err)

    def energy_j(self, tuple workload, double mhz):
        """Predicted energy per token (J) at a clock, as gc_propose_roofline computes it."""
        cdef gc_workload w = _workload(workload)
        return gc_roofline_energy_j(&self.r, &w, mhz)

    def propose(self, tuple workload, levels_mhz):
        """The level (MHz) of the given table with the lowest predicted energy."""
        cdef gc_workload w = _workload(workload)
        cdef uint64_t hz[64]
        cdef double mhz = 0
        levels = sorted(float(x) for x in levels_mhz)
        if not 0 < len(levels) <= 64:
            raise errors.InvalidValueError("1..64 levels")
        for i, f in enumerate(levels):
            hz[i] = <uint64_t>(f * 1e6 + 0.5)
        gc_propose_roofline(&self.r, &w, hz, len(levels), &mhz)
        return mhz


def propose_rules(tuple workload):
    """The clock (MHz) the paper's published rules propose."""
    cdef gc_workload w = _workload(workload)
    return gc_propose_rules(&w)


cdef const gc_roofline *_rl(Roofline roofline):
    return NULL if roofline is None else &roofline.r


def decide(Board board, Tree tree, str policy, tuple workload, Roofline roofline=None):
    """(proposed_mhz, level_hz) for a policy on this board; nothing is written."""
    cdef gc_workload w = _workload(workload)
    cdef int p = _policy(policy)
    cdef gc_decision d
    check(gc_decide(&board.b, &tree.m, _rl(roofline), p, &w, &d), board.b.err)
    return d.proposed_mhz, d.level_hz


def apply(Board board, Tree tree, str policy, tuple workload, state_dir=None, Roofline roofline=None):
    """Decide and pin (maxn: restore). Returns (proposed_mhz, level_hz)."""
    cdef gc_workload w = _workload(workload)
    cdef int p = _policy(policy)
    cdef gc_decision d
    cdef const gc_roofline *rl = _rl(roofline)
    cdef bytes sd = _opt(state_dir)
    cdef const char *c_sd = sd
    cdef int rc
    with nogil:
        rc = gc_apply(&board.b, &tree.m, rl, p, &w, c_sd, &d)
    check(rc, board.b.err)
    return d.proposed_mhz, d.level_hz
