"""``pydvfs exporter``: serve the board's energy, power, clocks and governor as Prometheus
metrics (pydvfs/integrations/prometheus.py; every metric: docs/metrics.md)."""
from __future__ import annotations

import argparse
import os
import sys
import threading

from ..errors import InvalidValueError
from ..signals import Terminated, terminate_as_exception
from .common import add_board_options, emit, examples


def register(sub, common) -> None:
    from ..integrations.prometheus import DEFAULT_LISTEN

    p = sub.add_parser(
        "exporter", parents=[common],
        help="serve the board's energy, power, clocks and governor as Prometheus metrics",
        description=(
            "Serve /metrics over HTTP for Prometheus to scrape (prometheus_client's server): the "
            "energy of each rail and role as counters integrated by the C sampler, power, the "
            "sampler's rate and dropped readings, the clocks of the GPU, the EMC and each CPU "
            "policy with the power mode's caps, who holds the GPU, and what a running governor "
            "decided and saved (from its status file, PYDVFS_GOVERNOR_STATUS). It only reads: "
            "the rails directly where this user may, else through `govcore serve`. Every metric "
            "with its unit and labels: docs/metrics.md. Runs until SIGTERM or Ctrl-C."),
        epilog=examples("pydvfs exporter --sysfs-root /tmp/orin",
                        "pydvfs exporter --listen 0.0.0.0:9450 --governor-status /run/pydvfs/governor",
                        "pydvfs exporter --once --sysfs-root /tmp/orin | promtool check metrics"))
    p.add_argument("--listen", metavar="HOST:PORT", default=None,
                   help=f"address and port to serve on (default {DEFAULT_LISTEN}; 0.0.0.0:9450 for a fleet)")
    p.add_argument("--board-name", metavar="NAME", default=None,
                   help="the board label of every metric (default: the host name)")
    p.add_argument("--rate", metavar="HZ", type=float, default=None,
                   help="sampler rate when the rails are read here (default: the sensor's update interval)")
    p.add_argument("--socket", metavar="PATH", default=None,
                   help="read the rails through the govcore daemon at PATH (env PYDVFS_SOCKET; default: "
                        "the rail files where readable, else the daemon's default socket)")
    p.add_argument("--governor-status", metavar="PATH", default=None,
                   help="a governor's status file, or a folder of them (*.json): what `pydvfs run` "
                        "writes where PYDVFS_GOVERNOR_STATUS names a file")
    p.add_argument("--once", action="store_true",
                   help="print one scrape on stdout and exit (after a second of sampling): the text format, or "
                        "with --json each metric's samples; listens nowhere, so it takes no --listen")
    add_board_options(p, state=True)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..integrations.prometheus import DEFAULT_LISTEN, BoardCollector, listen_text, parse_listen, serve

    if args.once and args.listen is not None:  # (it would never bind: a bad address went unnoticed)
        raise InvalidValueError("--once prints one scrape on stdout and listens nowhere: drop --listen")
    host, port = parse_listen(DEFAULT_LISTEN if args.listen is None else args.listen)
    try:
        import prometheus_client  # noqa: F401
    except ImportError as e:
        raise ImportError("prometheus_client", name="prometheus_client") from e
    if args.rate is not None and not args.rate > 0:
        raise InvalidValueError("--rate must be > 0 Hz")
    check_governor_status(args.governor_status)
    collector = BoardCollector(args.sysfs_root, args.rate, args.board_name, args.socket,
                               args.governor_status, args.state_dir)
    try:
        if args.once:
            return _once(collector, args)
        with terminate_as_exception():
            try:
                server, _thread = serve(collector, host, port)
            except OSError as e:
                raise InvalidValueError(f"cannot listen on {listen_text(host, port)}: {e.strerror or e}") from None
            port = server.server_port
            data = {"listen": listen_text(host, port), "url": f"http://{listen_text(host, port)}/metrics",
                    "board": collector.board,
                    "board_type": collector.board_type, "model": collector.dev.model,
                    "source": collector.energy.source, "sysfs_root": collector.sysfs_root}
            emit(args, data, lambda: (f"pydvfs exporter: serving {data['url']} for {data['board']} "
                                      f"({data['board_type']}, {data['model']}; rails read "
                                      f"{'here' if data['source'] == 'local' else 'through govcore serve'})"))
            try:
                threading.Event().wait()
            except (KeyboardInterrupt, Terminated):
                pass
            server.shutdown()
    finally:
        collector.close()
    return 0


def check_governor_status(path: str | None) -> None:
    """--governor-status: a folder, a file, or a status file not written yet (its name ends in
    .json, in a folder that exists); anything else is a typo, refused rather than never read."""
    if path is None or os.path.exists(path):
        return
    if not (path.endswith(".json") and os.path.isdir(os.path.dirname(os.path.abspath(path)))):
        raise InvalidValueError(f"--governor-status {path}: no such file or folder (a status file not written "
                                "yet must end in .json, in a folder that exists)")


def _once(collector, args) -> int:
    import time

    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    generate_latest(registry)  # the first read opens the interval
    time.sleep(1.0)
    if not args.json:
        sys.stdout.write(generate_latest(registry).decode())
        sys.stdout.flush()
        return 0
    families = [{"name": m.name, "type": m.type, "help": m.documentation,
                 "samples": [{"name": s.name, "labels": dict(s.labels), "value": s.value} for s in m.samples]}
                for m in registry.collect()]
    emit(args, {"board": collector.board, "metrics": families}, "")
    return 0
