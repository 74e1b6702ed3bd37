"""What the governor knows of a fine-tuning workload, from whatever the user has at hand."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from ..errors import InvalidValueError


def _is_decoder(model: str) -> bool:
    """The model family, from govcore's one list (InvalidValueError if unknown)."""
    from .. import _core
    return _core.model_is_decoder(model)


def _number(value, what: str) -> float:
    """A number given as int, float or text; InvalidValueError naming the key otherwise."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidValueError(f"workload {what} must be a number, got {str(value)[:40]!r}") from None


def _whole(value, what: str) -> int:
    """A count given as int, float or text: it must be a whole, finite number."""
    v = _number(value, what)
    if not math.isfinite(v) or v != int(v):
        raise InvalidValueError(f"workload {what} must be a whole number, got {value!r}")
    return int(v)


@dataclass(frozen=True)
class Workload:
    """A fine-tuning workload. ``seq_len`` is the average number of tokens per training sample
    (without padding); ``util_pct`` the GPU utilisation measured on it, if known."""

    model: str
    layers: int
    hidden: int
    seq_len: float
    util_pct: float | None = None
    name: str | None = None

    def __post_init__(self):
        _is_decoder(self.model)
        for field_name in ("layers", "hidden", "seq_len"):
            value = getattr(self, field_name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InvalidValueError(f"workload {field_name} must be a positive number, got {value!r}")
        if self.util_pct is not None and not (0.0 <= float(self.util_pct) <= 100.0):  # NaN fails too
            raise InvalidValueError(f"workload util_pct must be within 0..100, got {self.util_pct!r}")

    @property
    def is_decoder(self) -> bool:
        return _is_decoder(self.model)

    def as_core(self) -> tuple:
        """The tuple the C policies take: (is_decoder, util or None, layers, hidden, seq_len)."""
        return (self.is_decoder, self.util_pct, self.layers, self.hidden, self.seq_len)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_any(cls, obj: Any, **overrides) -> "Workload":
        """A Workload from a Workload, a dict, or a Hugging Face config or model.

        Hugging Face objects give the model type, layers and hidden size; the average sequence
        length (and utilisation) must come as keyword arguments or a ``seq_len`` key."""
        if isinstance(obj, Workload):
            return replace(obj, **overrides) if overrides else obj
        if isinstance(obj, Mapping):
            return cls._from_mapping({**obj, **overrides})
        config = getattr(obj, "config", obj)  # a model carries its config
        if hasattr(config, "model_type") and hasattr(config, "to_dict"):
            return cls._from_hf_config(config, overrides)
        raise InvalidValueError(
            f"cannot read a workload from {type(obj).__name__}: give a pydvfs.Workload, a dict, "
            "or a Hugging Face config/model")

    @classmethod
    def _from_mapping(cls, d: Mapping) -> "Workload":
        aliases = {"seq-len": "seq_len", "avg_seq_len": "seq_len", "util": "util_pct",
                   "gpu_util_pct": "util_pct", "num_hidden_layers": "layers", "hidden_size": "hidden"}
        d = {aliases.get(k, k): v for k, v in d.items()}
        missing = [k for k in ("model", "layers", "hidden", "seq_len") if d.get(k) in (None, "")]
        if missing:
            raise InvalidValueError(f"workload is missing {', '.join(missing)}")
        try:
            return cls(model=str(d["model"]), layers=_whole(d["layers"], "layers"),
                       hidden=_whole(d["hidden"], "hidden"), seq_len=_number(d["seq_len"], "seq_len"),
                       util_pct=None if d.get("util_pct") in (None, "") else _number(d["util_pct"], "util_pct"),
                       name=d.get("name"))
        except InvalidValueError:
            raise  # names its key already
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidValueError(f"bad workload value: {e}") from None

    @classmethod
    def _from_hf_config(cls, config: Any, overrides: dict) -> "Workload":
        c = config.to_dict()
        model_type = str(c.get("model_type", ""))
        layers = c.get("num_hidden_layers", c.get("n_layer", c.get("num_layers")))
        hidden = c.get("hidden_size", c.get("n_embd", c.get("d_model")))
        try:
            _is_decoder(model_type)
        except InvalidValueError:
            decoder = bool(c.get("is_decoder")) or any(a.endswith("ForCausalLM") for a in c.get("architectures") or [])
            model_type = "decoder" if decoder else "encoder"
        return cls._from_mapping({"model": model_type, "layers": layers, "hidden": hidden,
                                  "name": c.get("_name_or_path") or None, **overrides})
