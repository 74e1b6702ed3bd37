# cython: language_level=3
"""Thin binding over govcore: discovery, clock pinning and restore.

Validation happens here, with the GIL held; the C calls that touch the board run without it.
C error codes become Python exceptions in one place: ``check``.
"""
from libc.errno cimport EACCES, EPERM, ENODEV, ENOENT, EINVAL, EIO, EROFS, ENAMETOOLONG, EBUSY

cdef extern from "<errno.h>":
    enum:
        EDESTADDRREQ
from libc.string cimport memcpy, memset, strerror
from cpython.mem cimport PyMem_Malloc, PyMem_Free

import os

from pydvfs import errors


cdef int check(int rc, const char *detail) except -1:
    """Map a govcore return code (0 or -errno) to the pydvfs error hierarchy."""
    if rc >= 0:
        return 0
    msg = detail.decode("utf-8", "backslashreplace") if detail != NULL and detail[0] != 0 else ""
    if not msg:
        msg = strerror(-rc).decode()
    if rc == -ENODEV:
        raise errors.DeviceNotFoundError(msg)
    if rc == -EACCES or rc == -EPERM or rc == -EROFS:
        raise errors.BoardPermissionError(msg)
    if rc == -EINVAL or rc == -ENAMETOOLONG:
        raise errors.InvalidValueError(msg)
    if rc == -GC_EVERIFY:
        raise errors.ClockVerifyError(msg)
    if rc == -EBUSY:
        raise errors.BoardBusyError(msg)
    if rc == -GC_ESTATE or rc == -EDESTADDRREQ:
        # a state file or folder we will not trust, or no private folder for one
        raise errors.StateFileError(msg)
    if rc == -GC_EBOARD:
        raise errors.BoardDataError(msg)
    raise errors.BoardIOError(msg)


def parse_nvpmodel_status(str text):
    """The mode id of a /var/lib/nvpmodel/status text (govcore's parser); None if garbled."""
    cdef int mode_id = -1
    cdef bytes t = text.encode("utf-8", "replace")
    return mode_id if gc_nvpmodel_parse_status(t, &mode_id) == 0 else None


def parse_nvpmodel_conf(str text, int mode_id):
    """(name, gpu_max_hz) of POWER_MODEL mode_id in an nvpmodel.conf text (govcore's parser;
    gpu_max_hz 0: no cap); None if the conf has no such block or is garbled."""
    cdef char name[64]
    cdef uint64_t hz = 0
    cdef bytes t = text.encode("utf-8", "replace")
    if gc_nvpmodel_parse_conf(t, mode_id, name, sizeof(name), &hz) < 0:
        return None
    return name.decode("utf-8", "replace"), hz


def raise_for(int rc, str message):
    """Raise the pydvfs error for a govcore code (0 or -errno) and message: for codes that come
    from elsewhere than this process, such as the govcore daemon's replies."""
    cdef bytes m = message.encode("utf-8", "replace")
    check(rc if rc < 0 else -EIO, m)


def mhz_to_hz(double mhz):
    """The one MHz -> Hz conversion (0 for a value that is not a clock)."""
    return gc_mhz_to_hz(mhz)


MHZ_GRAMMAR = GC_MHZ_GRAMMAR.decode()


def parse_mhz(text):
    """A clock typed as text, in Hz, by govcore's one grammar (gc_parse_mhz: ASCII digits, an
    optional fraction of at most 6 digits, 0 < MHz <= 1e6), so that pydvfs and govcore take
    and refuse the same clocks. InvalidValueError naming the grammar otherwise."""
    cdef bytes raw
    cdef uint64_t hz = 0
    if isinstance(text, bytes):
        raw = text
    elif isinstance(text, str):
        raw = text.encode("utf-8", "surrogateescape")
    else:
        raise errors.InvalidValueError(f"not a clock: {text!r} (expected text: {MHZ_GRAMMAR})")
    cdef char hint[160]
    if gc_parse_mhz(raw, len(raw), &hz) < 0:
        gc_mhz_hint(raw, len(raw), hint, sizeof(hint))
        raise errors.InvalidValueError(f"not a clock: {text!r} (expected {MHZ_GRAMMAR})"
                                       f"{hint.decode('ascii')}")
    return hz


