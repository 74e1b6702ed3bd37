# Policy part of the govcore binding (included by _core.pyx): trees, proposals, decide/apply.
from libc.errno cimport EBADMSG, ENOEXEC

# The static policies, from govcore's table of them (policy_table.c's gc_policies), in its order: the
# one list every Python caller uses; their one-line help and what each needs, from the same entries.
POLICY_NAMES = tuple(gc_policies[i].name.decode() for i in range(gc_n_policies))
POLICY_HELP = {gc_policies[i].name.decode(): gc_policies[i].help.decode() for i in range(gc_n_policies)}
POLICY_FLAGS = {gc_policies[i].name.decode(): frozenset(
    flag for flag, bit in (("needs_model_dir", GC_POLICY_NEEDS_MODEL_DIR),
                           ("takes_objective", GC_POLICY_TAKES_OBJECTIVE),
                           ("pins_nothing", GC_POLICY_PINS_NOTHING),
                           ("no_workload", GC_POLICY_NO_WORKLOAD)) if gc_policies[i].flags & bit)
    for i in range(gc_n_policies)}
# What a policy may minimise, in govcore's order: the index is the power of the step time (E t^k).
OBJECTIVE_NAMES = tuple(gc_objective_name(i).decode() for i in range(GC_OBJECTIVE_COUNT))
# How a workload may train (workload.c's gc_peft_names, gc_precision_names, gc_method_keys): the
# one list of each, which pydvfs.Workload and `govcore apply --workload` both read.
PEFT_NAMES = tuple(gc_peft_names[i].decode() for i in range(GC_PEFT_COUNT))
PRECISION_NAMES = tuple(gc_precision_names[i].decode() for i in range(GC_PRECISION_COUNT))
METHOD_KEYS = tuple(gc_method_keys[i].decode() for i in range(GC_N_METHOD_KEYS))
# The keys of a workload and the bounds of its numbers (workload.c's gc_workload_fields, the one
# grammar: docs/policy.md, "The workload grammar"): key -> (kind, min, max), kind "label",
# "name", "whole" or "decimal"; min and max None for a label or a name.
_KINDS = {GC_WK_LABEL: "label", GC_WK_NAME: "name", GC_WK_WHOLE: "whole", GC_WK_DECIMAL: "decimal"}
WORKLOAD_FIELDS = {gc_workload_fields[i].key.decode(): (
    _KINDS[gc_workload_fields[i].kind],
    *((gc_workload_fields[i].min, gc_workload_fields[i].max)
      if gc_workload_fields[i].kind in (GC_WK_WHOLE, GC_WK_DECIMAL) else (None, None)))
    for i in range(GC_N_WORKLOAD_FIELDS)}
WORKLOAD_SPEC_MAX = GC_WORKLOAD_SPEC_MAX


def parse_workload(spec):
    """A ``--workload`` spec (``model=bert,layers=12,...``) checked by govcore's one grammar
    (gc_workload_parse: exact keys, each once, plain decimal numbers within their bounds,
    printable ASCII without blanks, at most WORKLOAD_SPEC_MAX bytes) -> {key: text}, in the
    spec's order. InvalidValueError with govcore's one line (``--workload ...``) otherwise; the
    keys the spec must hold and the checks across keys are the caller's (a Workload's)."""
    cdef gc_workload w
    cdef char model[GC_MODEL_NAME_MAX]
    cdef char err[512]
    cdef unsigned have = 0
    cdef bytes raw
    if isinstance(spec, str):
        raw = spec.encode("utf-8", "surrogateescape")
    else:
        raw = bytes(spec)
    memset(&w, 0, sizeof(w))
    if b"\0" in raw:  # (C would read the spec up to it)
        raise errors.InvalidValueError("--workload: a blank or a byte that is not printable ASCII")
    if gc_workload_parse(raw, &w, model, sizeof(model), &have, err, sizeof(err)) < 0:
        raise errors.InvalidValueError("--" + err.decode("utf-8", "replace"))
    return dict(item.split("=", 1) for item in raw.decode("ascii").split(","))


