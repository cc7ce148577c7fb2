"""Read a profiler trace in the notebook: where did the time go?

``jax.profiler.trace(logdir)`` writes ``logdir/plugins/profile/<run>/<host>.trace.json.gz``
(Chrome trace-event JSON) next to the ``.xplane.pb`` that XProf reads.
:func:`load` parses the JSON with the standard library into :class:`Event`
records; :func:`top_ops` ranks the device operations; :func:`steps` splits
each step (``StepTraceAnnotation``) into device compute, host-only work and
idle time; :func:`time_in`, :func:`overlap` and :func:`host_waits` measure the input pipeline
and the host's waits for device values; :func:`plot_timeline` draws it;
:func:`compare` puts two profiles side by side. :func:`sample` captures a short
loop with a chosen bottleneck, in one of several loop shapes (for practice).
The device memory profile (pprof) is read by :mod:`tpututor.pprof`, and XProf's web
server is started on 127.0.0.1 by :mod:`tpututor.xprof_server`.

Which events count as *device* work: on a TPU the "XLA Ops" line of each
``/device:...`` process; on a GPU its stream lines ("Stream #N(...)", leaving out
memory copies and sets), not the "XLA Ops" line XProf derives from them, which would
count each kernel twice (XProf's trace viewer guide: only the TPU's XLA Ops and the
GPU's stream data are directly grounded in the profile); on the CPU backend the XLA
kernels that run on XLA:CPU's own worker threads (``tf_XLAEigen/...``, the Eigen
pool for intra-op work, and ``tf_XLAPjRtCpuClient/...``, the PjRt client's pool
that runs whole programs). Host work is the
events of the thread that runs the training loop (the one holding the step
annotations; every Python thread is named "python", so threads are told apart
by id). Both rules are heuristics over the trace's names, printed where they
matter.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "Event",
    "Trace",
    "StepBreakdown",
    "INPUT",
    "HOST_WAIT",
    "KINDS",
    "VARIANTS",
    "latest_run",
    "load",
    "top_ops",
    "steps",
    "overall",
    "step_table",
    "op_table",
    "time_in",
    "overlap",
    "host_waits",
    "plot_timeline",
    "compare",
    "sample",
]

INPUT = "load batch"  # the lesson's name for the input pipeline's TraceAnnotation
HOST_WAIT = "np.asarray(jax.Array)"  # JAX's own annotation when the host reads a device value (float(), np.asarray)
KINDS = ("input-bound", "host-sync-bound", "device-bound", "dispatch-bound")  # the bottlenecks sample() can plant
VARIANTS = {  # the loop shapes sample() can give each kind; some are there to defeat rules that look for presence
    "input-bound": ("serial",),  # the loader in the loop's thread, most of the step
    "host-sync-bound": ("float", "device_get"),  # a tiny step, its loss read back every step
    "device-bound": ("plain", "sync", "prefetch", "light-input", "overlapped-input"),  # a large step; with
    # float(loss) every step, a loader thread working ahead, a short load in the loop's thread, or a long one
    # that runs while the device computes the step just dispatched
    "dispatch-bound": ("eager-update",),  # a tiny step whose update runs op by op outside jit, nothing read back
}

_BOOKKEEPING = ("end: ", "ThreadpoolListener", "ThunkExecutor", "$")
_NOT_COMPUTE = ("Dispatch", "::", "H2D", "D2H")  # transfers and runtime waits, not kernels
_EXECUTOR_WAIT = "ThunkExecutor::Execute (wait"  # XLA:CPU running a program whose kernels are on other threads
_COPIES = ("memcpy", "memset")  # a GPU stream's transfers (MemcpyH2D, MemcpyD2H, Memset, ...), not kernels


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
    pid: int | str | None = None  # the trace's process and thread ids: several threads share a name
    tid: int | str | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def thread_key(self) -> tuple:
        """Which thread ran it: (host file, process id, thread id), or the thread's name without ids."""
        return (self.host, self.pid, self.tid) if self.tid is not None else (self.host, self.process, self.thread)


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
            with_streams = {(e.host, e.process) for e in on_device if e.thread.startswith("Stream")}
            return [
                e
                for e in on_device
                if (e.thread.startswith("Stream") and not any(c in e.name.lower() for c in _COPIES))
                or (e.thread == "XLA Ops" and (e.host, e.process) not in with_streams)
            ]
        return [
            e
            for e in self.events
            if e.thread.startswith("tf_XLA")
            and not e.name.startswith(_BOOKKEEPING)
            and not any(marker in e.name for marker in _NOT_COMPUTE)
        ]

    @functools.cached_property
    def busy_events(self) -> list[Event]:
        """What makes the device *busy*: :attr:`device_events`, and on the CPU backend also the spans in which
        XLA:CPU's executor waits for its own kernels (``ThunkExecutor::Execute (wait for completion)``): a
        large dot runs as tasks on the Eigen pool that the trace marks only with zero-length
        ``ThreadpoolListener`` markers, so without these spans most of its time would look idle."""
        if any(e.process.startswith("/device:") for e in self.events):
            return self.device_events
        waits = [e for e in self.events if e.thread.startswith("tf_XLA") and e.name.startswith(_EXECUTOR_WAIT)]
        return sorted(self.device_events + waits, key=lambda e: e.ts)

    @functools.cached_property
    def host_thread(self) -> str | None:
        """The name of the thread that ran the Python program (where the step annotations are)."""
        names = [e.thread for e in self.events if "step_num" in e.args]
        if names:
            return names[0]
        return "python" if any(e.thread == "python" for e in self.events) else None

    @functools.cached_property
    def host_key(self) -> tuple | None:
        """:attr:`Event.thread_key` of the training loop's thread: the one holding the first step annotation
        (or the first thread named like :attr:`host_thread` when no step is annotated)."""
        marked = [e for e in self.events if "step_num" in e.args]
        if marked:
            return marked[0].thread_key
        named = [e for e in self.events if e.thread == self.host_thread]
        return named[0].thread_key if named else None

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

        key = self.host_key
        return [e for e in self.events if e.thread_key == key and "step_num" not in e.args and not encloses(e)]


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
        raise FileNotFoundError(
            f"no *.trace.json.gz in {run_dir}: the capture did not finish, or wrote "
            "only .xplane.pb (open that with XProf)"
        )
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
        raise ValueError(
            f"{file} is not a complete gzipped trace ({type(exc).__name__}: {exc}); was the capture interrupted?"
        ) from exc
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
        events.append(
            Event(
                str(e.get("name", "?")),
                ts,
                dur,
                processes.get(pid, str(pid)),
                threads.get((pid, tid), str(tid)),
                e.get("args") or {},
                host,
                pid,
                tid,
            )
        )
    return events


