"""One file with what pydvfs reads from a board (``pydvfs capture-board OUT``), and the tree
rebuilt from it (``pydvfs fake-board DIR --from OUT``).

As ``hwloc-gather-topology`` does for machine topology: a user with a board we have not seen
sends one JSON file, and the same code that runs on the board runs on its layout anywhere.

**What is kept** (:data:`KEPT`; nothing else is read, so nothing else can leak): the devfreq
folders (the GPU's and the others: clock tables, limits, governors, the podgov tunables, the
device's ``load`` and ``of_node/name``), the cpufreq policy folders, the power sensors (hwmon
``name``, channel labels and enables, the sensor's interval and averaging, and a few readings of
each input), the EMC debugfs files, nvpmodel's caps, status and table, the device-tree model and
the L4T release line. Every value is checked for its kind (numbers, short names, the nvpmodel
table's grammar; ``nvpmodel.conf`` comments are dropped) and anything else is left out and
listed in ``skipped``, as are FIFOs, sockets and devices (opened non-blocking, never waited on)
and files over the size cap. Symlinks are recorded as links, relative to the root. No serial
number, host name, MAC address or user name is read: no file that holds one is on the list.
Everything is read beneath the root without following a link while opening it (each folder
opened with ``O_NOFOLLOW`` from its parent's descriptor, as govcore opens board files): a link
is read with ``readlink`` and walked by hand, so a folder swapped for a link while the capture
runs is left out, not followed to a file outside the tree. The capture file is written 0600.

Rebuilding (:func:`rebuild`) trusts nothing in the file: every entry must lie beneath the tree
once resolved as the kernel resolves it (no entry beneath a link or a file, no link whose target
leaves the tree through ``..`` or another link), and the tree is laid out component by
component from the folder's descriptor, following no link, in a folder only the caller can
write (a new one, or an empty one the caller owns that no one else can write).

The format (:data:`FORMAT`, :data:`VERSION`): ``{"format", "version", "meta": {...},
"entries": {path: {"text": ...} | {"link": target}}, "readings": {path: [...]},
"skipped": [{"path", "why"}]}``; paths relative to the root, ``/`` separated.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import posixpath
import re
import stat
import time
from pathlib import Path

from ..errors import DeviceNotFoundError, InvalidValueError
from ..progress import read_capped

FORMAT = "pydvfs-board-capture"
VERSION = 1
FILE_CAP_BYTES = 64 * 1024          # one sysfs value; nvpmodel.conf has its own cap
CONF_CAP_BYTES = 256 * 1024
TOTAL_CAP_BYTES = 8 * 1024 * 1024   # a capture file larger than this is not one
META_RESERVE_BYTES = 64 * 1024      # of TOTAL_CAP_BYTES, kept for "meta" and the JSON around
READINGS = 3                        # reads of each sensor input, READING_GAP_S apart
READING_GAP_S = 0.05
MAX_LINK_HOPS = 40

NUMBER = re.compile(r"^[ \t]*-?\d+(?:[ \t]+-?\d+)*[ \t]*\n?$")      # "612000000", "306000000 408000000"
# names, labels, governor lists, cpu lists; device-tree strings (of_node/name) end in a NUL
TOKENS = re.compile(r"^[A-Za-z0-9_ .,:@+/()\-\[\]]{0,256}\x00?\n?$")
MODEL = re.compile(r"^[A-Za-z0-9_ .,:@+/()\-]{1,128}\x00?\n?$")     # the device-tree model (NUL-terminated)
RELEASE = re.compile(r"^# R\d+ \(release\), REVISION: [\w.]+(?:, [A-Z_]+: [\w.:\-() ]+)*$")
CONF_HEADER = re.compile(r"^< [A-Z_]+(?: [A-Z_]+=[\w.\-]+)* >$")
# "GPU MAX_FREQ 612000000", "CPU_ONLINE CORE_0 1", "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTRL_EN on",
# "MAX_FREQ /sys/devices/.../max_freq": a number, a board path or a plain word, nothing else
CONF_LINE = re.compile(r"^[A-Z0-9_]+(?:[ \t]+[A-Za-z0-9_]+)?[ \t]+(?:-?\d+|/[\w./@:+\-]*|[A-Za-z_]+)$")

# (folders, relative to the root: a glob of one level per '*'; files kept there, with their kind)
DEVFREQ_FILES = {"available_frequencies": "number", "available_governors": "tokens", "governor": "tokens",
                 "min_freq": "number", "max_freq": "number", "cur_freq": "number", "target_freq": "number",
                 "polling_interval": "number", "name": "tokens"}
HWMON_FILE = re.compile(r"^(?:name|update_interval|samples|shunt_resistor\d*|(?:in|curr|power)\d+_(?:input|label|enable))$")
INA3221X_FILE = re.compile(r"^(?:name|rail_name_\d+|in_(?:power|voltage|current)\d+_input)$")
CPUFREQ_FILES = {"scaling_min_freq": "number", "scaling_max_freq": "number", "scaling_cur_freq": "number",
                 "cpuinfo_min_freq": "number", "cpuinfo_max_freq": "number",
                 "scaling_available_frequencies": "number", "scaling_governor": "tokens",
                 "scaling_available_governors": "tokens", "related_cpus": "tokens", "affected_cpus": "tokens"}
EMC_FILES = {"sys/kernel/debug/bpmp/debug/clk/emc/rate": "number",
             "sys/kernel/debug/bpmp/debug/clk/emc/min_rate": "number",
             "sys/kernel/debug/bpmp/debug/clk/emc/max_rate": "number",
             "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked": "number",
             "sys/kernel/debug/emc/available_rates": "number"}
SINGLE_FILES = {"proc/device-tree/model": "model", "etc/nv_tegra_release": "release",
                "var/lib/nvpmodel/status": "tokens", "etc/nvpmodel.conf": "conf", **EMC_FILES}

KEPT = (
    "sys/class/devfreq/* (links) and each devfreq folder: " + ", ".join(DEVFREQ_FILES)
    + "; its nvhost_podgov/* numbers; its device's load and of_node/name",
    "sys/class/hwmon/* (links) and each sensor folder: name, update_interval, samples, shunt_resistor*, "
    "in/curr/powerN_input|label|enable, with a few readings of each input",
    "sys/bus/i2c/drivers/ina3221/* and ina3221x/* (links); JetPack 4 iio:device*: name, rail_name_N, "
    "in_power|voltage|currentN_input",
    "sys/devices/system/cpu/cpufreq/policy*: " + ", ".join(CPUFREQ_FILES),
    "sys/kernel/nvpmodel_clk_cap/* numbers",
    "EMC debugfs: " + ", ".join(EMC_FILES),
    "var/lib/nvpmodel/status; etc/nvpmodel.conf (its POWER_MODEL/PARAM blocks, comments dropped)",
    "proc/device-tree/model; etc/nv_tegra_release (its release line only)",
)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC


def _walk(top_fd: int, parts: list[str], create: bool = False) -> int:
    """A new descriptor of the folder ``parts`` beneath ``top_fd``, opened one component at a
    time with ``O_NOFOLLOW``: OSError (ELOOP, ENOTDIR) where a component is a link or not a
    folder, so nothing outside the tree is reached. ``create``: make the missing folders (0755)."""
    fd = os.dup(top_fd)
    try:
        for name in parts:
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _follow(cur: list[str], path: str, look, hops: int = 0) -> str | None:
    """Walk ``path`` from the folder ``cur`` (its components) one component at a time, the way
    the kernel resolves it: ``look(here)`` says what stands at ``here`` (the components so far,
    joined by "/"): "" for a folder or file (walked into), a link's target (walked in its place;
    an absolute one from the top), None where the walk stops (nothing there, unreadable). The
    path reached; None where the walk stops or passes ``MAX_LINK_HOPS`` links (``hops`` met
    already); ".." where a ".." climbs above the top."""
    cur = list(cur)
    todo = path.split("/")
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            if not cur:
                return ".."
            cur.pop()
            continue
        here = "/".join(cur + [name])
        target = look(here)
        if target is None:
            return None
        if not target:
            cur.append(name)
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            return None
        if target.startswith("/"):
            cur = []
        todo = target.split("/") + todo
    return "/".join(cur)


class _Capture:
    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.entries: dict[str, dict] = {}
        self.readings: dict[str, list] = {}
        self.skipped: list[dict] = []
        self.left_out = 0  # skipped files not listed: the capture was full
        self.size = 0      # bytes the entries, readings and skipped take in the file

    def close(self) -> None:
        os.close(self.root_fd)

    # -- where things are (beneath the root, no link followed) -----------------------------
    def _in_parent(self, rel: str, fn):
        """fn(name, parent_fd) for rel's last component, its folder walked beneath the root."""
        parts = rel.split("/")
        fd = _walk(self.root_fd, parts[:-1])
        try:
            return fn(parts[-1], fd)
        finally:
            os.close(fd)

    def _open(self, rel: str, flags: int = _READ_FLAGS) -> int:
        return self._in_parent(rel, lambda name, fd: os.open(name, flags, dir_fd=fd))

    def resolve(self, rel: str) -> str | None:
        """The real path of ``rel`` (relative to the root), walked by :func:`_follow` and
        recording every symlink met as a link; None where it does not exist or leaves the root."""
        def look(here: str) -> str | None:
            try:
                st = self._in_parent(here, lambda n, fd: os.lstat(n, dir_fd=fd))
                if not stat.S_ISLNK(st.st_mode):
                    return ""
                target = self._in_parent(here, lambda n, fd: os.readlink(n, dir_fd=fd))
            except OSError:
                return None
            rel_target = target
            if target.startswith("/"):  # absolute on the board: under the root here
                rel_target = posixpath.relpath(posixpath.normpath(target), "/" + posixpath.dirname(here))
            if here not in self.entries and self._fits(here, rel_target):
                self.entries[here] = {"link": rel_target}
            return target

        real = _follow([], rel, look)
        return None if real == ".." else real

    def listdir(self, rel: str) -> list[str]:
        real = self.resolve(rel)
        if real is None:
            return []
        try:
            fd = _walk(self.root_fd, [p for p in real.split("/") if p])
        except OSError:
            return []
        try:
            return sorted(os.listdir(fd))
        except OSError:
            return []
        finally:
            os.close(fd)

    def _fits(self, *texts: str) -> bool:
        """Count texts into the file's size; False (and nothing counted) where they would take
        it past TOTAL_CAP_BYTES (less what meta needs)."""
        n = sum(len(json.dumps(t)) + 4 for t in texts)
        if self.size + n > TOTAL_CAP_BYTES - META_RESERVE_BYTES:
            return False
        self.size += n
        return True

    # -- reading ---------------------------------------------------------------------------
    def _skip(self, rel: str, why: str) -> None:
        if self._fits(rel, why):
            self.skipped.append({"path": rel, "why": why})
        else:
            self.left_out += 1

    def read(self, rel: str, kind: str, cap: int = FILE_CAP_BYTES) -> str | None:
        """Keep the file at rel (through its links) if it is a small regular file holding a
        value of ``kind``; else list it in ``skipped``. Returns the text kept."""
        real = self.resolve(rel)
        if real is None or real in self.entries:
            return None if real is None else self.entries[real].get("text")
        try:
            fd = self._open(real)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ENOTDIR):  # not there: nothing to say
                self._skip(real, f"cannot be read: {e.strerror}")
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self._skip(real, "not a regular file (a FIFO, socket or device): not read")
                return None
            data = read_capped(fd, cap)
        except OSError as e:
            self._skip(real, f"cannot be read: {e.strerror}")
            return None
        finally:
            os.close(fd)
        if len(data) > cap:
            self._skip(real, f"larger than {cap} bytes: not kept")
            return None
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError:
            self._skip(real, "not text: not kept")
            return None
        kept = _checked(text, kind)
        if kept is None:
            self._skip(real, f"does not hold a {kind} value pydvfs reads: not kept")
            return None
        if not self._fits(real, kept):
            self._skip(real, "the capture is full: not kept")
            return None
        self.entries[real] = {"text": kept}
        return kept

    # -- the layout --------------------------------------------------------------------------
    def devfreq(self) -> int:
        """The devfreq devices' files; how many devices there were."""
        found = 0
        for name in self.listdir("sys/class/devfreq"):
            df = self.resolve(f"sys/class/devfreq/{name}")
            if df is None:
                continue
            found += 1
            for f, kind in DEVFREQ_FILES.items():
                self.read(f"{df}/{f}", kind)
            for f in self.listdir(f"{df}/nvhost_podgov"):
                self.read(f"{df}/nvhost_podgov/{f}", "number")
            for where in ("of_node/name", "device/of_node/name", "device/load"):
                self.read(f"{df}/{where}", "tokens" if where.endswith("name") else "number")
        return found

    def sensors(self) -> None:
        dirs = []
        for name in self.listdir("sys/class/hwmon"):
            d = self.resolve(f"sys/class/hwmon/{name}")
            if d is not None:
                dirs.append(d)
        for addr in self.listdir("sys/bus/i2c/drivers/ina3221"):
            for name in self.listdir(f"sys/bus/i2c/drivers/ina3221/{addr}/hwmon"):
                d = self.resolve(f"sys/bus/i2c/drivers/ina3221/{addr}/hwmon/{name}")
                if d is not None and d not in dirs:
                    dirs.append(d)
        for d in dirs:
            for f in self.listdir(d):
                if HWMON_FILE.match(f):
                    self.read(f"{d}/{f}", "tokens" if f.endswith(("label", "name")) or f == "name" else "number")
        for addr in self.listdir("sys/bus/i2c/drivers/ina3221x"):
            for dev in self.listdir(f"sys/bus/i2c/drivers/ina3221x/{addr}"):
                if not dev.startswith("iio:device"):
                    continue
                d = self.resolve(f"sys/bus/i2c/drivers/ina3221x/{addr}/{dev}")
                if d is None:
                    continue
                for f in self.listdir(d):
                    if INA3221X_FILE.match(f):
                        self.read(f"{d}/{f}", "tokens" if f.startswith(("rail_name", "name")) else "number")

    def sample_inputs(self) -> None:
        inputs = [p for p, e in self.entries.items() if "text" in e and p.endswith("_input")]
        for p in inputs:
            if self._fits(p, self.entries[p]["text"].strip()):
                self.readings[p] = [self.entries[p]["text"].strip()]
        for _ in range(READINGS - 1):
            time.sleep(READING_GAP_S)
            for p in [p for p in inputs if p in self.readings]:
                try:
                    fd = self._open(p)
                    try:
                        text = os.read(fd, 64).decode("ascii", "replace")
                    finally:
                        os.close(fd)
                except OSError:
                    continue
                if NUMBER.match(text) and self._fits(text.strip()):
                    self.readings[p].append(text.strip())

    def cpufreq(self) -> None:
        for name in self.listdir("sys/devices/system/cpu/cpufreq"):
            if not re.match(r"^policy\d+$", name):
                continue
            for f, kind in CPUFREQ_FILES.items():
                self.read(f"sys/devices/system/cpu/cpufreq/{name}/{f}", kind)

    def singles(self) -> None:
        for name in self.listdir("sys/kernel/nvpmodel_clk_cap"):
            self.read(f"sys/kernel/nvpmodel_clk_cap/{name}", "number")
        for rel, kind in SINGLE_FILES.items():
            self.read(rel, kind, CONF_CAP_BYTES if kind == "conf" else FILE_CAP_BYTES)


