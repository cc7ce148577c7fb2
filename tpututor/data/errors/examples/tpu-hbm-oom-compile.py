import jax.numpy as jnp

from tpututor import aot

v = aot.abstract((2**16,), jnp.float32, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
try:
    aot.compile(lambda v: jnp.sort(jnp.outer(v, v), axis=0)[0], v, slice="v5e-1")  # 16 GiB matrix, sorted
except aot.CompileError as err:
    print(err.message)
