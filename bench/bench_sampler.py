"""Overhead and accuracy of the C sampler versus straightforward pure-Python samplers.

Same run, same fake board (4 INA3221 rails = 8 files + the GPU load file per sample), same
moving waveform written by the animator at 4 kHz, for each rate (100 Hz, 1 kHz, flat out):

- c          the govcore sampler thread (pread on kept-open files, C integration);
- py_reopen  a Python thread doing what zeus / jtop do: open, read, close each file per sample;
- py_pread   a Python thread with kept-open files and os.pread (the fair Python baseline);
- wakeup     the floor any periodic sampler pays: a C thread that wakes at the same rate and
             reads nothing, paced exactly as the govcore sampler thread (bench/wakeup_loop.c:
             timer slack 1 ns, absolute CLOCK_MONOTONIC deadlines, clock_nanosleep), so that the
             sampler's cost reads as a ratio to the wake-up's (not run flat out: it would spin).

Per run: CPU time per sample (the sampler thread's own CPU clock: CLOCK_THREAD_CPUTIME_ID in
C, time.thread_time_ns in Python), CPU % of one core, achieved rate, interval jitter p50/p99
(|interval - period|; raw intervals when flat out), and the energy error against the energy
the files actually held and against the analytic waveform. Ratios are against the Python
samplers of the same repeat. Medians over --repeats. Writes bench/results/sampler.json.

``--busy N`` keeps N busy loops (processes at the same priority) running through every run: the
sampler thread starved as on a loaded machine (CI shares its two cores), where its energy error
against what the files held is the question, not its CPU cost (bench/results/sampler_busy.json).

Caveat: a fake board's files live on an ordinary filesystem; a pread there costs ~0.3 us,
while a real INA3221 sysfs read goes over I2C (and may block until a conversion is ready), so
on a Jetson every sampler's per-sample cost is dominated by the kernel and the ratios shrink.

    PYTHONPATH=. python bench/bench_sampler.py [--repeats 3] [--duration 2] [--busy 0]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydvfs import _core  # noqa: E402
from pydvfs.device.animate import Waveform, animate  # noqa: E402
from pydvfs.device.fake import build_fake_board  # noqa: E402

RATES = {"100Hz": 100.0, "1kHz": 1000.0, "flat": -1.0}
WAVES = {
    "VDD_GPU_SOC": Waveform(voltage_mv=5000, base_ma=2000, sine_ma=800, sine_hz=3.0, step_ma=1000,
                            step_period_s=0.25),
    "VDD_CPU_CV": Waveform(voltage_mv=5000, base_ma=1000, sine_ma=300, sine_hz=1.7, step_ma=0),
}


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def jitter_us(t_ns, rate_hz):
    iv = [b - a for a, b in zip(t_ns, t_ns[1:])]
    if rate_hz > 0:
        period = 1e9 / rate_hz
        dev = [abs(x - period) / 1e3 for x in iv]
    else:
        dev = [x / 1e3 for x in iv]  # flat out: the raw interval
    return pct(dev, 50), pct(dev, 99)


def run_c(board, rate_hz, duration_s):
    s = _core.Sampler(str(board.root), rate_hz, None, 1 << 20)
    s.start()
    a = s.snapshot()
    time.sleep(duration_s)
    z = s.snapshot()
    s.stop()
    w = s.window(a, z)
    st = s.stats()
    t_ns, _, _ = s.trace()
    t_ns = list(t_ns)
    return {
        "samples": st["samples"], "cpu_ns": st["thread_cpu_ns"], "t_ns": t_ns,
        "t0_ns": a.t_ns, "t1_ns": z.t_ns, "energy_j": w["energy_j"], "overruns": st["overruns"],
    }


class PySampler(threading.Thread):
    """A plain Python sampler: trapezoid on mV x mA per rail, absolute-deadline pacing."""

    def __init__(self, rails, load_path, rate_hz, duration_s, reopen):
        super().__init__(daemon=True)
        self.rails, self.load_path = rails, load_path
        self.rate_hz, self.duration_s, self.reopen = rate_hz, duration_s, reopen
        self.result = None

    def run(self):
        rails, reopen = self.rails, self.reopen
        files = [p for _, v, i in rails for p in (v, i)] + [self.load_path]
        if reopen:
            def read_all():
                out = []
                for p in files:
                    with open(p) as f:
                        out.append(int(f.read()))
                return out
        else:
            fds = [os.open(p, os.O_RDONLY) for p in files]

            def read_all():
                return [int(os.pread(fd, 32, 0)) for fd in fds]
        n = len(rails)
        energy_uws = [0.0] * n
        last_p = None
        last_t = None
        ts = []
        period = 1e9 / self.rate_hz if self.rate_hz > 0 else 0
        cpu0 = time.thread_time_ns()
        start = time.monotonic_ns()
        deadline = start
        end = start + self.duration_s * 1e9
        while True:
            t0 = time.monotonic_ns()
            vals = read_all()
            t = (t0 + time.monotonic_ns()) // 2
            p = [vals[2 * k] * vals[2 * k + 1] for k in range(n)]  # uW
            if last_p is not None:
                dt = (t - last_t) / 1e9
                for k in range(n):
                    energy_uws[k] += (p[k] + last_p[k]) / 2 * dt
            last_p, last_t = p, t
            ts.append(t)
            if t >= end:
                break
            if period:
                deadline += period
                now = time.monotonic_ns()
                if deadline <= now:
                    deadline += ((now - deadline) // period + 1) * period
                time.sleep((deadline - now) / 1e9)
        cpu = time.thread_time_ns() - cpu0
        if not reopen:
            for fd in fds:
                os.close(fd)
        self.result = {
            "samples": len(ts), "cpu_ns": cpu, "t_ns": ts, "t0_ns": ts[0], "t1_ns": ts[-1],
            "energy_j": {rails[k][0]: energy_uws[k] / 1e6 for k in range(n)}, "overruns": None,
        }


def run_py(board, rate_hz, duration_s, reopen):
    rails = [(name, str(r.voltage_path), str(r.current_path)) for name, r in board.rails.items()]
    th = PySampler(rails, str(board.gpu_dir / "load"), rate_hz, duration_s, reopen)
    th.start()
    th.join()
    return th.result


def build_wakeup_loop(out_dir: Path) -> Path:
    """Compile bench/wakeup_loop.c (the baseline stays out of _core)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("bench_sampler: needs a C compiler for bench/wakeup_loop.c")
    exe = out_dir / "wakeup_loop"
    subprocess.run([cc, "-std=c99", "-O2", "-o", str(exe), str(Path(__file__).resolve().parent / "wakeup_loop.c"),
                    "-lpthread"], check=True)
    return exe


