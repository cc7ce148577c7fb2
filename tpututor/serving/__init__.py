"""Serving a language model as a job: how many chips, how big a batch, how fast, and what it costs.

* :mod:`tpututor.serving.planner`: the serving planner behind ``python -m tpututor plan-serving``
  (chips and tensor-parallel degree, the largest batch that fits, TTFT and per-token bounds,
  tokens/s per chip and dollars per million output tokens), from the chip and price tables.

Lessons 09a-09c (inference and serving), section by section, each a small module (import it by name; this
package's import loads none of them):

* :mod:`tpututor.serving.sizing`: a served model's bytes, FLOPs, batch that fits and least step time,
  from its shapes (no framework);
* :mod:`tpututor.serving.decode`: decoding with a KV cache, the model of lesson 08a (training) run a
  token at a time (imports JAX);
* :mod:`tpututor.serving.batching`: continuous batching; :mod:`tpututor.serving.int8`: int8 weights;
* :mod:`tpututor.serving.paged`: paged attention and cold pages in host memory;
* :mod:`tpututor.serving.sharding`: the served model over a mesh;
* :mod:`tpututor.serving.endpoint`: a local HTTP endpoint around a generate function (no framework).

The techniques serving engines tune, on the same cache (each imports JAX):

* :mod:`tpututor.serving.prefix`: prefix caching, a shared prompt's KV blocks reused from a page pool;
* :mod:`tpututor.serving.speculative`: speculative decoding with an n-gram draft, equal to greedy decoding;
* :mod:`tpututor.serving.kvquant`: an int8 KV cache with one scale per token and head.

Nothing here imports a framework.
"""
