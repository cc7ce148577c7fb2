# Process 1 of 2, started alone: process 0, which runs the coordinator, never comes up.
import socket
import jax

with socket.socket() as s:  # a port on this machine that nobody listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=1,
                           initialization_timeout=5)  # seconds to wait for every process (default 300)
