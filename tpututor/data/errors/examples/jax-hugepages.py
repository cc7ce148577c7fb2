# On a TPU v5e VM with hugepages off. Here: JAX's TPU start-up code, with its hardware probes faked.
import warnings
warnings.simplefilter("always")
from jax._src import cloud_tpu_init, hardware_utils

hardware_utils.num_available_tpu_chips_and_device_id = lambda: (1, hardware_utils.TpuVersion.v5e)
hardware_utils.transparent_hugepages_enabled = lambda: False
cloud_tpu_init.cloud_tpu_init()
