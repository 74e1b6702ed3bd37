"""The pydvfs error hierarchy. Every error a user can cause derives from PydvfsError.

C functions in govcore return 0 or -errno; those codes become these exceptions in exactly one
place, ``pydvfs._core._check``.
"""


class PydvfsError(Exception):
    """Base class of every error pydvfs raises on purpose."""


class DeviceNotFoundError(PydvfsError):
    """No Jetson GPU devfreq node (or no INA3221 sensor where one is needed) under the sysfs root."""


class BoardPermissionError(PydvfsError):
    """A board file exists but may not be written (run as root, or fix the file's permissions)."""


class InvalidValueError(PydvfsError, ValueError):
    """A value given by the user is out of range or malformed."""


class ClockVerifyError(PydvfsError):
    """The clock was written but the board reports something else (e.g. a power-mode cap)."""


class BoardBusyError(PydvfsError):
    """Another process governs the GPU (it holds the board's lock, or the daemon's pin)."""


class BoardIOError(PydvfsError):
    """Reading or writing a board file failed for another reason."""


class BoardDataError(BoardIOError):
    """A board file holds data it should not (e.g. a garbled ``available_frequencies``): the
    board's fault, not the user's input."""


class StateFileError(PydvfsError):
    """The saved clock state file is damaged: check the clock by hand and delete the file."""


class CommandError(PydvfsError):
    """A command pydvfs was asked to run (``measure -- CMD``) could not be started."""


class PolicyLoadError(PydvfsError):
    """A model folder's compiled policy (policy.so) was refused before any of its code ran."""


class UntrustedPolicyError(PolicyLoadError):
    """As root: the policy, or a folder above it, is not owned by root (or the real user), is
    writable by group or others, or is reached through a symlink."""


class ManifestMismatchError(PolicyLoadError):
    """The model folder's manifest.txt is missing, of another format, or does not match its files."""


class ForeignPolicyError(PolicyLoadError):
    """policy.so is built for another CPU (e.g. trained on x86_64, applied on the aarch64 board)."""


class StoreError(PydvfsError):
    """The folder of the board's run records (``--data-dir``, ``PYDVFS_DATA_DIR``) is refused:
    not owned by this user, writable by others, a symbolic link, or cannot be read or written."""
