import jax
import jax.numpy as jnp

jnp.ones(2) + 1  # the first operation starts the backend
jax.config.update("jax_num_cpu_devices", 8)  # too late
