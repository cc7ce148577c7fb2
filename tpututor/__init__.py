"""tpututor: the helper package behind the tpututor notebooks.

Importing it imports no framework (no JAX, TensorFlow or torch): lessons use it to find out
what the machine has before they import anything heavy. What a lesson imports from it:

- ``runtime``: what this machine is (platform, accelerator, CPU, installed frameworks), read
  from files and the environment, never by importing a framework
- ``hardware``: the chip table (peak FLOP/s, HBM, interconnect per axis), each row sourced
- ``frameworks``: use a framework if it works here, or say why not (missing or broken)
- ``fakes``: fake machines (Colab, Kaggle, TPU VMs, a GPU box) built in a folder, for the tour in lesson 00a (where am I running) and the tests
- ``doctor``: the report behind ``python -m tpututor doctor``, each warning with its fix
- ``errors``: the error atlas (messages, causes, fixes) behind ``doctor --explain "<pasted error>"``
- ``preflight``: can this runtime do the course, or the open lesson (``doctor --preflight``)
- ``launch``: the setup cell's logic (install what a Colab or Kaggle runtime lacks)
- ``lessons``: what each lesson needs, as shipped with the package
- ``bench``: timing done right on every backend (compile apart, wait for the device)
- ``roofline``: FLOPs, bytes and the roofline of a chip
- ``kernels``: a Pallas kernel's HBM traffic, VMEM and FLOPs from its grid and BlockSpecs, on the roofline
- ``pallas_compat``: Pallas TPU interpret mode's names across JAX 0.7.2, 0.10 and 0.11
- ``hlo``: the program at each compiler stage; HLO read as tables
- ``aot``: compile for a named TPU slice on any machine with the real TPU compiler (libtpu); imports JAX
- ``metrics``: PyTorch/XLA's counters and metrics as records
- ``finetune``: local stand-ins for a Hub BERT and data set; training scripts run bounded in time
- ``mesh``: meshes, shardings, the collectives in a compiled program and what they cost
- ``lm``: the training lesson's language model (``models.llama``'s Llama at a small size), grain pipeline, sharding rules, Orbax checkpoints; imports JAX
- ``lm_config``: that model's shape (``Config``), without any framework
- ``hosts``: several JAX hosts on one machine, started as a TPU slice's ``--worker=all`` would (``python -m tpututor launch``); training processes run with a watchdog, their losses collected
- ``tblog``: TensorBoard scalars (event files) written and read without TensorFlow
- ``protowire``: the protocol-buffer wire format read and written with the standard library (``tblog``, ``pprof``)
- ``mfu``: model FLOPs per training step (MaxText's count) and MFU against a chip's peak
- ``traces``: read profiler traces in a notebook: parse, analyse, plot; practice traces with a planted bottleneck
- ``pprof``: a device memory profile (pprof) decoded with the standard library: live buffers and where they were made
- ``xprof_server``: XProf's web server on 127.0.0.1; which addresses a port listens on
- ``strategy``: the TensorFlow distribution strategy this machine can run
- ``cost``: what TPU time costs, from a dated, sourced price table
- ``plan``: memory, time and cost of a training run before you pay (``python -m tpututor plan``); request review
- ``models``: the models a learner brings: the Llama family (Llama, Qwen2, Gemma) in Flax NNX, Hugging Face checkpoints in and out; imports JAX
- ``serving``: serving as a job: chips, batch, latency bounds and $ per million tokens (``python -m tpututor plan-serving``); prefix caching, speculative decoding, an int8 KV cache
- ``standin``: a local stand-in of the Cloud TPU API on 127.0.0.1 for the official client (not Google Cloud)
- ``source``: ``show(obj)``, the package code a cell calls, displayed in the lesson
- ``check``: self-checking exercises (PASSED, FAILED, NOT ATTEMPTED), ``check.hint`` and ``check.solution``
- ``exercises``: the lessons' worked answers, hints and known-wrong answers, out of the learner's sight
- ``config``: the run profile (``full`` or ``ci``)
- ``validate``: the argument checks helpers share (one message for a bad size wherever it is given)
- ``cli``: ``python -m tpututor`` (doctor, chips, bench, plan, plan-serving, launch)

``tpututor_course``, beside this package in a clone, is the course tooling (stamping, the lesson
runner ``python -m tpututor_course run``, the student build, the workshop guide, the site, the
translations, releases). It is not installed with tpututor, and no lesson imports it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .config import choose  # noqa: E402  (cheap: standard library only)
from .config import profile as run_profile  # noqa: E402  (named for what it is: the ci or full size of a run)

__all__ = ["__version__", "choose", "run_profile"]
