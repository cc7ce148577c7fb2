"""tpututor.serving.decode: the KV-cache decode step, batching, int8, paged attention, offload, sharding, the endpoint."""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.request

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import run_python
from tpututor import hardware, hlo, lm, mesh, mfu
from tpututor.serving import batching, decode, endpoint, int8, paged, sharding, sizing

CFG = lm.PROFILES["ci"]


@pytest.fixture(scope="module")
def raw():
    return decode.random_params(CFG, seed=3)


@pytest.fixture(scope="module")
def params(raw):
    return decode.serving_params(raw, CFG)


@pytest.fixture(scope="module")
def window():
    return jnp.asarray(np.random.default_rng(4).integers(1, CFG.vocab, (2, CFG.seq_len)), jnp.int32)


@pytest.fixture(scope="module")
def model_logits(raw, window):
    graph = lm.graphdef(CFG)
    return jax.jit(lambda p, w: nnx.merge(graph, p)(w))(raw, window)


def requests(seed=1, n=6):
    rng = np.random.default_rng(seed)
    return [
        batching.Request(i, rng.integers(1, CFG.vocab, int(rng.integers(2, 9))).tolist(), int(rng.integers(2, 12)))
        for i in range(n)
    ]


def test_importing_decode_imports_its_frameworks_but_the_serving_planner_imports_none():
    out = run_python(
        "import sys, tpututor.serving.planner; print(sorted(m for m in ('jax', 'flax', 'numpy') if m in sys.modules))\n"
        "import tpututor.serving.decode; print(sorted(m for m in ('jax', 'flax', 'numpy') if m in sys.modules))"
    )
    assert out.split("\n")[:2] == ["[]", "['flax', 'jax', 'numpy']"]


def test_random_params_have_the_shapes_of_lesson_08s_model(raw):
    expected = jax.eval_shape(lambda: nnx.to_pure_dict(nnx.state(lm.LM(CFG, nnx.Rngs(0)), nnx.Param)))
    assert jax.tree.map(lambda a: (a.shape, a.dtype), raw) == jax.tree.map(lambda a: (a.shape, a.dtype), expected)
    assert float(jnp.std(raw["layers"]["mlp"]["up"]["kernel"])) == pytest.approx(0.02, rel=0.1)


def test_prefill_gives_the_models_logits(params, window, model_logits):
    logits, cache = jax.jit(
        lambda p, w: decode.forward(p, w, decode.init_cache(CFG, 2), jnp.zeros(2, jnp.int32), cfg=CFG)
    )(params, window)
    assert jnp.allclose(logits, model_logits, atol=1e-2)
    assert cache[0]["k"].shape == (2, CFG.seq_len, CFG.n_kv_heads, CFG.head_dim)


def test_decoding_position_by_position_matches_the_model(params, window, model_logits):
    step = jax.jit(lambda p, t, c, pos: decode.forward(p, t[:, None], c, pos, cfg=CFG), donate_argnums=(2,))
    cache, out = decode.init_cache(CFG, 2), []
    for t in range(CFG.seq_len):
        logits, cache = step(params, window[:, t], cache, jnp.full(2, t, jnp.int32))
        out.append(logits[:, 0])
    cached = jnp.stack(out, axis=1)
    assert float(jnp.max(jnp.abs(cached - model_logits))) < 0.05 * float(jnp.max(jnp.abs(model_logits))) + 0.02
    assert float(jnp.mean(jnp.argmax(cached, -1) == jnp.argmax(model_logits, -1))) > 0.9