def run_wakeup(exe, rate_hz, duration_s):
    out = subprocess.run([str(exe), f"{rate_hz:g}", f"{duration_s:g}"], capture_output=True, text=True, check=True)
    wakeups, cpu_ns, overruns = (int(x) for x in out.stdout.split())
    return {"samples": wakeups, "cpu_us_per_sample": cpu_ns / wakeups / 1e3,
            "cpu_pct_of_core": cpu_ns / 1e9 / duration_s * 100, "achieved_rate_hz": wakeups / duration_s,
            "overruns": overruns}


def one_run(kind, board, rate_hz, duration_s, wakeup_exe=None):
    anim = animate(board, WAVES, rate_hz=4000, duration_s=duration_s + 2.0, load_permille=500)
    try:
        time.sleep(0.05)
        if kind == "wakeup":  # same conditions (the animator running), nothing read
            return run_wakeup(wakeup_exe, rate_hz, duration_s)
        if kind == "c":
            r = run_c(board, rate_hz, duration_s)
        else:
            r = run_py(board, rate_hz, duration_s, reopen=(kind == "py_reopen"))
    finally:
        anim.stop()
    t_ns = r["t_ns"]
    span_s = (t_ns[-1] - t_ns[0]) / 1e9
    errs_held, errs_exact = [], []
    for rail in WAVES:
        held = anim.written_energy_j(rail, r["t0_ns"], r["t1_ns"])
        exact = anim.energy_j(rail, r["t0_ns"], r["t1_ns"])
        errs_held.append(abs(r["energy_j"][rail] - held) / held * 100)
        errs_exact.append(abs(r["energy_j"][rail] - exact) / exact * 100)
    j50, j99 = jitter_us(t_ns, rate_hz)
    wall_s = (r["t1_ns"] - r["t0_ns"]) / 1e9
    return {
        "samples": r["samples"],
        "achieved_rate_hz": (len(t_ns) - 1) / span_s if span_s > 0 else 0.0,
        "cpu_us_per_sample": r["cpu_ns"] / r["samples"] / 1e3,
        "cpu_pct_of_core": r["cpu_ns"] / 1e9 / wall_s * 100,
        "jitter_p50_us": j50, "jitter_p99_us": j99,
        "energy_err_vs_held_pct": max(errs_held),
        "energy_err_vs_analytic_pct": max(errs_exact),
        "writer_max_gap_ms": anim.max_write_gap_s() * 1e3,
        "overruns": r["overruns"],
    }


