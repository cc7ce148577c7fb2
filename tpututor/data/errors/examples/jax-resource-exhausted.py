import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # give this process 3 GiB, like a small device
import jax
import jax.numpy as jnp

x = jnp.ones(2**15)
scores = jax.jit(lambda v: jnp.outer(v, v))(x)  # a 32768 x 32768 float32 matrix: 4 GiB
scores.block_until_ready()  # JAX runs asynchronously: the failure surfaces when you wait for the result
