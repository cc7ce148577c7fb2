"""Read a profiler trace in the notebook: where did the time go?

``jax.profiler.trace(logdir)`` writes ``logdir/plugins/profile/<run>/<host>.trace.json.gz``
(Chrome trace-event JSON) next to the ``.xplane.pb`` that XProf reads.
:func:`load` parses the JSON with the standard library into :class:`Event`
records; :func:`top_ops` ranks the device operations; :func:`steps` splits
each step (``StepTraceAnnotation``) into device compute, host-only work and
idle time; :func:`plot_timeline` draws it; :func:`compare` puts two profiles
side by side. :func:`serve` starts XProf's web server on 127.0.0.1.

Which events count as *device* work: on TPUs and GPUs the ops of the
``/device:...`` process (its "XLA Ops" or stream threads); on the CPU backend
the XLA kernels that run on XLA's own threads (``tf_XLA...``). Host work is the
Python thread's events. Both rules are heuristics over the trace's names,
printed where they matter.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["Event", "Trace", "StepBreakdown", "latest_run", "load", "top_ops", "steps", "overall", "step_table",
           "op_table", "plot_timeline", "compare", "serve", "Server"]

_BOOKKEEPING = ("end: ", "ThreadpoolListener", "ThunkExecutor", "$")
_NOT_COMPUTE = ("Dispatch", "::", "H2D", "D2H")  # transfers and runtime waits, not kernels


@dataclass(frozen=True)
class Event:
    """One complete ("X") trace event; times in microseconds."""

    name: str
    ts: float
    dur: float
    process: str
    thread: str
    args: dict = field(default_factory=dict, compare=False, hash=False)
    host: str = ""  # which host's file it came from (a multi-host run writes one per host)

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass
class Trace:
    run_dir: Path
    file: Path  # the first host's trace file
    events: list[Event]  # every host's events, in time order
    files: list[Path] = field(default_factory=list)  # one per host

    @property
    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.events})

    @functools.cached_property
    def device_events(self) -> list[Event]:
        on_device = [e for e in self.events if e.process.startswith("/device:")]
        if on_device:
            return [e for e in on_device if e.thread == "XLA Ops" or e.thread.startswith("Stream")]
        return [e for e in self.events if e.thread.startswith("tf_XLA") and not e.name.startswith(_BOOKKEEPING)
                and not any(marker in e.name for marker in _NOT_COMPUTE)]

    @functools.cached_property
    def host_thread(self) -> str | None:
        """The thread that ran the Python program (where the step annotations are)."""
        names = [e.thread for e in self.events if "step_num" in e.args]
        if names:
            return names[0]
        return "python" if any(e.thread == "python" for e in self.events) else None

    @functools.cached_property
    def step_events(self) -> list[Event]:
        """The step annotations of the first host (every host runs the same steps)."""
        first = self.hosts[0] if self.events else ""
        return sorted((e for e in self.events if "step_num" in e.args and e.host == first), key=lambda e: e.ts)

    @functools.cached_property
    def host_events(self) -> list[Event]:
        """Host-thread work, leaving out the step annotations and the frames that enclose whole
        steps (the Python loop itself), which would make the host look busy all the time."""
        marked = self.step_events

        def encloses(e: Event) -> bool:
            return any(e.ts <= s.ts and e.end >= s.end for s in marked)

        first = self.hosts[0] if self.events else ""
        return [e for e in self.events if e.host == first and e.thread == self.host_thread
                and "step_num" not in e.args and not encloses(e)]


def latest_run(logdir: str | os.PathLike) -> Path:
    """The newest ``plugins/profile/<run>`` folder under ``logdir`` (or ``logdir`` itself if it is one)."""
    logdir = Path(logdir)
    if not logdir.exists():
        raise FileNotFoundError(f"no profile log directory at {logdir}")
    if list(logdir.glob("*.trace.json.gz")):
        return logdir
    runs = sorted(p for p in (logdir / "plugins" / "profile").glob("*") if p.is_dir())
    if not runs:
        raise FileNotFoundError(
            f"no profile run under {logdir}: expected {logdir}/plugins/profile/<run>/ "
            "(capture one with jax.profiler.trace(logdir))"
        )
    return runs[-1]


def load(path: str | os.PathLike) -> Trace:
    """Parse the trace of a run (a log directory, a run folder, or a ``.trace.json.gz`` file).

    A multi-host run writes one ``<host>.trace.json.gz`` per host into the run folder: all are
    read, each event keeps its ``host``."""
    path = Path(path)
    if path.is_file():
        run_dir, files = path.parent, [path]
    else:
        run_dir = latest_run(path)
        files = sorted(run_dir.glob("*.trace.json.gz")) or sorted(run_dir.glob("perfetto_trace.json.gz"))
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz in {run_dir}: the capture did not finish, or wrote "
                                "only .xplane.pb (open that with XProf)")
    events: list[Event] = []
    for file in files:
        events += _read_events(file, file.name.removesuffix(".trace.json.gz"))
    return Trace(run_dir, files[0], sorted(events, key=lambda ev: ev.ts), list(files))


def _read_events(file: Path, host: str) -> list[Event]:
    """The complete ("X") events of one host's trace file; malformed events are skipped."""
    try:
        with gzip.open(file, "rt") as f:
            doc = json.load(f)
    except (OSError, EOFError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{file} is not a complete gzipped trace ({type(exc).__name__}: {exc}); "
                         "was the capture interrupted?") from exc
    raw = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    if not isinstance(raw, list):
        raise ValueError(f"{file} has no traceEvents list")
    processes: dict = {}
    threads: dict = {}
    for e in raw:
        if isinstance(e, dict) and e.get("ph") == "M":
            name = (e.get("args") or {}).get("name", "")
            if e.get("name") == "process_name":
                processes[e.get("pid")] = name
            elif e.get("name") == "thread_name":
                threads[(e.get("pid"), e.get("tid"))] = name
    events = []
    for e in raw:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        try:
            ts, dur = float(e["ts"]), float(e.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue  # a malformed event: skip it, keep the rest
        pid, tid = e.get("pid"), e.get("tid")
        events.append(Event(str(e.get("name", "?")), ts, dur, processes.get(pid, str(pid)),
                            threads.get((pid, tid), str(tid)), e.get("args") or {}, host))
    return events


def _leaves(events: list[Event]) -> list[Event]:
    """The events that contain no other event of their thread (a while loop's body, not the loop)."""
    out = []
    by_thread: dict[tuple[str, str], list[Event]] = {}
    for e in events:
        by_thread.setdefault((e.host, e.thread), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        for i, e in enumerate(evs):
            nxt = evs[i + 1] if i + 1 < len(evs) else None
            if nxt is None or nxt.ts >= e.end:
                out.append(e)
    return out


def top_ops(trace: Trace, n: int = 10) -> list[tuple[str, int, float, float]]:
    """(op, count, total µs, share of device time) for the device ops that took the most time.

    Only innermost ops count, so a loop and the ops inside it are not counted twice.
    """
    totals: dict[str, list[float]] = {}
    for e in _leaves(trace.device_events):
        rec = totals.setdefault(_op_name(e.name), [0, 0.0])
        rec[0] += 1
        rec[1] += e.dur
    all_us = sum(v[1] for v in totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][1])[:n]
    return [(name, int(c), us, us / all_us) for name, (c, us) in ranked]


def _op_name(name: str) -> str:
    return re.sub(r"(\.\d+)+(\.clone)?$", "", name)  # fusion.3, fusion.7, tanh.3.clone: one kind each


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _length(intervals: Sequence[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _clip(events: Iterable[Event], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(e.ts, lo), min(e.end, hi)) for e in events if e.end > lo and e.ts < hi]


def _minus(a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]) -> float:
    """Length of a minus its overlap with b (both merged and sorted): one sweep over both."""
    overlap, j = 0.0, 0
    for x0, x1 in a:
        while j < len(b) and b[j][1] <= x0:
            j += 1
        k = j
        while k < len(b) and b[k][0] < x1:
            overlap += min(x1, b[k][1]) - max(x0, b[k][0])
            k += 1
    return _length(a) - overlap


@dataclass
class StepBreakdown:
    step: int
    start_us: float
    total_us: float
    device_us: float  # some device op running
    host_us: float  # the Python thread busy while no device op runs
    idle_us: float  # neither

    @property
    def device_share(self) -> float:
        return self.device_us / self.total_us if self.total_us else 0.0


def _marked(trace: Trace) -> list[Event]:
    """The step annotations, or a clear error saying how to add them."""
    if not trace.step_events:
        raise ValueError(f"no step annotations in {trace.file}: wrap each step in "
                         "jax.profiler.StepTraceAnnotation('train', step_num=i)")
    return trace.step_events


def _window_end(trace: Trace, lo: float, hi: float) -> float:
    """``hi``, or later if device work started after ``lo`` ends later (asynchronous dispatch)."""
    return max([hi] + [e.end for e in trace.device_events if e.ts >= lo])


def _split(trace: Trace, step: int, lo: float, hi: float) -> StepBreakdown:
    """The interval [lo, hi] split into device compute, host-only work and idle time."""
    dev = _union(_clip(trace.device_events, lo, hi))
    host_only = _minus(_union(_clip(trace.host_events, lo, hi)), dev)
    dev_us = _length(dev)
    return StepBreakdown(step, lo, hi - lo, dev_us, host_only, max(0.0, hi - lo - dev_us - host_only))


def steps(trace: Trace) -> list[StepBreakdown]:
    """Each annotated step split into device compute, host-only work and idle time."""
    return [_split(trace, int(s.args.get("step_num", i)), s.ts, s.end) for i, s in enumerate(_marked(trace))]


def overall(trace: Trace) -> StepBreakdown:
    """The same split for the whole run: from the first step's start to the end of the last device
    op or step, whichever is later. With asynchronous dispatch a step's annotation ends when the
    work is queued, so the device work of the last steps lies after it: this window includes it."""
    marked = _marked(trace)
    lo = marked[0].ts
    return _split(trace, -1, lo, _window_end(trace, lo, marked[-1].end))


def step_table(breakdown: Sequence[StepBreakdown]) -> str:
    lines = ["| step | total ms | device ms | host only ms | idle ms | device share |", "|---|---|---|---|---|---|"]
    for b in breakdown:
        lines.append(f"| {b.step} | {b.total_us / 1e3:.2f} | {b.device_us / 1e3:.2f} | {b.host_us / 1e3:.2f} | "
                     f"{b.idle_us / 1e3:.2f} | {b.device_share:.0%} |")
    return "\n".join(lines)


def op_table(trace: Trace, n: int = 10) -> str:
    lines = ["| device op | count | total ms | share of device time |", "|---|---|---|---|"]
    lines += [f"| {name} | {c} | {us / 1e3:.3f} | {share:.0%} |" for name, c, us, share in top_ops(trace, n)]
    return "\n".join(lines)


def plot_timeline(trace: Trace, ax=None, max_threads: int = 6, title: str | None = None):
    """One row per busy thread, one bar per event, over the annotated steps (or the whole trace)."""
    import matplotlib.pyplot as plt

    marked = trace.step_events
    lo = marked[0].ts if marked else min(e.ts for e in trace.events)
    # device work dispatched in the last step may finish after it: show it
    hi = _window_end(trace, lo, marked[-1].end if marked else max(e.end for e in trace.events))
    rows: dict[str, list[Event]] = {}
    for e in trace.device_events + (trace.host_events if marked else []):
        if e.end > lo and e.ts < hi:
            rows.setdefault(e.thread, []).append(e)
    busiest = sorted(rows, key=lambda t: -sum(e.dur for e in rows[t]))[:max_threads]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 * len(busiest) + 1.2))
    for i, thread in enumerate(busiest):
        bars = [((e.ts - lo) / 1e3, e.dur / 1e3) for e in rows[thread]]
        colour = "tab:orange" if thread == trace.host_thread else "tab:blue"
        ax.broken_barh(bars, (i - 0.4, 0.8), facecolors=colour)
    for s in marked:
        ax.axvline((s.ts - lo) / 1e3, color="gray", lw=0.8, ls=":")
    ax.set_yticks(range(len(busiest)), [t if len(t) < 28 else t[:25] + "..." for t in busiest], fontsize=8)
    ax.set_xlabel("ms since the first step (dotted lines: step starts)")
    ax.set_title(title or "timeline: host (orange) and device ops (blue)")
    return ax