def test_the_decode_step_compiles_once_for_every_position_and_donates_the_cache(raw):
    cfg = dataclasses.replace(CFG, seq_len=24)  # a config no other test compiled
    params = decode.serving_params(decode.random_params(cfg), cfg)
    step = decode.make_step(cfg)
    device = jax.devices()[0]  # committed inputs, like the step's outputs: one program for every call
    tok, pos = (jax.device_put(jnp.zeros(1, jnp.int32), device) for _ in range(2))
    cache = decode.init_cache(cfg, 1)
    first = cache[0]["k"]
    with hlo.compiles() as log:
        for _ in range(cfg.seq_len):
            tok, cache, pos = step(params, tok, cache, pos)
        tok.block_until_ready()
    assert len([n for n in log if "step" in n]) == 1
    assert first.is_deleted() and int(pos[0]) == cfg.seq_len
    assert "input_output_alias" in step.lower(params, tok, cache, pos).compile().as_text().splitlines()[0]


def test_the_cached_loop_and_the_recomputed_window_see_the_same_logits(params, window):
    recompute = decode.recompute_step(CFG)
    logits_full, _ = jax.jit(
        lambda p, w: decode.forward(p, w, decode.init_cache(CFG, 1), jnp.zeros(1, jnp.int32), cfg=CFG)
    )(params, window[:1])
    w, t = recompute(params, window[:1].at[:, 10:].set(0), jnp.int32(10))
    assert int(t) == 11 and int(w[0, 10]) == int(jnp.argmax(logits_full[0, 9]))


def test_generate_decodes_equal_length_prompts_together(params):
    prompts = [[5, 6, 7], [9, 9, 9]]
    together = decode.generate(params, CFG, prompts, 6)
    alone = [decode.generate(params, CFG, [p], 6)[0] for p in prompts]
    assert together == alone and all(len(t) == 6 for t in together)
    with pytest.raises(ValueError, match="one length"):
        decode.generate(params, CFG, [[1, 2], [1, 2, 3]], 4)


def test_continuous_batching_gives_each_request_its_one_at_a_time_tokens(params):
    events = []
    batcher = batching.Batcher(params, CFG, slots=3)
    got = batcher.run(requests(), on_event=lambda kind, r, s: events.append((kind, r.id)))
    assert got == batching.one_at_a_time(params, CFG, requests(), slots=3)
    assert [e for e in events if e[0] == "join"][:3] == [("join", 0), ("join", 1), ("join", 2)]
    assert len(events) == 2 * len(requests()) and batcher.free_slots() == [0, 1, 2]
    assert batcher.steps < sum(r.new_tokens - 1 for r in requests())  # slots were shared


def test_the_batcher_compiles_one_prefill_per_prompt_bucket_and_one_step(params):
    cache_len = 32  # a cache length no other test uses: every program below is new
    lengths = [3, 7, 9, 14, 17, 25, 5, 12]
    assert [decode.bucket(n, cache_len) for n in lengths] == [8, 8, 16, 16, 32, 32, 8, 16]
    batcher = batching.Batcher(params, CFG, slots=3, cache_len=cache_len)
    queue = [batching.Request(i, [1 + i] * n, 4) for i, n in enumerate(lengths)]
    with hlo.compiles() as log:
        batcher.run(queue)
    assert len([n for n in log if "prefill" in n]) == 3  # buckets 8, 16 and 32, for 8 prompt lengths
    assert len([n for n in log if "step" in n]) == 1  # one decode step for every request and position
    with pytest.raises(decode.CacheFull):
        decode.bucket(33, cache_len)


def test_a_prompt_longer_than_the_cache_is_refused_with_the_sizes(params):
    with pytest.raises(decode.CacheFull, match=r"need 70 cache positions, but the cache holds 64"):
        decode.check_fits(60, 11, 64)
    batcher = batching.Batcher(params, CFG, slots=2)
    with pytest.raises(decode.CacheFull, match="shorten the prompt"):
        batcher.insert(batching.Request("long", [1] * CFG.seq_len, 4))
    with pytest.raises(decode.CacheFull):
        batcher.run([batching.Request("ok", [1, 2], 3), batching.Request("long", [1] * 70, 1)])
    assert batcher.free_slots() == [0, 1], "nothing was admitted"
    with pytest.raises(decode.CacheFull, match="context the model was trained for"):
        decode.init_cache(CFG, 1, CFG.seq_len + 1)
    with pytest.raises(ValueError, match="empty"):
        decode.check_fits(0, 3, 64)


