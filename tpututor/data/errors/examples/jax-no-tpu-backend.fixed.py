import os
os.environ.pop("JAX_PLATFORMS", None)  # let JAX take the best backend this machine has
import jax

print(jax.devices())