def _leaves(events: list[Event]) -> list[Event]:
    """The events that contain no other event of their thread (a while loop's body, not the loop)."""
    out = []
    by_thread: dict[tuple, list[Event]] = {}
    for e in events:
        by_thread.setdefault(e.thread_key, []).append(e)
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
    device_us: float  # the device busy (Trace.busy_events)
    host_us: (
        float  # inside a span of the loop's thread (any span: also time.sleep, or a wait) while the device is not busy
    )
    idle_us: float  # neither

    @property
    def device_share(self) -> float:
        return self.device_us / self.total_us if self.total_us else 0.0


def _marked(trace: Trace) -> list[Event]:
    """The step annotations, or a clear error saying how to add them."""
    if not trace.step_events:
        raise ValueError(
            f"no step annotations in {trace.file}: wrap each step in "
            "jax.profiler.StepTraceAnnotation('train', step_num=i)"
        )
    return trace.step_events


def _window_end(trace: Trace, lo: float, hi: float) -> float:
    """``hi``, or later if device work started after ``lo`` ends later (asynchronous dispatch)."""
    return max([hi] + [e.end for e in trace.busy_events if e.ts >= lo])


def _split(trace: Trace, step: int, lo: float, hi: float) -> StepBreakdown:
    """The interval [lo, hi] split into device compute, host-only work and idle time."""
    dev = _union(_clip(trace.busy_events, lo, hi))
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
        lines.append(
            f"| {b.step} | {b.total_us / 1e3:.2f} | {b.device_us / 1e3:.2f} | {b.host_us / 1e3:.2f} | "
            f"{b.idle_us / 1e3:.2f} | {b.device_share:.0%} |"
        )
    return "\n".join(lines)


