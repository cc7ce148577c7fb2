"""tpututor.hosts (the multi-host launcher), tpututor.tblog, and each host's own data shards.

The trainer run as four hosts (eight devices, a preemption, a dead host, a resume that matches the
uninterrupted run step for step) is lessons 14a (multi-host) and 14b (dead host), which assert all of it: the test suite
executes it once (tests/test_notebooks.py), so it is not repeated here."""

from __future__ import annotations

import signal
import subprocess
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import PYTHON, ROOT, run_python
from tpututor import hosts, tblog


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
    out = run_python(
        "import sys, tpututor.hosts, tpututor.tblog\n"
        "print(sorted(m for m in ('jax', 'numpy', 'tensorflow', 'grain') if m in sys.modules))"
    )
    assert out.strip() == "[]"


def test_each_host_gets_the_variables_jax_reads_and_short_timeouts():
    base = {
        "PATH": "/bin",
        "SLURM_NTASKS": "99",
        "OMPI_MCA_orte_hnp_uri": "x",
        "XLA_FLAGS": "--xla_dump_to=/d --xla_force_host_platform_device_count=8",
        "JAX_NUM_CPU_DEVICES": "8",
    }
    env = hosts.host_env(2, 4, 12345, 2, heartbeat_timeout=7, init_timeout=30, launch_id="abc", base=base)
    assert env["JAX_COORDINATOR_ADDRESS"] == "127.0.0.1:12345"
    assert (env["SLURM_NTASKS"], env["SLURM_PROCID"], env["SLURM_LOCALID"]) == ("4", "2", "2")
    assert env["XLA_FLAGS"] == "--xla_dump_to=/d --xla_force_host_platform_device_count=2"
    assert "OMPI_MCA_orte_hnp_uri" not in env and "JAX_NUM_CPU_DEVICES" not in env
    assert env["JAX_PLATFORMS"] == "cpu" and env["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] == "gloo"
    assert hosts.initialize_options(env) == {
        "heartbeat_timeout_seconds": 7,
        "initialization_timeout": 30,
        "shutdown_timeout_seconds": 30,
    }
    assert hosts.initialize_options({}) == {}  # on a TPU slice: JAX's own defaults
    older_jax = ("coordinator_address", "initialization_timeout", "heartbeat_timeout_seconds")  # 0.7.2: no shutdown
    assert hosts.initialize_options(env, accepted=older_jax) == {
        "heartbeat_timeout_seconds": 7,
        "initialization_timeout": 30,
    }
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
    job = hosts.Job(
        script("""
        import json, os, sys
        print("hello from", os.environ["SLURM_PROCID"], "of", os.environ["SLURM_NTASKS"])
        print("to stderr", file=sys.stderr)
        print(json.dumps({"process": int(os.environ["SLURM_PROCID"])}))
        print('{"cut off": ')
    """),
        hosts=3,
    )
    result = job.wait()
    assert result.ok and result.returncode == 0 and [e.host for e in result.exits] == [0, 1, 2]
    assert result.output(1).splitlines()[:2] == ["hello from 1 of 3", "to stderr"]
    assert [hosts.records(result, h) for h in range(3)] == [[{"process": 0}], [{"process": 1}], [{"process": 2}]]
    echoed = capsys.readouterr().out
    assert "[host 2] hello from 2 of 3" in echoed and "[host 0] to stderr" in echoed
    assert hosts.leftovers(job.launch_id) == []


def test_a_failed_host_gives_the_others_grace_then_every_host_is_stopped():
    job = hosts.Job(
        script("""
        import os, sys, time
        if os.environ["SLURM_PROCID"] == "1":
            print("failing", flush=True)
            sys.exit(3)
        time.sleep(60)
    """),
        hosts=3,
        grace=1.0,
        echo=False,
    )
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
        for _line in job.follow():
            break  # as an exception or Ctrl-C in the loop would
    assert gone(job.pids) and hosts.leftovers(job.launch_id) == []


def test_the_cli_prefixes_lines_returns_the_status_and_stops_hosts_on_ctrl_c():
    out = subprocess.run(
        [
            PYTHON,
            "-m",
            "tpututor",
            "launch",
            "--hosts",
            "2",
            "--",
            PYTHON,
            "-c",
            "import os, sys; print('id', os.environ['SLURM_PROCID']); sys.exit(int(os.environ['SLURM_PROCID']) * 5)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 5 and "[host 0] id 0" in out.stdout and "[host 1] id 1" in out.stdout
    assert "host 1 (pid" in out.stderr and "exit status 5" in out.stderr
    bad = subprocess.run(
        [PYTHON, "-m", "tpututor", "launch", "--hosts", "2"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
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
    launcher = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "tpututor",
            "launch",
            "--hosts",
            "2",
            "--",
            PYTHON,
            "-c",
            "import os, time; print('pid', os.getpid(), flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
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
    job = hosts.Job(
        script("""
        import os, signal, time
        def blocked():
            os.kill(os.getpid(), signal.SIGABRT)
        blocked()
    """),
        hosts=1,
        echo=False,
    )
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


# --------------------------------------------------------------------------- run_process, run_processes

PRINTS_LOSSES = """
    import json, sys, time
    for step in range(1, int(sys.argv[1]) + 1):
        print(json.dumps({"step": step, "loss": 1.0 / step, "process": int(sys.argv[3:4] and sys.argv[3] or 0)}), flush=True)
        time.sleep(float(sys.argv[2]))
    print("a line that is not JSON", flush=True)
    print("a warning", file=sys.stderr, flush=True)
"""


def test_a_process_s_losses_status_and_seconds_come_back():
    run = hosts.run_process(script(PRINTS_LOSSES) + ["3", "0"], timeout=30)
    assert run.losses == {1: 1.0, 2: 0.5, 3: 1 / 3}
    assert run.returncode == 0 and not run.stopped and not run.timed_out and 0 < run.seconds < 30
    assert run.lines[-1] == "a line that is not JSON" and "a warning" in run.stderr
    assert hosts.losses_of(['{"step": 2, "loss": 1.5}', "{not json", '{"done": true}', "text"]) == {2: 1.5}


def test_the_stop_signal_is_sent_once_the_step_is_printed():
    run = hosts.run_process(script(PRINTS_LOSSES) + ["1000", "0.02"], timeout=30, stop_after=3)
    assert run.stopped and not run.timed_out and run.returncode == -signal.SIGKILL
    assert min(run.losses) == 1 and 3 <= max(run.losses) < 1000 and run.seconds < 20


def test_the_watchdog_kills_a_process_that_hangs_and_check_raises():
    hang = script('import time; print(\'{"step": 1, "loss": 2.0}\', flush=True); time.sleep(600)')
    t0 = time.monotonic()
    run = hosts.run_process(hang, timeout=1.5, check=False)
    assert run.timed_out and run.returncode == -signal.SIGKILL and run.losses == {1: 2.0}
    assert time.monotonic() - t0 < 10
    with pytest.raises(RuntimeError, match="timeout of 1.5 s"):
        hosts.run_process(hang, timeout=1.5)
    with pytest.raises(RuntimeError, match=r"exit status 3(.|\n)*broken"):
        hosts.run_process(script("import sys; print('broken', file=sys.stderr); sys.exit(3)"))


def test_the_processes_of_one_job_start_together_and_each_is_collected():
    env = hosts.cpu_env("/tmp/cache-dir", base={"PATH": "/usr/bin"})
    assert env["JAX_PLATFORMS"] == "cpu" and env["JAX_COMPILATION_CACHE_DIR"] == "/tmp/cache-dir"
    t0 = time.monotonic()
    runs = hosts.run_processes([script(PRINTS_LOSSES) + ["2", "1", str(i)] for i in range(2)], env=env)
    assert [r.records[0]["process"] for r in runs] == [0, 1] and all(r.losses == {1: 1.0, 2: 0.5} for r in runs)
    assert time.monotonic() - t0 < 3.8, "the two ran at the same time, not one after the other"


@pytest.mark.parametrize(
    "call, fix",
    [
        (lambda: hosts.run_process("python -m tpututor.lm train"), "shlex.split"),
        (lambda: hosts.run_process([PYTHON, "--steps", 5]), r"str\(n\)"),
        (lambda: hosts.run_processes([]), "one per process"),
        (lambda: hosts.run_process([PYTHON], timeout=0), "timeout=300"),
        (lambda: hosts.run_process([PYTHON], stop_after=0), "stop_after=5"),
    ],
)
def test_bad_arguments_name_the_fix(call, fix):
    with pytest.raises((TypeError, ValueError), match=fix):
        call()
