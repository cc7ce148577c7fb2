import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
from jax.experimental import mesh_utils
from jax.sharding import AxisType

try:
    jax.make_mesh((4, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))  # 16 devices
except ValueError as err:
    print(f"ValueError: {err}")
mesh_utils.create_device_mesh((4, 4))  # the older helper words it differently