def op_table(trace: Trace, n: int = 10) -> str:
    lines = ["| device op | count | total ms | share of device time |", "|---|---|---|---|"]
    lines += [f"| {name} | {c} | {us / 1e3:.3f} | {share:.0%} |" for name, c, us, share in top_ops(trace, n)]
    return "\n".join(lines)


def _run_window(trace: Trace) -> tuple[float, float]:
    """The whole run: the first step's start to the end of the last device op or step (or the whole trace)."""
    marked = trace.step_events
    lo = marked[0].ts if marked else min(e.ts for e in trace.events)
    return lo, _window_end(trace, lo, marked[-1].end if marked else max(e.end for e in trace.events))


def time_in(trace: Trace, name: str = INPUT, *, thread: str = "any") -> float:
    """Microseconds of the run (:func:`overall`'s window) covered by events called ``name``.

    ``thread="any"`` counts them on every thread (a prefetching loader runs in its own thread);
    ``thread="loop"`` only on the training loop's thread. Overlapping events count once."""
    if thread not in ("any", "loop"):
        raise ValueError(f"thread must be 'any' or 'loop', not {thread!r}")
    lo, hi = _run_window(trace)
    named = [e for e in trace.events if e.name == name and (thread == "any" or e.thread_key == trace.host_key)]
    return _length(_union(_clip(named, lo, hi)))


def overlap(trace: Trace, name: str = INPUT, *, thread: str = "any") -> float:
    """The share of the time in events called ``name`` during which some device op runs: 0 when the
    input pipeline and the device take turns, near 1 when the loading hides behind compute.
    ``thread`` as in :func:`time_in`."""
    if thread not in ("any", "loop"):
        raise ValueError(f"thread must be 'any' or 'loop', not {thread!r}")
    lo, hi = _run_window(trace)
    named = [e for e in trace.events if e.name == name and (thread == "any" or e.thread_key == trace.host_key)]
    spans = _union(_clip(named, lo, hi))
    total = _length(spans)
    if not total:
        return 0.0
    return (total - _minus(spans, _union(_clip(trace.busy_events, lo, hi)))) / total


def host_waits(trace: Trace) -> list[Event]:
    """The training loop's waits for a device value inside its steps: JAX's ``np.asarray(jax.Array)``
    events on the loop's thread that start within a step annotation. ``float(x)``, ``int(x)``, ``bool(x)``
    and ``jax.device_get(x)`` make one (a ``jax.device_get`` after the loop is not a per-step wait);
    ``np.asarray(x)`` and ``x.item()`` read through a faster path that JAX 0.7.2 and 0.10.2 leave
    unannotated, so they wait without showing up here."""
    marked = trace.step_events
    waits = [
        e
        for e in trace.events
        if e.name == HOST_WAIT and e.thread_key == trace.host_key and any(s.ts <= e.ts < s.end for s in marked)
    ]
    return _leaves(waits)


def _row_label(trace: Trace, key: tuple, first: Event) -> str:
    """A timeline row's name: the loop, a device line, an XLA:CPU worker, or another thread and what it ran."""
    if key == trace.host_key:
        return f"{first.thread} (loop)"
    if first.process.startswith("/device:"):
        return f"{first.process.removeprefix('/device:')} {first.thread}"
    if first.thread.startswith("tf_XLA"):
        return f"XLA CPU worker ({first.thread.split('/')[0].removeprefix('tf_')})"
    return f"{first.thread} ({first.name})"


