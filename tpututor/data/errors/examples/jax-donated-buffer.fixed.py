import jax
import jax.numpy as jnp

update = jax.jit(lambda params: params - 0.1, donate_argnums=0)
params = jnp.ones(4)
params = update(params)  # the name now holds the result
assert abs(float(params[0]) - 0.9) < 1e-6
