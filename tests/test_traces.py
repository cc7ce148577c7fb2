"""tpututor.traces on traces the installed JAX and torch_xla write, and its practice traces."""

from __future__ import annotations

import gzip
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import run_python
from tpututor import traces


def test_load_finds_the_newest_run_and_parses_events(jax_trace):
    t = traces.load(jax_trace)
    assert t.run_dir.parent.name == "profile" and t.file.name.endswith(".trace.json.gz")
    assert t.events and t.host_thread is not None and len(t.step_events) == 3
    assert any(e.name == "host work" for e in t.events)


def test_a_run_folder_or_the_file_itself_also_loads(jax_trace):
    run = traces.latest_run(jax_trace)
    assert len(traces.load(run).events) == len(traces.load(next(run.glob("*.trace.json.gz"))).events)


def test_top_ops_rank_the_device_ops_and_their_shares_sum_to_one(jax_trace):
    t = traces.load(jax_trace)
    ops = traces.top_ops(t, n=50)
    assert ops and ops[0][2] >= ops[-1][2]
    assert sum(share for *_, share in ops) == pytest.approx(1.0)
    assert not any(name.startswith(("end: ", "$", "ThreadpoolListener")) for name, *_ in ops)
    assert "| device op | count |" in traces.op_table(t)


def test_steps_split_into_device_host_and_idle(jax_trace):
    breakdown = traces.steps(traces.load(jax_trace))
    assert [b.step for b in breakdown] == [0, 1, 2]
    for b in breakdown:
        assert b.device_us > 0 and b.host_us > 0 and b.idle_us >= 0
        assert b.device_us + b.host_us + b.idle_us == pytest.approx(b.total_us, rel=1e-6, abs=1e-3)
    assert "| step | total ms |" in traces.step_table(breakdown)


def test_timeline_and_compare(jax_trace, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    t = traces.load(jax_trace)
    ax = traces.plot_timeline(t)
    assert ax.get_yticklabels() and ax.get_xlabel().startswith("ms since")
    ax.figure.savefig(tmp_path / "timeline.png")
    table = traces.compare(t, t, ("a", "b"))
    assert table.splitlines()[0] == "| | a | b |" and "| device busy |" in table


def test_overall_covers_the_device_work_after_the_last_step(jax_trace):
    t = traces.load(jax_trace)
    whole = traces.overall(t)
    assert whole.total_us >= t.step_events[-1].end - t.step_events[0].ts
    assert whole.device_us + whole.host_us + whole.idle_us == pytest.approx(whole.total_us, rel=1e-6, abs=1e-3)
    assert whole.device_us >= sum(b.device_us for b in traces.steps(t)) - 1e-6


def test_a_trace_without_step_annotations_says_how_to_add_them(tmp_path):
    with jax.profiler.trace(str(tmp_path)):
        jnp.ones(8).block_until_ready()
    with pytest.raises(ValueError, match="StepTraceAnnotation"):
        traces.steps(traces.load(tmp_path))


def test_missing_directory_and_missing_run_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no profile log directory at"):
        traces.load(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=f"no profile run under {tmp_path}"):
        traces.load(tmp_path)


def test_a_run_without_the_json_trace_points_to_xprof(tmp_path):
    run = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(b"\x00")
    with pytest.raises(FileNotFoundError, match="no \\*.trace.json.gz in .*2026_01_01"):
        traces.load(tmp_path)


def test_a_truncated_trace_is_a_clear_error(tmp_path):
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    data = gzip.compress(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "ts": 0, "dur": 1}]}).encode())
    (run / "vm.trace.json.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a complete gzipped trace.*interrupted"):
        traces.load(tmp_path)


