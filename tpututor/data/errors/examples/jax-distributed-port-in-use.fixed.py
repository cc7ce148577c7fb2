import socket
import jax
from tpututor import hosts

busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen()
port = hosts.free_port()  # a port nobody listens on (or end the program that holds the old one)
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0,
                           coordinator_bind_address=f"127.0.0.1:{port}")
assert jax.process_count() == 1
jax.distributed.shutdown()
