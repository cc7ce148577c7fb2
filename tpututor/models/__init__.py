"""Models the lessons build and a learner brings: small, readable files, framework imports at their top.

* :mod:`tpututor.models.llama`: the Llama family (Llama 2 and 3, Qwen2, Gemma) in Flax NNX: RMSNorm,
  RoPE, grouped-query attention, a gated MLP, stacked layers under ``jax.lax.scan`` with a remat
  policy, every weight named by logical axes for sharding rules.
* :mod:`tpututor.models.dit`: a small class-conditional Diffusion Transformer (adaLN-Zero blocks under
  ``jax.lax.scan``), trained by flow matching on digits drawn from fonts, and a guided sampler.
* :mod:`tpututor.models.checkpoint`: Hugging Face ``save_pretrained`` directories (``config.json`` and
  safetensors) in and out of that model.

Importing this package imports no framework; importing a module inside it imports JAX and Flax.
"""