def test_malformed_events_are_skipped_not_fatal(tmp_path):
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "ok", "ts": 0, "dur": 5},
        {"ph": "X", "pid": 1, "tid": 1, "name": "no time"},
        {"ph": "X", "ts": "soon"},
        "garbage",
        7,
    ]
    with gzip.open(run / "vm.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    t = traces.load(tmp_path)
    assert [e.name for e in t.events] == ["ok"] and t.events[0].process == "/host:CPU"


@pytest.mark.slow
def test_torch_xla_traces_read_the_same_way(tmp_path):
    run_python(
        """
        import sys, torch, torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.debug.profiler as xp
        x = torch.randn(256, 256).to(torch_xla.device())
        torch_xla.sync()
        xp.start_trace(sys.argv[1])
        for i in range(2):
            with xp.StepTrace("train", step_num=i):
                y = x @ x
        xm.wait_device_ops()
        xp.stop_trace()
    """,
        str(tmp_path),
        env={"PJRT_DEVICE": "CPU"},
    )
    t = traces.load(tmp_path)
    assert "dot" in [name for name, *_ in traces.top_ops(t)] and len(t.step_events) == 2


def test_a_multi_host_run_reads_every_hosts_file(tmp_path):
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    for host, op in (("host-a", "dot.1"), ("host-b", "add.2")):
        events = [
            {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "X", "pid": 1, "tid": 2, "name": op, "ts": 1, "dur": 4},
        ]
        with gzip.open(run / f"{host}.trace.json.gz", "wt") as f:
            json.dump({"traceEvents": events}, f)
    t = traces.load(tmp_path)
    assert t.hosts == ["host-a", "host-b"] and len(t.files) == 2
    assert {name for name, *_ in traces.top_ops(t)} == {"dot", "add"}


def test_nested_ops_count_once_and_clone_suffixes_fold(tmp_path):
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "tf_XLACpu"}},
        {"ph": "X", "pid": 1, "tid": 2, "name": "while", "ts": 0, "dur": 10},
        {"ph": "X", "pid": 1, "tid": 2, "name": "dot.3", "ts": 1, "dur": 4},
        {"ph": "X", "pid": 1, "tid": 2, "name": "tanh.3.clone", "ts": 5, "dur": 4},
        {"ph": "X", "pid": 1, "tid": 2, "name": "H2D Dispatch", "ts": 20, "dur": 5},
        {"ph": "X", "pid": 1, "tid": 2, "name": "Pool::Await", "ts": 30, "dur": 5},
    ]
    with gzip.open(run / "vm.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    ops = {name: (count, us) for name, count, us, _ in traces.top_ops(traces.load(tmp_path))}
    assert ops == {"dot": (1, 4.0), "tanh": (1, 4.0)}


def _write_trace(tmp_path, events, name="vm"):
    run = tmp_path / "plugins" / "profile" / "r1"
    run.mkdir(parents=True, exist_ok=True)
    with gzip.open(run / f"{name}.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    return traces.load(tmp_path)


def _two_python_threads(load_ts=(0, 20), step_ts=(0, 20), waits=(15,)):
    """A host with two threads both named "python" (the loop, tid 1, and a loader, tid 2) and a CPU device."""
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "python"}},
        {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "tf_XLACpu"}},
    ]
    for i, ts in enumerate(step_ts):
        events.append({"ph": "X", "pid": 1, "tid": 1, "name": "train", "ts": ts, "dur": 20, "args": {"step_num": i}})
        events.append({"ph": "X", "pid": 1, "tid": 3, "name": "dot.1", "ts": ts + 10, "dur": 10})
    for ts in load_ts:
        events.append({"ph": "X", "pid": 1, "tid": 2, "name": traces.INPUT, "ts": ts, "dur": 10})
    for ts in waits:
        events.append({"ph": "X", "pid": 1, "tid": 1, "name": traces.HOST_WAIT, "ts": ts, "dur": 5})
    return events


def test_threads_sharing_a_name_are_told_apart_by_id(tmp_path):
    t = _write_trace(tmp_path, _two_python_threads())
    assert t.host_thread == "python" and t.host_key == ("vm", 1, 1)
    assert all(e.tid == 1 for e in t.host_events), "the loader's events are not the loop's host work"
    assert traces.time_in(t, thread="loop") == 0 and traces.time_in(t) == pytest.approx(20)


def test_overlap_says_how_much_loading_hides_behind_device_work(tmp_path):
    hidden = _write_trace(tmp_path / "a", _two_python_threads(load_ts=(10, 30)))  # loads while dot.1 runs
    exposed = _write_trace(tmp_path / "b", _two_python_threads(load_ts=(0, 20)))  # loads before it
    assert traces.overlap(hidden) == pytest.approx(1.0) and traces.overlap(exposed) == pytest.approx(0.0)
    assert traces.overlap(hidden, thread="loop") == 0.0, "nothing loads on the loop's thread"
    with pytest.raises(ValueError, match="'any' or 'loop'"):
        traces.time_in(hidden, thread="loader")


def test_host_waits_count_only_waits_inside_steps(tmp_path):
    t = _write_trace(tmp_path, _two_python_threads(waits=(15, 35, 60)))  # 60: after the last step (ends 40)
    assert [w.ts for w in traces.host_waits(t)] == [15, 35]
    assert "| host waits for a device value, per step | 1.0 | 1.0 |" in traces.compare(t, t)


def test_a_prefetching_thread_shows_as_a_loader_not_as_the_loop(tmp_path):
    import threading

    def work():
        with jax.profiler.TraceAnnotation(traces.INPUT):
            np.linalg.svd(np.ones((100, 100)))

    with jax.profiler.trace(str(tmp_path)):
        with jax.profiler.StepTraceAnnotation("train", step_num=0):
            loader = threading.Thread(target=work)
            loader.start()
            loader.join()
            float(jnp.ones(4).sum())
    t = traces.load(tmp_path)
    assert traces.time_in(t) > 0 and traces.time_in(t, thread="loop") == 0
    assert len(traces.host_waits(t)) == 1, "float() is one wait for a device value, on the loop's thread"


def _measures(t):
    """What a diagnosis reads from a trace: shares of the run, and host waits per step."""
    whole = traces.overall(t)
    return {
        "stalled": traces.time_in(t, thread="loop") * (1 - traces.overlap(t, thread="loop")) / whole.total_us,
        "loop_loads": traces.time_in(t, thread="loop") / whole.total_us,
        "any_loads": traces.time_in(t) / whole.total_us,
        "waits": len(traces.host_waits(t)) / len(t.step_events),
        "device": whole.device_share,
    }