def board_text(raw):
    """Text a board file holds (a governor, a model name, a rail label), made safe to show: a
    byte that is not UTF-8 as \\xNN, a control or other unprintable character escaped (a
    terminal escape reaches no terminal), never an error. Paths stay bytes-exact instead
    (os.fsdecode): they are opened again."""
    text = raw.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


BOARD_FILE_MAX = 4096  # bytes of a board file read_board_file returns at most


def read_board_file(sysfs_root, str path):
    """A board file's bytes (at most BOARD_FILE_MAX, trailing newlines, blanks and NULs cut), read
    as govcore reads every board file (gc_sysfs_read): under the sysfs root, through no link that
    leads out of it; None where it cannot be read."""
    cdef char buf[4097]
    cdef bytes r = os.fsencode(sysfs_root or "/")
    cdef bytes p = os.fsencode(path) if r == b"/" else r.rstrip(b"/") + os.fsencode(path)  # a board path
    cdef const char *cr = r
    cdef const char *cp = p
    cdef int rc
    with nogil:
        rc = gc_sysfs_read(cr, cp, buf, sizeof(buf))
    return None if rc < 0 else bytes(buf)


def default_state_dir():
    """Where saved clock states live when no folder is given; None where there is no private
    default (no $XDG_RUNTIME_DIR for a user: a folder must then be passed)."""
    cdef char out[512]
    cdef int rc = gc_default_state_dir(out, sizeof(out))
    if rc == -EDESTADDRREQ:
        return None
    check(rc, NULL)
    return os.fsdecode(<bytes>out)  # a path ($PYDVFS_STATE_DIR may be any bytes): kept bytes-exact


cdef bytes _opt(s):
    """A state folder argument: None (the default folder) or a path; govcore refuses a relative
    one. Anything else (state_dir=5) is refused here rather than turned into a folder "5"."""
    if s is None:
        return b""
    if not isinstance(s, (str, os.PathLike)):
        raise errors.InvalidValueError(f"state_dir must be a folder path, got {s!r}")
    if not os.fspath(s):  # not the default folder in disguise
        raise errors.InvalidValueError("the state folder is empty: give a folder starting with /")
    return os.fsencode(s)