def test_overfilled_or_unknown_slots_are_refused(params):
    batcher = batching.Batcher(params, CFG, slots=2)
    batcher.insert(batching.Request("a", [1, 2, 3], 10))
    batcher.insert(batching.Request("b", [4, 5], 10))
    with pytest.raises(batching.SlotsFull, match=r"all 2 slots are decoding \(requests \['a', 'b'\]\)"):
        batcher.insert(batching.Request("c", [6], 3))
    with pytest.raises(batching.SlotsFull, match="still decoding request 'a'"):
        batcher.insert(batching.Request("c", [6], 3), slot=0)
    with pytest.raises(batching.SlotsFull, match="does not exist"):
        batcher.insert(batching.Request("c", [6], 3), slot=5)
    assert [r.id for r in batcher.active] == ["a", "b"], "the running requests are untouched"


def _pool(seed=0, lengths=(32, 19, 4), page_size=4, spare=5):
    rng = np.random.default_rng(seed)
    k, v = (jnp.asarray(rng.normal(size=(len(lengths), 32, 2, 16)), jnp.bfloat16) for _ in range(2))
    q = jnp.asarray(rng.normal(size=(len(lengths), 2, 16)), jnp.bfloat16)
    num_pages = len(lengths) * 32 // page_size + spare
    pool, table = paged.pages_from_cache(k, v, page_size, num_pages, rng.permutation(num_pages))
    return q, k, v, pool, table, jnp.asarray(lengths, jnp.int32)


def test_paged_attention_equals_the_contiguous_cache_and_jaxs_reference():
    q, k, v, pool, table, lengths = _pool()
    contiguous = paged.contiguous_attention(q, k, v, lengths)
    assert jnp.array_equal(paged.paged_attention(q, pool, table, lengths), contiguous)
    assert jnp.array_equal(jax.jit(paged.paged_attention)(q, pool, table, lengths), contiguous)
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import ref_ragged_paged_attention

    fixed = dict(
        kv_lens=np.asarray(lengths),
        cu_q_lens=np.arange(4, dtype=np.int32),
        num_seqs=np.array([3], np.int32),
        sm_scale=1 / np.sqrt(16),
    )  # it loops over the sequences in Python: fixed numbers, one compilation
    theirs = jax.jit(lambda q, kv, t: ref_ragged_paged_attention(q, kv, page_indices=t, **fixed))(q, pool, table)
    assert jnp.allclose(theirs.astype(jnp.float32), contiguous, atol=3e-2)


def test_an_int8_pool_with_a_bad_page_gives_nan_for_that_sequence_only():
    q, _, _, pool, table, lengths = _pool()
    int8_pool = jnp.clip(jnp.round(pool.astype(jnp.float32) * 40), -127, 127).astype(jnp.int8)
    bad = jnp.asarray(table).at[0, 3].set(-1)
    out = jax.jit(paged.paged_attention)(q, int8_pool, bad, lengths)
    assert out.dtype == jnp.float32
    assert bool(jnp.isnan(out[0]).all()) and not bool(jnp.isnan(out[1:]).any())


def test_a_page_table_pointing_outside_the_pool_is_an_error_never_another_page():
    q, _, _, pool, table, lengths = _pool()
    bad = np.asarray(table).copy()
    bad[2, 1] = pool.shape[0] + 3
    with pytest.raises(paged.PageTableError, match=r"entry \[2, 1\] = \d+ points outside the pool of \d+ pages"):
        paged.paged_attention(q, pool, bad, lengths)
    with pytest.raises(paged.PageTableError, match="outside"):
        paged.check_page_table(np.array([[0, -1]]), 8)
    with pytest.raises(paged.PageTableError, match="more than 2 pages of 4"):
        paged.check_page_table(np.array([[0, 1]]), 8, lengths=[9], page_size=4)
    out = jax.jit(paged.paged_attention)(q, pool, jnp.asarray(bad), lengths)
    assert bool(jnp.isnan(out[2]).any()) and not bool(jnp.isnan(out[:2]).any())


