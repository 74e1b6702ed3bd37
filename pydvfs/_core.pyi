"""Type stubs for the govcore binding (pydvfs/_core.pyx, pydvfs/_policy.pxi): everything the
extension exports. Units are in the names: _hz devfreq clocks, _mhz user clocks, _ns
CLOCK_MONOTONIC, _j / _w energy and power."""

from array import array
from os import PathLike
from typing import Any, Sequence

# The static policies, in govcore's order (gc_policy_name): ("mlg", "ffg", "rules", "maxn", "roofline").
POLICY_NAMES: tuple[str, ...]
POLICY_HELP: dict[str, str]
POLICY_FLAGS: dict[str, frozenset[str]]
# What a policy may minimise (gc_objective_name): ("energy", "edp", "ed2p"); the index is the
# power of the step time in the cost E t^k.
OBJECTIVE_NAMES: tuple[str, ...]
PEFT_NAMES: tuple[str, ...]
PRECISION_NAMES: tuple[str, ...]
METHOD_KEYS: tuple[str, ...]
# The one workload grammar (workload.c gc_workload_fields; docs/policy.md "The workload grammar"):
# key -> (kind "label" | "name" | "whole" | "decimal", min or None, max or None).
WORKLOAD_FIELDS: dict[str, tuple[str, float | None, float | None]]
WORKLOAD_SPEC_MAX: int
def parse_workload(spec: str | bytes) -> dict[str, str]:
    """A --workload spec checked by gc_workload_parse -> {key: text}; InvalidValueError (one
    line, "--workload ...") otherwise. The keys it needs and the checks across keys: a Workload's."""
def check_workload(workload: tuple) -> None:
    """InvalidValueError unless the workload (Workload.as_core()) passes gc_workload_check."""

def mhz_to_hz(mhz: float) -> int: ...
def parse_mhz(text: str | bytes) -> int:
    """A clock typed as text, in Hz, by govcore's one grammar (gc_parse_mhz); InvalidValueError
    naming MHZ_GRAMMAR otherwise."""
def board_text(raw: bytes) -> str:
    """Text a board file holds, for people: UTF-8, other bytes shown as \\xNN."""

MHZ_GRAMMAR: str  # GC_MHZ_GRAMMAR: the clock grammar in words
BOARD_FILE_MAX: int
def read_board_file(sysfs_root: str | None, path: str) -> bytes | None:
    """A board file (bounded) read as govcore reads one: under the root, no link out of it."""
def default_state_dir() -> str | None: ...

MAX_INTERPOLATED_PCT: float  # sampler.h GC_SAMPLER_MAX_INTERPOLATED_PCT

