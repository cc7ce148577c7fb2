import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

batch = jnp.ones((6, 16))  # 6 rows over 4 devices
for kind in (AxisType.Auto, AxisType.Explicit):  # the two axis types word it differently
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(kind, kind))
    try:
        jax.device_put(batch, NamedSharding(mesh, P("data")))
    except ValueError as err:
        print(f"{type(err).__name__}: {err}")