def test_int8_weights_are_within_half_a_step_per_channel_and_close_in_logits(raw, window, model_logits):
    w = raw["layers"]["mlp"]["down"]["kernel"][1]
    q = int8.quantize_int8(w)
    assert q["kernel"].dtype == jnp.int8 and q["scale"].shape == (w.shape[1],)
    assert bool(jnp.all(jnp.abs(int8.dequantize(q) - w) <= q["scale"] / 2 + 1e-7))
    with pytest.raises(ValueError, match="still stacked"):
        int8.quantize_params(raw)
    q8 = jax.jit(int8.quantize_params)(decode.unstack(raw, CFG.n_layers))
    logits, _ = jax.jit(lambda p, t: decode.forward(p, t, decode.init_cache(CFG, 2), jnp.zeros(2, jnp.int32), cfg=CFG))(
        q8, window
    )
    assert float(jnp.linalg.norm(logits - model_logits) / jnp.linalg.norm(model_logits)) < 0.1
    assert sizing.decode_cost(CFG, 1, 64, bytes_per_weight=1).bytes < 0.6 * sizing.decode_cost(CFG, 1, 64).bytes
    with pytest.raises(ValueError, match=r"\(in, out\) matrix"):
        int8.quantize_int8(jnp.ones(3))


def test_int8_of_the_serving_weights_halves_the_kernels_and_keeps_the_rest_like_for_like(params):
    q8 = int8.quantize_params(params)
    kernels = lambda tree, kind: sum(x.nbytes for x in jax.tree.leaves(tree) if x.ndim == 2 and x.dtype == kind)
    assert (
        kernels(q8, jnp.int8) * 2 == kernels(params, jnp.bfloat16) - params["embed"]["embedding"].nbytes
    )  # the matmul kernels: 2 bytes -> 1 byte
    assert (
        q8["embed"]["embedding"].dtype == jnp.bfloat16 and q8["layers"][0]["attn_norm"]["weight"].dtype == jnp.float32
    )
    total = lambda tree: sum(x.nbytes for x in jax.tree.leaves(tree))
    assert total(q8) < 0.65 * total(params)


def test_dequantized_copies_finds_a_materialised_float_copy_of_an_int8_kernel(params):
    q8 = int8.quantize_params(params)
    w = q8["layers"][0]["mlp"]["up"]
    x = jnp.ones((2, CFG.d_model), jnp.bfloat16)
    copied = jax.jit(lambda w8, x: (w8.astype(jnp.bfloat16) * 2, x @ w8.astype(jnp.bfloat16)))
    found = int8.dequantized_copies(copied.lower(w["kernel"], x).compile().as_text(), q8)
    assert found and all(f"[{CFG.d_model},{CFG.d_ff}]" in f for f in found)
    clean = jax.jit(lambda w8, x: x.sum() + w8.sum())  # reads the kernel, never converts it whole
    assert int8.dequantized_copies(clean.lower(w["kernel"], x).compile().as_text(), q8) == []
    with pytest.raises(ValueError, match="no int8"):
        int8.dequantized_copies("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}", params)


def test_the_tpu_compiler_fuses_the_int8_to_bf16_convert_into_the_matmul(params):
    # whether the int8 weights cross from HBM as int8 is the TPU compiler's choice: ask it (libtpu,
    # deviceless, for a v5e); a CPU materialises float copies, as lesson 09b (int8) prints
    from tpututor import aot

    if aot.available() is not None:
        pytest.fail(f"the course environment has the TPU compiler: {aot.available()}")
    q8 = int8.quantize_params(params)
    where = aot.mesh("v5e-4", {"devices": 4})
    args = jax.tree.map(
        lambda a: aot.abstract(a.shape, a.dtype, where, ()),
        (q8, jnp.zeros(1, jnp.int32), decode.init_cache(CFG, 1), jnp.zeros(1, jnp.int32)),
    )
    compiled = aot.compile(decode.make_step(CFG), *args, slice="v5e-4")
    assert int8.dequantized_copies(compiled.hlo, q8) == []
    assert any(
        ins.shape.startswith("s8[") for ins in hlo.parse(compiled.hlo).entry.instructions if ins.opcode == "parameter"
    )