def _diagnose(t):
    """The lesson's rules (exercise 07.3), written apart from its worked answer."""
    m = _measures(t)
    if m["stalled"] >= 0.2:
        return "input-bound"
    if m["device"] >= 0.5:
        return "device-bound"
    return "host-sync-bound" if m["waits"] >= 0.5 else "dispatch-bound"


SAMPLED = [(kind, variant) for kind in traces.KINDS for variant in traces.VARIANTS[kind]]


@pytest.mark.parametrize(("kind", "variant"), SAMPLED, ids=[f"{k}-{v}" for k, v in SAMPLED])
def test_sample_plants_the_bottleneck_it_is_asked_for(kind, variant, tmp_path):
    t = traces.sample(kind, tmp_path, seed=3, variant=variant)
    m = _measures(t)
    assert _diagnose(t) == kind, m
    if kind == "input-bound":  # the loop's thread loads while the device has nothing to do
        assert m["stalled"] >= 0.5, m
    elif kind == "host-sync-bound":  # no loading at all, a read-back every step, the device mostly idle
        assert m["any_loads"] == 0 and m["waits"] == 1 and m["device"] < 0.5, m
    elif kind == "dispatch-bound":  # nothing loaded, nothing read back, and still the device mostly idle
        assert m["any_loads"] == 0 and m["waits"] == 0 and m["device"] < 0.5, m
    else:  # the device busy most of the run, and no input stall
        assert m["device"] >= 0.5 and m["stalled"] < 0.2, m
    # and what each loop shape shows that a rule looking only for presence takes for another bottleneck
    if variant == "serial":
        assert m["loop_loads"] >= 0.5, m
    elif variant == "plain":
        assert m["any_loads"] == 0 and m["waits"] == 0, m  # only the device share tells it from dispatch-bound
    elif variant == "sync":
        assert m["waits"] == 1, m  # float(loss) every step, yet the device is the limit
    elif variant == "prefetch":
        assert m["loop_loads"] == 0 and m["any_loads"] > 0.05, m  # loading, on another thread
    elif variant == "light-input":
        assert 0 < m["loop_loads"] < 0.05, m  # loading in the loop's thread, but briefly
    elif variant == "overlapped-input":  # a long load in the loop's thread, hidden behind the step just dispatched
        assert m["loop_loads"] >= 0.2 and traces.overlap(t, thread="loop") >= 0.5, m


def test_gpu_kernels_count_once_from_the_stream_lines_not_the_derived_xla_ops_line(tmp_path):
    device = [
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 2, "tid": 1, "name": "thread_name", "args": {"name": "Stream #13(Compute)"}},
        {"ph": "M", "pid": 2, "tid": 2, "name": "thread_name", "args": {"name": "Stream #14(MemcpyH2D)"}},
        {"ph": "M", "pid": 2, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 2, "tid": 1, "name": "gemm_fusion", "ts": 0, "dur": 8},
        {"ph": "X", "pid": 2, "tid": 2, "name": "MemcpyH2D", "ts": 0, "dur": 3},
        {"ph": "X", "pid": 2, "tid": 3, "name": "gemm_fusion", "ts": 0, "dur": 8},
    ]  # derived from the stream
    t = _write_trace(tmp_path, device)
    assert traces.top_ops(t) == [("gemm_fusion", 1, 8.0, 1.0)]


def test_a_tpu_without_stream_lines_is_read_from_its_xla_ops_line(tmp_path):
    device = [
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 2, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 2, "tid": 3, "name": "fusion.4", "ts": 0, "dur": 8},
    ]
    assert [name for name, *_ in traces.top_ops(_write_trace(tmp_path, device))] == ["fusion"]


def test_xla_cpu_executor_waits_count_as_busy_but_are_not_ops(tmp_path):
    """A large dot on XLA:CPU runs on the Eigen pool, marked only by the executor's wait on its own thread."""
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 1, "name": "thread_name", "args": {"name": "python"}},
        {"ph": "M", "pid": 1, "tid": 4, "name": "thread_name", "args": {"name": "tf_XLAPjRtCpuClient/1"}},
        {"ph": "X", "pid": 1, "tid": 1, "name": "train", "ts": 0, "dur": 100, "args": {"step_num": 0}},
        {"ph": "X", "pid": 1, "tid": 4, "name": "ThunkExecutor::Execute (wait for completion)", "ts": 10, "dur": 60},
        {"ph": "X", "pid": 1, "tid": 4, "name": "add.1", "ts": 75, "dur": 5},
    ]
    t = _write_trace(tmp_path, events)
    assert [name for name, *_ in traces.top_ops(t)] == ["add"]
    assert traces.steps(t)[0].device_us == pytest.approx(65)


def test_sample_names_the_kinds_and_variants_it_knows():
    assert set(traces.VARIANTS) == set(traces.KINDS)
    with pytest.raises(ValueError, match="input-bound"):
        traces.sample("disk-bound")
    with pytest.raises(ValueError, match="plain"):
        traces.sample("device-bound", variant="serial")