def _checked(text: str, kind: str) -> str | None:
    """The text kept of a value of ``kind``, or None where it is not one."""
    if kind == "number":
        return text if NUMBER.match(text) else None
    if kind == "tokens":
        return text if TOKENS.match(text) else None
    if kind == "model":
        return text if MODEL.match(text) else None
    if kind == "release":
        first = text.split("\n", 1)[0].rstrip()
        return first + "\n" if RELEASE.match(first) else None
    if kind == "conf":
        kept = [line.strip() for line in text.splitlines()
                if CONF_HEADER.match(line.strip()) or CONF_LINE.match(line.strip())]
        return "\n".join(kept) + "\n" if kept else None
    raise ValueError(kind)


def capture_board(sysfs_root: str | os.PathLike = "/", source: str = "pydvfs capture-board",
                  board_id: str | None = None) -> dict:
    """What pydvfs reads from the board under ``sysfs_root`` (see the module doc), as one record."""
    from .. import __version__
    from .table import identify

    if not os.path.isdir(sysfs_root):
        raise InvalidValueError(f"sysfs root {sysfs_root} is not a folder")
    try:
        c = _Capture(str(sysfs_root))
    except OSError as e:
        raise InvalidValueError(f"cannot open the sysfs root {sysfs_root}: {e.strerror}") from None
    try:
        if c.devfreq() == 0:
            # nothing of a Jetson to capture (status refuses the tree too); a new board whose GPU
            # pydvfs does not know still has a devfreq device, and is captured
            raise DeviceNotFoundError(f"no devfreq device under {os.path.join(str(sysfs_root), 'sys/class/devfreq')}: "
                                      "no Jetson GPU to capture (a Jetson with its GPU driver loaded has one)")
        c.sensors()
        c.sample_inputs()
        c.cpufreq()
        c.singles()
        model = (c.entries.get(c.resolve("proc/device-tree/model") or "", {}).get("text") or "").strip("\x00\n ")
    finally:
        c.close()
    if c.left_out:
        c.skipped.append({"path": "*", "why": f"{c.left_out} more files left out: the capture is full"})
    if board_id is None:
        found = identify(model) if model else None
        board_id = found.id if found else None
    return {
        "format": FORMAT,
        "version": VERSION,
        "meta": {"pydvfs_version": __version__,
                 "captured_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "source": source, "model": model or None, "board": board_id,
                 "kept": list(KEPT)},
        "entries": dict(sorted(c.entries.items())),
        "readings": c.readings,
        "skipped": c.skipped,
    }


