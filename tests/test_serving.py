"""The serving planner, against scaling-book's worked numbers for serving LLaMA 3-70B on TPU v5e."""

from __future__ import annotations

import subprocess

import pytest

from conftest import PYTHON, ROOT
from tpututor.serving import planner
from tpututor.serving.planner import Traffic, plan_serving

LLAMA_70B = planner.model("llama-3-70b")


def option(plan, chips):
    return next(o for o in plan.options if o.chips == chips)


def test_llama_3_70b_caches_160_kb_per_token_in_int8():
    # applied-inference.md: "2 x 8 x 128 x 80 = 160kB" per token (int8 cache)
    assert LLAMA_70B.kv_bytes_per_token(1) == 2 * 8 * 128 * 80 == 163_840


def test_int8_llama_3_70b_at_batch_32_and_8k_needs_eight_v5e_and_decodes_in_17_ms():
    # "Params 70GB + KV caches 41.9GB = 112GB ... 7 chips, so 4x2"; "T = (70e9 + 41.9e9) / (8 x 8.1e11) = 17ms";
    # "32 / 0.017 / 8 = 235 tokens/sec/chip"
    plan = plan_serving(LLAMA_70B, "v5e", Traffic(8191, 1), weight_bytes=1, kv_bytes=1, reserve=0)
    assert option(plan, 4).max_batch < 32 <= option(plan, 8).max_batch
    t32, terms = planner.step_bound(LLAMA_70B, plan.chip, 8, 32, 8192, weight_bytes=1, kv_bytes=1)
    assert t32 == terms["hbm"] == pytest.approx(0.017, rel=0.03)  # bandwidth-bound, as the book says
    assert 32 / t32 / 8 == pytest.approx(235, rel=0.03)
    assert option(plan, 8).step_s >= t32  # at its largest batch the step is longer


@pytest.mark.parametrize("weight_bytes, chips", [(2, 16), (1, 8), (0.5, 4)])
def test_the_smallest_v5e_topology_per_weight_precision_matches_scaling_book(weight_bytes, chips):
    # "Minimum topology by precision": bf16 4x4, int8 4x2, int4 2x2 (weights alone; a short context)
    plan = plan_serving(LLAMA_70B, "v5e", Traffic(1024, 1), weight_bytes=weight_bytes, kv_bytes=1, reserve=0)
    assert plan.chosen is not None and plan.chosen.chips == chips


def test_llama_3_1_8b_at_8k_on_v5e_needs_more_than_one_chip_and_has_a_price_and_a_vllm_command():
    plan = plan_serving("llama-3.1-8b", "v5e", Traffic(7680, 512, latency_ms=50))
    assert option(plan, 1).max_batch == 0  # 16 GB of bf16 weights do not fit one 16 GiB v5e
    assert plan.chosen.chips > 1 and plan.chosen.batch >= 1 and plan.chosen.step_s * 1e3 <= 50
    assert plan.chosen.usd_per_mtok > 0 and plan.chosen.usd_per_mtok_spot < plan.chosen.usd_per_mtok
    assert f"--tensor-parallel-size {plan.chosen.chips} " in plan.vllm_command()
    assert "v5litepod-4" in plan.text()  # 2 chips are sold as a v5e-4: two replicas


def test_past_the_kv_heads_more_chips_no_longer_shrink_the_cache():
    plan = plan_serving("llama-3.1-8b", "v6e", Traffic(8192, 512), max_chips=32)
    assert option(plan, 8).cache_per_sequence_per_chip == option(plan, 16).cache_per_sequence_per_chip
    assert option(plan, 4).cache_per_sequence_per_chip == 2 * option(plan, 8).cache_per_sequence_per_chip
    assert "KV heads" in option(plan, 16).note


def test_a_tighter_latency_target_takes_a_smaller_batch():
    loose = plan_serving("llama-3.1-8b", "v6e", Traffic(2048, 256, latency_ms=100)).chosen
    tight = plan_serving("llama-3.1-8b", "v6e", Traffic(2048, 256, latency_ms=8)).chosen
    assert tight.batch < loose.batch and tight.step_s * 1e3 <= 8


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"traffic": Traffic(0, 10)}, "prompt must be a whole number above 0"),
        ({"traffic": Traffic(10, 10, latency_ms=-1)}, "latency_ms"),
        ({"weight_bytes": 0}, "weight_bytes"),
        ({"reserve": 1.5}, "reserve"),
        ({"chip": "H100"}, "sizes TPUs"),
        ({"model": "gpt-5"}, "knows llama-3.1-8b"),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, message):
    args = {"model": "llama-3.1-8b", "chip": "v5e", "traffic": Traffic(1024, 128), **kwargs}
    with pytest.raises(ValueError, match=message):
        plan_serving(args.pop("model"), args.pop("chip"), args.pop("traffic"), **args)


def test_the_command_prints_the_plan_and_its_assumptions():
    out = subprocess.run(
        [
            PYTHON,
            "-m",
            "tpututor",
            "plan-serving",
            "--model",
            "llama-3.1-8b",
            "--chip",
            "v5e",
            "--prompt",
            "7680",
            "--output",
            "512",
            "--latency-ms",
            "50",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Chosen: 2 chips" in out.stdout and "vllm serve" in out.stdout and "Assumptions:" in out.stdout
    bad = subprocess.run(
        [
            PYTHON,
            "-m",
            "tpututor",
            "plan-serving",
            "--model",
            "llama-3.1-8b",
            "--chip",
            "v5e",
            "--prompt",
            "0",
            "--output",
            "512",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert bad.returncode == 2 and "prompt must be" in bad.stderr
