"""Continuous batching (lesson 09b (batching), section 1): requests join free slots of one running batch and leave
when done, one compiled decode step for every mix of positions.

:class:`Request`, :class:`Batcher` (``insert`` a request into a slot, ``step`` every slot, ``run`` a
queue), and :func:`one_at_a_time`, the baseline that serves requests one after another. A slot that is
taken or does not exist is a :class:`SlotsFull`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..validate import positive_ints
from .decode import bucket, check_fits, init_cache, make_prefill, make_step

__all__ = [
    "SlotsFull",
    "Request",
    "Batcher",
    "one_at_a_time",
]


class SlotsFull(ValueError):
    """Every batch slot is taken, or a slot number does not exist."""


# --------------------------------------------------------------------------- continuous batching


@dataclass
class Request:
    """A prompt (token ids) and how many tokens to generate for it."""

    id: Any
    prompt: Sequence[int]
    new_tokens: int
    out: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.out) >= self.new_tokens


@functools.lru_cache(maxsize=1)
def _insert_fn():
    """``insert(cache, one, slot)``: a one-sequence cache copied into row ``slot`` of the batched one (donated)."""

    def insert(cache, one, slot):
        put = lambda big, small: jax.lax.dynamic_update_slice_in_dim(big, small, slot, axis=0)
        return jax.tree.map(put, cache, one)

    return jax.jit(insert, donate_argnums=(0,))


class Batcher:
    """Continuous batching over ``slots`` rows of one KV cache (JetStream's prefill / insert / generate).

    ``insert`` prefills one request on its own and copies its cache into a free slot; ``step``
    decodes one token for every slot at once (idle slots compute too, and are ignored); a
    finished request leaves its slot at once, for the next one. ``run`` drives a queue of requests.
    """

    def __init__(self, params, cfg: Any, slots: int, cache_len: int | None = None):
        positive_ints(slots=slots)
        self.params, self.cfg, self.slots = params, cfg, slots
        self.cache_len = cache_len or cfg.seq_len
        self.cache = init_cache(cfg, slots, self.cache_len)
        device = next(iter(self.cache[0]["k"].devices()))
        # Tokens and positions live on the device, committed like the step's outputs: a step's
        # inputs are the previous step's outputs, with no copy from the host in between.
        self.tokens = jax.device_put(jnp.zeros(slots, jnp.int32), device)
        self.pos = jax.device_put(jnp.zeros(slots, jnp.int32), device)
        self.active: list[Request | None] = [None] * slots
        self._prefill = make_prefill(cfg)
        self._step = make_step(cfg)
        self._insert = _insert_fn()
        self.steps = 0

    def free_slots(self) -> list[int]:
        return [i for i, r in enumerate(self.active) if r is None]

    def insert(self, request: Request, slot: int | None = None) -> int:
        """Prefill ``request`` and put it in ``slot`` (default: the first free one); returns the slot."""
        check_fits(len(request.prompt), request.new_tokens, self.cache_len)
        free = self.free_slots()
        if slot is None:
            if not free:
                raise SlotsFull(
                    f"all {self.slots} slots are decoding (requests "
                    f"{[r.id for r in self.active]}): wait for one to finish (step) or make a Batcher "
                    "with more slots"
                )
            slot = free[0]
        if not isinstance(slot, int) or not 0 <= slot < self.slots:
            raise SlotsFull(f"slot {slot!r} does not exist: this Batcher has slots 0..{self.slots - 1}")
        if self.active[slot] is not None:
            raise SlotsFull(
                f"slot {slot} is still decoding request {self.active[slot].id!r}: pick a free slot "
                f"({free or 'none free now'})"
            )
        n = len(request.prompt)
        tokens = np.zeros((1, bucket(n, self.cache_len)), np.int32)
        tokens[0, :n] = request.prompt
        one = init_cache(self.cfg, 1, self.cache_len)
        tok, _, one = self._prefill(self.params, jnp.asarray(tokens), one, jnp.array([n], jnp.int32))
        self.cache = self._insert(self.cache, one, jnp.int32(slot))
        self.tokens = self.tokens.at[slot].set(tok[0])
        self.pos = self.pos.at[slot].set(n)
        request.out = [int(tok[0])]  # the first token, on the host: the request's time to first token
        self.active[slot] = request
        if request.done:
            self.active[slot] = None
        return slot

    def step(self) -> list[Request]:
        """One decode step for every slot; returns the requests that finished.

        The step's inputs are the previous step's outputs, all on the device. Reading the new
        tokens (``np.asarray``) waits for the step and copies B integers to the host: one sync
        per step, which is what lets a request stream its tokens (and would let it stop at an
        end token). Engines hide it by reading step n's tokens while step n + 1 runs.
        """
        if all(r is None for r in self.active):
            return []
        self.tokens, self.cache, self.pos = self._step(self.params, self.tokens, self.cache, self.pos)
        self.steps += 1
        new = np.asarray(self.tokens)  # device to host: the one sync per step
        finished = []
        for i, r in enumerate(self.active):
            if r is None:
                continue  # an idle slot computes too; its row is overwritten by the next insert
            r.out.append(int(new[i]))
            if r.done:
                finished.append(r)
                self.active[i] = None
        return finished

    def run(
        self, requests: Sequence[Request], on_event: Callable[[str, Request, int], None] | None = None
    ) -> dict[Any, list[int]]:
        """Serve ``requests`` in order through the slots; returns {request id: generated tokens}.

        ``on_event(kind, request, step)`` is told when a request joins ("join") and leaves ("leave").
        """
        for r in requests:
            check_fits(len(r.prompt), r.new_tokens, self.cache_len)
        queue, results = list(requests), {}
        while queue or any(r is not None for r in self.active):
            while queue and self.free_slots():
                r = queue.pop(0)
                self.insert(r)
                if on_event:
                    on_event("join", r, self.steps)
                if r.done:  # a one-token request finishes at its prefill
                    results[r.id] = r.out
                    if on_event:
                        on_event("leave", r, self.steps)
            for r in self.step():
                results[r.id] = r.out
                if on_event:
                    on_event("leave", r, self.steps)
        return results


def one_at_a_time(
    params, cfg: Any, requests: Sequence[Request], *, slots: int = 1, cache_len: int | None = None
) -> dict[Any, list[int]]:
    """The reference for :class:`Batcher`: each request decoded alone, one after another.

    With ``slots`` > 1 each request runs alone in a Batcher of that many slots, through the same
    compiled step as a batched run (the other rows idle). With ``slots=1`` the step is a batch-1
    program: XLA may choose other matmul kernels for 1 row than for 4, and in bf16 the last bit
    can then differ, enough to flip a near tie between two tokens.
    """
    out: dict[Any, list[int]] = {}
    for r in requests:
        out.update(Batcher(params, cfg, slots, cache_len).run([Request(r.id, list(r.prompt), r.new_tokens)]))
    return out
