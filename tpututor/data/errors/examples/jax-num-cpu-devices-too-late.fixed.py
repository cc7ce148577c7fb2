import jax

jax.config.update("jax_num_cpu_devices", 8)  # right after import jax
import jax.numpy as jnp

jnp.ones(2) + 1
assert jax.device_count() == 8
