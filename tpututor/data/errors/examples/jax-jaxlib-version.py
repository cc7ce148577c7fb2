# What import jax checks first, fed the versions of mismatched installs (a jaxlib too old, one too new):
import jax.version
from jax._src.lib import check_jaxlib_version

for jaxlib_version in ("0.4.0", "0.99.0"):
    try:
        check_jaxlib_version(jax.version.__version__, jaxlib_version, jax.version._minimum_jaxlib_version)
    except RuntimeError as err:
        print(f"RuntimeError: {err}")
