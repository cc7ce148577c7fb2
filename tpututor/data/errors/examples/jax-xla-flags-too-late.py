import os
import jax

print(jax.device_count())  # the backend starts here
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # read at start-up only
assert jax.device_count() == 1  # the flag changed nothing