class Board:
    def __init__(self, sysfs_root: str = "/") -> None: ...
    @property
    def sysfs_root(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def gpu_name(self) -> str: ...
    @property
    def devfreq_dir(self) -> str: ...
    @property
    def load_path(self) -> str: ...
    @property
    def sensor_interval_ms(self) -> int: ...
    @property
    def freqs_hz(self) -> tuple[int, ...]: ...
    @property
    def board_id(self) -> str: ...
    @property
    def jetpack(self) -> int | None: ...
    @property
    def l4t(self) -> str | None: ...
    @property
    def warning(self) -> str: ...
    @property
    def roles(self) -> dict[str, tuple[str, ...] | None]: ...
    @property
    def module_partial(self) -> bool: ...
    @property
    def skipped_rails(self) -> tuple[tuple[str, str], ...]:
        """(name, why) per channel found and not taken as a rail (disabled, or unreadable)."""
    @property
    def rails(self) -> tuple[tuple[str, str, str, str, str], ...]:
        """(name, kind 'hwmon'|'ina3221x'|'power', voltage_path, current_path, power_path) per rail."""
    def clock_state(self) -> tuple[int, int, int, str]:
        """(cur_hz, min_hz, max_hz, governor)."""
    def load_permille(self) -> int | None: ...
    def snap_hz(self, want_hz: int) -> int: ...
    def state_path(self, state_dir: str | None = None) -> str: ...
    def saved_state(self, state_dir: str | None = None) -> tuple[int, int, str] | None: ...
    def range_state(self) -> tuple[int, int, str]: ...
    def drop_state(self, state_dir: str | None = None) -> bool: ...
    def lock_path(self) -> str: ...
    @property
    def pin_warning(self) -> str: ...
    def pin_hz(self, want_hz: int, state_dir: str | None = None, nearest: bool = True,
               above_power_mode: bool = False) -> int:
        """Pin the level nearest want_hz (nearest=False: refused far outside the table), lowered
        to the power mode's cap unless above_power_mode."""
    @property
    def last_pin_cap(self) -> tuple[int, int]:
        """(cap_hz, clamped_from_hz) of the last pin (0: none)."""
    def power_mode(self) -> dict[str, Any]:
        """id, name, gpu_max_mhz (None where not known) and unknown (why) of the nvpmodel mode."""
    def gpu_cap(self, state_dir: str | None = None) -> dict[str, Any]:
        """cap_mhz, devfreq_max_mhz, from_saved, nvpmodel_clk_cap_mhz (govcore/powermode.h)."""
    def saved_domains(self, state_dir: str | None = None) -> list[str]:
        """The clock domains beside the GPU's that the saved state holds (as a restore puts them back)."""
    def restore(self, state_dir: str | None = None) -> bool: ...
    def domains(self, emc_table_hz: tuple[int, ...] = ()) -> list[dict[str, Any]]:
        """The EMC and each cpufreq policy: name, kind, available, why, levels_hz, cap_hz,
        related_cpus, state (governor, min_hz, max_hz, rate_hz, locked) or None."""
    def pin_mode_hz(self, gpu_hz: int, emc_hz: int, cpu_hz: int, state_dir: str | None = None,
                    emc_table_hz: tuple[int, ...] = ()) -> tuple[int, dict[str, int]]:
        """GPU, EMC and every CPU policy pinned as one: (gpu_level_hz, {domain: level_hz})."""

class Snapshot:
    @property
    def t_ns(self) -> int: ...

class Sampler:
    rail_names: tuple[str, ...]
    has_load: bool
    board_id: str
    warning: str
    def __init__(self, sysfs_root: str = "/", rate_hz: float = 0.0, rails: list[str] | None = None,
                 ring_capacity: int = 0) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def snapshot(self) -> Snapshot: ...
    def window(self, a: Snapshot, b: Snapshot) -> dict[str, Any]:
        """duration_s, energy_j, avg_power_w (per rail), gpu_util_pct, samples, read_errors, rate_hz."""
    def stats(self) -> dict[str, Any]: ...
    def trace(self) -> tuple[array, dict[str, array], array | None]:
        """(t_ns, {rail: mW}, GPU load % or None), oldest sample first."""

BUILTIN_POLICIES: tuple[tuple[str, str], ...]
SAVING_MARGIN_SD: float
def energy_measures() -> tuple[str, ...]: ...
class Tree:
    def __init__(self, model_dir: str | PathLike[str] | None = None, board_id: str | None = None,
                 measure: str | None = None) -> None: ...
    @property
    def origin(self) -> dict: ...
    @property
    def expected_savings(self) -> dict | None: ...
    @property
    def name(self) -> str: ...
    @property
    def feature_names(self) -> tuple[str, ...]: ...
    @property
    def classes_mhz(self) -> tuple[float, ...]: ...
    @property
    def ffg_mhz(self) -> float: ...
    @property
    def board_id(self) -> str | None:
        """The board the tree was trained on (pydvfs.device.table id), None if not known."""
    @property
    def levels_mhz(self) -> tuple[float, ...]:
        """The GPU clock table it was trained on (empty: not known)."""
    @property
    def default_util_pct(self) -> tuple[float, float]: ...
    @property
    def provenance(self) -> dict[str, str]:
        """data_file, data_sha256 and trained_utc of the tree."""
    def features(self, workload: tuple) -> tuple[float, ...]: ...
    def propose(self, workload: tuple) -> float: ...

# workload: (is_decoder, gpu_util_pct or None, layers, hidden, seq_len)
def tree_features(feature_names: tuple[str, ...], default_util_pct: tuple[float, float],
                  workload: tuple) -> tuple[float, ...]:
    """govcore's gc_features for a tree read as data (pydvfs/policy/tree_data.py)."""
def model_is_decoder(model: str) -> bool: ...
def propose_rules(workload: tuple) -> float: ...
def features(names: Sequence[str], workload: tuple, default_util_pct: tuple[float, float] = ...) -> tuple[float, ...]: ...
def apply_request(policy: str, workload: tuple, model: str, objective: str = "energy",
                  max_slowdown_pct: float | None = None, energy: str | None = None, tree: str | None = None,
                  dry_run: bool = False) -> str:
    """The daemon's apply request line (protocol.c's gc_request_format_apply, checked by its parser)."""
def measure_label(measure: str) -> str:
    """An energy measure's name in text ("module", "CPU+GPU"): gc_measure_label."""
def goal_text(objective: str = "energy", max_slowdown_pct: float | None = None, energy: str | None = None) -> str:
    """A goal in words, as govcore says it (gc_goal_text)."""
def decision_text(policy: str, freq_mhz: float | None, policy_mhz: float | None = None, objective: str = "energy",
                  max_slowdown_pct: float | None = None, energy: str | None = None,
                  trade: dict | None = None) -> tuple[str, list[str]]:
    """(the clock line, [goal, bound, trade lines]) of a decision (govcore/decision_text.c)."""
def decide(board: Board, tree: Tree, policy: str, workload: tuple | None, roofline: Roofline | None = None,
           objective: str = "energy", max_slowdown_pct: float | None = None) -> dict[str, float | int]:
    """proposed_mhz, level_hz (0: MAXN), policy_level_hz (before the slowdown bound), and the
    trade predicted by ``roofline`` against the top level: trade_vs_hz (0: none), trade_j_pct,
    trade_s_pct. A bound needs ``roofline`` (except for maxn); edp/ed2p only the roofline policy.
    expected_saving_pct and saving_spread_pct (None: the tree does not know), kept_from_hz and
    kept_reason (a level not clearly better than MAXN, left to the board's governor),
    saving_range_pct ([low, high] across the board's uncertainty family, a built-in mlg's; None
    otherwise: gc_saving_range). workload
    None: ffg and maxn only. Nothing is written."""
def apply(board: Board, tree: Tree, policy: str, workload: tuple, state_dir: str | None = None,
          roofline: Roofline | None = None, objective: str = "energy",
          max_slowdown_pct: float | None = None, above_power_mode: bool = False) -> dict[str, float | int]:
    """decide's record, pinned (maxn: restored), with cap_hz and clamped_from_hz (0: none)."""
def parse_nvpmodel_status(text: str) -> int | None:
    """The mode id of a /var/lib/nvpmodel/status text; None if garbled."""
def parse_nvpmodel_conf(text: str, mode_id: int) -> tuple[str, int] | None:
    """(name, GPU MAX_FREQ Hz, 0: no cap) of POWER_MODEL mode_id; None if absent or garbled."""

class Roofline:
    """The roofline policy's board constants, read strictly (in C) from a roofline.txt."""
    def __init__(self, path: str | PathLike[str]) -> None: ...
    def energy_j(self, workload: tuple, mhz: float) -> float:
        """Predicted energy per token (J) at a clock (MHz)."""
    def time_s(self, workload: tuple, mhz: float) -> float:
        """Predicted time per token (s, in the model's gauge) at a clock (MHz): a/f + b."""
    def propose(self, workload: tuple, levels_mhz: Sequence[float]) -> float:
        """The level with the lowest predicted energy (ties: the lower)."""

MODEL_FORMAT: int  # policy.h GC_MODEL_FORMAT: the model folder manifest's format
def build_info() -> dict[str, object]:
    """version, git_describe, builtin_tree_sha256, can_load_policies, version_text."""
def raise_for(rc: int, message: str) -> None:
    """Raise the pydvfs error for a govcore code (0 or -errno); nothing for rc >= 0."""

class Lock:
    """The GPU's owner lock (govcore/lock.h), taken in the constructor (waiting up to wait_ms)."""
    def __init__(self, board: Board, wait_ms: int = 0) -> None: ...
    @property
    def path(self) -> str: ...
    @property
    def held(self) -> bool: ...
    def release(self) -> None: ...
def lock_holder(board: Board) -> int:
    """The pid holding the GPU's lock: 0 if none, -1 if its pid cannot be read."""

def read_model_file(model_dir: str | PathLike, name: str, limit: int = ...) -> bytes: ...
