import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
from jax.sharding import AxisType

n = jax.device_count()
shape = (n // 2, 2) if n % 2 == 0 else (n, 1)  # same names, sizes that fit
mesh = jax.make_mesh(shape, ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
assert mesh.size == n