def start_busy(n: int) -> list:
    """``n`` busy loops, each its own process at the caller's priority (stopped by pid)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds per run")
    ap.add_argument("--busy", type=int, default=0, help="busy loops running beside every run")
    ap.add_argument("--out", default=None, help="default: bench/results/sampler.json (sampler_busy.json with --busy)")
    args = ap.parse_args()
    if args.out is None:
        args.out = str(Path(__file__).resolve().parent / "results" / ("sampler_busy.json" if args.busy else "sampler.json"))
    busy = start_busy(args.busy)
    try:
        summary, runs = measure(args)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    load1, load5, _ = os.getloadavg()
    out = {
        "benchmark": "bench/bench_sampler.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_1m_5m": [load1, load5],
                    "note": "shared 2-core VM with other jobs running; fake board on ext4"},
        "params": {"repeats": args.repeats, "duration_s": args.duration, "files_per_sample": 9,
                   "busy_loops": args.busy,
                   "baseline": "wakeup: bench/wakeup_loop.c, the sampler thread's pacing with nothing read",
                   "writer_rate_hz": 4000, "rates": RATES},
        "median": summary,
        "runs": runs,
        "targets": {"rate_hz": ">= 1000 sustained", "cpu_pct_of_core_at_1kHz": "<= 2",
                    "cpu_per_sample_ratio_vs_python": ">= 20", "energy_err_pct": "<= 0.5",
                    "jitter_p99_us": "<= 200"},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def measure(args) -> tuple:
    """Every kind at every rate, --repeats times: (the medians and ratios per rate, the runs)."""
    kinds = ("c", "py_reopen", "py_pread", "wakeup")
    runs = {k: {r: [] for r in RATES} for k in kinds}
    with tempfile.TemporaryDirectory(prefix="bench-sampler-") as tmp:
        wakeup_exe = build_wakeup_loop(Path(tmp))
        board = build_fake_board(Path(tmp) / "board")
        for name in board.rails:
            board.set_rail(name, 5000, 500)
        for rep in range(args.repeats):
            for rate_name, rate_hz in RATES.items():
                for kind in kinds:
                    if kind == "wakeup" and rate_hz <= 0:
                        continue  # an empty loop flat out only spins: no baseline there
                    res = one_run(kind, board, rate_hz, args.duration, wakeup_exe)
                    runs[kind][rate_name].append(res)
                    tail = "" if kind == "wakeup" else (
                        f"  jitter p99 {res['jitter_p99_us']:8.1f} us  err {res['energy_err_vs_held_pct']:.3f} % "
                        f"(analytic {res['energy_err_vs_analytic_pct']:.3f} %)")
                    print(f"[{rep + 1}/{args.repeats}] {rate_name:>5} {kind:<9} "
                          f"{res['cpu_us_per_sample']:7.2f} us/sample  {res['cpu_pct_of_core']:6.2f} % core  "
                          f"{res['achieved_rate_hz']:9.1f} Hz{tail}", flush=True)
    summary = {}
    for rate_name in RATES:
        row = {}
        for kind in kinds:
            if not runs[kind][rate_name]:
                continue
            keys = runs[kind][rate_name][0].keys()
            row[kind] = {k: statistics.median(r[k] for r in runs[kind][rate_name])
                         for k in keys if runs[kind][rate_name][0][k] is not None}
            if kind != "wakeup":  # (a median hides the run that a test on a busy machine would fail on)
                row[kind]["energy_err_vs_held_pct_worst"] = max(r["energy_err_vs_held_pct"] for r in runs[kind][rate_name])
        for base in ("py_reopen", "py_pread"):
            # per-repeat ratios (same conditions), then the median
            ratios = [p["cpu_us_per_sample"] / c["cpu_us_per_sample"]
                      for c, p in zip(runs["c"][rate_name], runs[base][rate_name])]
            row[f"cpu_per_sample_ratio_{base}_over_c"] = statistics.median(ratios)
        if runs["wakeup"][rate_name]:
            # the sampler against the floor: the wake-up alone, same rate, same repeat
            pairs = list(zip(runs["c"][rate_name], runs["wakeup"][rate_name]))
            row["cpu_per_sample_ratio_c_over_wakeup"] = statistics.median(
                c["cpu_us_per_sample"] / w["cpu_us_per_sample"] for c, w in pairs)
            row["reading_us_per_sample_above_wakeup"] = statistics.median(
                c["cpu_us_per_sample"] - w["cpu_us_per_sample"] for c, w in pairs)
        summary[rate_name] = row
    return summary, runs


if __name__ == "__main__":
    main()