cdef class Board:
    """A discovered Jetson board under a sysfs root."""

    def __cinit__(self, sysfs_root="/"):
        cdef bytes root = os.fsencode(sysfs_root)
        cdef const char *c_root = root
        cdef int rc
        with nogil:
            rc = gc_board_open(&self.b, c_root)
        check(rc, self.b.err)

    @property
    def sysfs_root(self):
        return os.fsdecode(self.b.sysfs_root)

    @property
    def model(self):
        return board_text(self.b.model)

    @property
    def gpu_name(self):
        return board_text(self.b.gpu_name)

    @property
    def board_id(self):
        """The board table's id (pydvfs/data/boards.json), "" where the board is unknown."""
        return self.b.board_id.decode()

    @property
    def jetpack(self):
        """The JetPack major version (from /etc/nv_tegra_release), None if unknown."""
        return self.b.jetpack or None

    @property
    def l4t(self):
        return self.b.l4t.decode() or None

    @property
    def warning(self):
        """What discovery could not settle (an unknown board, a role's rail missing, a repeated
        label), one line; "" if nothing."""
        return self.b.warning.decode("utf-8", "replace")

    @property
    def roles(self):
        """{role: (rail, ...) | None}: the rails of each role as discovered (None: not known)."""
        cdef int r, k
        out = {}
        for r in range(GC_N_ROLES):
            role = gc_role_names[r].decode()
            if self.b.role_n[r] < 0:
                out[role] = None
            else:
                out[role] = tuple(self.b.rails[self.b.role_rail[r][k]].name.decode()
                                  for k in range(self.b.role_n[r]))
        return out

    @property
    def module_partial(self):
        """True where the module's energy is summed over the rails present, one of the table's
        optional rails of it missing (the AGX Orin without VDDQ_VDD2_1V8AO)."""
        return self.b.role_n[0] > 0 and self.b.role_partial[0] != 0  # 0: GC_ROLE_MODULE

    @property
    def skipped_rails(self):
        """((name, why), ...): the channels discovery found and did not take as rails (an
        INA3221 channel disabled, or one whose reading failed)."""
        return tuple((board_text(self.b.skipped[i].name), board_text(self.b.skipped[i].why))
                     for i in range(self.b.n_skipped))

    @property
    def devfreq_dir(self):
        return os.fsdecode(self.b.devfreq_dir)

    @property
    def load_path(self):
        return os.fsdecode(self.b.load_path)

    @property
    def sensor_interval_ms(self):
        return self.b.sensor_interval_ms

    @property
    def freqs_hz(self):
        return tuple(self.b.freqs_hz[i] for i in range(self.b.n_freqs))

    @property
    def rails(self):
        """(name, kind, voltage_path, current_path, power_path) per rail."""
        cdef gc_rail *r
        cdef int i
        out = []
        for i in range(self.b.n_rails):
            r = &self.b.rails[i]
            kind = gc_rail_kind_name(r.kind).decode()
            out.append((r.name.decode(), kind, os.fsdecode(r.voltage_path), os.fsdecode(r.current_path),
                        os.fsdecode(r.power_path)))
        return tuple(out)

    def clock_state(self):
        """(cur_hz, min_hz, max_hz, governor)."""
        cdef gc_clock_state st
        cdef int rc
        with nogil:
            rc = gc_clock_read(&self.b, &st)
        check(rc, self.b.err)
        return st.cur_hz, st.min_hz, st.max_hz, board_text(st.governor)

    def range_state(self):
        """(min_hz, max_hz, governor) without cur_freq (governor "" if unreadable): what a
        restore reports back."""
        cdef gc_clock_state st
        cdef int rc
        with nogil:
            rc = gc_range_read(&self.b, &st)
        check(rc, self.b.err)
        return st.min_hz, st.max_hz, board_text(st.governor)

    def load_permille(self):
        """GPU load in tenths of a percent, or None where the board has no load file."""
        cdef int v = 0
        cdef int rc
        with nogil:
            rc = gc_gpu_load_permille(&self.b, &v)
        if rc == -ENOENT:
            return None
        check(rc, self.b.err)
        return v

    def snap_hz(self, uint64_t want_hz):
        cdef uint64_t level = 0
        if want_hz == 0:
            raise errors.InvalidValueError("not a clock: 0 Hz")
        check(gc_snap_hz(&self.b, want_hz, &level), NULL)
        return level

    def state_path(self, state_dir=None):
        cdef char out[512]
        cdef bytes d = _opt(state_dir)
        check(gc_state_path(&self.b, d, out, sizeof(out)), self.b.err)
        return os.fsdecode(out)

    def lock_path(self):
        """This GPU's lock file (govcore/lock.h): one per GPU, whatever the state folder."""
        cdef char out[512]
        cdef int rc
        with nogil:
            rc = gc_lock_path(&self.b, out, sizeof(out))
        check(rc, self.b.err)
        return os.fsdecode(out)

    @property
    def pin_warning(self):
        """What the last successful pin had to say ("": nothing), e.g. that the original it saved
        is itself a pin."""
        return self.b.warn.decode("utf-8", "replace")

    def saved_state(self, state_dir=None):
        """(min_hz, max_hz, governor) saved before the first change, or None."""
        cdef gc_clock_state st
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        with nogil:
            rc = gc_state_load(&self.b, c_dir, &st)
        if rc == -ENOENT:
            return None
        check(rc, self.b.err)
        return st.min_hz, st.max_hz, board_text(st.governor)

    def drop_state(self, state_dir=None):
        """Remove the saved state whatever it holds (restore --force); True if there was one."""
        cdef int dropped = 0
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        with nogil:
            rc = gc_state_drop(&self.b, c_dir, &dropped)
        check(rc, self.b.err)
        return bool(dropped)

    def pin_hz(self, uint64_t want_hz, state_dir=None, bint nearest=True, above_power_mode=False):
        """Pin the GPU clock to the level nearest want_hz (gc_pin_hz: the one snap), at or under
        the power mode's cap unless above_power_mode; returns the level (Hz). ``last_pin_cap``
        says what the cap did. nearest=False: a clock more than one level outside the table is
        refused (gc_check_near_table), as the daemon's ``pin`` without nearest=1."""
        cdef uint64_t level = 0
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        if want_hz == 0:
            raise errors.InvalidValueError("not a clock: 0 MHz")
        if not nearest:
            check(gc_check_near_table(&self.b, want_hz), self.b.err)
        self.b.above_power_mode = 1 if above_power_mode else 0
        with nogil:
            rc = gc_pin_hz(&self.b, want_hz, c_dir, &level)
        self.b.above_power_mode = 0
        check(rc, self.b.err)
        return level

    @property
    def last_pin_cap(self):
        """(cap_hz, clamped_from_hz) of the last pin: the cap it obeyed (0: none known, or
        lifted) and the level the cap lowered (0: none)."""
        return self.b.cap_hz, self.b.clamped_from_hz

    def power_mode(self):
        """The nvpmodel mode in force: {id, name, gpu_max_mhz, unknown} (None where not known;
        ``unknown`` says why), as govcore status prints it."""
        cdef gc_power_mode pm
        with nogil:
            gc_power_mode_read(&self.b, &pm)
        return {"id": pm.id if pm.id >= 0 else None,
                "name": pm.name.decode("utf-8", "replace") or None,
                "gpu_max_mhz": gc_hz_to_mhz(pm.gpu_max_hz) if pm.gpu_max_hz else None,
                "unknown": pm.why.decode("utf-8", "replace") or None}

    def gpu_cap(self, state_dir=None):
        """The GPU cap a pin obeys (govcore/powermode.h): {cap_mhz, devfreq_max_mhz,
        from_saved, nvpmodel_clk_cap_mhz}."""
        cdef gc_gpu_cap cap
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        with nogil:
            rc = gc_gpu_cap_read(&self.b, c_dir, &cap)
        check(rc, self.b.err)
        return {"cap_mhz": gc_hz_to_mhz(cap.cap_hz) if cap.cap_hz else None,
                "devfreq_max_mhz": gc_hz_to_mhz(cap.devfreq_max_hz) if cap.devfreq_max_hz else None,
                "from_saved": bool(cap.from_saved),
                "nvpmodel_clk_cap_mhz": gc_hz_to_mhz(cap.clk_cap_hz) if cap.clk_cap_hz else None}

    def saved_domains(self, state_dir=None):
        """The clock domains beside the GPU's that the saved state holds (["emc", "cpu0", ...];
        [] for none or no saved state), as a restore would put them back."""
        cdef char lines[GC_DOMAINS_RECORD_MAX]
        cdef char names[GC_ERR_MAX]
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        if gc_state_load_domains(&self.b, c_dir, lines, sizeof(lines)) < 0:
            return []
        if gc_domains_record_names(lines, names, sizeof(names)) < 0:
            return []
        return names.decode("utf-8", "replace").split()

    def restore(self, state_dir=None):
        """Put the saved state back; True if there was one. A state that no longer matches the
        board: what it still offers is written, the state removed, and StateFileError names what
        was left."""
        cdef int restored = 0
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        with nogil:
            rc = gc_restore(&self.b, c_dir, &restored)
        check(rc, self.b.err)
        return bool(restored)

    def domains(self, emc_table_hz=()):
        """The clock domains beside the GPU: a dict per domain (name, kind 'emc'|'cpu',
        available, why, levels_hz, cap_hz, related_cpus, devfreq: the memory clock's devfreq
        name where it is one (Thor's bwmgr) else None, state: None where it cannot be read,
        else governor/min_hz/max_hz/rate_hz/locked). The EMC's rates where the kernel lists none:
        emc_table_hz if given, else the board table's."""
        cdef gc_domains *ds = _open_domains(&self.b, emc_table_hz)
        cdef gc_domain_state st
        cdef gc_domain *d
        cdef int i
        out = []
        try:
            for i in range(ds.n):
                d = &ds.d[i]
                state = None
                if d.readable and gc_domain_read(ds, i, &st) == 0:
                    state = {"governor": st.governor.decode("utf-8", "replace"), "min_hz": st.min_hz,
                             "max_hz": st.max_hz, "rate_hz": st.rate_hz, "locked": bool(st.locked)}
                out.append({
                    "name": d.name.decode(), "kind": "cpu" if d.kind == GC_DOMAIN_CPU else "emc",
                    "devfreq": d.devfreq.decode() or None,
                    "available": bool(d.available),
                    "why": None if d.available else d.why.decode("utf-8", "replace"),
                    "levels_hz": tuple(d.levels_hz[j] for j in range(d.n_levels)),
                    "cap_hz": d.cap_hz or None,
                    "related_cpus": d.related_cpus.decode("utf-8", "replace"),
                    "state": state})
        finally:
            PyMem_Free(ds)
        return out

    def pin_mode_hz(self, uint64_t gpu_hz, uint64_t emc_hz, uint64_t cpu_hz, state_dir=None,
                    emc_table_hz=(), above_power_mode=False):
        """Pin the GPU (0: leave it; at or under the power mode's cap unless above_power_mode),
        the EMC (0: leave it) and every CPU policy (0: leave them) as one (gc_pin_mode):
        (gpu_level_hz, {domain name: level_hz}); ``last_pin_cap`` says what the cap did."""
        cdef gc_domains *ds = _open_domains(&self.b, emc_table_hz)
        cdef uint64_t gpu_level = 0
        cdef uint64_t levels[17]
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc, i
        self.b.above_power_mode = 1 if above_power_mode else 0
        try:
            with nogil:
                rc = gc_pin_mode(&self.b, ds, gpu_hz, emc_hz, cpu_hz, c_dir, &gpu_level, levels)
            check(rc, self.b.err)
            return gpu_level, {ds.d[i].name.decode(): levels[i] for i in range(ds.n) if levels[i]}
        finally:
            self.b.above_power_mode = 0
            PyMem_Free(ds)


