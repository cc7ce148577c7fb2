"""The shape of lesson 08a's (training) language model, without any framework.

The model is :class:`tpututor.models.llama.Llama` (RMSNorm, RoPE, grouped-query attention, a
SwiGLU MLP, the layers scanned), the definition lesson 13a (bring your own model) loads Hugging
Face checkpoints into, at a size and a byte vocabulary that train in minutes.

:class:`Config` (widths, depth, heads, context, vocabulary, dtypes; its parameter count),
:data:`PROFILES` (the ``ci`` and ``full`` sizes) and :func:`config_for` (a size for a run on a
given chip). :mod:`tpututor.lm` builds and trains the model from it and re-exports these names;
this module imports no framework, so a lesson can size a run (lesson 11b, cost) or a
planner can count parameters where JAX is not installed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from . import hardware

__all__ = ["VOCAB", "Config", "PROFILES", "config_for"]

VOCAB = 256  # one token per byte of the text's UTF-8 encoding: ASCII is one byte, Hangul three


@dataclasses.dataclass(frozen=True)
class Config:
    """The model's shape. ``compute_dtype`` is what matmuls run in; ``param_dtype`` the master weights."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 192
    seq_len: int = 64
    vocab: int = VOCAB
    compute_dtype: str = "bfloat16"
    param_dtype: str = "float32"
    n_kv_heads: int | None = None  # key/value heads (grouped-query attention); None: as many as n_heads
    rope_theta: float = 10_000.0  # RoPE's base wavelength

    def __post_init__(self):
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        for name in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "seq_len", "vocab"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Config.{name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} must be a multiple of n_heads={self.n_heads} "
                f"(each head gets d_model // n_heads columns)"
            )
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.n_kv_heads} "
                f"(each key/value head serves n_heads // n_kv_heads query heads)"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def mlp_matrices(self) -> int:
        """The MLP is gated (SwiGLU): gate, up and down, three d_model x d_ff matrices."""
        return 3

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Config:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in known})

    def n_params(self) -> int:
        """Every parameter, embeddings and norms included (the Llama layout of :mod:`tpututor.models.llama`:
        q and o of d x d, k and v of d x kv_heads·head_dim, a gated MLP of three d x d_ff matrices)."""
        d, L = self.d_model, self.n_layers
        attention = 2 * d * d + 2 * d * self.n_kv_heads * self.head_dim
        per_block = attention + 3 * d * self.d_ff + 2 * d
        return self.vocab * d + L * per_block + d + d * self.vocab


# ci: the whole lesson in about a minute on 2 cores. full: minutes on a laptop CPU.
PROFILES: dict[str, Config] = {
    "ci": Config(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=192, seq_len=64),
    "full": Config(d_model=256, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=768, seq_len=128),
}

# On an accelerator (full profile): (least HBM GiB per chip, config). Sized so that the f32 state
# (16 bytes per parameter with Adam) and the activations of a 32-sequence batch fit with room left.
_ACCELERATOR_SIZES = (
    (64, Config(d_model=1024, n_layers=16, n_heads=16, n_kv_heads=4, d_ff=2816, seq_len=1024)),
    (16, Config(d_model=768, n_layers=12, n_heads=12, n_kv_heads=4, d_ff=2048, seq_len=1024)),
    (0, Config(d_model=512, n_layers=8, n_heads=8, n_kv_heads=2, d_ff=1408, seq_len=512)),
)


def config_for(profile: str, device_kind: str | None = None, platform: str = "cpu") -> Config:
    """The config for a run profile; with ``profile="full"`` on a TPU or GPU, sized from the chip's HBM.

    ``device_kind`` is JAX's ``device.device_kind``; the chip table (:mod:`tpututor.hardware`)
    gives its memory, divided by its ``jax_devices_per_chip`` (a v3 chip is two JAX devices, each
    with half the HBM). The ``ci`` profile is tiny everywhere.
    """

    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use one of {', '.join(PROFILES)}")
    if profile == "ci" or platform == "cpu" or device_kind is None:
        return PROFILES[profile]
    chip = hardware.find(device_kind)
    hbm = chip.hbm_gib / chip.jax_devices_per_chip if chip and chip.hbm_gib else 0  # per JAX device
    return next(cfg for least, cfg in _ACCELERATOR_SIZES if hbm >= least)
