import jax
import jax.numpy as jnp

update = jax.jit(lambda params: params - 0.1, donate_argnums=0)
params = jnp.ones(4)
new_params = update(params)
params + 1  # params was donated to the update