cdef gc_domains *_open_domains(const gc_board *b, emc_table_hz) except NULL:
    """The domains under b's root; the EMC's rates where the kernel lists none: emc_table_hz if
    given, else the board table's (govcore/gen_boards.h)."""
    cdef uint64_t table[64]
    cdef int n = 0, rc
    cdef gc_domains *ds
    for hz in emc_table_hz:
        if n == 64:
            break
        table[n] = int(hz)
        n += 1
    ds = <gc_domains *>PyMem_Malloc(sizeof(gc_domains))
    if ds == NULL:
        raise MemoryError()
    if n:
        rc = gc_domains_open(ds, b.sysfs_root, table, n)
    else:
        rc = gc_domains_open_board(ds, b)
    if rc < 0:
        PyMem_Free(ds)
        check(rc, NULL)
    return ds


cdef class Lock:
    """The GPU's owner lock (govcore/lock.h), taken in the constructor (waiting up to wait_ms;
    BoardBusyError naming the holder's pid) and held until release(). One per process and GPU:
    flock locks of two open files conflict even within one process."""

    def __cinit__(self, Board board not None, int wait_ms=0):
        cdef int rc
        gc_lock_init(&self.lk)
        with nogil:
            rc = gc_lock_acquire(&board.b, wait_ms, &self.lk)
        check(rc, board.b.err)

    @property
    def path(self):
        return os.fsdecode(self.lk.path)

    @property
    def held(self):
        return self.lk.fd >= 0

    def release(self):
        with nogil:
            gc_lock_release(&self.lk)

    def __dealloc__(self):
        gc_lock_release(&self.lk)