def plot_timeline(
    trace: Trace, ax=None, max_threads: int = 6, title: str | None = None, annotations: Sequence[str] = (INPUT,)
):
    """One row per busy thread, one bar per event, over the annotated steps (or the whole trace).

    Device ops are blue (on the CPU backend, the rows of XLA:CPU's worker threads); the training loop's
    thread is orange, with its spans called one of ``annotations`` (loading a batch) in green and its waits
    for a device value (:data:`HOST_WAIT`) in red; ``annotations`` spans on other threads (a prefetching
    loader) are green too."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    marked = trace.step_events
    lo, hi = _run_window(trace)  # device work dispatched in the last step may finish after it: show it
    host = trace.host_events if marked else []
    other = [e for e in trace.events if e.name in annotations and e.thread_key != trace.host_key]
    rows: dict[tuple, list[Event]] = {}
    for e in trace.busy_events + host + other:
        if e.end > lo and e.ts < hi:
            rows.setdefault(e.thread_key, []).append(e)
    busiest = sorted(rows, key=lambda k: -sum(e.dur for e in rows[k]))[:max_threads]
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.6 * len(busiest) + 1.2))
    device = set(map(id, trace.busy_events))
    labels = []

    def bars(events: Iterable[Event]) -> list[tuple[float, float]]:
        return [((e.ts - lo) / 1e3, e.dur / 1e3) for e in events]

    for i, key in enumerate(busiest):
        events = rows[key]
        if key == trace.host_key:  # other host work first, then loading and waits drawn over it
            ax.broken_barh(bars(events), (i - 0.4, 0.8), facecolors="tab:orange")
            ax.broken_barh(bars(e for e in events if e.name in annotations), (i - 0.4, 0.8), facecolors="tab:green")
            ax.broken_barh(bars(e for e in events if e.name == HOST_WAIT), (i - 0.4, 0.8), facecolors="tab:red")
        else:
            ax.broken_barh(
                bars(events), (i - 0.4, 0.8), facecolors="tab:blue" if id(events[0]) in device else "tab:green"
            )
        name = _row_label(trace, key, events[0])
        labels.append(name if len(name) < 34 else name[:31] + "...")
    for s in marked:
        ax.axvline((s.ts - lo) / 1e3, color="gray", lw=0.8, ls=":")
    ax.set_yticks(range(len(busiest)), labels, fontsize=8)
    ax.set_xlabel("ms since the first step (dotted lines: step starts)")
    ax.legend(
        handles=[
            Patch(color="tab:blue", label="device busy"),
            Patch(color="tab:orange", label="loop: other host work"),
            Patch(color="tab:green", label=" / ".join(annotations)),
            Patch(color="tab:red", label="loop waits for a device value"),
        ],
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
    )
    ax.set_title(title or "timeline: device ops, the loop's thread, and loading")
    return ax


def compare(a: Trace, b: Trace, labels: tuple[str, str] = ("before", "after")) -> str:
    """Two profiles side by side: the whole run's time and its split, where the input pipeline ran,
    the host's waits for device values, and the top device ops of each."""
    oa, ob = overall(a), overall(b)

    def per_step(t: Trace) -> str:
        return f"{len(host_waits(t)) / max(1, len(t.step_events)):.1f}"

    rows = [
        f"| | {labels[0]} | {labels[1]} |",
        "|---|---|---|",
        f"| steps, first start to last device op, ms | {oa.total_us / 1e3:.2f} | {ob.total_us / 1e3:.2f} |",
        f"| device busy | {oa.device_share:.0%} | {ob.device_share:.0%} |",
        f"| host only | {oa.host_us / oa.total_us:.0%} | {ob.host_us / ob.total_us:.0%} |",
        f"| idle | {oa.idle_us / oa.total_us:.0%} | {ob.idle_us / ob.total_us:.0%} |",
        f"| `{INPUT}` on the loop's thread | {time_in(a, thread='loop') / oa.total_us:.0%} | "
        f"{time_in(b, thread='loop') / ob.total_us:.0%} |",
        f"| `{INPUT}` on any thread | {time_in(a) / oa.total_us:.0%} | {time_in(b) / ob.total_us:.0%} |",
        f"| host waits for a device value, per step | {per_step(a)} | {per_step(b)} |",
    ]
    ta, tb = top_ops(a, 3), top_ops(b, 3)
    for i in range(max(len(ta), len(tb))):
        fa = f"{ta[i][0]} ({ta[i][3]:.0%})" if i < len(ta) else "-"
        fb = f"{tb[i][0]} ({tb[i][3]:.0%})" if i < len(tb) else "-"
        rows.append(f"| top device op {i + 1} | {fa} | {fb} |")
    return "\n".join(rows)


