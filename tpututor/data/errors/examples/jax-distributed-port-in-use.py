# Process 0 starts the coordinator on the port of the address, which something else holds already.
import socket
import jax

busy = socket.socket()
busy.bind(("127.0.0.1", 0))  # the port is taken
busy.listen()
port = busy.getsockname()[1]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0,
                           coordinator_bind_address=f"127.0.0.1:{port}")  # listen on this machine only
