"""The simulator prices how a run trains (issue 28): LoRA, QLoRA and 16-bit autocast on every
board's profile, the decoders of the catalogue, and sweeps/datasets/curves that carry them."""
from __future__ import annotations

import csv

import pytest

from pydvfs.characterise import dataset as ds
from pydvfs.policy.curves import curves_from_frame
from pydvfs.sim.catalogue import (
    ARCHITECTURES,
    METHODS,
    PEFT_KINDS,
    PRECISIONS,
    SFT_MODELS,
    Method,
    get_method,
    get_workload,
)
from pydvfs.sim.model import default_params, operating_point, step_work
from pydvfs.sim.profiles import board_ids, profile
from pydvfs.sim.sweep import sweep_rows

P = default_params()


def _energy(w, board, mhz):
    op = operating_point(w, "fixed", mhz, P, board=board)
    return op.role_power_w["module"] * op.t_step_s, op.t_step_s


def test_full_fp32_is_the_calibrated_model_unchanged():
    # operating points computed before the training methods existed (same parameters)
    cases = [("agx-orin", "bert-base", "QNLI", 0.8025672618650432, "VDD_GPU_SOC", 8.162454666189754),
             ("orin-nano-super", "pythia-1b", "SST-2", 5.311322698280844, "VDD_IN", 7.401855213470574),
             ("agx-xavier", "gemma-2b", "QNLI", 56.615796536737186, "GPU", 1.9176878760121816)]
    for board, model, task, t_step, rail, watts in cases:
        w = get_workload(model, task)
        assert w.name == f"{model}/{task}" and w.method == Method() == get_method("full-fp32")
        op = operating_point(w, "fixed", 612, P, board=board)
        assert op.t_step_s == pytest.approx(t_step, rel=1e-12) and op.power_w[rail] == pytest.approx(watts, rel=1e-12)


def test_decoder_catalogue_from_published_configs():
    assert set(SFT_MODELS) >= {"qwen2.5-0.5b", "qwen2.5-1.5b", "llama-3.2-1b", "smollm2-135m", "smollm2-360m",
                               "smollm2-1.7b", "gemma-2-2b", "gemma-3-1b", "phi-3.5-mini"}
    for name in SFT_MODELS:
        a = ARCHITECTURES[name]
        assert a.head == "lm" and a.gated_mlp
        assert abs(a.params / a.params_published - 1) < 0.01, (name, a.params, a.params_published)
    # the methods: full, LoRA and QLoRA in fp32 and bf16; names govcore knows
    from pydvfs import _core
    assert PEFT_KINDS == _core.PEFT_NAMES and PRECISIONS == _core.PRECISION_NAMES
    assert {(m.peft, m.precision) for m in METHODS.values()} == {(k, p) for k in PEFT_KINDS for p in ("fp32", "bf16")}
    w = get_workload("qwen2.5-0.5b", "QNLI", method="qlora-bf16")
    assert w.name == "qwen2.5-0.5b/QNLI@qlora-bf16"
    wl = w.workload()
    assert (wl.model, wl.layers, wl.hidden, wl.peft, wl.rank, wl.precision, wl.weight_bits_effective) == \
        ("qwen2", 24, 896, "qlora", 16, "bf16", 4)
    assert w.trainable_params == 24 * 16 * ((896 + 896) + (896 + 128))  # q and v adapters of rank 16


@pytest.mark.parametrize("board", board_ids())
def test_lora_is_cheaper_than_full_and_qlora_adds_traffic(board):
    top = profile(board).levels_mhz[-1]
    for model in ("smollm2-135m", "llama-3.2-1b"):
        for prec in ("fp32", "bf16"):
            full, lora, qlora = (get_workload(model, "QNLI", method=f"{k}-{prec}") for k in ("full", "lora", "qlora"))
            sf, sl, sq = (step_work(w, P, board=board) for w in (full, lora, qlora))
            assert sl.flops < sf.flops and sl.flops > 0.6 * sf.flops  # ~4N of 6N, attention and adapters on top
            assert sl.bytes < sf.bytes  # no optimizer state of the frozen base
            assert sq.bytes > sl.bytes and sq.kernels > sl.kernels  # dequantisation
            (e_f, t_f), (e_l, t_l), (e_q, t_q) = (_energy(w, board, top) for w in (full, lora, qlora))
            assert e_l < e_f and t_l < t_f and e_l < e_q < e_f


