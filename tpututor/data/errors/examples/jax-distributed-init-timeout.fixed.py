# Start every process, each with the same coordinator address and process count and its own index:
# here with tpututor's launcher, on 127.0.0.1 (from a shell: python -m tpututor launch --hosts 2 -- CMD).
import sys
from tpututor import hosts

host = '''
import jax
jax.distributed.initialize(initialization_timeout=60)  # address, count and index from the launcher
print(f"process {jax.process_index()} of {jax.process_count()}: {jax.device_count()} devices")
jax.distributed.shutdown()
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:  # stops both, whatever happens
    result = job.wait()
assert result.ok, result.summary()