def test_the_critical_batch_matches_scaling_books_worked_numbers():
    assert sizing.critical_batch("v5e") == pytest.approx(240, rel=0.2)
    assert sizing.critical_batch("v5e", bytes_per_weight=1) == pytest.approx(120, rel=0.2)
    assert sizing.critical_batch("v6e") > sizing.critical_batch("v5e")


def test_the_hbm_model_reproduces_scaling_books_llama_2_13b_on_eight_v5e():
    # LLaMA-2-13B: d_model 5120, 40 layers, 40 heads (no GQA), a gated MLP of three 5120 x 13824
    # matrices: lm's own layout.
    llama = lm.Config(d_model=5120, n_layers=40, n_heads=40, d_ff=13824, seq_len=8192, vocab=32000)
    bandwidth = 8 * hardware.lookup("v5e").hbm_bandwidth
    book = {
        1: (32.7, 4.98),
        8: (79.6, 12.13),
        16: (133.2, 20.30),
        32: (240.4, 36.65),
        64: (454.8, 69.33),
        240: (1634, 249.09),
    }  # (total memory, printed as GiB but in 1e9 bytes; theoretical step ms)
    for batch, (memory, ms) in book.items():
        assert sizing.memory_bytes(llama, batch, 8192) / 1e9 == pytest.approx(memory, rel=0.01)
        assert sizing.min_step_seconds(llama, batch, 8192, bandwidth) * 1e3 == pytest.approx(ms, rel=0.01)
    assert sizing.max_batch(llama, 8192, "v5e", chips=8) == 16  # "We OOM beyond batch size 16"
    assert sizing.max_batch(llama, 8192, "v5e", chips=1) == 0  # 26 GB of weights do not fit 16 GiB


def test_gqa_shrinks_the_cache_and_the_key_value_weights():
    big = lm.Config(d_model=2048, n_layers=24, n_heads=16, d_ff=5632, seq_len=2048)
    assert sizing.kv_bytes_per_token(big, kv_heads=2) * 8 == sizing.kv_bytes_per_token(big)
    assert sizing.matmul_weights(big) == mfu.matmul_params(big)
    assert sizing.matmul_weights(big, kv_heads=2) == mfu.matmul_params(big) - 2 * 24 * 2048 * 14 * 128
    assert sizing.max_batch(big, 2048, "v5e") == 36 and sizing.max_batch(big, 2048, "v5e", kv_heads=2) > 256
    assert sizing.max_batch(big, 2048, "v5e", hbm_bytes=1e9) == 0
    with pytest.raises(ValueError, match="dividing n_heads=16"):
        sizing.kv_bytes_per_token(big, kv_heads=3)


def test_costs_follow_the_shapes_and_the_bound_is_bytes_over_bandwidth():
    cost = sizing.decode_cost(CFG, 4, 64)
    n = 2 * CFG.n_layers * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 192) + 2 * 64 * CFG.vocab  # 2 bytes per weight
    assert cost.bytes == n + 4 * 64 * sizing.kv_bytes_per_token(CFG)
    assert sizing.decode_cost(CFG, 1, 64).intensity < 1.5 < sizing.prefill_cost(CFG, 1, 64).intensity
    assert sizing.min_step_seconds(CFG, 4, 64, 1e9) == pytest.approx(cost.bytes / 1e9)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        sizing.decode_cost(CFG, 0, 64)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        sizing.min_step_seconds(CFG, 1, 64, 0)