def check_workload(tuple workload):
    """A workload (Workload.as_core()) within govcore's bounds and one some Jetson can train
    (gc_workload_check); InvalidValueError with its one line otherwise."""
    _workload(workload)


MODEL_FORMAT = GC_MODEL_FORMAT
# The built-in policies compiled in (govcore/gen_policies_builtin.c, tools/gen_policies.py): (board
# id, energy measure) pairs; the measures in govcore's order (pydvfs.measure.energy.MEASURES, generated
# from it); the board whose policy an unknown board gets; the margin of the "clearly positive"
# expected saving, in spreads.
BUILTIN_POLICIES = tuple((gc_builtin_policies[i].board_id.decode(), gc_builtin_policies[i].measure.decode())
                         for i in range(gc_n_builtin_policies))
SAVING_MARGIN_SD = GC_SAVING_MARGIN_SD


def energy_measures():
    """The energy measures govcore's built-in policies were generated for, the default first."""
    out, i = [], 0
    while gc_energy_measures[i] != NULL:
        out.append(gc_energy_measures[i].decode())
        i += 1
    return tuple(out)


cdef str _cstr(const char *s):
    return s.decode("utf-8", "replace") if s != NULL else ""


def build_info():
    """What this extension was built from: version, git describe, the built-in tree's SHA-256
    (of its policy_tree.c), and the lines of ``--version`` after its first (govcore's
    gc_version_text: the built-in policies and the build)."""
    cdef char text[GC_VERSION_TEXT_MAX]
    if gc_version_text(text, sizeof(text)) < 0:
        raise RuntimeError(f"the version text does not fit in {GC_VERSION_TEXT_MAX} bytes")
    return {"version": gc_version.decode(), "git_describe": gc_git_describe.decode(),
            "builtin_tree_sha256": gc_builtin_tree_sha256.decode(),
            "can_load_policies": bool(gc_can_load_policies), "version_text": text.decode()}


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
    """(is_decoder, gpu_util_pct or None, layers, hidden, seq_len[, peft, rank, trainable_params,
    weight_bits, precision, batch_size, tokens_per_step]) -> gc_workload (Workload.as_core();
    the five-tuple is full fp32 fine-tuning, the counts 0 where not given)."""
    cdef gc_workload cw
    cdef char err[512]
    is_decoder, util, layers, hidden, seq_len = w[:5]
    cw.is_decoder = 1 if is_decoder else 0
    try:
        cw.gpu_util_pct = -1.0 if util is None else float(util)
        cw.layers = float(layers)
        cw.hidden = float(hidden)
        cw.seq_len = float(seq_len)
    except (TypeError, ValueError, OverflowError):
        raise errors.InvalidValueError(f"workload layers, hidden, seq_len and util_pct are numbers, got "
                                       f"{str((layers, hidden, seq_len, util))[:80]}") from None
    cw.peft = 0
    cw.rank = 0
    cw.trainable_params = 0
    cw.weight_bits = 0
    cw.precision = 0
    cw.batch_size = 0
    cw.tokens_per_step = 0
    if len(w) != 5 and len(w) != 5 + GC_N_METHOD_KEYS:
        raise errors.InvalidValueError(f"a workload tuple has 5 or {5 + GC_N_METHOD_KEYS} items, got {len(w)}")
    peft, rank, trainable, bits, precision, batch, tokens = w[5:] or (PEFT_NAMES[0], 0, 0, 0, PRECISION_NAMES[0], 0, 0)
    if peft not in PEFT_NAMES:
        raise errors.InvalidValueError(f"workload peft must be one of {', '.join(PEFT_NAMES)}, got {peft!r}")
    if precision not in PRECISION_NAMES:
        raise errors.InvalidValueError(f"workload precision must be one of {', '.join(PRECISION_NAMES)}, got {precision!r}")
    cw.peft = PEFT_NAMES.index(peft)
    cw.precision = PRECISION_NAMES.index(precision)
    try:
        cw.rank = float(rank or 0)
        cw.trainable_params = float(trainable or 0)
        cw.weight_bits = float(bits or 0)
        cw.batch_size = float(batch or 0)
        cw.tokens_per_step = float(tokens or 0)
    except (TypeError, ValueError, OverflowError):
        raise errors.InvalidValueError(f"workload rank, trainable_params, weight_bits, batch_size and "
                                       f"tokens_per_step are numbers, got {str(w[5:])[:80]}") from None
    if gc_workload_check(&cw, err, sizeof(err)) < 0:
        raise errors.InvalidValueError(err.decode())
    return cw