def compare(a: Trace, b: Trace, labels: tuple[str, str] = ("before", "after")) -> str:
    """Two profiles side by side: the whole run's time and its split, and the top device ops of each."""
    oa, ob = overall(a), overall(b)
    rows = [f"| | {labels[0]} | {labels[1]} |", "|---|---|---|",
            f"| steps, first start to last device op, ms | {oa.total_us / 1e3:.2f} | {ob.total_us / 1e3:.2f} |",
            f"| device busy | {oa.device_share:.0%} | {ob.device_share:.0%} |",
            f"| host only | {oa.host_us / oa.total_us:.0%} | {ob.host_us / ob.total_us:.0%} |",
            f"| idle | {oa.idle_us / oa.total_us:.0%} | {ob.idle_us / ob.total_us:.0%} |"]
    ta, tb = top_ops(a, 3), top_ops(b, 3)
    for i in range(max(len(ta), len(tb))):
        fa = f"{ta[i][0]} ({ta[i][3]:.0%})" if i < len(ta) else "-"
        fb = f"{tb[i][0]} ({tb[i][3]:.0%})" if i < len(tb) else "-"
        rows.append(f"| top device op {i + 1} | {fa} | {fb} |")
    return "\n".join(rows)


# --------------------------------------------------------------------------- XProf


