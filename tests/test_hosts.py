"""tpututor.hosts (the multi-host launcher), tpututor.tblog, and the trainer run as four hosts:
a dead host, a preemption, a resume that matches the uninterrupted run step for step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import PYTHON, ROOT, run_python
from tpututor import hosts, tblog

TINY = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "seq_len": 16}


def script(code: str) -> list[str]:
    return [PYTHON, "-c", textwrap.dedent(code)]


def gone(pids, within: float = 10.0) -> bool:
    """True when none of ``pids`` is alive (or a zombie only) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            if "\nState:\tZ" not in state:
                alive.append(pid)
        if not alive:
            return True
        time.sleep(0.1)
    return False


# --------------------------------------------------------------------------- no framework

def test_importing_hosts_and_tblog_loads_no_framework():
    out = run_python("import sys, tpututor.hosts, tpututor.tblog\n"
                     "print(sorted(m for m in ('jax', 'numpy', 'tensorflow', 'grain') if m in sys.modules))")
    assert out.strip() == "[]"


def test_each_host_gets_the_variables_jax_reads_and_short_timeouts():
    base = {"PATH": "/bin", "SLURM_NTASKS": "99", "OMPI_MCA_orte_hnp_uri": "x", "XLA_FLAGS": "--xla_dump_to=/d "
            "--xla_force_host_platform_device_count=8", "JAX_NUM_CPU_DEVICES": "8"}
    env = hosts.host_env(2, 4, 12345, 2, heartbeat_timeout=7, init_timeout=30, launch_id="abc", base=base)
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:12345"
    assert (env["SLURM_NTASKS"], env["SLURM_PROCID"], env["SLURM_LOCALID"]) == ("4", "2", "2")
    assert env["XLA_FLAGS"] == "--xla_dump_to=/d --xla_force_host_platform_device_count=2"
    assert "OMPI_MCA_orte_hnp_uri" not in env and "JAX_NUM_CPU_DEVICES" not in env
    assert env["JAX_PLATFORMS"] == "cpu" and env["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] == "gloo"
    assert hosts.initialize_options(env) == {"heartbeat_timeout_seconds": 7, "initialization_timeout": 30,
                                             "shutdown_timeout_seconds": 30}
    assert hosts.initialize_options({}) == {}  # on a TPU slice: JAX's own defaults
    older_jax = ("coordinator_address", "initialization_timeout", "heartbeat_timeout_seconds")  # 0.7.2: no shutdown
    assert hosts.initialize_options(env, accepted=older_jax) == {"heartbeat_timeout_seconds": 7,
                                                                 "initialization_timeout": 30}
    with pytest.raises(ValueError, match="not one of 0..3"):
        hosts.host_env(4, 4, 1)


def test_jax_detects_the_launchers_environment_without_connecting():
    # jax.distributed.initialize() with no arguments resolves its topology through this same function
    code = """
        import os
        from jax._src import clusters
        print(clusters.ClusterEnv.auto_detect_unset_distributed_params(
            os.environ.get("JAX_COORDINATOR_ADDRESS"), None, None, None, None, 10)[:3])
    """
    out = run_python(code, env=hosts.host_env(3, 4, 23456, 2), clean_env=True)
    assert out.strip() == "('127.0.0.1:23456', 4, 3)"


def test_lines_are_prefixed_and_gathered_and_exits_reported(capsys):
    job = hosts.Job(script("""
        import os, sys
        print("hello from", os.environ["SLURM_PROCID"], "of", os.environ["SLURM_NTASKS"])
        print("to stderr", file=sys.stderr)
    """), hosts=3)
    result = job.wait()
    assert result.ok and result.returncode == 0 and [e.host for e in result.exits] == [0, 1, 2]
    assert result.output(1).splitlines() == ["hello from 1 of 3", "to stderr"]
    echoed = capsys.readouterr().out
    assert "[host 2] hello from 2 of 3" in echoed and "[host 0] to stderr" in echoed
    assert hosts.leftovers(job.launch_id) == []


def test_a_failed_host_gives_the_others_grace_then_every_host_is_stopped():
    job = hosts.Job(script("""
        import os, sys, time
        if os.environ["SLURM_PROCID"] == "1":
            print("failing", flush=True)
            sys.exit(3)
        time.sleep(60)
    """), hosts=3, grace=1.0, echo=False)
    t0 = time.monotonic()
    result = job.wait()
    assert time.monotonic() - t0 < 20
    assert result.exits[1].returncode == 3 and not result.exits[1].stopped
    assert all(e.returncode == -signal.SIGKILL and e.stopped for e in (result.exits[0], result.exits[2]))
    assert result.returncode == 3 and "stopping the hosts still running" in result.output(-1)
    assert hosts.leftovers(job.launch_id) == []


def test_the_time_limit_stops_every_host_and_a_broken_loop_leaves_nothing_behind():
    job = hosts.Job(script("import time; print('up', flush=True); time.sleep(60)"), hosts=2, timeout=1.5, echo=False)
    result = job.wait()
    assert result.timed_out and result.returncode == 124 and all(e.stopped for e in result.exits)
    job = hosts.Job(script("import time; print('up', flush=True); time.sleep(60)"), hosts=2, echo=False)
    with job:
        for line in job.follow():
            break  # as an exception or Ctrl-C in the loop would
    assert gone(job.pids) and hosts.leftovers(job.launch_id) == []


def test_the_cli_prefixes_lines_returns_the_status_and_stops_hosts_on_ctrl_c():
    out = subprocess.run([PYTHON, "-m", "tpututor", "launch", "--hosts", "2", "--", PYTHON, "-c",
                          "import os, sys; print('id', os.environ['SLURM_PROCID']); sys.exit(int(os.environ['SLURM_PROCID']) * 5)"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 5 and "[host 0] id 0" in out.stdout and "[host 1] id 1" in out.stdout
    assert "host 1 (pid" in out.stderr and "exit status 5" in out.stderr
    bad = subprocess.run([PYTHON, "-m", "tpututor", "launch", "--hosts", "2"], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and "no command to launch" in bad.stderr

    launcher, pids = _sleeping_hosts()
    try:
        launcher.send_signal(signal.SIGINT)  # Ctrl-C
        # The hosts would sleep for ten minutes: only the launcher's own stop ends them. Stopping takes
        # up to 5 s of grace plus thread joins; a loaded CI machine needed more than 30 s once.
        assert launcher.wait(timeout=120) == 130
    finally:
        launcher.kill()
    assert gone(pids)


def test_hosts_die_with_a_launcher_killed_by_sigkill():
    launcher, pids = _sleeping_hosts()
    try:
        launcher.kill()  # no chance to clean up: the kernel ends the hosts (PR_SET_PDEATHSIG)
        launcher.wait()
    finally:
        launcher.kill()
    assert gone(pids)


def _sleeping_hosts() -> tuple[subprocess.Popen, list[int]]:
    """`python -m tpututor launch --hosts 2` over hosts that sleep ten minutes, once both have
    printed their pids: only something done to the launcher can end them in time."""
    launcher = subprocess.Popen([PYTHON, "-m", "tpututor", "launch", "--hosts", "2", "--", PYTHON, "-c",
                                 "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    pids: list[int] = []
    try:
        for line in launcher.stdout:
            if " pid " in line:
                pids.append(int(line.split()[-1]))
            if len(pids) == 2:
                return launcher, pids
    except BaseException:
        launcher.kill()
        raise
    launcher.kill()
    raise AssertionError(f"the launcher ended before both hosts started (pids seen: {pids})")


def test_the_stack_a_fatal_signal_prints_names_the_blocked_call():
    job = hosts.Job(script("""
        import os, signal, time
        def blocked():
            os.kill(os.getpid(), signal.SIGABRT)
        blocked()
    """), hosts=1, echo=False)
    result = job.wait()
    assert result.exits[0].how == "killed by SIGABRT"
    frames = hosts.main_thread_stack(result.output(0))
    assert [f[2] for f in frames] == ["blocked", "<module>"]


# --------------------------------------------------------------------------- TensorBoard event files

def test_tblog_round_trips_scalars(tmp_path):
    with tblog.Writer(tmp_path) as w:
        for step in (1, 2, 3):
            w.scalars(step, {"loss": 4.5 / step, "step_seconds": 0.25})
    assert tblog.read(tmp_path) == {"loss": {1: 4.5, 2: 2.25, 3: 1.5}, "step_seconds": {1: 0.25, 2: 0.25, 3: 0.25}}
    path = tblog.event_files(tmp_path)[0]
    path.write_bytes(path.read_bytes()[:-3])  # a file cut off mid-write: the last record is dropped
    assert tblog.read(tmp_path)["loss"] == {1: 4.5, 2: 2.25}


@pytest.mark.slow
def test_tensorflows_own_reader_reads_tblog_files(tmp_path):
    pytest.importorskip("tensorflow")
    with tblog.Writer(tmp_path) as w:
        w.scalars(7, {"loss": 2.5})
    code = f"""
        import tensorflow as tf
        for e in tf.compat.v1.train.summary_iterator({str(tblog.event_files(tmp_path)[0])!r}):
            print(e.step, repr(e.file_version), [(v.tag, v.simple_value) for v in e.summary.value])
    """
    out = run_python(code, env={"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert out.splitlines() == ["0 'brain.Event:2' []", "7 '' [('loss', 2.5)]"]


# --------------------------------------------------------------------------- data shards

def test_each_process_reads_its_own_shard_files(tmp_path):
    import grain

    from tpututor import lm

    text = "".join(chr(32 + i % 90) for i in range(800))
    lm.write_shards(text, tmp_path, shards=8)
    parts = [lm.read_shards(tmp_path, grain.sharding.ShardOptions(p, 4)) for p in range(4)]
    assert sum(len(p) for p in parts) == 800 and parts[0].dtype == np.int32
    whole = lm.encode(text)
    assert np.array_equal(parts[1][:100], whole[100:200])  # process 1 reads files 1 and 5
    with pytest.raises(ValueError, match="write a multiple of 3"):
        lm.read_shards(tmp_path, grain.sharding.ShardOptions(0, 3))


# --------------------------------------------------------------------------- the rehearsal (slow)

STEPS, SAVE_EVERY, KILL_AFTER, KILLED_HOST = 8, 2, 5, 2  # 8: room for a preemption step before the end;
# kill after 5: the save at step 2 has surely finished (a save waits for the one before), however slow the machine


@pytest.fixture(scope="module")
def bucket(tmp_path_factory):
    from tpututor import lm

    root = tmp_path_factory.mktemp("rehearsal")
    text, _, _ = lm.stdlib_corpus(60_000)
    lm.write_shards(text, root / "bucket", shards=8)
    return root


def trainer(root: Path, run: str, *extra: str) -> list[str]:
    return [PYTHON, "-m", "tpututor.lm", "train", "--distributed", "--config", json.dumps(TINY), "--batch", "8",
            "--steps", str(STEPS), "--data-dir", str(root / "bucket"), "--ckpt-dir", str(root / run),
            "--save-every", str(SAVE_EVERY), *extra]


def launch(command, on_line=None) -> tuple[hosts.Job, hosts.Result, float]:
    # The CPU compiler at a lower optimisation level: the same program every launch, compiled in less time.
    env = {**os.environ, "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"}
    job = hosts.Job(command, hosts=4, devices_per_host=2, timeout=300, env=env, cwd=ROOT, echo=False)
    t0 = time.perf_counter()
    with job:
        for line in job.follow():
            if on_line is not None:
                on_line(job, line)
    assert hosts.leftovers(job.launch_id) == [] and gone(job.pids, 1)
    return job, job.result, time.perf_counter() - t0


def records(result: hosts.Result, host: int = 0) -> list[dict]:
    return [json.loads(t) for t in result.output(host).splitlines() if t.startswith("{")]


def losses(result: hosts.Result) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records(result) if "step" in r}


@pytest.fixture(scope="module")
def uninterrupted(bucket):
    _, result, secs = launch(trainer(bucket, "whole", "--logdir", str(bucket / "logs")))
    print(f"uninterrupted: {secs:.1f} s")
    assert result.ok, result.output(0)[-3000:]
    return result


@pytest.mark.slow
def test_four_hosts_make_eight_devices_and_only_process_0_reports(uninterrupted, bucket):
    for host in range(4):
        first = records(uninterrupted, host)[0]
        assert first == {"process": host, "processes": 4, "devices": 8, "local_devices": 2}
        assert (host == 0) == any("step" in r for r in records(uninterrupted, host))
    steps = losses(uninterrupted)
    assert sorted(steps) == list(range(1, STEPS + 1)) and steps[STEPS] < steps[1]
    board = tblog.read(bucket / "logs")
    assert len(tblog.event_files(bucket / "logs")) == 1  # process 0 only
    assert board["loss"] == {s: float(np.float32(v)) for s, v in steps.items()}


@pytest.mark.slow
def test_a_dead_host_stops_the_job_and_the_relaunch_resumes_to_the_same_losses(uninterrupted, bucket):
    t_all = time.perf_counter()
    killed_at: list[float] = []

    def kill_after_step(job, line):
        if not killed_at and line.host == 0 and line.text.startswith(f'{{"step": {KILL_AFTER},'):
            job.kill(KILLED_HOST)  # SIGKILL: the machine is gone, no chance to say so
            killed_at.append(job.seconds())

    dead_job, dead, _ = launch(trainer(bucket, "run"), kill_after_step)
    assert killed_at, dead.output(0)[-3000:]
    kill = killed_at[0]
    victim = dead.exits[KILLED_HOST]
    assert victim.returncode == -signal.SIGKILL and not victim.stopped
    for e in dead.exits:
        if e.host == KILLED_HOST:
            continue
        text = dead.output(e.host)
        waited = e.seconds - kill
        heartbeat = "Terminating process because the JAX distributed service detected fatal errors" in text
        gloo = [line for line in text.splitlines() if "Gloo" in line and "is connected to" not in line]
        how = "heartbeat" if heartbeat else gloo[:1]
        print(f"host {e.host}: {e.how} {waited:.1f} s after the kill ({how})")
        seen = f"host {e.host}: {e.how} {waited:.1f} s after the kill\n{text[-3000:]}"
        # Every other process ends by itself, with an error, before the launcher's grace runs out: JAX's
        # coordination service notices the missing heartbeats (10 s timeout here) and aborts, or, sooner,
        # a Gloo transfer with the dead host fails. The launcher only stops what is still running after that.
        assert e.returncode != 0 and not e.stopped, seen
        assert waited <= dead_job.grace, seen
        assert heartbeat or gloo, seen
        if heartbeat:
            assert e.returncode == -signal.SIGABRT, seen
            if e.host == 0:  # the coordinator names the dead task
                assert f"The following tasks are unhealthy (stopped sending heartbeats):\n{KILLED_HOST}" in text
            frames = [f for f in hosts.main_thread_stack(text) if f[0].endswith("lm.py")]
            assert frames and frames[0][2] == "train", seen
            source = (ROOT / "tpututor" / "lm.py").read_text().splitlines()[frames[0][1] - 1]
            assert "float(loss)" in source  # blocked reading the step's loss: its all-reduce never completed
    before = losses(dead)

    _, resumed, _ = launch(trainer(bucket, "run"))
    assert resumed.ok, resumed.output(0)[-3000:]
    after = losses(resumed)
    whole = losses(uninterrupted)
    print(f"killed after step {max(before)}, resumed at step {min(after)}; whole rehearsal "
          f"{time.perf_counter() - t_all:.1f} s")
    assert min(after) - 1 in range(1, KILL_AFTER + 1) and max(after) == STEPS
    assert {s: before[s] for s in before} == {s: whole[s] for s in before}
    assert after == {s: whole[s] for s in after}  # bit for bit, step for step


@pytest.mark.slow
def test_a_sigterm_to_one_host_saves_a_checkpoint_on_every_host_at_one_step(uninterrupted, bucket):
    import orbax.checkpoint as ocp

    sent: list[float] = []

    def preempt(job, line):
        if not sent and line.host == 0 and line.text.startswith('{"step": 2,'):
            job.kill(1, signal.SIGTERM)  # what a maintenance event sends the host it stops
            sent.append(job.seconds())

    _, result, _ = launch(trainer(bucket, "preempted", "--save-every", "100"), preempt)
    assert sent and result.ok, result.output(0)[-3000:]
    stops = {r["preempted"] for h in range(4) for r in records(result, h) if "preempted" in r}
    assert len(stops) == 1, stops
    (stop,) = stops
    assert "SIGTERM caught" in result.output(1) and 2 <= stop < STEPS
    with ocp.CheckpointManager(bucket / "preempted", options=ocp.CheckpointManagerOptions(create=False)) as m:
        assert m.all_steps() == [1, stop]  # the first step (Orbax's initial save) and the preemption
    assert losses(result) == {s: v for s, v in losses(uninterrupted).items() if s <= stop}