def test_pages_go_to_pinned_host_memory_and_come_back_unchanged():
    _, _, _, pool, table, _ = _pool()
    assert paged.host_memory() == "pinned_host"
    cold = pool[np.asarray(table[1])]
    away = paged.offload(cold, "pinned_host")
    back = paged.offload(away, "device")
    assert away.sharding.memory_kind == "pinned_host" and back.sharding.memory_kind == "device"
    assert jnp.array_equal(back, cold)
    layout, why = paged.host_placement(lambda x: x * 1, cold)
    if layout is None:  # JAX 0.7.2 on a CPU: the reason, not an exception
        assert "pinned_host" in why
    else:
        assert "S(5)" in layout and why == ""


def test_serving_shardings_split_the_cache_over_batch_and_heads_and_only_activations_move(params):
    grid = lm.make_mesh(data=4, tensor=2, devices=mesh.pick_devices(8))
    cache = decode.init_cache(CFG, 4)
    with pytest.raises(lm.ShardingRuleError, match="kv_heads"):  # 2 key/value heads do not split 4 ways
        sharding.serving_shardings(params, cache, lm.make_mesh(data=2, tensor=4, devices=mesh.pick_devices(8)))
    p_sh, c_sh = sharding.serving_shardings(params, cache, grid)
    placed = jax.device_put(cache, c_sh)
    assert placed[0]["k"].addressable_shards[0].data.shape == (1, CFG.seq_len, 1, CFG.head_dim)
    assert p_sh["layers"][0]["attn"]["q"]["kernel"].spec == jax.sharding.PartitionSpec(None, "tensor")
    rows = jax.sharding.NamedSharding(grid, jax.sharding.PartitionSpec("data"))
    fn = jax.jit(
        lambda p, t, c, pos: decode.forward(p, t[:, None], c, pos, cfg=CFG)[1],
        in_shardings=(p_sh, rows, c_sh, rows),
        out_shardings=c_sh,
    )
    row_args = [jax.device_put(jnp.zeros(4, jnp.int32), rows) for _ in range(2)]
    found = mesh.collectives(fn.lower(jax.device_put(params, p_sh), row_args[0], placed, row_args[1]).compile())
    assert found and {c.kind for c in found} == {"all-reduce"}
    with pytest.raises(lm.ShardingRuleError, match="does not divide"):
        sharding.serving_shardings(params, decode.init_cache(CFG, 3), grid)


def _post(url, body: bytes, timeout=30):
    request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_endpoint_answers_on_loopback_refuses_bad_requests_and_stops():
    def complete(prompt, n):
        decode.check_fits(len(prompt), n, 16)
        return prompt[::-1][:n]

    with endpoint.serve(complete, lifetime_s=30) as server:
        assert server.url.startswith("http://127.0.0.1:")
        status, body = _post(server.url, json.dumps({"prompt": "abc", "max_tokens": 2}).encode())
        assert status == 200 and body["choices"][0]["text"] == "cb" and body["usage"]["completion_tokens"] == 2
        assert body["object"] == "text_completion" and body["id"].startswith("cmpl-") and body["model"]
        assert isinstance(body["created"], int) and body["usage"]["total_tokens"] == 5
        status, body = _post(server.url, b"{not json")
        assert status == 400 and body["error"]["type"] == "BadRequestError" and body["error"]["code"] == 400
        status, body = _post(server.url, json.dumps({"prompt": "x" * 20, "max_tokens": 2}).encode())
        assert status == 400 and "CacheFull" in body["error"]["message"]
        with urllib.request.urlopen(server.url + "/health", timeout=10) as reply:
            assert json.loads(reply.read()) == {"status": "ok"}
        assert server.requests == 1
    assert not server.running
    for host in ("0.0.0.0", "::1"):
        with pytest.raises(ValueError, match="loopback"):
            endpoint.serve(complete, host=host)


def test_the_endpoint_stops_by_itself_after_its_lifetime():
    server = endpoint.serve(lambda p, n: p, lifetime_s=0.3)
    deadline = time.time() + 10
    while server.running and time.time() < deadline:
        time.sleep(0.05)
    assert not server.running
    server.stop()  # stopping a stopped endpoint is harmless
