"""A real Prometheus server (Debian's ``prometheus`` package) scraping exporters, for the
tests, the benchmark and the dashboard's pictures (tools/dashboard_panels.py).

For tests and tools only; production code never imports it (like ``fake.py``). The server is
started as a child process with its own config and data folder, listening on a free port of
127.0.0.1, and stopped by :meth:`PromServer.stop` (never a system service).
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

INSTALL_HINT = "no prometheus binary (Debian: apt-get install prometheus; `make metrics-tools` does it as root)"


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def promtool_binary() -> str | None:
    return shutil.which("promtool")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PromServer:
    """``prometheus`` scraping ``targets`` (host:port) every ``scrape_s`` seconds."""

    def __init__(self, workdir: Path, targets: list[str], scrape_s: float = 1.0, job: str = "pydvfs"):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = self.workdir / "prometheus.yml"
        targets_list = ", ".join(f'"{t}"' for t in targets)
        cfg.write_text(
            "global:\n"
            f"  scrape_interval: {scrape_s:g}s\n"
            f"  scrape_timeout: {min(scrape_s, 10):g}s\n"
            f"  evaluation_interval: {scrape_s:g}s\n"
            "scrape_configs:\n"
            f"  - job_name: {job}\n"
            f"    static_configs:\n      - targets: [{targets_list}]\n")
        self.log = self.workdir / "prometheus.log"
        binary = prometheus_binary()
        if binary is None:
            raise RuntimeError(INSTALL_HINT)
        self.proc = subprocess.Popen(
            [binary, f"--config.file={cfg}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=open(self.log, "wb"))
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready in time")
            time.sleep(0.1)

    def _get(self, path: str, params: dict) -> dict:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus: {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list:
        """The instant vector (or matrix, for a range selector) of ``expr``: the API's result list."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params)["result"]

    def query_range(self, expr: str, start: float, end: float, step: float) -> list:
        return self._get("/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                                 "step": f"{step:g}"})["result"]

    def targets_up(self) -> bool:
        res = self.query("up")
        return bool(res) and all(float(r["value"][1]) == 1.0 for r in res)

    def wait_for(self, expr: str, timeout_s: float = 20.0, pred=lambda res: bool(res)) -> list:
        deadline = time.monotonic() + timeout_s
        while True:
            res = self.query(expr)
            if pred(res):
                return res
            if time.monotonic() > deadline:
                raise AssertionError(f"{expr}: no satisfying answer in {timeout_s:g} s (last: {res})")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "PromServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def scalar(res: list) -> float:
    """The one value of an instant vector of one series."""
    if len(res) != 1:
        raise AssertionError(f"expected one series, got {len(res)}: {res}")
    return float(res[0]["value"][1])


# An nvpmodel table with the one mode MAXN (no GPU cap), so that the power mode's metrics show.
MAXN_CONF = """< PARAM TYPE=CLOCK NAME=GPU >
MAX_FREQ /sys/devices/17000000.ga10b/devfreq/17000000.ga10b/max_freq

< POWER_MODEL ID=0 NAME=MAXN >
GPU MIN_FREQ 0
GPU MAX_FREQ -1

< PM_CONFIG DEFAULT=0 >
"""


def governed_board(root: Path, layout: str):
    """A fake AGX Orin (``layout`` jp5 or jp6) with its EMC and CPU clocks and nvpmodel in MAXN:
    every clock metric has something to show. jp5's cur_freq follows a pin (a static board);
    jp6's is written by the simulated fine-tuning when one animates it."""
    from .fake import build_fake_board

    fb = build_fake_board(root, layout, clock_domains=True, follow_clamp=(layout == "jp5"))
    (fb.root / "var/lib/nvpmodel").mkdir(parents=True, exist_ok=True)
    (fb.root / "var/lib/nvpmodel/status").write_text("pmode:0000 fmode:quiet\n")
    (fb.root / "etc").mkdir(exist_ok=True)
    (fb.root / "etc/nvpmodel.conf").write_text(MAXN_CONF)
    return fb


class Exporter:
    """``python -m pydvfs exporter`` on a free port of 127.0.0.1 (returns once it serves, unless
    ``wait`` is False: then :meth:`wait_ready`)."""

    def __init__(self, name: str, root: Path, log: Path, *extra: str, env: dict | None = None,
                 wait: bool = True):
        import os
        import sys

        self.name, self.port = name, free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.log = Path(log)
        repo = str(Path(__file__).resolve().parents[2])
        env = env or {**os.environ, "PYTHONPATH": repo}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pydvfs", "exporter", "--listen", self.addr, "--sysfs-root", str(root),
             "--board-name", name, "--json", *extra], stdout=subprocess.PIPE, stderr=open(self.log, "wb"),
            env=env, text=True)
        self.info = None
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout_s: float = 60.0) -> "Exporter":
        """Block until it serves (its --json line says where)."""
        out = ""
        deadline = time.monotonic() + timeout_s
        while not out.rstrip().endswith("}"):
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                raise RuntimeError(f"exporter {self.name} did not start: {self.log.read_text()}")
            out += line
        self.info = json.loads(out)
        return self

    def page(self) -> str:
        with urllib.request.urlopen(f"http://{self.addr}/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)