def lock_holder(Board board not None):
    """The pid holding the GPU's lock: 0 if none, -1 if its pid cannot be read."""
    cdef pid_t pid = 0
    cdef int rc
    with nogil:
        rc = gc_lock_holder(&board.b, &pid)
    check(rc, board.b.err)
    return pid


include "_policy.pxi"


# ------------------------------------------------------------------------------- sampler ---
# The INA3221 sampler thread (govcore/sampler.c). Arguments are checked here with the GIL;
# every C call that may wait (start waits for the first sample, stop for the thread) or copy
# (snapshot, trace) runs without it.

from array import array
from cpython cimport array as carray
from libc.math cimport NAN


# Above this share of a window interpolated over failed reads (or with a negative reading), a
# rail's energy is warned about (pydvfs.measure.sampler, govcore measure).
MAX_INTERPOLATED_PCT = GC_SAMPLER_MAX_INTERPOLATED_PCT


cdef class Snapshot:
    """Cumulative energy/load counters at one instant (opaque: subtract two with
    ``Sampler.window``)."""

    @property
    def t_ns(self):
        """CLOCK_MONOTONIC time of the snapshot, ns (time.monotonic_ns on Linux)."""
        return self.snap.t_ns


cdef class Sampler:
    """The C sampler over the rails of the board under ``sysfs_root``.

    rate_hz: > 0 samples per second; 0 follows the sensor's update_interval; < 0 flat out.
    rails: names to sample (None: all). ring_capacity: samples kept for ``trace`` (0: 65536).
    A sampler runs once: start, stop, then read out.
    """

    def __cinit__(self, sysfs_root="/", double rate_hz=0.0, rails=None, ring_capacity=0):
        cdef bytes root = os.fsencode(sysfs_root)
        cdef const char *c_root = root
        cdef gc_sampler_config cfg
        cdef int rc, i
        self.s = NULL
        self.rail_names = ()
        self.board_id = ""
        self.warning = ""
        if rate_hz != rate_hz or rate_hz > GC_SAMPLER_MAX_RATE_HZ:
            raise errors.InvalidValueError(
                f"sampling rate must be a number of Hz up to {GC_SAMPLER_MAX_RATE_HZ:.0f}")
        if not 0 <= ring_capacity <= GC_SAMPLER_RING_MAX:
            raise errors.InvalidValueError(f"ring capacity must be 0..{GC_SAMPLER_RING_MAX}")
        with nogil:
            rc = gc_board_open(&self.b, c_root)
        check(rc, self.b.err)
        cfg.rate_hz = rate_hz
        cfg.ring_capacity = ring_capacity
        cfg.rail_mask = 0
        if rails is not None:
            names = [self.b.rails[i].name.decode() for i in range(self.b.n_rails)]
            wanted = [rails] if isinstance(rails, str) else list(rails)
            if not wanted:
                raise errors.InvalidValueError("rails: give at least one rail name (or None for all)")
            for name in wanted:
                if name not in names:
                    raise errors.InvalidValueError(
                        f"no rail {name!r} on this board (rails: {', '.join(names) or 'none'})")
                cfg.rail_mask |= 1u << names.index(name)
        with nogil:
            rc = gc_sampler_create(&self.s, &self.b, &cfg)
        check(rc, self.b.err)
        self.rail_names = tuple(gc_sampler_rail_name(self.s, i).decode()
                                for i in range(gc_sampler_n_rails(self.s)))
        self.has_load = gc_sampler_has_load(self.s) != 0
        self.board_id = gc_sampler_board_id(self.s).decode()
        self.warning = self.b.warning.decode("utf-8", "replace")

    def __dealloc__(self):
        if self.s != NULL:
            with nogil:
                gc_sampler_free(self.s)
            self.s = NULL

    def start(self):
        """Start the thread (waits at most 2 s for the first sample). No-op if running."""
        cdef int rc
        with nogil:
            rc = gc_sampler_start(self.s)
        if rc == -EINVAL:
            raise errors.InvalidValueError("this sampler has been stopped; a sampler runs once")
        check(rc, NULL)

    def stop(self):
        """Stop the thread (bounded wait; see docs/sampler.md). Safe to call again."""
        with nogil:
            gc_sampler_stop(self.s)

    def snapshot(self):
        """The counters now."""
        cdef Snapshot snap = Snapshot.__new__(Snapshot)
        with nogil:
            gc_sampler_snapshot(self.s, &snap.snap)
        return snap

    def window(self, Snapshot a not None, Snapshot b not None):
        """What happened between snapshots a and b, as a dict (units in the keys)."""
        cdef gc_window w
        cdef int i
        check(gc_window_diff(&a.snap, &b.snap, &w), b"snapshots out of order or of another sampler")
        return {
            "duration_ns": w.duration_ns,
            "energy_nj": {self.rail_names[i]: w.energy_nj[i] for i in range(w.n_rails)},
            "energy_j": {self.rail_names[i]: w.energy_j[i] for i in range(w.n_rails)},
            "avg_power_w": {self.rail_names[i]: w.avg_power_w[i] for i in range(w.n_rails)},
            "gpu_util_pct": w.gpu_util_pct if w.gpu_util_pct >= 0 else None,
            "samples": w.samples,
            "read_errors": w.read_errors,
            "rate_hz": w.rate_hz,
            "failed_reads": {self.rail_names[i]: w.failed_reads[i] for i in range(w.n_rails)},
            "interpolated_pct": {self.rail_names[i]: w.interpolated_pct[i] for i in range(w.n_rails)},
            "negative_readings": {self.rail_names[i]: w.negative_readings[i] for i in range(w.n_rails)},
            "readings_ok": bool(w.readings_ok),
        }

    def stats(self):
        """Thread counters: samples, read_errors, overruns, reopens, thread_cpu_ns, ..."""
        cdef gc_sampler_stats st
        with nogil:
            gc_sampler_get_stats(self.s, &st)
        return {
            "running": bool(st.running),
            "rate_hz": st.rate_hz,
            "period_ns": st.period_ns,
            "samples": st.samples,
            "read_errors": st.read_errors,
            "overruns": st.overruns,
            "reopens": st.reopens,
            "first_t_ns": st.first_t_ns,
            "last_t_ns": st.last_t_ns,
            "thread_cpu_ns": st.thread_cpu_ns,
            "ring_count": st.ring_count,
            "ring_capacity": st.ring_capacity,
            "abandoned": bool(st.abandoned),
        }

    def trace(self):
        """The ring buffer, oldest first: (t_ns array('q'), {rail: array('d') mW (NaN where a
        read failed)}, GPU load array('d') % (NaN where missing) or None)."""
        cdef gc_sampler_stats st
        cdef size_t n = 0, j, cap
        cdef int k, nr = len(self.rail_names)
        cdef carray.array t = array("q")
        cdef carray.array p = array("i")
        cdef carray.array ld = array("h")
        cdef carray.array col
        cdef int32_t v
        with nogil:
            gc_sampler_get_stats(self.s, &st)
        cap = st.ring_capacity
        carray.resize(t, cap)
        carray.resize(p, cap * nr)
        carray.resize(ld, cap)
        with nogil:
            gc_sampler_trace(self.s, <int64_t *>t.data.as_longlongs, <int32_t *>p.data.as_ints,
                             <int16_t *>ld.data.as_shorts,
                             cap, &n)
        carray.resize(t, n)
        power = {}
        for k in range(nr):
            col = array("d")
            carray.resize(col, n)
            for j in range(n):
                v = p.data.as_ints[j * nr + k]
                col.data.as_doubles[j] = NAN if v == GC_SAMPLE_MISSING else v / 1000.0  # uW -> mW
            power[self.rail_names[k]] = col
        load = None
        if self.has_load:
            col = array("d")
            carray.resize(col, n)
            for j in range(n):
                col.data.as_doubles[j] = NAN if ld.data.as_shorts[j] < 0 else ld.data.as_shorts[j] / 10.0
            load = col
        return t, power, load