def features(names, tuple workload, default_util_pct=(50.0, 50.0)):
    """The features ``names`` of a workload (Workload.as_core()) as govcore computes them for a
    tree (gc_features: float32-rounded, as scikit-learn compares them); ``default_util_pct``
    (encoder, decoder) where the workload's utilisation is unknown. What a model folder's tree
    would be fed, without one."""
    cdef gc_tree_model m
    cdef gc_workload w = _workload(workload)
    cdef double out[GC_MAX_FEATURES]
    cdef char err[256]
    cdef const char *cnames[GC_MAX_FEATURES]
    encoded = [str(n).encode() for n in names]
    if len(encoded) > GC_MAX_FEATURES:
        raise errors.InvalidValueError(f"at most {GC_MAX_FEATURES} features")
    for i, n in enumerate(encoded):
        cnames[i] = n
    memset(&m, 0, sizeof(m))
    m.n_features = len(encoded)
    m.feature_names = cnames
    m.default_util_pct[0] = float(default_util_pct[0])
    m.default_util_pct[1] = float(default_util_pct[1])
    if gc_features(&m, &w, out, err, sizeof(err)) < 0:
        raise errors.InvalidValueError(err.decode())
    return tuple(out[i] for i in range(len(encoded)))


cdef int _policy(str name) except -1:
    cdef int p = 0
    if gc_policy_parse(name.encode(), &p) < 0:
        raise errors.InvalidValueError(f"unknown policy {name!r}: expected {', '.join(POLICY_NAMES)}")
    return p


cdef class Tree:
    """A decision-tree policy: the one built in, or one compiled by `pydvfs train` (model_dir)."""

    def __cinit__(self, model_dir=None, board_id=None, measure=None):
        """``model_dir`` None: the built-in policy of ``board_id`` (None or unknown: the fallback
        board's) for ``measure`` (None: the default, module energy); with neither, the tree of
        policy_tree.c (gc_builtin_tree)."""
        cdef char err[512]
        cdef bytes d, bb, mm
        cdef const gc_tree_model *t
        self.handle = NULL
        err[0] = 0
        if model_dir is None and board_id is None and measure is None:
            self.m = gc_builtin_tree
        elif model_dir is None:
            bb = (board_id or "").encode()
            mm = (measure or energy_measures()[0]).encode()
            t = gc_builtin_for(bb, mm)
            if t == NULL:
                raise errors.InvalidValueError(f"unknown energy measure {measure!r}: expected "
                                               f"{' or '.join(energy_measures())}")
            self.m = t[0]
        else:
            d = os.fsencode(model_dir)
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
    def board_id(self):
        """The board the tree was trained on (a pydvfs.device.table id), or None if not known."""
        return self.m.board_id.decode() or None

    @property
    def levels_mhz(self):
        """The GPU clock table the tree was trained on (empty: not known)."""
        return tuple(self.m.levels_mhz[i] for i in range(self.m.n_levels))

    @property
    def origin(self):
        """What the tree knows and where it comes from: {"kind": calibrated / estimate (a built-in
        on a calibrated or estimated profile) / user folder / ..., "source": built-in / user
        folder / ..., "board", "measure", "calibrated"} (None where not known), as govcore's
        JSON says it (gc_tree_origin_kind)."""
        return {"kind": gc_tree_origin_kind(&self.m).decode() or None, "source": self.m.origin.decode() or None,
                "board": self.board_id,
                "measure": self.m.measure.decode() or None,
                "calibrated": None if self.m.calibrated < 0 else bool(self.m.calibrated)}

    @property
    def expected_savings(self):
        """What the training data says each choice saves against MAXN: {"classes": [(mhz, saving %,
        spread %)], "ffg": (mhz, saving %, spread %)}; None where not known."""
        if not self.m.has_savings:
            return None
        return {"classes": [(self.m.classes_mhz[i], self.m.class_saving_pct[i], self.m.class_spread_pct[i])
                            for i in range(self.m.n_classes)],
                "ffg": (self.m.ffg_mhz, self.m.ffg_saving_pct, self.m.ffg_spread_pct)}

    @property
    def default_util_pct(self):
        return (self.m.default_util_pct[0], self.m.default_util_pct[1])

    def features(self, tuple workload):
        """The feature vector the tree sees (float32-rounded, as scikit-learn compares)."""
        cdef gc_workload w = _workload(workload)
        cdef double out[GC_MAX_FEATURES]
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


