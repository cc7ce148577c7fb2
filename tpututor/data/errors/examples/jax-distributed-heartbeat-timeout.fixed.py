# Every process stays to the end and leaves through jax.distributed.shutdown(), together.
import sys
from tpututor import hosts

host = '''
import time
import jax
jax.distributed.initialize(initialization_timeout=60, heartbeat_timeout_seconds=5)
print(f"process {jax.process_index()} joined", flush=True)
time.sleep(1)  # the work
jax.distributed.shutdown()  # waits for every process (JAX also calls it at exit)
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:
    result = job.wait()
assert result.ok, result.summary()
