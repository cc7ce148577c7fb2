import jax
import jax.numpy as jnp

@jax.jit
def relu(x):
    if x > 0:  # a Python if on a traced value
        return x
    return jnp.zeros_like(x)

relu(jnp.float32(2.0))
