import jax
import jax.numpy as jnp

@jax.jit
def relu(x):
    return jnp.where(x > 0, x, jnp.zeros_like(x))  # the choice happens inside the compiled program

assert relu(jnp.float32(2.0)) == 2.0 and relu(jnp.float32(-1.0)) == 0.0
