import jax
jax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices
import jax.numpy as jnp
from jax.sharding import AxisType, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
total(jnp.arange(8.0))  # the input is not split over data, but in_specs says it is
