"""CPU cost of ``pydvfs exporter`` against the sampler alone, same board, same rate, same run.

Two child processes on one fake AGX Orin (4 INA3221 rails, the C sampler at the same rate):

- sampler   pydvfs.Sampler started and left running (what any energy measurement pays);
- exporter  pydvfs.integrations.prometheus.BoardCollector behind its HTTP server (pydvfs.integrations.prometheus.serve), scraped
            every --interval seconds (5 s: a typical fleet's scrape interval) by this process.

Each child reports its own process CPU time (all threads, CLOCK_PROCESS_CPUTIME_ID) over the
same steady --duration after a warm-up, so start-up (imports) is not counted. Reported: each
child's % of one core, the exporter's ratio over the sampler alone, and the exporter's extra
(% of one core above the sampler), plus the CPU of one scrape (a burst of --burst scrapes,
back to back) and what that costs at the interval. Medians over --repeats; the two children of
a repeat run one after the other under the same conditions. Writes bench/results/exporter.json.

    PYTHONPATH=. python bench/bench_exporter.py [--repeats 3] [--duration 30] [--interval 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def child(kind: str, root: str, rate: float, duration: float, warmup: float, port: int) -> None:
    """Run one side; print one JSON line: cpu_s over duration (and scrape timing for the exporter)."""
    import threading

    if kind == "sampler":
        from pydvfs.measure.sampler import Sampler

        s = Sampler(rate_hz=rate, sysfs_root=root, trace_capacity=1)
        s.start()
        s.begin_window("bench")
        time.sleep(warmup)
        c0, t0 = time.process_time(), time.monotonic()
        time.sleep(duration)
        c1, t1 = time.process_time(), time.monotonic()
        samples = s.peek_window("bench").samples
        s.stop()
    else:
        from pydvfs.integrations.prometheus import BoardCollector, serve

        col = BoardCollector(root, rate, "bench")
        server, _ = serve(col, "127.0.0.1", port)
        print(json.dumps({"ready": True}), flush=True)
        marks = {}

        def on_line():
            for line in sys.stdin:
                what = line.strip()
                marks[what] = (time.process_time(), time.monotonic())
                print(json.dumps({"mark": what}), flush=True)

        th = threading.Thread(target=on_line)
        th.start()
        th.join()
        (c0, t0), (c1, t1) = marks["begin"], marks["end"]
        samples = col.totals.samples
        server.shutdown()
        col.close()
        out = {"cpu_s": c1 - c0, "wall_s": t1 - t0, "samples": samples}
        if "burst_begin" in marks:
            out["burst_cpu_s"] = marks["burst_end"][0] - marks["burst_begin"][0]
        print(json.dumps(out), flush=True)
        return
    print(json.dumps({"cpu_s": c1 - c0, "wall_s": t1 - t0, "samples": samples}), flush=True)


def _spawn(kind, root, rate, duration, warmup, port):
    return subprocess.Popen([sys.executable, __file__, "--child", kind, "--root", root, "--rate", str(rate),
                             "--duration", str(duration), "--warmup", str(warmup), "--port", str(port)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})


def _scrape(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return len(r.read())


def run_sampler(root, rate, duration, warmup) -> dict:
    p = _spawn("sampler", root, rate, duration, warmup, 0)
    out, _ = p.communicate(timeout=duration + warmup + 60)
    return json.loads(out.strip().splitlines()[-1])


def run_exporter(root, rate, duration, warmup, interval, burst) -> dict:
    from pydvfs.device.promserver import free_port

    port = free_port()
    p = _spawn("exporter", root, rate, duration, warmup, port)

    def mark(what):
        p.stdin.write(what + "\n")
        p.stdin.flush()
        json.loads(p.stdout.readline())

    json.loads(p.stdout.readline())  # ready
    t_end = time.monotonic() + warmup
    while time.monotonic() < t_end:
        _scrape(port)
        time.sleep(min(interval, max(0.0, t_end - time.monotonic())))
    mark("begin")
    t0 = time.monotonic()
    n, size = 0, 0
    while True:  # a scrape every `interval` s on a fixed grid
        size = _scrape(port)
        n += 1
        nxt = t0 + n * interval
        if nxt > t0 + duration:
            break
        time.sleep(max(0.0, nxt - time.monotonic()))
    time.sleep(max(0.0, t0 + duration - time.monotonic()))
    mark("end")
    # the cost of one scrape: a burst, back to back (the sampler's share is small in it)
    mark("burst_begin")
    for _ in range(burst):
        _scrape(port)
    mark("burst_end")
    p.stdin.close()
    out = json.loads(p.stdout.readline())
    p.wait(timeout=30)
    out.update(scrapes=n, page_bytes=size)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0, help="steady seconds measured per child")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--interval", type=float, default=5.0, help="scrape interval, s")
    ap.add_argument("--rate", type=float, default=None,
                    help="sampler rate, Hz (default: the fake sensor's update interval, as the exporter's default)")
    ap.add_argument("--burst", type=int, default=100, help="back-to-back scrapes for the per-scrape cost")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "exporter.json"))
    ap.add_argument("--child", choices=("sampler", "exporter"), help=argparse.SUPPRESS)
    ap.add_argument("--root", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        rate = None if args.rate in (None, 0) else args.rate
        return child(args.child, args.root, rate, args.duration, args.warmup, args.port)

    from pydvfs.device.fake import build_fake_board

    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-exporter-") as tmp:
        board = build_fake_board(Path(tmp) / "board", "jp5", clock_domains=True)
        for name in board.rails:
            board.set_rail(name, 5000, 500)
        rate = args.rate or 0
        for rep in range(args.repeats):
            s = run_sampler(str(board.root), rate, args.duration, args.warmup)
            e = run_exporter(str(board.root), rate, args.duration, args.warmup, args.interval, args.burst)
            r = {
                "sampler_pct_of_core": 100 * s["cpu_s"] / s["wall_s"],
                "exporter_pct_of_core": 100 * e["cpu_s"] / e["wall_s"],
                "sampler_rate_hz": s["samples"] / max(1e-9, s["wall_s"] + args.warmup),
                "scrape_cpu_ms": 1e3 * e["burst_cpu_s"] / args.burst,
                "scrapes": e["scrapes"], "page_bytes": e["page_bytes"],
            }
            r["exporter_over_sampler_ratio"] = r["exporter_pct_of_core"] / r["sampler_pct_of_core"]
            r["exporter_extra_pct_of_core"] = r["exporter_pct_of_core"] - r["sampler_pct_of_core"]
            r["scrape_pct_of_core_at_interval"] = 100 * r["scrape_cpu_ms"] / 1e3 / args.interval
            runs.append(r)
            print(f"[{rep + 1}/{args.repeats}] sampler {r['sampler_pct_of_core']:.3f} % core, exporter "
                  f"{r['exporter_pct_of_core']:.3f} % core (x{r['exporter_over_sampler_ratio']:.2f}, "
                  f"+{r['exporter_extra_pct_of_core']:.3f} %), one scrape {r['scrape_cpu_ms']:.2f} ms CPU "
                  f"= {r['scrape_pct_of_core_at_interval']:.3f} % of a core every {args.interval:g} s", flush=True)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    load1, load5, _ = os.getloadavg()
    out = {
        "benchmark": "bench/bench_exporter.py",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_1m_5m": [load1, load5],
                    "note": "shared 2-core VM with other jobs running; fake board on ext4"},
        "params": {"repeats": args.repeats, "duration_s": args.duration, "warmup_s": args.warmup,
                   "scrape_interval_s": args.interval, "rate_hz": args.rate or "the sensor's (fake: 7 ms, 143 Hz)",
                   "burst": args.burst, "rails": len(board.rails), "domains": "gpu, emc, 3 CPU policies"},
        "median": median,
        "runs": runs,
        "targets": {"exporter_extra_pct_of_core": "< 1 at a 5 s scrape interval"},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(median, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
