"""One rank of measured fine-tuning runs; launched by ``collect`` through torchrun.

For each strategy asked for (one process group serves them all, which saves a launch): builds a
BERT classifier from ``transformers.BertConfig`` (random weights, no download), wraps it for the
strategy, trains on a fixed synthetic batch, and has rank 0 write one JSON record per strategy:
time of the measured steps, energy (NVML, summed over ranks; NaN without a sensor) and the first
step's loss (used by the tests to check that sharding did not change the maths).

- ``fsdp``: FSDP2, ``torch.distributed.fsdp.fully_shard`` on every encoder layer and the root;
  the global batch is split across ranks.
- ``tp``: ``parallelize_module`` with ColwiseParallel on query/key/value and the MLP's first
  linear, RowwiseParallel on the attention output and MLP output linears; every rank sees the
  whole batch.
- ``single``: one process, no wrapping (the baseline the speedups are taken against).

Backend: NCCL on CUDA, gloo on CPU with a CPU device mesh (``init_device_mesh("cpu", ...)``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time


def _args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--strategies", required=True, help="comma list of single, tp, fsdp")
    for name in ("layers", "hidden", "heads", "ff", "seq-len", "batch", "steps", "warmup"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--out", required=True)
    return p.parse_args(argv)


def _tp_plan():
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return {
        "attention.self.query": ColwiseParallel(),
        "attention.self.key": ColwiseParallel(),
        "attention.self.value": ColwiseParallel(),
        "attention.output.dense": RowwiseParallel(),
        "intermediate.dense": ColwiseParallel(),
        "output.dense": RowwiseParallel(),
    }


def main(argv=None) -> int:
    import torch
    import torch.distributed as dist

    a = _args(argv)
    strategies = [s.strip() for s in a.strategies.split(",") if s.strip()]
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    records = {}
    for strategy in strategies:
        if strategy not in ("single", "tp", "fsdp"):
            raise SystemExit(f"unknown strategy {strategy}")
        if strategy == "single" and world != 1:
            raise SystemExit("strategy single runs on exactly one process")
        records[strategy] = _run(a, strategy, torch, dist, cuda, device, rank, world, local)
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(records, f)
    dist.destroy_process_group()
    return 0


def _run(a, strategy, torch, dist, cuda, device, rank, world, local) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                     num_attention_heads=a.heads, intermediate_size=a.ff,
                     max_position_embeddings=max(a.seq_len, 8), hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(cfg).to(device)
    mesh = init_device_mesh(device.type, (world,))
    if strategy == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model.bert.encoder.layer:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    elif strategy == "tp":
        from torch.distributed.tensor.parallel import parallelize_module

        if a.heads % world or a.ff % world:
            raise SystemExit(f"tp over {world} ranks needs heads and ff divisible by {world}")
        for layer in model.bert.encoder.layer:
            parallelize_module(layer, mesh, _tp_plan())
            layer.attention.self.num_attention_heads = a.heads // world   # heads per rank
            layer.attention.self.all_head_size = a.hidden // world
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq_len), generator=g)
    labels = torch.randint(0, 2, (a.batch,), generator=g)
    if strategy == "fsdp":
        if a.batch % world:
            raise SystemExit(f"fsdp over {world} ranks needs a batch divisible by {world}")
        ids, labels = ids.chunk(world)[rank], labels.chunk(world)[rank]
    ids, labels = ids.to(device), labels.to(device)

    def step():
        out = model(input_ids=ids, labels=labels)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach()

    first = step()
    if strategy == "fsdp":   # the loss of the global batch: mean over the ranks' halves
        _avg(dist, first, world)
    for _ in range(max(0, a.warmup - 1)):
        step()
    _sync(torch, cuda, dist)
    meter = _energy_meter(local) if cuda else None
    e0 = meter() if meter else None
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    _sync(torch, cuda, dist)
    elapsed = time.perf_counter() - t0
    energy = float("nan")
    if meter:
        mine = torch.tensor([meter() - e0], dtype=torch.float64, device=device)
        dist.all_reduce(mine)
        energy = float(mine.item())
    return {"time_s": elapsed, "energy_j": None if math.isnan(energy) else energy,
            "first_loss": float(first.item()), "world": world, "backend": dist.get_backend(),
            "hardware": (torch.cuda.get_device_name(device).replace(" ", "-").lower() if cuda
                         else f"cpu-{dist.get_backend()}")}


def _avg(dist, t, world):
    dist.all_reduce(t)        # SUM, then divide: gloo has no AVG
    t /= world


def _sync(torch, cuda, dist):
    if cuda:
        torch.cuda.synchronize()
    dist.barrier()


def _energy_meter(index):
    """A function returning this GPU's energy counter in J, or None without NVML support."""
    try:
        import pynvml  # lazily: only where CUDA exists
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)   # mJ; raises if unsupported
    except Exception:   # no pynvml, no NVML, or a GPU without the counter: no energy, not a guess
        return None
    return lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0


if __name__ == "__main__":
    raise SystemExit(main())