_SERVER = """
import sys
from cheroot import wsgi
from xprof import server as xs
logdir, port = sys.argv[1], int(sys.argv[2])
context = xs.TBContext(logdir, xs.DataProvider(logdir), xs.TBContext.Flags(False))
context.hide_capture_profile_button = True
context.enable_tab_name_label = False
context.src_prefix = None
plugin = xs.ProfilePluginLoader().load(context)
wsgi.Server(("127.0.0.1", port), xs.make_wsgi_app(plugin)).start()
"""


@dataclass
class Server:
    """A running XProf server; stop it with :meth:`stop` (or use it in a ``with`` block)."""

    process: subprocess.Popen
    port: int
    logdir: str
    log: object = None  # the server's stderr, kept in a temporary file

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def _get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=30) as resp:
            body = resp.read()
        if body[:2] == b"\x1f\x8b":
            body = gzip.decompress(body)
        return json.loads(body)

    def tools(self, run: str) -> list[str]:
        """The XProf tools that can open ``run`` (trace viewer, op profile, ...)."""
        return self._get(f"data/plugin/profile/run_tools?run={run}")

    def runs(self) -> list[str]:
        """The profile runs the server lists, read over HTTP."""
        return self._get("data/plugin/profile/runs")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(logdir: str | os.PathLike, port: int | None = None, timeout: float = 90.0) -> Server:
    """Start XProf's web server for ``logdir`` on 127.0.0.1 only, and wait until it answers.

    (``xprof --logdir`` itself listens on every interface.) Needs ``pip install xprof``.
    """
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    logdir = str(Path(logdir).resolve())
    log = tempfile.TemporaryFile(mode="w+")  # a pipe could fill up and stall the server
    proc = subprocess.Popen([sys.executable, "-c", _SERVER, logdir, str(port)], stdout=subprocess.DEVNULL,
                            stderr=log, text=True, start_new_session=True)
    server = Server(proc, port, logdir, log)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"XProf exited before answering: {log.read()[-1500:]}")
        try:
            server.runs()
            return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise TimeoutError(f"XProf did not answer on {server.url} within {timeout:.0f} s")
            time.sleep(0.5)
