# cython: language_level=3
"""Thin binding over govcore: discovery, clock pinning and restore.

Validation happens here, with the GIL held; the C calls that touch the board run without it.
C error codes become Python exceptions in one place: ``check``.
"""
from libc.errno cimport EACCES, EPERM, ENODEV, ENOENT, EINVAL, EIO, EROFS, ENAMETOOLONG
from libc.string cimport strerror

from pydvfs import errors


cdef int check(int rc, const char *detail) except -1:
    """Map a govcore return code (0 or -errno) to the pydvfs error hierarchy."""
    if rc >= 0:
        return 0
    msg = detail.decode("utf-8", "replace") if detail != NULL and detail[0] != 0 else ""
    if not msg:
        msg = strerror(-rc).decode()
    if rc == -ENODEV:
        raise errors.DeviceNotFoundError(msg)
    if rc == -EACCES or rc == -EPERM or rc == -EROFS:
        raise errors.BoardPermissionError(msg)
    if rc == -EINVAL or rc == -ENAMETOOLONG:
        raise errors.InvalidValueError(msg)
    if rc == -EIO:
        raise errors.ClockVerifyError(msg)
    raise errors.BoardIOError(msg)


def mhz_to_hz(double mhz):
    """The one MHz -> Hz conversion (0 for a value that is not a clock)."""
    return gc_mhz_to_hz(mhz)


def default_state_dir():
    """Where saved clock states live when no folder is given."""
    cdef char out[512]
    check(gc_default_state_dir(out, sizeof(out)), NULL)
    return out.decode()


cdef bytes _opt(s):
    return b"" if s is None else str(s).encode()


cdef class Board:
    """A discovered Jetson board under a sysfs root."""

    def __cinit__(self, sysfs_root="/"):
        cdef bytes root = str(sysfs_root).encode()
        cdef const char *c_root = root
        cdef int rc
        with nogil:
            rc = gc_board_open(&self.b, c_root)
        check(rc, self.b.err)

    @property
    def sysfs_root(self):
        return self.b.sysfs_root.decode()

    @property
    def model(self):
        return self.b.model.decode("utf-8", "replace")

    @property
    def gpu_name(self):
        return self.b.gpu_name.decode()

    @property
    def devfreq_dir(self):
        return self.b.devfreq_dir.decode()

    @property
    def load_path(self):
        return self.b.load_path.decode()

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
            kind = "hwmon" if r.kind == GC_RAIL_HWMON else "ina3221x"
            out.append((r.name.decode(), kind, r.voltage_path.decode(), r.current_path.decode(),
                        r.power_path.decode()))
        return tuple(out)

    def clock_state(self):
        """(cur_hz, min_hz, max_hz, governor)."""
        cdef gc_clock_state st
        cdef int rc
        with nogil:
            rc = gc_clock_read(&self.b, &st)
        check(rc, self.b.err)
        return st.cur_hz, st.min_hz, st.max_hz, st.governor.decode()

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
        return out.decode()

    def saved_state(self, state_dir=None):
        """(min_hz, max_hz, governor) saved before the first change, or None."""
        cdef gc_clock_state st
        cdef bytes d = _opt(state_dir)
        cdef int rc = gc_state_load(&self.b, d, &st)
        if rc == -ENOENT:
            return None
        check(rc, self.b.err)
        return st.min_hz, st.max_hz, st.governor.decode()

    def pin_hz(self, uint64_t want_hz, state_dir=None):
        """Pin the GPU clock to the level nearest want_hz; returns the level (Hz)."""
        cdef uint64_t level = 0
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        if want_hz == 0:
            raise errors.InvalidValueError("not a clock: 0 MHz")
        with nogil:
            rc = gc_pin_hz(&self.b, want_hz, c_dir, &level)
        check(rc, self.b.err)
        return level

    def restore(self, state_dir=None):
        """Put the saved state back; True if there was one."""
        cdef int restored = 0
        cdef bytes d = _opt(state_dir)
        cdef const char *c_dir = d
        cdef int rc
        with nogil:
            rc = gc_restore(&self.b, c_dir, &restored)
        check(rc, self.b.err)
        return bool(restored)
include "_policy.pxi"
