"""Several JAX hosts on one machine, started the way a TPU slice starts its workers.

On a TPU slice of several hosts, ``gcloud compute tpus tpu-vm ssh NAME --worker=all --command=CMD``
runs ``CMD`` once on every host, and ``jax.distributed.initialize()``, called with no arguments,
learns the coordinator's address, the number of processes and its own index from the TPU
runtime. :class:`Job` (and ``python -m tpututor launch --hosts 4 -- CMD``) rehearses that on one
machine: it starts ``CMD`` once per host on 127.0.0.1, each process with the environment
variables below, gathers every host's output lines (each prefixed with its process index), and
stops every process it started: when the command ends, when one host fails and the others do
not end on their own within ``grace`` seconds, after ``timeout`` seconds, and on Ctrl-C.

What each host's environment holds (:func:`host_env`):

* ``JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT``: read by ``jax.distributed.initialize()`` itself.
* ``SLURM_JOB_ID``, ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``, ``SLURM_PROCID``, ``SLURM_LOCALID``:
  JAX 0.10 reads the process count and index only from a cluster it detects (Open MPI, Slurm,
  Cloud TPU, Kubernetes: ``jax/_src/clusters/``). Of those, Slurm is the one described by
  environment variables alone, so the launcher speaks Slurm's (on one node: ``SLURM_LOCALID`` is
  the process index too). Other ``SLURM_*`` and ``OMPI_*`` variables are removed, so that no
  other cluster is detected first.
* ``JAX_PLATFORMS=cpu``, ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` (N simulated CPU
  devices per host) and ``JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo`` (collectives between
  processes over TCP; the default in JAX 0.10, named for older versions).
* ``JAX_ENABLE_COMPILATION_CACHE=false``: on CPU each process computes its own cache key (measured
  with JAX 0.10.2), and only process 0 writes entries, so with a warm cache process 0 starts the
  first collective while the others still compile; after 30 s its Gloo set-up fails
  (``Gloo context initialization failed: DEADLINE_EXCEEDED: GetKeyValue() timed out``).
  Every host compiling keeps them in step.
* ``TPUTUTOR_HEARTBEAT_TIMEOUT``, ``TPUTUTOR_INIT_TIMEOUT``, ``TPUTUTOR_SHUTDOWN_TIMEOUT``: JAX
  takes its timeouts only as ``initialize()`` arguments (defaults 100 s, 300 s, 300 s), so
  :func:`initialize_options` turns these into those arguments. Short ones make a dead host
  known in seconds.
* ``PYTHONFAULTHANDLER=1``: a host ended by a fatal signal (JAX aborts a process whose peer
  died) prints every thread's Python stack first, which shows the call it was blocked in.
  ``PYTHONUNBUFFERED=1``: lines arrive as they are printed.
* ``TPUTUTOR_LAUNCH_ID``: one id per launch in every process it started, so that
  :func:`leftovers` can find any that outlived it.

One process, or a few started together, without the slice's environment: :func:`run_process` and
:func:`run_processes` start each command with the environment given (:func:`cpu_env`: JAX on the
CPU, sharing a compilation cache), kill it after ``timeout`` seconds (a watchdog), can send it a
signal once it has printed a given step (a preemption), and return what came back
(:class:`ProcessRun`: ``{step: loss}`` from the JSON lines it printed, its exit status, its
seconds, the end of its standard error). Lesson 08a (training) runs ``python -m tpututor.lm train``
with them.

This module imports no framework.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

__all__ = [
    "Job",
    "Line",
    "HostExit",
    "Result",
    "ProcessRun",
    "cpu_env",
    "losses_of",
    "run_process",
    "run_processes",
    "host_env",
    "initialize_options",
    "free_port",
    "leftovers",
    "main_thread_stack",
    "records",
    "TIMEOUT_ENV",
    "LAUNCH_ID_ENV",
]

TIMEOUT_ENV = {  # variable -> the jax.distributed.initialize() argument it becomes
    "TPUTUTOR_HEARTBEAT_TIMEOUT": "heartbeat_timeout_seconds",
    "TPUTUTOR_INIT_TIMEOUT": "initialization_timeout",
    "TPUTUTOR_SHUTDOWN_TIMEOUT": "shutdown_timeout_seconds",
}
LAUNCH_ID_ENV = "TPUTUTOR_LAUNCH_ID"

# Started in front of the command (Linux): ask the kernel to SIGKILL the host if the launcher dies,
# even by SIGKILL itself, then become the command (exec keeps the process id).
_DIE_WITH_PARENT = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(137)  # the launcher is already gone\n"
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def initialize_options(
    environ: Mapping[str, str] | None = None, accepted: Iterable[str] | None = None
) -> dict[str, int]:
    """The keyword arguments for ``jax.distributed.initialize()`` that the launcher's timeout variables
    ask for (:data:`TIMEOUT_ENV`); empty on a TPU slice, where JAX's defaults apply. ``accepted``
    (``inspect.signature(jax.distributed.initialize).parameters``) drops those the running JAX does
    not take: JAX 0.7.2, Colab's, has no ``shutdown_timeout_seconds``."""
    environ = os.environ if environ is None else environ
    names = None if accepted is None else set(accepted)
    return {
        arg: int(environ[var])
        for var, arg in TIMEOUT_ENV.items()
        if environ.get(var) and (names is None or arg in names)
    }


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the coordinator binds it a moment later)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def host_env(
    host: int,
    hosts: int,
    port: int,
    devices_per_host: int = 2,
    *,
    heartbeat_timeout: int = 10,
    init_timeout: int = 60,
    shutdown_timeout: int = 30,
    launch_id: str = "",
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of host ``host`` of ``hosts`` (see the module's docstring for each variable)."""
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0..{hosts - 1}")
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith(("SLURM_", "OMPI_")) and k != "JAX_NUM_CPU_DEVICES"
    }
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_force_host_platform_device_count")]
    env.update(
        {
            "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
            "SLURM_JOB_ID": str(port),
            "SLURM_STEP_NODELIST": "127.0.0.1",
            "SLURM_NTASKS": str(hosts),
            "SLURM_PROCID": str(host),
            "SLURM_LOCALID": str(host),
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": " ".join(flags + [f"--xla_force_host_platform_device_count={devices_per_host}"]),
            "JAX_CPU_COLLECTIVES_IMPLEMENTATION": "gloo",
            "JAX_ENABLE_COMPILATION_CACHE": "false",
            "TPUTUTOR_HEARTBEAT_TIMEOUT": str(heartbeat_timeout),
            "TPUTUTOR_INIT_TIMEOUT": str(init_timeout),
            "TPUTUTOR_SHUTDOWN_TIMEOUT": str(shutdown_timeout),
            "PYTHONFAULTHANDLER": "1",
            "PYTHONUNBUFFERED": "1",
            LAUNCH_ID_ENV: launch_id,
        }
    )
    return env


class Line(NamedTuple):
    """One line a host printed (standard output and error together), ``seconds`` after the launch."""

    host: int
    seconds: float
    text: str

    def __str__(self) -> str:
        return f"[host {self.host}] {self.text}"


@dataclasses.dataclass(frozen=True)
class HostExit:
    """How one host ended: ``returncode`` as ``subprocess`` gives it (-9: killed by SIGKILL),
    ``seconds`` after the launch, and whether the launcher ended it (``stopped``)."""

    host: int
    pid: int
    returncode: int
    seconds: float
    stopped: bool = False

    @property
    def how(self) -> str:
        if self.returncode < 0:
            try:
                name = signal.Signals(-self.returncode).name
            except ValueError:
                name = f"signal {-self.returncode}"
            return f"killed by {name}"
        return f"exit status {self.returncode}"

    def __str__(self) -> str:
        by = ", stopped by the launcher" if self.stopped else ""
        return f"host {self.host} (pid {self.pid}): {self.how} after {self.seconds:.1f} s{by}"


@dataclasses.dataclass
class Result:
    """Every host's exit (in host order), every line, the launch's length, and whether it ran out of time."""

    exits: list[HostExit]
    lines: list[Line]
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(e.returncode == 0 for e in self.exits)

    @property
    def returncode(self) -> int:
        """0 when every host exited 0; 124 after the time limit; else the first failed host's status
        (128 + signal for a signal, as a shell reports it)."""
        if self.timed_out:
            return 124
        first = min((e for e in self.exits if e.returncode != 0), key=lambda e: e.seconds, default=None)
        if first is None:
            return 0
        return 128 - first.returncode if first.returncode < 0 else first.returncode

    def output(self, host: int) -> str:
        """Everything host ``host`` printed, one line each."""
        return "\n".join(line.text for line in self.lines if line.host == host)

    def summary(self) -> str:
        head = f"{len(self.exits)} hosts in {self.seconds:.1f} s" + (" (time limit reached)" if self.timed_out else "")
        return "\n".join([head] + [f"  {e}" for e in self.exits])


class Job:
    """``command`` started once per host on 127.0.0.1, as :func:`host_env` describes.

    ``job = Job(cmd, hosts=4).start()``, then ``for line in job.follow(): ...`` (each line as it comes,
    echoed with its host's prefix unless ``echo=False``) or ``result = job.wait()``; ``job.kill(2)``
    sends a signal to one host (SIGKILL unless told), ``job.signal(sig)`` to every host. Use it as a
    context manager: leaving the block stops every process it started (``stop``), whatever happened.

    When a host fails (a status other than 0, or a signal), the others get ``grace`` seconds to end on
    their own (and show their own error: a peer's death reaches them through JAX's heartbeats),
    then the launcher kills them. After ``timeout`` seconds it kills every host.
    """

    def __init__(
        self,
        command: Sequence[str],
        hosts: int = 4,
        devices_per_host: int = 2,
        *,
        port: int | None = None,
        heartbeat_timeout: int = 10,
        init_timeout: int = 60,
        shutdown_timeout: int = 30,
        grace: float | None = None,
        timeout: float = 600.0,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        echo: bool | TextIO = True,
    ):
        if not command:
            raise ValueError("no command to launch: give it after --, e.g. -- python -m tpututor.lm train ...")
        if hosts < 1 or devices_per_host < 1:
            raise ValueError(f"hosts and devices_per_host must be at least 1, got {hosts} and {devices_per_host}")
        self.command, self.hosts, self.devices_per_host = list(command), hosts, devices_per_host
        self.port = port
        self.timeouts = dict(
            heartbeat_timeout=heartbeat_timeout, init_timeout=init_timeout, shutdown_timeout=shutdown_timeout
        )
        self.grace = heartbeat_timeout + 15.0 if grace is None else grace
        self.timeout, self.env, self.cwd = timeout, env, cwd
        self.echo = sys.stdout if echo is True else echo or None
        self.launch_id = uuid.uuid4().hex
        self.procs: list[subprocess.Popen] = []
        self.lines: list[Line] = []
        self.exits: dict[int, HostExit] = {}
        self._events: queue.Queue = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._stopped: set[int] = set()
        self._t0 = 0.0
        self._result: Result | None = None

    # -- starting
    def start(self) -> Job:
        if self.procs:
            raise RuntimeError("this job has started already: make a new Job to launch again")
        self.port = self.port or free_port()
        self._t0 = time.monotonic()
        wrap = [sys.executable, "-S", "-c", _DIE_WITH_PARENT, str(os.getpid())] if sys.platform == "linux" else []
        try:
            for host in range(self.hosts):
                env = host_env(
                    host,
                    self.hosts,
                    self.port,
                    self.devices_per_host,
                    launch_id=self.launch_id,
                    base=self.env,
                    **self.timeouts,
                )
                proc = subprocess.Popen(
                    wrap + self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,
                )
                self.procs.append(proc)
                for target in (self._read, self._wait):
                    t = threading.Thread(
                        target=target, args=(host, proc), daemon=True, name=f"host{host}-{target.__name__}"
                    )
                    t.start()
                    self._threads.append(t)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Job:
        return self if self.procs else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def seconds(self) -> float:
        """Seconds since the launch."""
        return time.monotonic() - self._t0

    def _read(self, host: int, proc: subprocess.Popen) -> None:
        for raw in proc.stdout:
            self._events.put(Line(host, time.monotonic() - self._t0, raw.decode("utf-8", "replace").rstrip("\r\n")))
        proc.stdout.close()
        self._events.put(("eof", host))

    def _wait(self, host: int, proc: subprocess.Popen) -> None:
        code = proc.wait()
        self._events.put(("exit", host, code, time.monotonic() - self._t0))

    # -- signals
    def kill(self, host: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to host ``host``'s process group (SIGKILL: the machine is gone)."""
        self._signal_group(self.procs[host], sig)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every host (SIGTERM: what a maintenance event or preemption sends)."""
        for proc in self.procs:
            self._signal_group(proc, sig)

    @staticmethod
    def _signal_group(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)  # start_new_session: the host's process id is its group's id
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, wait: float = 5.0) -> None:
        """End every host still running: SIGTERM, then SIGKILL after ``wait`` seconds; then every
        process each host started (its process group), whatever state it is in."""
        running = [(h, p) for h, p in enumerate(self.procs) if p.poll() is None]
        for h, p in running:
            self._stopped.add(h)
            self._signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + wait
        for _h, p in running:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            self._signal_group(p, signal.SIGKILL)
        for p in self.procs:
            p.wait()
        for t in self._threads:
            t.join(timeout=5)

    # -- following
    def follow(self) -> Iterator[Line]:
        """Yield every line as the hosts print it (echoed with its prefix), until all hosts have ended
        and their output is read; the time limit and the grace after a failure apply meanwhile."""
        if not self.procs:
            self.start()
        eofs: set[int] = set()
        failed_at: float | None = None
        timed_out = False
        try:
            while len(eofs) < self.hosts or len(self.exits) < self.hosts:
                now = self.seconds()
                if not timed_out and now > self.timeout:
                    timed_out = True
                    self._note(f"time limit of {self.timeout:.0f} s reached: stopping every host")
                    self._kill_running()
                elif failed_at is not None and now > failed_at + self.grace and len(self.exits) < self.hosts:
                    self._note(f"{self.grace:.0f} s after the first failure: stopping the hosts still running")
                    self._kill_running()
                    failed_at = float("inf")
                try:
                    event = self._events.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(event, Line):
                    self.lines.append(event)
                    if self.echo is not None:
                        print(event, file=self.echo, flush=True)
                    yield event
                elif event[0] == "eof":
                    eofs.add(event[1])
                else:
                    _, host, code, secs = event
                    self.exits[host] = HostExit(host, self.procs[host].pid, code, secs, host in self._stopped)
                    if code != 0 and failed_at is None:
                        failed_at = secs
        finally:
            if len(self.exits) < self.hosts or len(eofs) < self.hosts:  # left early (Ctrl-C, an error, a break)
                self.stop()
            else:
                for p in self.procs:  # anything a host left behind in its process group
                    self._signal_group(p, signal.SIGKILL)
        self._result = Result([self.exits[h] for h in sorted(self.exits)], list(self.lines), self.seconds(), timed_out)

    @property
    def result(self) -> Result | None:
        """How the job ended, once :meth:`follow` (or :meth:`wait`) has run to its end; else None."""
        return self._result

    def wait(self) -> Result:
        """Follow the job to its end (see :meth:`follow`) and return how every host ended."""
        for _ in self.follow():
            pass
        return self._result

    def _kill_running(self) -> None:
        for h, p in enumerate(self.procs):
            if p.poll() is None and h not in self.exits:
                self._stopped.add(h)
                self._signal_group(p, signal.SIGKILL)

    def _note(self, text: str) -> None:
        line = Line(-1, self.seconds(), text)
        self.lines.append(line)
        if self.echo is not None:
            print(f"[launch] {text}", file=self.echo, flush=True)


def main_thread_stack(output: str) -> list[tuple[str, int, str]]:
    """The Python stack of the main thread, innermost call first, as ``(file, line, function)``, from
    the thread dump a host prints when a fatal signal ends it (``PYTHONFAULTHANDLER=1``): the call it
    was in when it died. Empty when the output holds no such dump."""
    frames: list[tuple[str, int, str]] = []
    current: list[tuple[str, int, str]] | None = None
    for line in output.splitlines():
        text = line.strip()
        if text.startswith(("Thread 0x", "Current thread 0x")) and text.endswith("(most recent call first):"):
            current = []
        elif current is not None and text.startswith('File "'):
            path, _, rest = text[6:].partition('", line ')
            number, _, function = rest.partition(" in ")
            if number.isdigit():
                current.append((path, int(number), function))
        elif current is not None:
            if any(f[2] == "<module>" for f in current):  # the thread that runs the program
                frames = current
            current = None
    if current and any(f[2] == "<module>" for f in current):
        frames = current
    return frames


def records(result: Result, host: int = 0) -> list[dict[str, Any]]:
    """The JSON objects host ``host`` printed, one a line, in the order it printed them: how a program
    run under the launcher reports to it (``python -m tpututor.lm train --distributed`` prints
    ``{"process": 0, "processes": 4, ...}`` first, then ``{"step": 1, "loss": ...}`` on process 0).
    Every other line (logs, warnings, a stack dump) is left out, and so is a line cut off mid-object."""
    found = (_json_object(line.text) for line in result.lines if line.host == host)
    return [value for value in found if value is not None]


def leftovers(launch_id: str) -> list[int]:
    """Process ids (Linux) still running with ``TPUTUTOR_LAUNCH_ID=launch_id`` in their environment."""
    marker = f"{LAUNCH_ID_ENV}={launch_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                status = (entry / "status").read_text()
                if "\nState:\tZ" not in status:  # a zombie is gone already, only not yet reaped
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


# -- one process, or a few, started directly (lesson 08a's training subprocesses)


def cpu_env(cache_dir: str | os.PathLike | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment unless given) with JAX on the CPU and, given ``cache_dir``,
    JAX's persistent compilation cache there, every program cached: a second process that runs the
    same program reads it instead of compiling it again."""
    env = dict(os.environ if base is None else base)
    env["JAX_PLATFORMS"] = "cpu"
    if cache_dir is not None:
        env.update(
            {
                "JAX_COMPILATION_CACHE_DIR": os.fspath(cache_dir),
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
            }
        )
    return env


def losses_of(lines: Iterable[str]) -> dict[int, float]:
    """``{step: loss}`` from the lines ``{"step": 1, "loss": 5.5, ...}`` among ``lines`` (what
    ``python -m tpututor.lm train`` prints); every other line is skipped."""
    found: dict[int, float] = {}
    for line in lines:
        record = _json_object(line)
        if record is not None and "step" in record and "loss" in record:
            found[int(record["step"])] = float(record["loss"])
    return found


def _json_object(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclasses.dataclass
class ProcessRun:
    """How one process ended: its exit status (``-9``: killed by SIGKILL), its seconds, every line it
    printed to standard output, the last 4000 characters of its standard error, whether it was sent
    the stop signal (``stopped``) and whether the watchdog killed it (``timed_out``)."""

    argv: list[str]
    returncode: int
    seconds: float
    lines: list[str]
    stderr: str = ""
    stopped: bool = False
    timed_out: bool = False

    @property
    def losses(self) -> dict[int, float]:
        """``{step: loss}`` from the lines it printed (:func:`losses_of`)."""
        return losses_of(self.lines)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every JSON object it printed, one a line, in order."""
        return [r for r in map(_json_object, self.lines) if r is not None]


def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    stop_after: int | None = None,
    stop_signal: int = signal.SIGKILL,
    check: bool = True,
    cwd: str | os.PathLike | None = None,
) -> ProcessRun:
    """Run ``argv`` to its end and return how it went (:class:`ProcessRun`).

    Once it prints step ``stop_after`` (a ``{"step": ...}`` line), it is sent ``stop_signal``
    (SIGKILL: the machine is gone; SIGTERM: a preemption notice); the lines it printed before it
    ended are kept. A watchdog kills it after ``timeout`` seconds. With ``check``, a process that
    fails on its own (an exit status other than 0, not after the stop signal) or runs out of time
    raises :class:`RuntimeError` with the end of its standard error."""
    return run_processes(
        [argv], env=env, timeout=timeout, stop_after=stop_after, stop_signal=stop_signal, check=check, cwd=cwd
    )[0]


def run_processes(
    argvs: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 300.0,
    stop_after: int | None = None,
    stop_signal: int = signal.SIGKILL,
    check: bool = True,
    cwd: str | os.PathLike | None = None,
) -> list[ProcessRun]:
    """Start every command of ``argvs`` at once (the processes of one job), wait for all of them and
    return how each ended, in order; ``timeout`` bounds them all together, and the other arguments
    apply to each as in :func:`run_process`. Whatever happens (a timeout, an error, Ctrl-C), no
    process is left running."""
    argvs = [_checked_argv(a) for a in _checked_list(argvs)]
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}: e.g. timeout=300")
    if stop_after is not None and (not isinstance(stop_after, int) or stop_after < 1):
        raise ValueError(f"stop_after is a step number, 1 or more, got {stop_after!r}: e.g. stop_after=5, or None")
    t0 = time.monotonic()
    procs: list[subprocess.Popen] = []
    errs, lines = [], [[] for _ in argvs]
    stopped, late, ended = [False] * len(argvs), [False] * len(argvs), [0.0] * len(argvs)
    readers: list[threading.Thread] = []

    def read(i: int, proc: subprocess.Popen) -> None:
        for raw in proc.stdout:
            line = raw.rstrip("\r\n")
            lines[i].append(line)
            record = _json_object(line) if stop_after is not None and not stopped[i] else None
            if record is not None and isinstance(record.get("step"), int) and record["step"] >= stop_after:
                stopped[i] = True
                Job._signal_group(proc, stop_signal)
        ended[i] = time.monotonic() - t0  # its output closed: it has ended

    try:
        for i, argv in enumerate(argvs):
            errs.append(tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace"))
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errs[-1],
                text=True,
                errors="replace",
                env=None if env is None else dict(env),
                cwd=cwd,
                start_new_session=True,  # its own process group: signals reach whatever it started too
            )
            procs.append(proc)
            readers.append(threading.Thread(target=read, args=(i, proc), daemon=True, name=f"process{i}-stdout"))
            readers[-1].start()
        for i, proc in enumerate(procs):  # the watchdog: one deadline for them all
            try:
                proc.wait(timeout=max(0.0, t0 + timeout - time.monotonic()))
            except subprocess.TimeoutExpired:
                for j, p in enumerate(procs):
                    if p.poll() is None:
                        late[j] = True
                        Job._signal_group(p, signal.SIGKILL)
                proc.wait()
            ended[i] = ended[i] or time.monotonic() - t0
    finally:
        for p in procs:  # anything still running, or left behind in a process group
            Job._signal_group(p, signal.SIGKILL)
        for p in procs:
            p.wait()
        for t in readers:
            t.join(timeout=5)
    runs = []
    for i, (argv, proc, err) in enumerate(zip(argvs, procs, errs)):
        err.seek(0)
        tail = err.read()[-4000:]
        err.close()
        runs.append(ProcessRun(argv, proc.returncode, ended[i], lines[i], tail, stopped[i], late[i]))
    if check:
        for i, run in enumerate(runs):
            if run.timed_out or (run.returncode != 0 and not run.stopped):
                why = (
                    f"ran past its timeout of {timeout:g} s and was killed (pass a larger timeout= if it is only slow)"
                    if run.timed_out
                    else f"failed with exit status {run.returncode} after {run.seconds:.0f} s"
                )
                raise RuntimeError(
                    f"process {i} ({' '.join(run.argv[:4])} ...) {why}; check=False returns it instead of raising. "
                    f"The end of its standard error:\n{run.stderr[-2000:]}"
                )
    return runs


def _checked_list(argvs: Sequence[Sequence[str]]) -> list[Sequence[str]]:
    if isinstance(argvs, str) or not isinstance(argvs, Sequence) or not argvs:
        raise TypeError(
            f"argvs is a list of command lines, one per process, got {argvs!r}: "
            "e.g. [[sys.executable, '-m', 'tpututor.lm', 'train', '--process-id', str(i)] for i in range(2)]"
        )
    return list(argvs)


def _checked_argv(argv: Sequence[str]) -> list[str]:
    if isinstance(argv, str):
        raise TypeError(
            f"the command {argv!r} is one string: pass its arguments as a list, e.g. "
            "[sys.executable, '-m', 'tpututor.lm', 'train', '--steps', '5'] (shlex.split(command) splits one)"
        )
    argv = [os.fspath(a) if isinstance(a, os.PathLike) else a for a in argv]
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(
            f"a command is a non-empty list of strings, got {argv!r}: write numbers as str(n), e.g. ['--steps', str(5)]"
        )
    return argv