def read_model_file(model_dir, str name, int limit=1 << 20):
    """The bytes of a model folder's file, opened with the checks policy.so gets
    (gc_model_file_open: no symlink, no fifo, regular files only; as root, nobody else's folder
    or file); at most limit bytes (more: InvalidValueError)."""
    cdef char err[512]
    cdef bytes d = os.fsencode(model_dir)
    cdef bytes n = os.fsencode(name)
    cdef int fd = -1
    err[0] = 0
    check(gc_model_file_open(d, n, &fd, err, sizeof(err)), err)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise errors.InvalidValueError(f"{os.fsdecode(model_dir)}/{name} is over {limit} bytes: not a model "
                                       "folder's file")
    return data


def tree_features(tuple feature_names, tuple default_util_pct, tuple workload):
    """The feature vector a tree with these feature names and default utilisations sees for a
    workload: govcore's gc_features (float32-rounded, as scikit-learn compares), for a tree read
    as data (pydvfs/policy/tree_data.py) rather than loaded from a policy.so."""
    cdef gc_tree_model m
    cdef gc_workload w = _workload(workload)
    cdef double out[GC_MAX_FEATURES]
    cdef const char *names[GC_MAX_FEATURES]
    cdef char err[512]
    cdef int i
    enc = [str(n).encode() for n in feature_names]
    if len(enc) > GC_MAX_FEATURES:
        raise errors.InvalidValueError(f"a tree reads at most {GC_MAX_FEATURES} features, this one {len(enc)}")
    memset(&m, 0, sizeof(m))
    for i in range(len(enc)):
        names[i] = enc[i]
    m.n_features = len(enc)
    m.feature_names = names
    m.default_util_pct[0] = float(default_util_pct[0])
    m.default_util_pct[1] = float(default_util_pct[1])
    err[0] = 0
    check(gc_features(&m, &w, out, err, sizeof(err)), err)
    return tuple(out[i] for i in range(len(enc)))


cdef class Roofline:
    """The roofline policy's board constants, read (strictly, in C) from a roofline.txt."""
    cdef gc_roofline r

    def __cinit__(self, path):
        cdef char err[512]
        cdef bytes p = os.fsencode(path)
        err[0] = 0
        check(gc_roofline_load(p, &self.r, err, sizeof(err)), err)

    def energy_j(self, tuple workload, double mhz):
        """Predicted energy per token (J) at a clock, as gc_propose_roofline computes it."""
        cdef gc_workload w = _workload(workload)
        return gc_roofline_energy_j(&self.r, &w, mhz)

    def time_s(self, tuple workload, double mhz):
        """Predicted time per token (s, in the model's gauge) at a clock: a/f + b."""
        cdef gc_workload w = _workload(workload)
        return gc_roofline_time_s(&self.r, &w, mhz)

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


