import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
assert float(total(jnp.arange(8.0))) == 28.0
