"""tpututor.serving's techniques: prefix caching, speculative decoding, an int8 KV cache."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpututor import lm
from tpututor.serving import decode, kvquant, prefix, sizing, speculative

CFG = lm.PROFILES["ci"]


@pytest.fixture(scope="module")
def params():
    return decode.serving_params(decode.random_params(CFG, seed=7), CFG)


def plain_prefill(params, prompt):
    padded = np.zeros((1, decode.bucket(len(prompt), CFG.seq_len)), np.int32)
    padded[0, : len(prompt)] = prompt
    tok, last, _ = decode.make_prefill(CFG)(
        params, jnp.asarray(padded), decode.init_cache(CFG, 1), jnp.array([len(prompt)], jnp.int32)
    )
    return int(tok[0]), last[0]


# --------------------------------------------------------------------------- prefix caching


def test_block_keys_are_whole_prefixes_of_full_blocks():
    assert prefix.block_keys([1, 2, 3, 4, 5], 2) == [(1, 2), (1, 2, 3, 4)]
    assert prefix.block_keys([1], 2) == []
    with pytest.raises(ValueError):
        prefix.block_keys([1, 2], 0)


def test_suffix_flops_of_no_prefix_are_the_whole_prefill():
    assert prefix.suffix_prefill_flops(CFG, 0, 40) == sizing.prefill_cost(CFG, 1, 40).flops
    assert prefix.suffix_prefill_flops(CFG, 32, 8) < prefix.suffix_prefill_flops(CFG, 0, 40)


def test_prefix_reuse_gives_the_same_tokens_and_logits(params):
    rng = np.random.default_rng(11)
    system = rng.integers(1, CFG.vocab, 24).tolist()  # three pages of 8
    cache = prefix.PrefixCache(CFG, num_pages=32, page_size=8)
    hits = []
    for _ in range(3):
        prompt = system + rng.integers(1, CFG.vocab, int(rng.integers(3, 20))).tolist()
        tok, logits, _, hit = cache.prefill(params, prompt)
        tok0, logits0 = plain_prefill(params, prompt)
        hits.append(hit)
        assert int(tok) == tok0
        np.testing.assert_allclose(
            np.asarray(logits), np.asarray(logits0), atol=1e-2 * float(jnp.max(jnp.abs(logits0)))
        )
    assert hits == [0, 24, 24]


def test_prefix_cache_decodes_on_like_a_plain_cache(params):
    """The cache a prefix-cached prefill returns continues decoding exactly as the plain one does."""
    rng = np.random.default_rng(12)
    system = rng.integers(1, CFG.vocab, 16).tolist()
    prompt = system + [5, 6, 7]
    pc = prefix.PrefixCache(CFG, num_pages=16, page_size=8)
    pc.prefill(params, system + [9])
    tok, _, cache, hit = pc.prefill(params, prompt, store=False)
    assert hit == 16
    step = decode.make_step(CFG)
    out, pos = [tok[None]], jnp.array([len(prompt)], jnp.int32)
    for _ in range(5):
        t, cache, pos = step(params, out[-1], cache, pos)
        out.append(t)
    assert [int(t[0]) for t in out] == decode.generate(params, CFG, [prompt], 6)[0]


def test_store_false_adds_nothing_and_a_full_pool_stops_adding(params):
    pc = prefix.PrefixCache(CFG, num_pages=2, page_size=8)
    pc.prefill(params, list(range(1, 20)), store=False)
    assert pc.pages == {} and len(pc.free) == 2
    pc.prefill(params, list(range(1, 40)))  # four full blocks, two free pages
    assert len(pc.pages) == 2 and pc.free == []
    assert pc.match(list(range(1, 40))) == [pc.pages[tuple(range(1, 9))], pc.pages[tuple(range(1, 17))]]


# --------------------------------------------------------------------------- speculative decoding


def test_ngram_draft_proposes_what_followed():
    assert speculative.ngram_draft([1, 2, 3, 9, 1, 2, 3], 2, n=3) == [9, 1]
    assert speculative.ngram_draft([4, 5, 6, 4], 3, n=3) == [5, 6, 4]  # one-token match
    assert speculative.ngram_draft([7, 8], 2) == [8, 8]  # no match: the last token repeated
    assert speculative.accepted([1, 2, 3], [1, 2, 4, 5]) == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_speculative_output_equals_greedy(params, seed):
    rng = np.random.default_rng(100 + seed)
    prompt = rng.integers(1, CFG.vocab, 6).tolist()
    prompt = prompt + prompt  # something for the n-gram draft to find
    new = CFG.seq_len - len(prompt) - 4
    result = speculative.generate(params, CFG, prompt, new, k=4)
    assert result.tokens == decode.generate(params, CFG, [prompt], new)[0]
    assert result.steps >= 1 and result.kept <= result.drafted


def test_a_right_draft_takes_k_plus_one_tokens_a_step_and_a_wrong_one_changes_nothing(params):
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    new, k = 30, 3
    greedy = decode.generate(params, CFG, [prompt], new)[0]
    right = speculative.generate(
        params, CFG, prompt, new, k=k, draft=lambda h, k: (greedy[len(h) - len(prompt) :] + [0] * k)[:k]
    )
    wrong = speculative.generate(
        params,
        CFG,
        prompt,
        new,
        k=k,
        draft=lambda h, k: [(greedy[min(len(h) - len(prompt), new - 1)] + 1) % CFG.vocab] * k,
    )
    assert right.tokens == wrong.tokens == greedy
    assert right.steps == -(-(new - 1) // (k + 1)) and wrong.kept == 0 and wrong.steps == new - 1


def test_speculative_refuses_what_does_not_fit(params):
    with pytest.raises(decode.CacheFull):
        speculative.generate(params, CFG, [1] * 8, CFG.seq_len - 8, k=4)
    with pytest.raises(ValueError, match="not k=2"):
        speculative.generate(params, CFG, [1] * 8, 4, k=2, draft=lambda h, k: [1])


# --------------------------------------------------------------------------- int8 KV cache


def test_quantize_is_within_half_a_step_per_vector():
    x = jnp.asarray(np.random.default_rng(3).normal(size=(2, 5, 4, 16)) * 3, jnp.float32)
    q, scale = kvquant.quantize(x)
    assert q.dtype == jnp.int8 and scale.shape == (2, 5, 4, 1)
    assert bool(jnp.all(jnp.abs(kvquant.dequantize(q, scale, jnp.float32) - x) <= scale / 2 + 1e-6))
    q0, s0 = kvquant.quantize(jnp.zeros((1, 3)))
    assert bool(jnp.all(q0 == 0)) and bool(jnp.all(s0 == 0))


def test_int8_cache_halves_the_values_and_adds_a_scale_per_token_and_head():
    c16, c8 = decode.init_cache(CFG, 3), kvquant.init_cache(CFG, 3)
    values = sum(layer[n].nbytes for layer in c8 for n in ("k", "v"))
    assert 2 * values == decode.cache_bytes(c16)
    assert decode.cache_bytes(c8) == decode.cache_bytes(c16) * kvquant.bytes_per_number(CFG.head_dim) / 2


def test_int8_cache_logits_within_bound(params):
    window = jnp.asarray(np.random.default_rng(5).integers(1, CFG.vocab, (2, CFG.seq_len)), jnp.int32)
    ref, _ = jax.jit(lambda p, w: decode.forward(p, w, decode.init_cache(CFG, 2), jnp.zeros(2, jnp.int32), cfg=CFG))(
        params, window
    )
    got, cache = kvquant.make_prefill(CFG)(params, window, kvquant.init_cache(CFG, 2))
    assert cache[0]["k"].dtype == jnp.int8
    assert float(jnp.max(jnp.abs(got - ref))) <= 0.02 * float(jnp.max(jnp.abs(ref))) + 0.01
    assert float(jnp.mean(jnp.argmax(got, -1) == jnp.argmax(ref, -1))) >= 0.9


def test_int8_cache_about_doubles_the_batch_that_fits():
    big = lm.Config(d_model=2048, n_layers=24, n_heads=16, d_ff=5632, seq_len=2048)
    fit16 = sizing.max_batch(big, big.seq_len, "v5e")
    fit8 = sizing.max_batch(big, big.seq_len, "v5e", kv_bytes=kvquant.bytes_per_number(big.head_dim))
    assert fit16 >= 1 and 1.9 * fit16 <= fit8 <= 2 * fit16 + 2
