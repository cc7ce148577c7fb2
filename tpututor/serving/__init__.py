"""Serving a language model as a job: how many chips, how big a batch, how fast, and what it costs.

* :mod:`tpututor.serving.planner`: the serving planner behind ``python -m tpututor plan-serving``
  (chips and tensor-parallel degree, the largest batch that fits, TTFT and per-token bounds,
  tokens/s per chip and dollars per million output tokens), from the chip and price tables.

Serving techniques for the model of lesson 09 (inference and serving), each a small module that
imports JAX at its top (import it by name; this package's import loads none of them):

* :mod:`tpututor.serving.prefix`: prefix caching, a shared prompt's KV blocks reused from a page pool;
* :mod:`tpututor.serving.speculative`: speculative decoding with an n-gram draft, equal to greedy decoding;
* :mod:`tpututor.serving.kvquant`: an int8 KV cache with one scale per token and head.

Nothing here imports a framework.
"""
