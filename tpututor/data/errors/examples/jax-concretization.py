import jax
import jax.numpy as jnp

@jax.jit
def first(x, n):
    return x[: int(n)]  # the length of the result depends on a traced value

first(jnp.arange(10), 3)
