"""tpututor.xprof_server: XProf's web server on 127.0.0.1, and the addresses a port listens on."""

from __future__ import annotations

import socket
from pathlib import Path

import jax
import pytest

from tpututor import traces, xprof_server


def listening_addresses(port: int) -> set[str]:
    """The IPv4 addresses a TCP port listens on here, from /proc/net/tcp (state 0A = LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


@pytest.mark.slow
def test_xprof_server_on_localhost_lists_the_run_and_stops(jax_trace):
    with xprof_server.serve(jax_trace, timeout=120) as server:
        assert server.url.startswith("http://127.0.0.1:")
        assert server.runs() == [traces.latest_run(jax_trace).name]
        assert "trace_viewer" in " ".join(server.tools(server.runs()[0]))
        assert listening_addresses(server.port) == {"127.0.0.1"}  # not 0.0.0.0, not another interface
        assert xprof_server.listening_addresses(server.port) == {"127.0.0.1"}
        op_profile = server.tool_data(server.runs()[0], "op_profile")
        assert op_profile["deviceType"] == "CPU_ONLY" and not op_profile["byProgram"]["children"]
        other = [a for a in socket.gethostbyname_ex(socket.gethostname())[2] if not a.startswith("127.")]
        if other:
            with pytest.raises(OSError):
                socket.create_connection((other[0], server.port), timeout=2)
    assert server.process.poll() is not None, "the server process has ended"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


def test_listening_addresses_sees_a_localhost_listener_and_its_end():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert xprof_server.listening_addresses(port) == {"127.0.0.1"}
    assert xprof_server.listening_addresses(port) == set()


def test_jax_profiler_server_listens_on_every_interface_until_stopped():
    """What the lesson says about start_server, checked: it binds [::] (no address argument) and
    stop_server closes it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    jax.profiler.start_server(port)
    try:
        assert xprof_server.listening_addresses(port) == {"::"}
    finally:
        jax.profiler.stop_server()
    assert xprof_server.listening_addresses(port) == set()