def write_capture(capture: dict, out: str | os.PathLike) -> Path:
    """Write a capture to a new file, mode 0600 (an existing one is refused: it is not ours to
    replace)."""
    out = Path(out)
    try:
        # 0600: the capture is the user's to share; a root capture is not for every local user
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        raise InvalidValueError(f"{out} exists: give a new file name") from None
    except OSError as e:
        raise InvalidValueError(f"cannot create {out}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        json.dump(capture, f, indent=1, sort_keys=False)
        f.write("\n")
    return out


def _safe_rel(path: str) -> bool:
    parts = path.split("/")
    return (bool(path) and not path.startswith("/") and "\x00" not in path and len(path) <= 4096
            and all(p not in ("", ".", "..") and len(p) <= 255 for p in parts))


def _link_leaves_tree(entries: dict, folders: set, link_path: str) -> bool:
    """Whether the link at ``link_path`` leaves the tree when the kernel resolves it in the tree
    rebuilt from ``entries``: its target walked by :func:`_follow` from the link's folder, every
    link met (the tree's own) substituted. A walk that meets a missing entry, a file with more to
    walk or too many links stops there, inside (the kernel stops with ENOENT, ENOTDIR or ELOOP)."""
    def look(here: str) -> str | None:
        e = entries.get(here)
        if e is None:
            return "" if here in folders else None
        link = e.get("link", "")  # a file: the walk ends at the next component (ENOTDIR)
        return None if link.startswith("/") else link

    return _follow(link_path.split("/")[:-1], entries[link_path]["link"], look, hops=1) == ".."


def _bad_capture(path, why: str) -> InvalidValueError:
    return InvalidValueError(f"{path} is not a board capture pydvfs lays out: {why}")


def read_capture(path: str | os.PathLike) -> dict:
    """A capture file, checked: InvalidValueError (one line) for anything else. Every entry must
    lie beneath the tree as the kernel will resolve it (see :func:`_link_leaves_tree`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InvalidValueError(f"cannot read {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidValueError(f"{path} is not a regular file: not a board capture")
        data = read_capped(fd, TOTAL_CAP_BYTES)
    except OSError as e:
        raise InvalidValueError(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > TOTAL_CAP_BYTES:
        raise InvalidValueError(f"{path} is larger than {TOTAL_CAP_BYTES // (1024 * 1024)} MiB: "
                                "too large to be a board capture")
    try:
        cap = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise InvalidValueError(f"{path} is not a board capture (not JSON)") from None
    except RecursionError:
        raise InvalidValueError(f"{path} is not a board capture (nested too deeply)") from None
    if not isinstance(cap, dict) or cap.get("format") != FORMAT:
        raise InvalidValueError(f"{path} is not a board capture (format is not {FORMAT!r})")
    version = cap.get("version")
    if type(version) is not int or version != VERSION:  # noqa: E721 (true == 1 is not a version)
        raise InvalidValueError(f"{path}: capture version {str(version)[:40]!r}; "
                                f"this pydvfs reads version {VERSION}")
    meta = cap.get("meta", {})
    if not isinstance(meta, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, (str, int, float, list))) for k, v in meta.items()):
        raise _bad_capture(path, '"meta" is not an object of names and values')
    entries = cap.get("entries")
    if not isinstance(entries, dict):
        raise InvalidValueError(f"{path}: no entries")
    for p, e in entries.items():
        ok = isinstance(p, str) and _safe_rel(p) and isinstance(e, dict) and len(e) == 1 and (
            (isinstance(e.get("text"), str) and e["text"].isascii()) or isinstance(e.get("link"), str))
        if ok and "link" in e:
            ok = (0 < len(e["link"]) <= 4096 and "\x00" not in e["link"] and not e["link"].startswith("/"))
        if not ok:
            raise InvalidValueError(f"{path}: entry {str(p)[:80]!r} is not a file or link inside the tree")
    for p in entries:
        parts = p.split("/")
        for i in range(1, len(parts)):
            above = entries.get("/".join(parts[:i]))
            if above is not None:
                what = "link" if "link" in above else "file"
                raise _bad_capture(path, f"entry {p[:80]!r} lies beneath the {what} "
                                         f"{'/'.join(parts[:i])[:80]!r} (a capture records real paths)")
    folders = {"/".join(p.split("/")[:i]) for p in entries for i in range(1, p.count("/") + 1)}
    for p, e in entries.items():
        if "link" in e and _link_leaves_tree(entries, folders, p):
            raise InvalidValueError(f"{path}: the link {p[:80]!r} -> {e['link'][:80]!r} leads out of the "
                                    "tree: not a file or link inside the tree")
    return cap


def rebuild(capture: dict, dest: str | os.PathLike) -> Path:
    """Lay out the captured tree (checked by :func:`read_capture`) under ``dest``: the files
    with their captured text, the links as they were. ``dest`` is a new folder, or an empty one
    the caller owns that no one else can write (InvalidValueError otherwise): each entry is
    made from that folder's descriptor one component at a time with ``O_NOFOLLOW``, so neither
    the capture's own links nor another user can steer a write outside it. A failed lay-out
    removes what it made."""
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        made = True
        try:
            os.mkdir(dest, 0o700)  # private while it is filled
        except FileExistsError:
            made = False
        fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise InvalidValueError(f"cannot make the folder {dest}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            made = False  # not ours to remove
            raise InvalidValueError(
                f"{dest} can be written by {'its owner (uid ' + str(st.st_uid) + ')' if st.st_uid != os.geteuid() else 'others'}: "
                "a capture is laid out only in a folder no one else can write; give a new folder")
        if os.listdir(fd):
            raise InvalidValueError(f"{dest} is not empty: give a new or empty folder")
        try:
            _lay_out(fd, capture["entries"])
        except OSError as e:
            for name in os.listdir(fd):
                with contextlib.suppress(OSError):
                    _remove_beneath(fd, name)
            raise InvalidValueError(f"cannot lay out the capture in {dest}: {e.strerror}"
                                    + (f" ({e.filename})" if e.filename else "")) from None
        if made:
            umask = os.umask(0o022)
            os.umask(umask)
            os.fchmod(fd, 0o777 & ~umask)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(dest)
        raise
    finally:
        os.close(fd)
    return dest


def _remove_beneath(dir_fd: int, name: str) -> None:
    """Remove what the lay-out made at ``name`` in ``dir_fd`` (a folder: all it holds), following
    no link (shutil.rmtree's dir_fd needs Python 3.11; JetPack 5 ships 3.8)."""
    if not stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:
        for child in os.listdir(fd):
            _remove_beneath(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def _lay_out(top_fd: int, entries: dict) -> None:
    """The files (and their folders), then the links, each beneath ``top_fd``, no link followed."""
    for p, e in sorted(entries.items()):
        if "text" not in e:
            continue
        *folders, name = p.split("/")
        parent = _walk(top_fd, folders, create=True)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                         dir_fd=parent)
        finally:
            os.close(parent)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(e["text"])
    for p, e in sorted(entries.items()):
        if "link" not in e:
            continue
        *folders, name = p.split("/")
        parent = _walk(top_fd, folders, create=True)
        try:
            os.symlink(e["link"], name, dir_fd=parent)
        finally:
            os.close(parent)
