import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
from jax.sharding import AxisType

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
with jax.set_mesh(mesh):
    pass
