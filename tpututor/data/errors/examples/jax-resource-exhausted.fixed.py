import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
import jax
import jax.numpy as jnp

x = jnp.ones(2**15)
row_sums = jax.jit(lambda v: jnp.outer(v, v).sum(axis=1))(x)  # fused: the matrix is never stored
row_sums.block_until_ready()
assert row_sums.shape == (2**15,) and float(row_sums[0]) == 2.0**15
