import jax.version
from jax._src.lib import check_jaxlib_version

check_jaxlib_version(jax.version.__version__, jax.version.__version__, jax.version._minimum_jaxlib_version)
