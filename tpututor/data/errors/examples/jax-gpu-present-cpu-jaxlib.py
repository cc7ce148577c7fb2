# On a GPU machine with the CPU-only JAX. Here: JAX's own start-up check, with its GPU probe faked.
import logging
logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
import jax
from jax._src import hardware_utils, xla_bridge

jax.devices()  # the CPU backend starts
hardware_utils.has_visible_nvidia_gpu = lambda: True  # fake: an NVIDIA GPU is visible
xla_bridge._suggest_missing_backends()  # the check JAX runs when it starts
