# On a TPU VM without libtpu. Here: JAX's own start-up check, with its TPU probe faked.
import logging
logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
import jax
from jax._src import hardware_utils, xla_bridge

jax.devices()  # the CPU backend starts
hardware_utils.num_available_tpu_chips_and_device_id = lambda: (4, None)  # fake: four TPU chips attached
xla_bridge._suggest_missing_backends()  # the check JAX runs when it starts