# --------------------------------------------------------------------------- practice traces


def sample(
    kind: str, logdir: str | os.PathLike | None = None, *, seed: int | None = None, variant: str | None = None
) -> Trace:
    """Capture a short training loop whose bottleneck is ``kind`` (one of :data:`KINDS`), and load it.

    Sizes, step counts and loop details are drawn at random (``seed`` fixes them), and so is the loop's
    shape, one of ``VARIANTS[kind]`` (or ``variant``), so a function that diagnoses traces can be tried on
    loops it has not seen:

    - ``"input-bound"``: a tiny model fed by a loader that waits (a stand-in for storage) and decodes on
      the host, in the loop's thread; its work is annotated :data:`INPUT`; ``float(loss)`` or not;
    - ``"host-sync-bound"``: a tiny model, its batch already on the device, and its loss read back every
      step (``"float"``: ``float(loss)``, ``"device_get"``: ``jax.device_get(loss)``);
    - ``"device-bound"``: a large model, its batch on the device (large enough for a TPU's or GPU's peak
      to take milliseconds per step); ``"plain"`` reads the losses once after the loop, ``"sync"`` calls
      ``float(loss)`` every step, ``"prefetch"`` takes each batch from a loader thread that works ahead
      (its spans are :data:`INPUT` too), ``"light-input"`` loads in the loop's thread for microseconds
      of each step, ``"overlapped-input"`` loads the next batch in the loop's thread for a good part of
      each step, right after dispatching it, so the load runs while the device computes;
    - ``"dispatch-bound"``: a tiny model, its batch on the device, nothing read back in the loop, and the
      update and a running loss average written outside ``jit``, so each step is several small
      dispatches: the device finishes each piece long before Python has dispatched the next.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    if variant is not None and variant not in VARIANTS[kind]:
        raise ValueError(f"{kind!r} loops come as {VARIANTS[kind]}, not {variant!r}")
    import queue
    import random
    import threading

    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = random.Random(seed)
    variant = variant or rng.choice(VARIANTS[kind])
    logdir = Path(logdir) if logdir is not None else Path(tempfile.mkdtemp(prefix="tpututor-sample-"))
    if kind == "input-bound":
        width, batch = rng.choice([64, 128]), rng.choice([16, 32])
    elif (
        kind != "device-bound"
    ):  # tiny: on a CPU, JAX 0.7's eager ops at width 128 keep the "device" busy half the time
        width, batch = rng.choice([16, 24, 32]), rng.choice([4, 8, 16])
    elif jax.default_backend() == "cpu":  # 4 * batch * width^2 = 0.9 to 2.1 GFLOP per step: milliseconds here
        width, batch = rng.choice([768, 1024]), rng.choice([384, 512])
    else:  # 4 * batch * width^2 = 0.5 to 1.1 TFLOP per step: milliseconds even at a TPU's or GPU's peak
        width, batch = 8192, rng.choice([2048, 4096])
    # Many short steps, so that one scheduler hiccup of a few ms on the device's thread does not make a
    # millisecond-long run look device-busy.
    n = rng.randint(4, 6) if kind in ("input-bound", "device-bound") else rng.randint(150, 300)

    grad_fn = jax.jit(jax.value_and_grad(lambda w, x: jnp.mean(jnp.tanh(x @ w) ** 2)))

    @jax.jit
    def step(w, x):
        loss, grad = grad_fn(w, x)
        return w - 0.01 * grad, loss

    def eager_step(w, x, average):
        loss, grad = grad_fn(w, x)
        return w - 0.01 * grad, loss, 0.9 * average + 0.1 * loss  # four more dispatches, one op each

    numbers = np.random.default_rng(rng.randrange(1 << 16))  # made on the host: nothing to compile for them
    w = jnp.asarray(np.eye(width, dtype=np.float32) + 0.01 * numbers.standard_normal((width, width), np.float32))
    x = jnp.asarray(numbers.standard_normal((batch, width), np.float32))
    w, loss = step(w, x)  # compile outside the trace
    jax.block_until_ready(eager_step(w, x, loss) if kind == "dispatch-bound" else loss)
    step_s = float("inf")
    for _ in range(3):  # the step's own time, to size the loads of the device-bound variants
        t0 = time.perf_counter()
        w, loss = step(w, x)
        jax.block_until_ready(loss)
        step_s = min(step_s, time.perf_counter() - t0)
    read_s = rng.uniform(0.006, 0.012)
    share = (0.4, 0.6) if variant == "overlapped-input" else (0.3, 0.6)  # of a step: long, but shorter than the step
    load_s = [rng.uniform(*share) * step_s for _ in range(n)]  # the waits of the loads that overlap the device
    cache = np.ones((batch, 16), np.float32)
    read_back = {
        "host-sync-bound": True,
        "dispatch-bound": False,
        "input-bound": rng.random() < 0.5,
        "device-bound": variant == "sync" or (variant != "plain" and rng.random() < 0.5),
    }[kind]
    how = variant if kind == "host-sync-bound" else "float"

    def read_batch(i: int):
        with jax.profiler.TraceAnnotation(INPUT):
            time.sleep(read_s)  # waiting for storage
            return np.random.default_rng(i).standard_normal((batch, width), dtype=np.float32)

    def light_load(i: int):
        with jax.profiler.TraceAnnotation(INPUT):
            cache.copy()  # a few microseconds of host work (from a cache); the batch itself is already on the device
            return x

    ready: queue.Queue = queue.Queue(maxsize=2)

    def timed_load(i: int):
        with jax.profiler.TraceAnnotation(INPUT):
            time.sleep(load_s[i])  # waiting for storage, while the step just dispatched runs
            return x

    def loader() -> None:
        for i in range(n):
            with jax.profiler.TraceAnnotation(INPUT):
                time.sleep(load_s[i])
            ready.put(x)

    with jax.profiler.trace(str(logdir)):
        worker = threading.Thread(target=loader, daemon=True) if variant == "prefetch" else None
        if worker is not None:
            worker.start()
        losses, average = [], jnp.zeros(())
        for i in range(n):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                batch_x = (
                    read_batch(i)
                    if kind == "input-bound"
                    else light_load(i)
                    if variant == "light-input"
                    else ready.get()
                    if worker is not None
                    else x
                )
                if kind == "dispatch-bound":
                    w, loss, average = eager_step(w, batch_x, average)
                else:
                    w, loss = step(w, batch_x)
                if variant == "overlapped-input":
                    timed_load(i)  # the next batch (the same rows here), loaded while this step computes
                if not read_back:
                    losses.append(loss)
                elif how == "device_get":
                    jax.device_get(loss)
                else:
                    float(loss)
        if worker is not None:
            worker.join()
        jax.block_until_ready((w, losses))
    return load(logdir)