cdef gc_goal _goal(str objective, max_slowdown_pct) except *:
    cdef gc_goal g
    if gc_objective_parse(objective.encode(), &g.objective) < 0:
        raise errors.InvalidValueError(
            f"unknown objective {objective!r}: expected {', '.join(OBJECTIVE_NAMES)}")
    g.max_slowdown_pct = -1.0 if max_slowdown_pct is None else float(max_slowdown_pct)
    if max_slowdown_pct is not None and not g.max_slowdown_pct >= 0:
        raise errors.InvalidValueError(f"the maximum slowdown must be a finite % >= 0, got {max_slowdown_pct}")
    return g


def apply_request(str policy, tuple workload, str model, str objective="energy", max_slowdown_pct=None,
                  energy=None, tree=None, bint dry_run=False):
    """The daemon's apply request line for a workload (Workload.as_core()) and a goal, spelt by
    govcore's one formatter (protocol.c's gc_request_format_apply, the inverse of the daemon's
    parser, which checks it); ``energy`` None and ``tree`` None: not given (the daemon's built-in
    measure and tree). InvalidValueError with the parser's one line where it cannot be sent."""
    cdef gc_request rq
    cdef char out[GC_REQ_MAX + 1]
    cdef char err[512]
    cdef bytes model_b = model.encode("ascii", "replace")
    cdef bytes tree_b = (tree or "").encode("ascii", "replace")
    cdef bytes measure_b
    memset(&rq, 0, sizeof(rq))
    rq.policy = _policy(policy)
    rq.workload = _workload(workload)
    rq.goal = _goal(objective, max_slowdown_pct)
    if <size_t>len(model_b) >= sizeof(rq.model) or <size_t>len(tree_b) >= sizeof(rq.tree):
        raise errors.InvalidValueError(f"apply: a model or tree name too long: {model!r}, {tree!r}")
    memcpy(rq.model, <const char *>model_b, len(model_b))
    memcpy(rq.tree, <const char *>tree_b, len(tree_b))
    if energy is not None:
        measure_b = str(energy).encode("ascii", "replace")
        rq.measure = measure_b
    rq.dry_run = dry_run
    if gc_request_format_apply(&rq, out, sizeof(out), err, sizeof(err)) < 0:
        raise errors.InvalidValueError(err.decode("utf-8", "replace"))
    return out.decode("ascii")

def measure_label(str measure):
    """An energy measure's name in text ("module", "CPU+GPU"): gc_measure_label."""
    return gc_measure_label(measure.encode()).decode()


def goal_text(str objective="energy", max_slowdown_pct=None, energy=None):
    """A goal in words (gc_goal_text): "module energy per step, step time within 5 % of the
    fastest clock's"."""
    cdef gc_goal g = _goal(objective, max_slowdown_pct)
    cdef char out[256]
    cdef bytes measure = (energy or "").encode()
    cdef const char *m = NULL
    if energy:
        m = measure
    gc_goal_text(out, sizeof(out), &g, m)
    return out.decode()


