# Two processes join; then process 1 dies without a word, as a preempted or OOM-killed host does.
import sys
from tpututor import hosts

host = '''
import os, signal, time
import jax
jax.distributed.initialize(initialization_timeout=60, heartbeat_timeout_seconds=5)  # default 100 s
print(f"process {jax.process_index()} joined", flush=True)
time.sleep(1)
if jax.process_index() == 1:
    os.kill(os.getpid(), signal.SIGKILL)  # gone: no more heartbeats
time.sleep(60)  # process 0 carries on (a training step, a checkpoint) until JAX notices
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:  # stops both, whatever happens
    print(job.wait().summary())
