"""The TensorFlow distribution strategy this machine can run, and why.

:func:`choose` tries, in order: a TPU through ``TPUClusterResolver(tpu='local')``
(TPU VMs: Colab, Kaggle, Cloud), ``MirroredStrategy`` over the GPUs, and
``MirroredStrategy`` over N logical CPU devices (simulated replicas). It never
raises on a CPU machine, and the returned reason says what it found and what it
tried. TensorFlow is imported when :func:`choose` is called (pass ``tf`` to use
a fake in tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .runtime import Host, detect_accelerator, installed_frameworks, tensorflow_can_use_tpu

__all__ = ["Chosen", "choose"]


@dataclass
class Chosen:
    strategy: Any
    kind: str  # "tpu" | "gpu" | "cpu"
    replicas: int
    reason: str
    tried: list[str] = field(default_factory=list)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160] if text else ''}"


def choose(cpu_replicas: int = 4, *, tf: Any = None, host: Host | None = None) -> Chosen:
    """The best strategy here: TPUStrategy, then MirroredStrategy on GPUs, then on logical CPUs."""
    if cpu_replicas < 1:
        raise ValueError(f"cpu_replicas must be at least 1, got {cpu_replicas}")
    host = host or Host()  # one view of the machine for both lookups below
    accelerator = detect_accelerator(host)
    if tf is None:
        import tensorflow as tf  # noqa: PLW0621 (imported late on purpose)
    tried: list[str] = []

    distribution = installed_frameworks(host)["tensorflow"].distribution
    if accelerator.kind == "tpu" and distribution is not None and not tensorflow_can_use_tpu(distribution):
        tried.append(
            f"{accelerator.name} attached, but TensorFlow here is {distribution}, which cannot use "
            "a TPU (install tensorflow-tpu)"
        )
    elif accelerator.kind == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            strategy = tf.distribute.TPUStrategy(resolver)
            n = strategy.num_replicas_in_sync
            return Chosen(
                strategy,
                "tpu",
                n,
                f"found {accelerator.name} x{accelerator.count}: TPUStrategy "
                f"with {n} replicas via TPUClusterResolver(tpu='local')",
                tried,
            )
        except Exception as exc:  # no tensorflow-tpu, TPU held by another process, TPU7x...
            tried.append(
                f"{accelerator.name} attached, but TPUStrategy failed ({_first_line(exc)}); "
                "TensorFlow needs the tensorflow-tpu package on a TPU VM, and no other process "
                "may hold the TPU"
            )
    else:
        tried.append("no TPU attached")

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        try:
            strategy = tf.distribute.MirroredStrategy()
            n = strategy.num_replicas_in_sync
            return Chosen(strategy, "gpu", n, "; ".join(tried + [f"MirroredStrategy over {n} GPU(s)"]), tried)
        except Exception as exc:
            tried.append(f"MirroredStrategy over GPUs failed ({_first_line(exc)})")
    else:
        tried.append("TensorFlow sees no GPU")

    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * cpu_replicas)
        note = f"split the CPU into {cpu_replicas} logical devices"
    except (RuntimeError, ValueError, IndexError):
        note = "TensorFlow had already started, so its existing logical CPU devices are used"
    try:
        logical = [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(logical)
        n = strategy.num_replicas_in_sync
        return Chosen(
            strategy, "cpu", n, "; ".join(tried + [f"MirroredStrategy over {n} logical CPU device(s) ({note})"]), tried
        )
    except Exception as exc:
        tried.append(f"MirroredStrategy over CPUs failed ({_first_line(exc)})")
        strategy = tf.distribute.get_strategy()
        return Chosen(strategy, "cpu", 1, "; ".join(tried + ["the default strategy (one device)"]), tried)
