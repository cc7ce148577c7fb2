"""Serving a language model as a job: how many chips, how big a batch, how fast, and what it costs.

* :mod:`tpututor.serving.planner`: the serving planner behind ``python -m tpututor plan-serving``
  (chips and tensor-parallel degree, the largest batch that fits, TTFT and per-token bounds,
  tokens/s per chip and dollars per million output tokens), from the chip and price tables.

Nothing here imports a framework.
"""
