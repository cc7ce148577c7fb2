"""Speculative decoding with an n-gram draft: guess k tokens cheaply, let the model check them in one step.

:func:`ngram_draft` looks the last few tokens up earlier in the text (prompt lookup decoding: no
second model) and proposes what followed them. :func:`make_verify` runs the last accepted token
and the k guesses through the model in one forward step (:func:`tpututor.serving.decode.forward`, k + 1
positions) and returns the model's greedy choice at each. :func:`generate` keeps the guesses up to
the first disagreement plus the model's own token there, so its output is greedy decoding's, token
for token, whatever the draft proposes; a good draft only makes it take fewer steps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import decode

__all__ = ["ngram_draft", "make_verify", "accepted", "Result", "generate"]


def ngram_draft(history: Sequence[int], k: int, n: int = 3) -> list[int]:
    """``k`` guesses: what followed the latest earlier occurrence of the last ``n`` tokens (then n - 1, ...).

    With no match, the last token repeated: any guess is safe, a wrong one is only rejected.
    """
    ids = list(history)
    for size in range(min(n, len(ids) - 1), 0, -1):
        tail = ids[-size:]
        for start in range(len(ids) - size - 1, -1, -1):
            if ids[start : start + size] == tail:
                follow = ids[start + size : start + size + k]
                return (follow + [follow[-1]] * k)[:k]
    return [ids[-1]] * k


@functools.lru_cache(maxsize=16)
def make_verify(cfg: Any):
    """``verify(params, tokens (1, k + 1), cache, pos (1,)) -> (greedy choices (k + 1,), cache)``, the cache donated.

    Choice i is the model's next token after ``tokens[0, :i + 1]``; keys and values of all k + 1
    tokens are written at ``pos ..``: entries past the accepted ones are overwritten later, and masked
    until then (attention sees positions up to each query's own).
    """

    def verify(params, tokens, cache, pos):
        logits, cache = decode.forward(params, tokens, cache, pos, cfg=cfg)
        return jnp.argmax(logits[0], axis=-1).astype(jnp.int32), cache

    return jax.jit(verify, donate_argnums=(2,))


def accepted(draft: Sequence[int], choices: Sequence[int]) -> int:
    """How many leading guesses equal the model's choices (guess i against choice i: the token after the guesses before it)."""
    n = 0
    for guess, choice in zip(draft, choices):
        if int(guess) != int(choice):
            break
        n += 1
    return n


@dataclass
class Result:
    tokens: list[int]  # the new tokens, greedy decoding's
    steps: int  # forward steps of the model after the prefill
    drafted: int  # guesses proposed
    kept: int  # guesses accepted

    @property
    def tokens_per_step(self) -> float:
        """New tokens per model step after the prefill's first one (1.0 is plain decoding)."""
        return (len(self.tokens) - 1) / max(1, self.steps)


def generate(
    params,
    cfg: Any,
    prompt: Sequence[int],
    new_tokens: int,
    k: int = 4,
    *,
    n: int = 3,
    cache_len: int | None = None,
    draft: Callable[[list[int], int], list[int]] | None = None,
) -> Result:
    """Greedy decoding of one prompt, ``k`` guesses verified per step.

    ``draft(history, k)`` proposes the guesses (default: :func:`ngram_draft` with ``n``).
    """
    cache_len = cache_len or cfg.seq_len
    ids = [int(t) for t in prompt]
    decode.check_fits(len(ids), new_tokens + k, cache_len)  # a verify step writes k positions past the last token
    width = decode.bucket(len(ids), cache_len)
    padded = np.zeros((1, width), np.int32)
    padded[0, : len(ids)] = ids
    tok, _, cache = decode.make_prefill(cfg)(
        params, jnp.asarray(padded), decode.init_cache(cfg, 1, cache_len), jnp.array([len(ids)], jnp.int32)
    )
    out, steps, drafted, kept = [int(tok[0])], 0, 0, 0
    verify = make_verify(cfg)
    device = next(iter(cache[0]["k"].devices()))
    while len(out) < new_tokens:
        guesses = [int(t) for t in (draft(ids + out, k) if draft else ngram_draft(ids + out, k, n))]
        if len(guesses) != k:
            raise ValueError(f"the draft proposed {len(guesses)} tokens, not k={k}")
        pos = jax.device_put(jnp.array([len(ids) + len(out) - 1], jnp.int32), device)
        choices, cache = verify(params, jnp.asarray([[out[-1]] + guesses], jnp.int32), cache, pos)
        choices = np.asarray(choices).tolist()
        a = accepted(guesses, choices)
        out += guesses[:a] + [choices[a]]
        steps, drafted, kept = steps + 1, drafted + k, kept + a
    return Result(out[:new_tokens], steps, drafted, kept)