@pytest.mark.parametrize("board", board_ids())
def test_sixteen_bit_autocast_where_the_board_has_the_units(board):
    prof = profile(board)
    top = prof.levels_mhz[-1]
    w32, w16 = get_workload("qwen2.5-1.5b", "MRPC", method="full-fp32"), get_workload("qwen2.5-1.5b", "MRPC", method="full-bf16")
    (e32, t32), (e16, t16) = _energy(w32, board, top), _energy(w16, board, top)
    cs32 = step_work(w32, P, board=board)
    if prof.tensor_ratio["bf16"] > 1:  # Ampere and later: compute-bound GEMMs run on tensor cores
        assert t16 < 0.6 * t32 and e16 < 0.6 * e32
    else:  # no bf16 units (Xavier, Nano): only the halved activation traffic helps
        assert t32 * 0.9 < t16 <= t32 and step_work(w16, P, board=board).eff == cs32.eff
    fp16 = Method("none", precision="fp16")
    t_fp16 = _energy(get_workload("qwen2.5-1.5b", "MRPC", method=fp16), board, top)[1]
    assert (t_fp16 < 0.8 * t32) == (prof.tensor_ratio["fp16"] * P.tc_eff_rel > 1)


def test_the_bf16_optimum_moves_down_on_the_agx_orin():
    levels = profile("agx-orin").levels_mhz

    def best(w):
        return min(levels, key=lambda f: _energy(w, "agx-orin", f)[0])

    for model in ("qwen2.5-0.5b", "gemma-3-1b"):
        assert best(get_workload(model, "QNLI", method="full-bf16")) < best(get_workload(model, "QNLI"))


def test_sweep_rows_carry_the_method_into_datasets_and_curves(tmp_path):
    rows = list(sweep_rows(models=["smollm2-135m"], tasks=["SST-2"], freqs_mhz=(612.0, 1300.5),
                           methods=("full-fp32", "lora-bf16")))
    path = tmp_path / "s.csv"
    ds.write_rows(path, rows)
    curves = {c.workload.name: c.workload for c in curves_from_frame(ds.read_dataframe(path))}
    full, lora = curves["smollm2-135m/SST-2"], curves["smollm2-135m/SST-2@lora-bf16"]
    assert (full.peft, full.precision, full.rank) == ("none", "fp32", None)
    assert (lora.peft, lora.rank, lora.precision, lora.batch_size) == ("lora", 16, "bf16", 16)
    assert lora.trainable_params == get_workload("smollm2-135m", "SST-2", method="lora-bf16").trainable_params
    assert lora.tokens_per_step == pytest.approx(16 * 13.32)
    # a dataset written before the method columns still loads: every run full fp32
    old = tmp_path / "old.csv"
    with open(old, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=ds.PRE_METHOD_COLUMN_NAMES, lineterminator="\n", extrasaction="ignore")
        wr.writeheader()
        for r in rows[:3]:
            wr.writerow({k: ds.validate_row(r)[k] for k in ds.PRE_METHOD_COLUMN_NAMES})
    assert list(ds.read_dataframe(old).columns) == list(ds.COLUMN_NAMES)
    assert all(r["peft"] is None for r in ds.read_rows(old))
    with pytest.raises(Exception, match="how a workload trains"):
        ds.DatasetWriter(old)


def test_unknown_method_is_refused():
    from pydvfs.errors import InvalidValueError

    with pytest.raises(InvalidValueError, match="unknown training method"):
        get_method("lora-fp8")
    with pytest.raises(InvalidValueError, match="precision"):
        Method("lora", precision="fp8")


def test_memory_need_orders_the_methods_and_boards():
    from pydvfs.sim.model import fits, memory_need_gb

    for model in ("qwen2.5-1.5b", "gemma-2-2b"):
        need = {t: memory_need_gb(get_workload(model, "QNLI", method=t)) for t in METHODS}
        assert need["full-fp32"] > need["lora-fp32"] > need["qlora-fp32"]
        assert need["lora-fp32"] > need["lora-bf16"] > need["qlora-bf16"]
    full = get_workload("qwen2.5-1.5b", "QNLI")  # ~1.5B x 16 B of weights, gradients and AdamW state
    assert 1.54 * 16 < memory_need_gb(full) < 40
    assert fits(full, "agx-orin") and not fits(full, "orin-nano-super") and not fits(full, "orin-nx")
    assert fits(get_workload("qwen2.5-1.5b", "QNLI", method="qlora-bf16"), "orin-nano-super")
    assert fits(get_workload("smollm2-135m", "QNLI"), "orin-nano-super")