def decision_text(str policy, freq_mhz, policy_mhz=None, str objective="energy", max_slowdown_pct=None,
                  energy=None, trade=None):
    """A decision in govcore's words (decision_text.c, what `govcore apply` prints): (the clock
    line, [the goal, the bound's move, the predicted trade]). ``freq_mhz`` None: MAXN;
    ``trade``: a decision record's {"vs_mhz", "j_per_step_pct", "s_per_step_pct"} or None."""
    cdef gc_decision d
    cdef char head[256]
    cdef char lines[1024]
    cdef bytes measure = (energy or "").encode()
    cdef const char *m = NULL
    if energy:
        m = measure
    memset(&d, 0, sizeof(d))
    d.policy = _policy(policy)
    d.goal = _goal(objective, max_slowdown_pct)
    d.level_hz = 0 if freq_mhz is None else mhz_to_hz(freq_mhz)
    d.policy_level_hz = d.level_hz if policy_mhz is None else mhz_to_hz(policy_mhz)
    if trade:
        d.trade_vs_hz = mhz_to_hz(trade["vs_mhz"])
        d.trade_j_pct = trade["j_per_step_pct"]
        d.trade_s_pct = trade["s_per_step_pct"]
    gc_decision_head(head, sizeof(head), &d)
    gc_decision_goal_lines(lines, sizeof(lines), &d, m)
    return head.decode(), lines.decode().splitlines()

cdef dict _decision(gc_decision *d, Tree tree, gc_workload *w):
    cdef char why[512]
    cdef char outside[512]
    cdef double rng[2]
    cdef bint has_range = gc_saving_range(&tree.m, d, rng)
    gc_outside_reason(&tree.m, d.policy, w, outside, sizeof(outside))
    gc_kept_reason(d, why, sizeof(why))
    return {"proposed_mhz": d.proposed_mhz, "level_hz": d.level_hz, "policy_level_hz": d.policy_level_hz,
            "trade_vs_hz": d.trade_vs_hz, "trade_j_pct": d.trade_j_pct, "trade_s_pct": d.trade_s_pct,
            "cap_hz": d.cap_hz, "clamped_from_hz": d.clamped_from_hz,
            "mapped_from_mhz": d.mapped_from_mhz if d.mapped_from_mhz > 0 else None,
            "expected_saving_pct": d.expected_saving_pct if d.has_expectation else None,
            "saving_spread_pct": d.saving_spread_pct if d.has_expectation else None,
            "saving_range_pct": [rng[0], rng[1]] if has_range else None,
            "kept_from_hz": d.kept_from_hz if d.kept_maxn else 0,
            "kept_reason": why.decode() or None, "outside_training": outside.decode() or None}


def decide(Board board, Tree tree, str policy, workload, Roofline roofline=None, str objective="energy",
           max_slowdown_pct=None):
    """The decision of a policy on this board (see _core.pyi); nothing is written. ``workload``
    None: a policy that reads none (ffg, maxn)."""
    cdef gc_workload w
    cdef gc_workload *pw = NULL
    cdef int p = _policy(policy)
    cdef gc_goal g = _goal(objective, max_slowdown_pct)
    cdef gc_decision d
    if workload is not None:
        w = _workload(workload)
        pw = &w
    check(gc_decide_goal(&board.b, &tree.m, _rl(roofline), p, pw, &g, &d), board.b.err)
    return _decision(&d, tree, pw)


def apply(Board board, Tree tree, str policy, tuple workload, state_dir=None, Roofline roofline=None,
          str objective="energy", max_slowdown_pct=None, above_power_mode=False):
    """Decide and pin (maxn: restore), at or under the power mode's cap unless
    above_power_mode. Returns the decision, as decide, with cap_hz and clamped_from_hz."""
    cdef gc_workload w = _workload(workload)
    cdef int p = _policy(policy)
    cdef gc_goal g = _goal(objective, max_slowdown_pct)
    cdef gc_decision d
    cdef const gc_roofline *rl = _rl(roofline)
    cdef bytes sd = _opt(state_dir)
    cdef const char *c_sd = sd
    cdef int rc
    board.b.above_power_mode = 1 if above_power_mode else 0
    with nogil:
        rc = gc_apply_goal(&board.b, &tree.m, rl, p, &w, &g, c_sd, &d)
    board.b.above_power_mode = 0
    check(rc, board.b.err)
    return _decision(&d, tree, &w)
