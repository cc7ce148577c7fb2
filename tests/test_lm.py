"""tpututor.lm: the training lesson's model, data pipeline, sharding rules, checkpoints and CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from conftest import PYTHON, ROOT, run_python
from tpututor import lm, lm_config

TINY = lm.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, seq_len=16)


@pytest.fixture(scope="module")
def tokens():
    return lm.encode("def f(x):\n    return x * 2\n" * 400)


@pytest.fixture(scope="module")
def one_device():
    return lm.make_mesh(devices=jax.devices()[:1])


def test_the_model_shape_imports_no_framework_and_the_model_imports_jax_but_not_grain_or_orbax():
    out = run_python(
        "import sys, tpututor.lm_config, tpututor.mfu\n"
        "print(sorted(m for m in ('jax', 'flax', 'optax', 'orbax', 'grain', 'numpy') if m in sys.modules))\n"
        "import tpututor.lm\n"
        "print(sorted(m for m in ('jax', 'flax', 'optax', 'orbax', 'grain') if m in sys.modules))"
    )
    assert out.split() == ["[]", "['flax',", "'jax',", "'optax']"]
    assert lm.Config is lm_config.Config and lm.PROFILES is lm_config.PROFILES


def test_encode_decode_round_trips_any_utf8_text_and_ascii_is_its_own_code():
    for text in ("for i in range(3):\n\tprint(i)", "한국어 텍스트도 학습합니다.", "é, ß, 漢字, 🙂"):
        assert lm.decode(lm.encode(text)) == text
    assert lm.encode("def").tolist() == [ord(c) for c in "def"]
    assert len(lm.encode("한")) == 3 and max(lm.encode("한국어")) < lm.VOCAB == 256


def test_decoding_a_cut_character_or_a_foreign_id_shows_the_replacement_character():
    cut = lm.encode("한")[:2].tolist()  # a window that ends inside a three-byte character
    assert lm.decode(cut + lm.encode("a").tolist()) == "\ufffda"
    assert lm.decode([104, 300, 105]) == "h\ufffdi"  # 300 is no byte (another model's id)


def test_the_stdlib_corpus_holds_out_whole_files(tmp_path):
    for i in range(20):
        (tmp_path / f"m{i:02d}.py").write_text(f"x = {i}\n")
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "t.py").write_text("skipped = True\n")
    train, held, used = lm.stdlib_corpus(10_000, held_out_every=10, root=str(tmp_path))
    assert len(used) == 20 and "skipped" not in train + held
    assert held.split() == ["x", "=", "9", "x", "=", "19"] and "x = 9" not in train.splitlines()


def test_a_folder_without_python_files_names_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="pass root="):
        lm.stdlib_files(str(tmp_path))


def test_two_processes_read_disjoint_halves_that_make_the_one_process_batch(tokens):
    one = lm.dataset(tokens, 16, 8, seed=1)
    halves = [lm.dataset(tokens, 16, 8, seed=1, process_index=p, process_count=2) for p in (0, 1)]
    for step in (0, 3, 40):  # 40 is past the first epoch: a new shuffle, still split the same way
        together = np.concatenate([h[step]["inputs"] for h in halves])
        assert np.array_equal(together, one[step]["inputs"])
    assert np.array_equal(one[0]["targets"][:, :-1], one[0]["inputs"][:, 1:])


def test_resuming_the_pipeline_is_slicing_and_epochs_reshuffle(tokens):
    ds = lm.dataset(tokens, 16, 8, seed=2)
    assert np.array_equal(next(iter(ds[5:]))["inputs"], ds[5]["inputs"])
    per_epoch = len(lm.Windows(tokens, 16)) // 8
    assert not np.array_equal(ds[0]["inputs"], ds[per_epoch]["inputs"])


def test_bad_pipeline_sizes_name_the_fix(tokens):
    with pytest.raises(ValueError, match="use a multiple of 3"):
        lm.dataset(tokens, 16, 8, process_count=3)
    with pytest.raises(ValueError, match="shorter seq_len"):
        lm.Windows(tokens[:10], 16)


def test_a_config_with_heads_that_do_not_divide_is_refused():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        lm.Config(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="positive integer"):
        lm.Config(n_layers=0)


def test_config_for_sizes_an_accelerator_run_from_its_memory():
    assert lm.config_for("ci", "TPU v5 lite", "tpu") == lm.PROFILES["ci"]
    assert lm.config_for("full") == lm.PROFILES["full"]
    v5e, h200 = lm.config_for("full", "TPU v5 lite", "tpu"), lm.config_for("full", "NVIDIA H200", "gpu")
    assert v5e.n_params() < h200.n_params()
    with pytest.raises(ValueError, match="unknown profile"):
        lm.config_for("huge")


def test_config_for_sizes_from_the_memory_of_one_jax_device_not_the_whole_chip():
    # A TPU v2 chip has 16 GiB of HBM but shows as two JAX devices of 8 GiB each (jax_devices_per_chip = 2):
    # the model must fit one device, so it gets the size for under 16 GiB, not the v5e's (16 GiB, one device).
    assert lm.config_for("full", "TPU v2", "tpu") == lm.config_for("full", "unknown chip", "tpu")
    assert lm.config_for("full", "TPU v2", "tpu").n_params() < lm.config_for("full", "TPU v5 lite", "tpu").n_params()


def test_a_rule_naming_an_axis_the_mesh_lacks_names_the_fix(one_device):
    abstract = lm.abstract_state(TINY, lm.optimizer())
    with pytest.raises(lm.ShardingRuleError, match="names mesh axis 'model'.*map 'mlp' to one of those"):
        lm.shardings(abstract, {**lm.RULES, "mlp": "model"}, one_device)


def test_a_dimension_that_does_not_divide_over_its_axis_names_the_fix():
    grid = lm.make_mesh(fsdp=8)
    with pytest.raises(lm.ShardingRuleError, match=r"size 12\) of w does not divide.*pick a size divisible by 8"):
        lm.spec_for(("embed", "mlp"), lm.RULES, grid, (12, 64), "w")


def test_a_batch_that_does_not_divide_the_data_axes_names_a_batch_that_does():
    grid = lm.make_mesh(data=2, fsdp=4)
    assert lm.check_batch(16, grid) == 2
    with pytest.raises(lm.ShardingRuleError, match=r"12 rows does not divide over the 8 data shards.*8 or 16"):
        lm.check_batch(12, grid)
    with pytest.raises(lm.ShardingRuleError, match="needs 4 devices but 8"):
        lm.make_mesh(data=2, tensor=2)


def test_shardings_follow_logical_axes_and_adam_moments_follow_their_parameter():
    from jax.sharding import PartitionSpec as P

    grid = lm.make_mesh(fsdp=4, tensor=2)
    sh = lm.shardings(lm.abstract_state(lm.PROFILES["ci"], lm.optimizer()), lm.RULES, grid)
    layers = sh["params"]["layers"]  # stacked: a leading axis of n_layers, kept whole on every device
    assert layers["mlp"]["up"]["kernel"].spec == P(None, "fsdp", "tensor")
    assert layers["attn"]["o"]["kernel"].spec == P(None, "tensor", "fsdp")
    assert layers["attn"]["k"]["kernel"].spec == P(None, "fsdp", "tensor")  # the kv_heads rule
    assert layers["attn_norm"]["weight"].spec == P(None, None)
    assert sh["params"]["lm_head"]["kernel"].spec == P("fsdp", None)
    assert sh["params"]["norm"]["weight"].spec == P(None)
    import jax

    # lm.optimizer = chain(clip_by_global_norm, adamw); find Adam's state wherever the chain puts it
    mu = next(s for s in jax.tree.leaves(sh["opt_state"], is_leaf=lambda x: hasattr(x, "mu")) if hasattr(s, "mu")).mu
    assert mu["layers"]["mlp"]["up"]["kernel"].spec == P(None, "fsdp", "tensor")
    assert sh["step"].spec == P()


def test_matmuls_run_in_bfloat16_and_gradients_are_float32():
    graph = lm.graphdef(TINY)
    params = lm.abstract_state(TINY, lm.optimizer())["params"]
    tok = jnp.zeros((2, TINY.seq_len), jnp.int32)
    jaxpr = jax.make_jaxpr(lambda p: lm.loss_fn(p, graph, {"inputs": tok, "targets": tok}))(params)
    dots = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"]
    assert dots and {str(v.aval.dtype) for e in dots for v in e.invars} == {"bfloat16"}
    grads = jax.eval_shape(jax.grad(lambda p: lm.loss_fn(p, graph, {"inputs": tok, "targets": tok})), params)
    assert {g.dtype for g in jax.tree.leaves(grads)} == {jnp.dtype("float32")}


@pytest.fixture(scope="module")
def trained(tokens, one_device):
    """A few steps of TINY on one device: (optimizer, compiled step, states after 0 and 3 steps, batches)."""
    tx = lm.optimizer(1e-2, 10)
    state = lm.init_state(TINY, tx, 0, one_device)
    step = lm.make_train_step(TINY, tx, one_device, donate=False)
    batches = [lm.to_device(lm.dataset(tokens, TINY.seq_len, 4)[i], lm.batch_sharding(one_device)) for i in range(3)]
    states, losses = [state], []
    for b in batches:
        state, loss = step(state, b)
        states.append(state)
        losses.append(float(loss))
    return tx, step, states, losses


def test_training_steps_lower_the_loss(trained):
    _, _, _, losses = trained
    assert losses[-1] < losses[0] < np.log(lm.VOCAB) + 0.5


def test_korean_text_trains_and_its_samples_decode_to_text(one_device):
    korean = "모델은 바이트를 읽고 다음 바이트를 예측합니다. 한국어 문장도 그대로 학습합니다.\n" * 60
    tokens = lm.encode(korean)
    assert lm.decode(tokens) == korean
    tx = lm.optimizer(1e-2, 20)
    state = lm.init_state(TINY, tx, 0, one_device)
    step = lm.make_train_step(TINY, tx, one_device, donate=False)
    data = lm.dataset(tokens, TINY.seq_len, 8)
    losses = []
    for i in range(12):
        state, loss = step(state, lm.to_device(data[i], lm.batch_sharding(one_device)))
        losses.append(float(loss))
    assert np.mean(losses[-3:]) < losses[0] - 1.0, losses  # it learns Korean, not one unknown token
    assert {t for t in tokens.tolist() if t >= 0x80} >= {0xEB, 0xEC, 0xED}  # Hangul's lead bytes are trained on
    sample = lm.generate(lm.model_from(TINY, state["params"]), "모델은", 12)
    assert isinstance(sample, str) and sample


def test_a_checkpoint_restores_exactly_and_another_model_is_refused_untouched(trained, tmp_path, one_device):
    tx, _, states, _ = trained
    manager = lm.checkpoint_manager(tmp_path, TINY, save_every=1)
    for i, state in enumerate(states[1:], start=1):
        lm.save(manager, i, state, TINY)
    manager.wait_until_finished()
    restored = lm.restore(manager, TINY, lm.abstract_state(TINY, tx))
    manager.close()
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(states[3])))

    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    other = lm.Config(**{**TINY.to_dict(), "d_model": 64})
    with pytest.raises(lm.CheckpointMismatch, match="d_model=32 there, 64 here. Nothing was changed"):
        lm.checkpoint_manager(tmp_path, other)
    with lm.checkpoint_manager(tmp_path, TINY) as reopened, pytest.raises(lm.CheckpointMismatch):
        lm.restore(reopened, other, lm.abstract_state(other, tx))
    assert sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in tmp_path.rglob("*")) == before


def test_load_gives_the_saved_config_and_a_model_that_samples(trained, tmp_path):
    _, _, states, _ = trained
    with lm.checkpoint_manager(tmp_path, TINY) as manager:
        lm.save(manager, 3, states[3], TINY, force=True)
    cfg, model = lm.load(tmp_path)
    assert cfg == TINY and np.array_equal(model.lm_head.kernel[...], states[3]["params"]["lm_head"]["kernel"])
    text = lm.generate(model, "def ", length=10, seed=1)
    assert 0 < len(text) <= 10 and len(lm.encode(text)) >= 10  # 10 bytes: fewer characters if some are not ASCII
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        lm.load(tmp_path / "empty")


def test_device_prefetch_hands_out_every_batch_then_stops_its_thread(one_device):
    import threading

    sh = lm.batch_sharding(one_device)
    source = ({"inputs": np.full((2, 4), i, np.int32)} for i in range(5))
    got = [int(b["inputs"][0, 0]) for b in lm.device_prefetch(source, sh)]
    assert got == [0, 1, 2, 3, 4]
    endless = ({"inputs": np.zeros((2, 4), np.int32)} for _ in iter(int, 1))
    ahead = lm.device_prefetch(endless, sh)
    next(ahead)
    ahead.close()
    assert not [t for t in threading.enumerate() if t.name == "device_prefetch"]


def test_device_prefetch_passes_the_pipelines_error_on(one_device):
    def broken():
        yield {"inputs": np.zeros((2, 4), np.int32)}
        raise OSError("the bucket went away")

    ahead = lm.device_prefetch(broken(), lm.batch_sharding(one_device))
    next(ahead)
    with pytest.raises(OSError, match="bucket"):
        next(ahead)


def test_unknown_remat_policies_are_refused():
    assert lm.remat_policy("none") is False and callable(lm.remat_policy("full"))
    with pytest.raises(ValueError, match="unknown remat policy"):
        lm.remat_policy("some")


def test_load_texts_reads_local_files_offline_through_the_hugging_face_path(tmp_path):
    pytest.importorskip("datasets")
    (tmp_path / "a.txt").write_text("first file\nline two\n")
    (tmp_path / "b.txt").write_text("second file\n")
    code = f"""
        from tpututor import lm
        texts = lm.load_texts("text", data_files={[str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]!r},
                              sample_by="document", cache_dir={str(tmp_path / "cache")!r})
        print(sorted(texts))
        try:
            lm.load_texts("text", data_files={[str(tmp_path / "a.txt")]!r}, field="body", cache_dir={str(tmp_path / "cache")!r})
        except KeyError as err:
            print("KeyError", err)
    """
    out = run_python(code, env={"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    assert "['first file\\nline two\\n', 'second file\\n']" in out and "pass field=" in out


def test_a_killed_training_process_resumes_to_the_uninterrupted_loss(tmp_path):
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "xla"),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }
    base = [
        PYTHON,
        "-m",
        "tpututor.lm",
        "train",
        "--config",
        json.dumps(TINY.to_dict()),
        "--batch",
        "4",
        "--schedule-steps",
        "6",
        "--corpus-chars",
        "50000",
        "--save-every",
        "2",
    ]

    def run(*extra):
        out = subprocess.run(base + list(extra), capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        return {r["step"]: r["loss"] for r in map(json.loads, out.stdout.splitlines()) if "step" in r}

    whole = run("--steps", "6")
    first = run("--steps", "4", "--ckpt-dir", str(tmp_path / "run"))  # stops after step 4, as if killed there
    rest = run("--steps", "6", "--ckpt-dir", str(tmp_path / "run"))
    assert sorted(first) == [1, 2, 3, 4] and sorted(rest) == [5, 6]
    assert rest[6] == whole[6] and first[4] == whole[4]


def test_the_cli_says_how_to_use_it():
    out = subprocess.run(
        [sys.executable, "-m", "tpututor.lm", "train", "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0 and "--ckpt-dir" in out.stdout and "--coordinator" in out.stdout


def test_a_cloud_storage_checkpoint_path_stays_a_url_and_a_local_one_becomes_absolute(tmp_path, monkeypatch):
    from tpututor import lm

    assert str(lm.checkpoint_path("gs://my-bucket/runs/lm")) == "gs://my-bucket/runs/lm"  # not ./gs:/my-bucket/...
    monkeypatch.chdir(tmp_path)
    assert str(lm.checkpoint_path("runs/lm")) == str(tmp_path / "runs" / "lm")


def test_the_training_model_is_the_llama_definition_lesson_13_loads_checkpoints_into():
    from tpututor.models import llama

    model = lm.LM(TINY, nnx.Rngs(0))
    assert isinstance(model, llama.Llama) and model.cfg == lm.llama_config(TINY)
    params = nnx.state(model, nnx.Param)
    assert sum(x.size for x in jax.tree.leaves(params)) == TINY.n_params() == llama.param_count(model.cfg)
    twin = nnx.merge(nnx.graphdef(nnx.eval_shape(lambda: llama.Llama(model.cfg, nnx.Rngs(1)))), params)
    tokens = jnp.arange(2 * TINY.seq_len).reshape(2, TINY.seq_len) % TINY.vocab
    assert jnp.array_equal(model(tokens), twin(tokens))


def test_grouped_query_attention_needs_heads_in_whole_groups():
    assert lm.Config(n_heads=4).n_kv_heads == 4  # multi-head unless told
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        lm.Config(n_heads=4, n_kv_heads=3)


def test_weight_decay_skips_every_norm_scale_even_stacked_ones():
    params = lm.abstract_state(TINY, lm.optimizer())["params"]
    mask = lm.decays(params)
    assert mask["layers"]["attn_norm"]["weight"] is False and mask["layers"]["mlp_norm"]["weight"] is False
    assert mask["norm"]["weight"] is False
    assert mask["layers"]["attn"]["q"]["kernel"] is True and mask["embed"]["embedding"] is True
    assert mask["lm_head"]["kernel"] is True
