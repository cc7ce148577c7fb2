"""XProf's web server on 127.0.0.1, and which addresses a port listens on.

:func:`serve` starts XProf's web server for a log directory on 127.0.0.1 only (``xprof --logdir``
itself listens on every interface) and returns a :class:`Server` that reads XProf's pages as JSON;
it needs ``pip install xprof``, in the subprocess it starts: this module imports no framework
and not ``xprof``. :func:`listening_addresses` reads ``/proc/net/tcp`` to say which addresses a
port listens on (for ``jax.profiler.start_server`` as much as for XProf).
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["listening_addresses", "serve", "Server"]


def listening_addresses(port: int) -> set[str]:
    """The local addresses a TCP port listens on, read from ``/proc/net/tcp`` and ``tcp6`` (Linux):
    "0.0.0.0" or "::" mean every interface. Empty when nothing listens, or off Linux."""
    found = set()
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            address, hex_port = parts[1].rsplit(":", 1)
            if parts[3] != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # each 32-bit word is little-endian
            found.add(socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, words))
    return found


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

    def hosts(self, run: str) -> list[str]:
        """The hosts (trace files) of ``run``."""
        return [h["hostname"] if isinstance(h, dict) else h for h in self._get(f"data/plugin/profile/hosts?run={run}")]

    def tool_data(self, run: str, tool: str, host: str | None = None):
        """What XProf's page for ``tool`` (e.g. "op_profile", "overview_page") is drawn from, as JSON."""
        host = host if host is not None else self.hosts(run)[0]
        return self._get(f"data/plugin/profile/data?run={run}&tag={tool}&host={host}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)

    def __enter__(self) -> Server:
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
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, logdir, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
        start_new_session=True,
    )
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
                raise TimeoutError(f"XProf did not answer on {server.url} within {timeout:.0f} s") from None
            time.sleep(0.5)
