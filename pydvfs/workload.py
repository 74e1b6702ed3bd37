"""What the governor knows of a fine-tuning workload, from whatever the user has at hand.

How it trains (issue 28) besides its shape: ``peft`` (``none`` full fine-tuning, ``lora``,
``qlora``), the adapters' ``rank`` or the ``trainable_params`` count, the frozen weights'
``weight_bits`` (32/16/8/4), the compute ``precision`` (``fp32``/``fp16``/``bf16``), the
``batch_size`` and the ``tokens_per_step`` (real tokens of a step, padding excluded where the
collator says so). Their defaults keep the meaning a workload had before: full fp32 fine-tuning.
The names of the PEFT kinds and precisions are govcore's (``_core.PEFT_NAMES``,
``_core.PRECISION_NAMES``): the C parser of ``--workload`` and this class read one list.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from .errors import InvalidValueError

# PEFT's LoraConfig default rank (r=8): the rank of a LoRA workload that names none.
DEFAULT_LORA_RANK = 8
# The weights' bits a workload may name (32/16: as trained; 8/4: quantised, QLoRA).
WEIGHT_BITS = (32, 16, 8, 4)


def effective_weight_bits(peft: str, weight_bits: int | None, precision: str) -> int:
    """The weights' bits as the GEMMs read them: as given, else 4 for qlora, 16 for lora under
    fp16/bf16 (a frozen base loaded in half precision), else 32 (fp32, or full fine-tuning's fp32
    master weights under autocast). C twin: gc_weight_bits."""
    if weight_bits:
        return int(weight_bits)
    if peft == "qlora":
        return 4
    if peft == "lora" and precision != "fp32":
        return 16
    return 32


def trainable_share(peft: str, rank: int | None, trainable_params: int | None, layers: float,
                    hidden: float) -> float:
    """Trained share of the layer stack's weights (12 L d^2): the trainable count where given,
    else 1 for full fine-tuning and, for LoRA, adapters of rank r on the query and value
    projections (PEFT's default targets for Llama/Qwen/Gemma/Phi): 2 x r (d + d) per layer.
    At most 1. C twin: gc_trainable_share."""
    stack = 12.0 * layers * hidden * hidden
    if trainable_params:
        return min(1.0, float(trainable_params) / stack)
    if peft == "none":
        return 1.0
    return min(1.0, 4.0 * (rank or DEFAULT_LORA_RANK) * hidden * layers / stack)


def _is_decoder(model: str) -> bool:
    """The model family, from govcore's one list (InvalidValueError if unknown)."""
    from . import _core
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


# The keys of a workload (``--workload``, dicts, sweep CSVs) beyond the dataclass's own names.
WORKLOAD_ENV = "PYDVFS_WORKLOAD"  # a sweep cell's workload spec (pydvfs.characterise.sweep.workload_env)
ALIASES = {"seq-len": "seq_len", "avg_seq_len": "seq_len", "util": "util_pct",
           "gpu_util_pct": "util_pct", "num_hidden_layers": "layers", "hidden_size": "hidden",
           "r": "rank", "lora_r": "rank", "bits": "weight_bits", "dtype": "precision",
           "per_device_train_batch_size": "batch_size"}


@dataclass(frozen=True)
class Workload:
    """A fine-tuning workload. ``seq_len`` is the average number of tokens per training sample
    (without padding); ``util_pct`` the GPU utilisation measured on it, if known.

    How it trains: ``peft`` ``none`` (full fine-tuning, the default), ``lora`` or ``qlora``;
    ``rank`` the LoRA rank (None: PEFT's default, 8) or ``trainable_params`` the trained
    parameter count (wins over ``rank``); ``weight_bits`` the bits of the (frozen) weights as the
    GEMMs read them: 32/16, or 4/8 (quantised, ``qlora`` only); None: 4 for qlora, 16 for lora
    in fp16/bf16, else 32 (:attr:`weight_bits_effective`); ``precision`` of the compute: fp32
    (default), fp16 or bf16 (autocast); ``batch_size`` samples and ``tokens_per_step`` real
    tokens per optimizer step (None: unknown)."""

    model: str
    layers: int
    hidden: int
    seq_len: float
    util_pct: float | None = None
    name: str | None = None
    peft: str = "none"
    rank: int | None = None
    trainable_params: int | None = None
    weight_bits: int | None = None
    precision: str = "fp32"
    batch_size: int | None = None
    tokens_per_step: float | None = None

    def __post_init__(self):
        """Types here; values by govcore's one check (``_core.check_workload``: every field
        within its bounds, the keys that agree, a workload some Jetson can train)."""
        from . import _core

        _is_decoder(self.model)
        for name in ("layers", "hidden", "seq_len", "util_pct", "rank", "trainable_params", "weight_bits",
                     "batch_size", "tokens_per_step"):
            value = getattr(self, name)
            if value is None and name not in ("layers", "hidden", "seq_len"):
                continue  # not given
            # as_core() gives a count of 0 and a util_pct of -1 for "not given": refuse them here
            if (not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0
                    or (value == 0 and name != "util_pct")):
                raise InvalidValueError(f"workload {name} must be a positive number, got {value!r}")
        _core.check_workload(self.as_core())

    @property
    def is_decoder(self) -> bool:
        return _is_decoder(self.model)

    @property
    def weight_bits_effective(self) -> int:
        """The weights' bits as the GEMMs read them (the default resolved: see the class)."""
        return effective_weight_bits(self.peft, self.weight_bits, self.precision)

    @property
    def lora_rank(self) -> int | None:
        """The adapters' rank (PEFT's default where none was given); None for full fine-tuning."""
        return None if self.peft == "none" else (self.rank or DEFAULT_LORA_RANK)

    @property
    def trainable_share(self) -> float:
        """Trained share of the layer stack's weights (1 for full fine-tuning; the feature)."""
        return trainable_share(self.peft, self.rank, self.trainable_params, self.layers, self.hidden)

    def as_core(self) -> tuple:
        """The tuple the C policies take: (is_decoder, util or None, layers, hidden, seq_len,
        peft, rank or 0, trainable_params or 0, weight_bits or 0, precision, batch_size or 0,
        tokens_per_step or 0)."""
        return (self.is_decoder, self.util_pct, self.layers, self.hidden, self.seq_len,
                self.peft, self.rank or 0, self.trainable_params or 0, self.weight_bits or 0,
                self.precision, self.batch_size or 0, self.tokens_per_step or 0.0)

    def to_dict(self) -> dict:
        return asdict(self)

    def method_columns(self) -> dict:
        """The dataset's columns of how it trains (pydvfs.characterise.dataset.METHOD_COLUMNS): empty (None)
        where they are the default, as in a dataset written before them."""
        return {"peft": None if self.peft == "none" else self.peft, "rank": self.rank,
                "trainable_params": self.trainable_params, "weight_bits": self.weight_bits,
                "precision": None if self.precision == "fp32" else self.precision,
                "tokens_per_step": self.tokens_per_step}

    def spec(self) -> str:
        """The ``--workload`` spelling of this workload (keys left out where they are the default),
        read back to the same Workload by pydvfs and govcore."""
        out = [f"model={self.model}", f"layers={self.layers}", f"hidden={self.hidden}", f"seq_len={self.seq_len:g}"]
        if self.util_pct is not None:
            out.append(f"util_pct={self.util_pct:g}")
        from . import _core
        for key in _core.METHOD_KEYS:  # govcore's order (gc_method_keys)
            value = getattr(self, key)
            if value is not None and not (key == "peft" and value == "none") and not (key == "precision" and value == "fp32"):
                out.append(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}")
        return ",".join(out)

    @classmethod
    def from_any(cls, obj: Any, **overrides) -> "Workload":
        """A Workload from a Workload, a dict, or a Hugging Face config or model.

        Hugging Face objects give the model type, layers and hidden size; the average sequence
        length (and utilisation) must come as keyword arguments or a ``seq_len`` key. A
        ``PeftModel`` gives its adapters (see :func:`method_of_model`)."""
        if isinstance(obj, Workload):
            return replace(obj, **overrides) if overrides else obj
        if isinstance(obj, Mapping):
            return cls._from_mapping({**obj, **overrides})
        config = getattr(obj, "config", obj)  # a model carries its config
        if hasattr(config, "model_type") and hasattr(config, "to_dict"):
            method = method_of_model(obj) if obj is not config else {}
            return cls._from_hf_config(config, {**method, **overrides})
        raise InvalidValueError(
            f"cannot read a workload from {type(obj).__name__}: give a pydvfs.Workload, a dict, "
            "or a Hugging Face config/model")

    @classmethod
    def _from_mapping(cls, d: Mapping) -> "Workload":
        d = {ALIASES.get(k, k): v for k, v in d.items()}
        missing = [k for k in ("model", "layers", "hidden", "seq_len") if d.get(k) in (None, "")]
        if missing:
            raise InvalidValueError(f"workload is missing {', '.join(missing)}")

        def opt(key, conv):
            v = d.get(key)
            if v in (None, ""):
                return None
            try:
                return conv(v, key)
            except InvalidValueError:
                raise
            except (TypeError, ValueError, OverflowError):
                raise InvalidValueError(f"workload {key} must be a number, got {v!r}") from None

        number = _number
        return cls(model=str(d["model"]), layers=opt("layers", _whole), hidden=opt("hidden", _whole),
                   seq_len=opt("seq_len", number), util_pct=opt("util_pct", number),
                   name=d.get("name"),
                   peft=str(d.get("peft") or "none").lower(),
                   rank=opt("rank", _whole), trainable_params=opt("trainable_params", _whole),
                   weight_bits=opt("weight_bits", _whole),
                   precision=str(d.get("precision") or "fp32").lower(),
                   batch_size=opt("batch_size", _whole),
                   tokens_per_step=opt("tokens_per_step", number))

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


_BITS_OF_DTYPE = {"float32": 32, "float16": 16, "bfloat16": 16, "int8": 8, "uint8": 8}


def parse_workload(spec: str) -> dict:
    """``name=bert-base/sst2,model=bert,layers=12,hidden=768,seq_len=64,task=sst2`` -> dict, by
    govcore's one grammar of a workload (``_core.parse_workload``: the keys of
    ``_core.WORKLOAD_FIELDS``, each once and spelled exactly, plain decimal numbers within their
    bounds; docs/policy.md, "The workload grammar") and checked as a :class:`Workload`."""
    from . import _core

    out = _core.parse_workload(spec)
    Workload.from_any(out)  # the keys it needs, and the checks across keys
    if "name" not in out:
        out["name"] = f"{out['model']}-L{out['layers']}-H{out['hidden']}" + (f"/{out['task']}" if "task" in out else "")
    return out


def method_of_model(model: Any) -> dict:
    """How a Hugging Face model trains, from what it carries: a ``PeftModel``'s adapter config
    (LoRA rank, its trainable parameter count), the base model's quantisation config
    (bitsandbytes 4/8-bit: ``qlora``) and its weights' dtype. Keys of :class:`Workload`; the
    ones it cannot tell are left out. Reads attributes only (no import of peft or bitsandbytes)."""
    out: dict = {}
    peft_config = getattr(model, "peft_config", None)
    if isinstance(peft_config, Mapping) and peft_config:
        adapter = getattr(model, "active_adapter", None)
        if isinstance(adapter, (list, tuple)):
            adapter = adapter[0] if adapter else None
        cfg = peft_config.get(adapter) if adapter in peft_config else next(iter(peft_config.values()))
        peft_type = str(getattr(getattr(cfg, "peft_type", None), "value", getattr(cfg, "peft_type", ""))).lower()
        if peft_type in ("lora", "adalora", "loha", "lokr", "dora") or getattr(cfg, "r", None):
            out["peft"] = "lora"
            r = getattr(cfg, "r", None)
            if isinstance(r, int) and r >= 1:
                out["rank"] = r
        trainable = sum(p.numel() for p in model.parameters() if getattr(p, "requires_grad", False)) \
            if hasattr(model, "parameters") else 0
        if trainable >= 1:
            out["trainable_params"] = int(trainable)
    config = getattr(model, "config", None)
    q = getattr(config, "quantization_config", None)
    if q is not None:
        qd = q if isinstance(q, Mapping) else (q.to_dict() if hasattr(q, "to_dict") else vars(q))
        if qd.get("load_in_4bit") or qd.get("bits") == 4:
            out["weight_bits"] = 4
        elif qd.get("load_in_8bit") or qd.get("bits") == 8:
            out["weight_bits"] = 8
        if out.get("weight_bits") in (4, 8):
            out["peft"] = "qlora"
    if "weight_bits" not in out and out.get("peft") in ("lora",) and hasattr(model, "parameters"):
        frozen = next((p for p in model.parameters() if not getattr(p, "requires_grad", True)), None)
        bits = _BITS_OF_DTYPE.get(str(getattr(frozen, "dtype", "")).replace("torch.", ""))
        if bits in (16, 32):
            out["weight_bits"] = bits
    return out


def precision_of_args(args: Any) -> str | None:
    """The compute precision of a Hugging Face ``TrainingArguments`` (``bf16``/``fp16`` flags:
    autocast); None where it says neither (fp32)."""
    if getattr(args, "bf16", False):
        return "bf16"
    if getattr(args, "fp16", False):
        return "fp16"
    return None
