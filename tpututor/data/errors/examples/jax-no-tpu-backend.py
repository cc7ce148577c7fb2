import os
os.environ["JAX_PLATFORMS"] = "tpu"  # insist on a TPU, on a machine without one
import jax

jax.devices()
