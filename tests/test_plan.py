"""tpututor.plan and `python -m tpututor plan`: the scaling book's worked numbers, the review of a
TPU request, VMs left running, and clear errors for bad arguments.

The worked numbers come from *How to Scale Your Model* (jax-ml/scaling-book, commit 0819a7d):
``applied-training.md`` ("Training LLaMA 3 on TPUs"), section "Counting parameters and FLOPs", and
``training.md`` ("How to Parallelize a Transformer for Training"), sections "Data Parallelism" and
"Fully-Sharded Data Parallelism (FSDP)".
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from conftest import run_python
from tpututor import cli, cost, hardware, plan

GB = 1e9


# ----------------------------------------------------------------- the scaling book's numbers


def test_llama3_70b_parameter_count_from_its_config_matches_the_scaling_book():
    # applied-training.md, "Counting parameters and FLOPs": 56.3e9 + 2.1e9 + 12e9 = 70.4e9
    n = plan.transformer_params(80, 8192, 128_256, d_ff=28_672, heads=64, kv_heads=8, head_dim=128)
    assert n == pytest.approx(70.4e9, rel=0.005)


def test_llama3_70b_on_a_full_v5p_pod_at_40_percent_mfu_takes_44_days():
    # same section: 6 * 70e9 * 15e12 = 6.3e24 FLOPs; T = 6.3e24 / (8960 * 4.59e14 * 0.4) = 3.8e6 s, about 44 days
    p = plan.plan(70e9, 15e12, "v5p", 8960, 0.4)
    assert p.flops == pytest.approx(6.3e24)
    assert p.seconds == pytest.approx(3.8e6, rel=0.01)
    assert round(p.days) == 44


def test_llama3_70b_training_state_matches_the_scaling_books_memory_table():
    # same chapter, the minimum-TPUs question: bf16 params 2 * 70GB = 140GB, f32 optimizer 8 * 70GB = 560GB
    p = plan.plan(70e9, 15e12, "v5p", 8960, 0.4, param_bytes=2, grad_bytes=0)
    dp = p.memory["DP"]
    assert (dp.params_bytes, dp.grads_bytes, dp.optimizer_bytes) == (140 * GB, 0, 560 * GB)
    assert p.memory["FSDP"].total_bytes == pytest.approx(700 * GB / 8960)


def test_the_largest_pure_data_parallel_model_is_hbm_over_10_bytes_per_parameter():
    # training.md, "Data Parallelism": params + Adam = 2 + 8 = 10 bytes per parameter, so on a 96GB v5p about 9B
    fits = plan.plan(9e9, 1e12, "v5p", 8, param_bytes=2, grad_bytes=0, hbm_bytes=96 * GB)
    too_big = plan.plan(9.7e9, 1e12, "v5p", 8, param_bytes=2, grad_bytes=0, hbm_bytes=96 * GB)
    assert fits.fits("DP") and not too_big.fits("DP")
    assert fits.memory["DP"].total_bytes == 90 * GB
    assert too_big.fits("FSDP"), "FSDP over 8 chips holds what one chip cannot"


def test_two_pods_at_half_mfu_train_llama3_70b_in_about_17_days():
    # training.md, "Fully-Sharded Data Parallelism (FSDP)": 6.3e24 FLOPs on 18,823 chips at 50% MFU, about 17 days
    p = plan.plan(70e9, 15e12, "v5p", 18_823, 0.5)
    assert p.days == pytest.approx(17, abs=0.5)


# ----------------------------------------------------------------- the model itself


def test_the_default_state_is_16_bytes_per_parameter_as_lesson_08_trains():
    p = plan.plan(1e9, 1e10, "v6e", 8)
    dp = p.memory["DP"]
    assert (dp.params_bytes, dp.grads_bytes, dp.optimizer_bytes) == (4e9, 4e9, 8e9)
    assert "= 16 in all" in " ".join(p.assumptions)


def test_fsdp_splits_the_training_state_over_every_chip_and_dp_does_not():
    p = plan.plan(8e9, 1e12, "v5p", 256, 0.4)
    dp, fsdp = p.memory["DP"], p.memory["FSDP"]
    assert dp.total_bytes == 8e9 * 16 and fsdp.total_bytes == pytest.approx(dp.total_bytes / 256)
    assert dp.hbm_bytes == hardware.lookup("v5p").hbm_bytes == fsdp.hbm_bytes
    assert not dp.fits and dp.free_bytes < 0 and dp.free_bytes == pytest.approx(dp.hbm_bytes - dp.total_bytes)
    assert fsdp.fits and plan.plan(5e9, 1e12, "v5p", 256).memory["DP"].fits, "80 GB of state fits a 95 GiB v5p"


def test_the_text_says_state_only_and_what_is_left_for_activations():
    text = plan.plan(8e9, 1e12, "v5p", 256, 0.4).text()
    fsdp = plan.plan(8e9, 1e12, "v5p", 256, 0.4).memory["FSDP"]
    assert f"FSDP: fits (state only, {fsdp.free_bytes / 2**30:.1f} GiB left for activations" in text
    assert "DP: does NOT fit" in text


@pytest.mark.parametrize(
    "chip, chips, name, counts",
    [
        ("v5p", 256, "v5p-512", "TensorCores, two per chip"),
        ("v6e", 64, "v6e-64", "v6e names count chips"),
        ("v5e", 16, "v5litepod-16", "v5e names count chips"),
    ],
)
def test_the_plan_names_the_slice_so_chips_and_tensorcores_are_not_confused(chip, chips, name, counts):
    p = plan.plan(1e9, 1e10, chip, chips)
    assert p.slice_name == name and cost.chips_in(name) == chips
    assert f"accelerator type {name} (" in p.text() and counts in p.text() and "quota" in p.text()
    assert p.to_dict()["slice_name"] == name
    assert plan.plan(1e9, 1e10, "H100", 8, region="us-east4").slice_name is None


def test_a_doubtful_price_row_is_named_in_the_cost_basis():
    p = plan.plan(1e9, 2e10, "H100", 8, 0.4, region="us-central1")
    assert p.price_basis.startswith("DOUBTFUL row") and "--price" in p.price_basis
    assert "UNVERIFIED row" in plan.plan(1e9, 2e10, "H100", 8, region="us-east4").price_basis
    assert "row" not in plan.plan(1e9, 2e10, "v6e", 8).price_basis.split(",")[0]


def test_time_and_cost_follow_from_flops_peak_mfu_and_the_price_table():
    p = plan.plan(8e9, 1e12, "v6e", 64, 0.5, region="europe-west4")
    row = cost.price("v6e", "europe-west4")
    assert p.seconds == pytest.approx(6 * 8e9 * 1e12 / (64 * 918e12 * 0.5))
    assert p.cost_on_demand == pytest.approx(64 * p.hours * row.on_demand_usd)
    assert p.cost_spot == pytest.approx(64 * p.hours * row.spot_usd)
    assert row.source_date in p.price_basis and "europe-west4" in p.price_basis


def test_a_gpu_is_planned_and_priced_per_gpu_hour():
    p = plan.plan(1e9, 2e10, "H100", 8, 0.4, region="us-east4")
    assert p.unit == "GPU" and p.price_on_demand == cost.price("H100", "us-east4").on_demand_usd
    assert "GPU-hours" in p.text() and "per GPU" in " ".join(p.assumptions)


def test_your_price_replaces_the_table_and_a_missing_row_says_how_to_pass_one():
    mine = plan.plan(1e9, 1e10, "v4", 8, price_per_chip_hour=3.22)
    assert mine.price_on_demand == 3.22 and mine.cost_spot is None and "your price" in mine.price_basis
    none = plan.plan(1e9, 1e10, "v4", 8)
    assert none.cost_on_demand is None and "--price" in none.price_basis
    assert "--price" in none.text()


def test_every_assumption_is_listed_with_the_result():
    p = plan.plan(8e9, 1e12, "v5p", 256, 0.4)
    text = " ".join(p.assumptions)
    for needle in (
        "6 x parameters x tokens",
        "MFU 40%",
        "bytes per parameter",
        "FSDP",
        "activations",
        "HBM 95.0 GiB",
        "perfect scaling",
        "cost =",
        "READY",
        "256 means chips",
        "v5p-512",
        "quota",
    ):
        assert needle in text, needle
    assert p.to_dict()["assumptions"] == p.assumptions


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(params=0), "params must be a positive number"),
        (dict(params=-8e9), "for example 8e9"),
        (dict(tokens=float("nan")), "tokens must be a positive number"),
        (dict(chips=0), "positive whole number"),
        (dict(chips=2.5), "positive whole number"),
        (dict(mfu=0), "fraction in"),
        (dict(mfu=40), "0.4 for 40%"),
        (dict(chip="v9"), "unknown chip 'v9': use one of"),
        (dict(chip="T4"), "no bf16 peak"),
        (dict(region="mars-north1"), "choose one of those or pass price_per_chip_hour="),
        (dict(grad_bytes=-1), "non-negative number of bytes"),
        (dict(price_per_chip_hour=-2), "price_per_chip_hour must"),
        (dict(params=1e30), "outside any real training run"),
        (dict(tokens=1e3), "a million to 10 quadrillion tokens"),
        (dict(chips=10**7), "1 to 200,000 chips"),
        (dict(batch=0), "batch must be a positive whole number"),
    ],
)
def test_bad_arguments_are_clear_errors_naming_the_fix(kwargs, message):
    args = dict(params=8e9, tokens=1e12, chip="v5p", chips=256, mfu=0.4)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        plan.plan(args.pop("params"), args.pop("tokens"), args.pop("chip"), args.pop("chips"), args.pop("mfu"), **args)


def test_transformer_params_counts_a_plain_mlp_and_tied_embeddings():
    plain = plan.transformer_params(2, 64, 100, d_ff=256, ffw_matrices=2, tied_embeddings=True)
    assert plain == 2 * (2 * 64 * 256 + 4 * 64 * 64) + 100 * 64
    with pytest.raises(ValueError, match="layers must be a positive whole number"):
        plan.transformer_params(0, 64, 100)


# ----------------------------------------------------------------- the CLI


def test_the_cli_prints_memory_time_cost_and_assumptions(capsys):
    assert cli.main(["plan", "--params", "8e9", "--tokens", "1e12", "--chip", "v5p", "--chips", "256"]) == 0
    out = capsys.readouterr().out
    for needle in (
        "memory per chip (GiB)",
        "FSDP",
        "fits? (state only)",
        "days",
        "on demand $4.20/chip-h",
        "spot",
        "assumptions:",
        "v5p-512",
    ):
        assert needle in out, needle


def test_the_cli_defaults_to_16_bytes_per_parameter(capsys):
    assert cli.main(["plan", "--params", "1e9", "--tokens", "1e10", "--chip", "v6e", "--chips", "8", "--json"]) == 0
    dp = json.loads(capsys.readouterr().out)["memory_per_chip"]["DP"]
    assert dp["total_bytes"] == 16e9


def test_the_cli_json_reproduces_the_scaling_book_llama_run(capsys):
    assert (
        cli.main(
            [
                "plan",
                "--params",
                "70e9",
                "--tokens",
                "15e12",
                "--chip",
                "v5p",
                "--chips",
                "8960",
                "--mfu",
                "0.4",
                "--param-bytes",
                "2",
                "--grad-bytes",
                "0",
                "--json",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert doc["seconds"] == pytest.approx(3.8e6, rel=0.01) and round(doc["days"]) == 44
    assert doc["memory_per_chip"]["DP"]["params_bytes"] == 140e9
    assert doc["cost_usd"]["on_demand"] == pytest.approx(doc["chip_hours"] * 4.20)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--params", "abc"], "--params must be a positive number like 8e9"),
        (["--chips", "0"], "must be a positive whole number"),
        (["--mfu", "40"], "--mfu is a fraction in (0, 1]"),
        (["--chip", "v9"], "unknown chip 'v9'"),
        (["--region", "mars-north1"], "no prices for region 'mars-north1'"),
        (["--optimizer-bytes", "-4"], "bytes per parameter must be a number >= 0"),
        (
            ["--params", "1e30"],
            "params = 1e+30 is outside any real training run (100 thousand to 10 trillion parameters)",
        ),
        (["--tokens", "1e20"], "a million to 10 quadrillion tokens"),
        (["--chips", "10000000"], "1 to 200,000 chips"),
    ],
)
def test_bad_cli_arguments_exit_2_with_the_fix(argv, message, capsys):
    base = {"--params": "8e9", "--tokens": "1e12", "--chip": "v5p", "--chips": "256"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    args = ["plan"] + [x for kv in base.items() for x in kv]
    try:
        code = cli.main(args)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_python_m_tpututor_plan_runs_in_a_fresh_interpreter():
    out = run_python("""
        import subprocess, sys
        r = subprocess.run([sys.executable, "-m", "tpututor", "plan", "--params", "8e9", "--tokens", "1e12",
                            "--chip", "v5p", "--chips", "256", "--mfu", "0.4"], capture_output=True, text=True)
        print(r.returncode, "fits" in r.stdout, "assumptions:" in r.stdout)
    """)
    assert out.split() == ["0", "True", "True"]


# ----------------------------------------------------------------- reviewing a request


def test_a_type_the_zone_lacks_is_an_error_naming_zones_that_offer_it():
    found = plan.review({"acceleratorType": "v6e-8"}, "us-central1-a", checkpoint_uri="gs://b/c")
    zone = [f for f in found if f.check == "zone"]
    assert zone and zone[0].level == "error" and "us-central1-b" in zone[0].fix
    assert not [f for f in plan.review({"acceleratorType": "v6e-8"}, "us-central1-b") if f.check == "zone"]


def test_a_spot_vm_without_durable_checkpoints_is_flagged():
    spot = {"acceleratorType": "v5litepod-8", "schedulingConfig": {"spot": True}}
    assert [f.level for f in plan.review(spot, "us-central1-a") if f.check == "spot"] == ["error"]
    assert [f.level for f in plan.review(spot, "us-central1-a", checkpoint_uri="/tmp/ckpt") if f.check == "spot"] == [
        "warning"
    ]
    assert not [f for f in plan.review(spot, "us-central1-a", checkpoint_uri="gs://b/run") if f.check == "spot"]


def test_tpu7x_and_nonsense_types_are_errors_and_unknown_zones_a_warning():
    assert plan.review({"acceleratorType": "tpu7x-8"}, "us-central1-c")[0].check == "api"
    assert plan.review({"acceleratorType": "a100-8"}, "us-central1-a")[0].check == "accelerator type"
    unknown = [f for f in plan.review({"acceleratorType": "v5litepod-8"}, "asia-east9-z") if f.check == "zone"]
    assert unknown[0].level == "warning" and "accelerator-types list" in unknown[0].fix


CLOUD = "https://www.googleapis.com/auth/cloud-platform"
TIGHT = {
    "acceleratorType": "v5litepod-8",
    "networkConfig": {"enableExternalIps": False},
    "serviceAccount": {"email": "job@p.iam.gserviceaccount.com", "scope": [CLOUD]},
    "metadata": {"enable-oslogin": "TRUE"},
    "shieldedInstanceConfig": {"enableSecureBoot": True},
}


def test_security_defaults_are_warnings_and_a_locked_down_request_has_only_notes():
    loose = plan.review(
        {
            "acceleratorType": "v5litepod-8",
            "networkConfig": {"enableExternalIps": True},
            "serviceAccount": {"email": "default", "scope": [CLOUD]},
        },
        "us-central1-a",
    )
    assert {f.check for f in loose} == {"external IP", "service account", "scopes", "OS Login", "secure boot"}
    assert all(f.level == "warning" for f in loose)
    assert "roles/iam.serviceAccountUser" in [f for f in loose if f.check == "service account"][0].fix
    found = plan.review(TIGHT, "us-central1-a")
    assert [(f.level, f.check) for f in found] == [("note", "no external IP")]
    assert "Private Google Access" in found[0].message and "Cloud NAT" in found[0].message


@pytest.mark.parametrize(
    "account",
    [{"email": "1234-compute@developer.gserviceaccount.com", "scope": [CLOUD]}, {"email": "", "scope": []}, {}],
)
def test_the_default_compute_account_with_a_broad_or_empty_scope_is_flagged(account):
    request = {**TIGHT, "serviceAccount": account}
    assert {"service account", "scopes"} <= {f.check for f in plan.review(request, "us-central1-a")}


def test_spot_needs_preemptible_quota_and_errors_come_before_warnings_and_notes():
    found = plan.review({**TIGHT, "schedulingConfig": {"spot": True}}, "us-central1-a")
    assert [f.level for f in found] == sorted((f.level for f in found), key=["error", "warning", "note"].index)
    quota = [f for f in found if f.check == "quota"]
    assert quota and quota[0].level == "note" and "preemptible" in quota[0].message and "tpu/docs/quota" in quota[0].fix


def test_a_queued_resources_spot_tier_counts_as_spot():
    qr = {
        "tpu": {"nodeSpec": [{"parent": "p", "nodeId": "n", "node": dict(TIGHT, acceleratorType="v5litepod-16")}]},
        "spot": {},
    }
    assert [f.check for f in plan.review(qr, "us-central1-a") if f.level == "error"] == ["spot"]
    assert not [f for f in plan.review(qr, "us-central1-a", checkpoint_uri="gs://b/r") if f.level != "note"]
    on_demand = {k: v for k, v in qr.items() if k != "spot"}
    assert not [f for f in plan.review(on_demand, "us-central1-a") if f.check in ("spot", "quota")]


def test_review_reads_the_official_clients_node_and_queued_resource_too():
    tpu_v2 = pytest.importorskip("google.cloud.tpu_v2")
    node = tpu_v2.Node(
        accelerator_type="v6e-8",
        scheduling_config=tpu_v2.SchedulingConfig(spot=True),
        metadata={"enable-oslogin": "TRUE"},
        service_account=tpu_v2.ServiceAccount(email="job@p.iam.gserviceaccount.com"),
        shielded_instance_config=tpu_v2.ShieldedInstanceConfig(enable_secure_boot=True),
    )
    assert [f.check for f in plan.review(node, "us-central1-a") if f.level == "error"] == ["zone", "spot"]
    assert "secure boot" not in {f.check for f in plan.review(node, "us-central1-a")}
    qr = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[
                tpu_v2.QueuedResource.Tpu.NodeSpec(
                    parent="p", node_id="n", node=tpu_v2.Node(accelerator_type="v5litepod-16")
                )
            ]
        ),
        spot=tpu_v2.QueuedResource.Spot(),
    )
    assert "spot" in [f.check for f in plan.review(qr, "us-central1-a") if f.level == "error"]
    qr_od = tpu_v2.QueuedResource(tpu=qr.tpu)
    assert "spot" not in [f.check for f in plan.review(qr_od, "us-central1-a")]


# ----------------------------------------------------------------- VMs left running


EAST5 = "projects/p/locations/us-east5-a/nodes/"


def test_forgotten_finds_old_ready_nodes_skips_kept_and_stopped_ones_and_prices_them_where_they_run():
    now = datetime(2026, 12, 7, 6, tzinfo=UTC)
    nodes = [
        {
            "name": EAST5 + "weekend",
            "acceleratorType": "v6e-16",
            "state": "READY",
            "createTime": "2026-12-04T18:00:00Z",
        },
        {
            "name": EAST5 + "kept",
            "acceleratorType": "v6e-8",
            "state": "READY",
            "labels": {"keep": "true"},
            "createTime": "2026-11-01T00:00:00Z",
        },
        {
            "name": EAST5 + "stopped",
            "acceleratorType": "v6e-8",
            "state": "STOPPED",
            "createTime": "2026-11-01T00:00:00Z",
        },
        {
            "name": EAST5 + "fresh",
            "acceleratorType": "v6e-8",
            "state": "READY",
            "createTime": (now - timedelta(hours=2)).isoformat(),
        },
        {
            "name": "projects/p/locations/us-central2-b/nodes/old-v4",
            "acceleratorType": "v4-8",
            "state": "READY",
            "createTime": "2026-12-06T00:00:00Z",
        },
    ]
    found = plan.forgotten(nodes, now, max_hours=12)
    assert [f.name.rsplit("/", 1)[-1] for f in found] == ["weekend", "old-v4"]
    weekend = found[0]
    assert weekend.hours == 60 and weekend.region == "us-east5"
    assert weekend.cost_usd == pytest.approx(16 * 60 * cost.price("v6e", "us-east5").on_demand_usd)
    assert "v6e in us-east5" in weekend.basis
    assert found[1].cost_usd is None and "price_per_chip_hour=" in found[1].basis
    with pytest.raises(ValueError, match="max_hours must be a non-negative number"):
        plan.forgotten(nodes, now, max_hours=-1)
    assert math.isclose(plan.forgotten(nodes, now, max_hours=0)[0].hours, 60)


def test_forgotten_says_so_when_it_prices_a_node_outside_its_region():
    now = datetime(2026, 12, 7, 6, tzinfo=UTC)
    node = {
        "name": "projects/p/locations/us-west4-a/nodes/x",
        "acceleratorType": "v5litepod-8",
        "state": "READY",
        "createTime": "2026-12-06T06:00:00Z",
    }
    assert plan.forgotten([node], now)[0].cost_usd is None
    priced = plan.forgotten([node], now, fallback_region="us-central1")[0]
    assert priced.cost_usd == pytest.approx(8 * 24 * cost.price("v5e", "us-central1").on_demand_usd)
    assert priced.basis.startswith("no us-west4 price in tpututor's table; priced at us-central1")


# ----------------------------------------------------------------- --compile: the plan checked by the TPU compiler

SMALL = ["--params", "1.3e6", "--layers", "1", "--d-model", "256", "--vocab", "1024", "--seq-len", "128"]
# one layer, but a vocabulary and width whose embeddings and Adam moments overflow a v5e's 16 GiB under FSDP
WIDE = ["--params", "7e9", "--layers", "1", "--d-model", "8192", "--vocab", "380000", "--seq-len", "128"]
V5E_8 = ["--tokens", "1e9", "--chip", "v5e", "--chips", "8", "--compile", "v5e-8"]

# XLA:TPU's long out-of-memory report (its layout as TPU users post it; sizes here made up)
LONG_OOM = """RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. \
Used 17.60G of 15.75G hbm. Exceeded hbm capacity by 1.85G.

Total hbm usage >= 17.60G:
    reserved        528.00M
    program          17.08G

  Largest program allocations in hbm:

  1. Size: 4.00G
     Operator: op_name="jit(train_step)/jvp(LM)/head/dot_general"
     Shape: f32[8,128,1048576]{2,1,0:T(8,128)}
     Unpadded size: 4.00G
     Allocation type: HLO temp
     ==========================

  2. Size: 1.45G
     Shape: f32[380000,1024]{1,0:T(8,128)}
     Unpadded size: 1.45G
     Allocation type: entry parameter
     ==========================
"""


def test_lm_shape_derives_a_standard_width_and_depth_from_a_parameter_count():
    layers, d, said = plan.lm_shape(8e9)
    assert (layers, d) == (34, 4352) and d % 128 == 0 and "34 layers" in said and "d_model 4352" in said
    cfg_params = layers * (12 * d * d + 2 * d) + d * (2 * plan.COMPILE_VOCAB + plan.COMPILE_SEQ_LEN + 1)
    assert cfg_params == pytest.approx(8e9, rel=0.03)
    assert plan.lm_shape(8e9, layers=32, d_model=4096) == (32, 4096, None)
    assert plan.lm_shape(8e9, d_model=4096)[:2] == (38, 4096) and plan.lm_shape(1e9, multiple=256)[1] % 256 == 0


def test_the_compilers_long_report_and_its_short_one_are_read():
    assert plan.largest_allocations(LONG_OOM) == [
        '1. 4.00G f32[8,128,1048576]{2,1,0:T(8,128)} (HLO temp) op_name="jit(train_step)/jvp(LM)/head/dot_general"',
        "2. 1.45G f32[380000,1024]{1,0:T(8,128)} (entry parameter)",
    ]
    assert plan.compiler_figures(LONG_OOM) == (17.60 * 2**30, 15.75 * 2**30)
    short = (
        "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries (22.53G) "
        "exceeds available HBM (15.75G)."
    )  # what libtpu 0.0.42.1 says for a v5e (measured)
    assert plan.largest_allocations(short) == [] and plan.compiler_figures(short) == (22.53 * 2**30, 15.75 * 2**30)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--layers", "2"], "--layers describe the model --compile builds: add --compile SLICE"),
        (["--seq-len", "2048", "--vocab", "50000"], "--vocab describe the model"),
        (["--compile", "v5e-8"], "--compile v5e-8 is 8 v5e chips, but the plan is for 256 v5p chips"),
        (["--compile", "v5e-6"], "not a standard v5e slice: use a power of two"),
        (["--compile", "h100-8"], "not a TPU slice the compiler knows"),
    ],
)
def test_compile_options_that_cannot_work_exit_2_with_the_fix(argv, message, capsys):
    code = cli.main(["plan", "--params", "8e9", "--tokens", "1e12", "--chip", "v5p", "--chips", "256"] + argv)
    assert code == 2 and message in capsys.readouterr().err


def test_compile_exits_2_with_the_reason_where_the_tpu_compiler_is_missing(monkeypatch, capsys):
    aot = pytest.importorskip("tpututor.aot")
    reason = 'the TPU compiler (libtpu) is not installed: pip install "jax[tpu]==0.7.2" adds the one built for this JAX'
    monkeypatch.setattr(aot, "available", lambda: reason)
    assert cli.main(["plan"] + SMALL + V5E_8) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"python -m tpututor plan: error: --compile v5e-8 needs the TPU compiler: {reason}"


def _needs_libtpu():
    aot = pytest.importorskip("tpututor.aot")
    if aot.available() is not None:
        pytest.skip(str(aot.available()))
    return aot


@pytest.mark.slow
def test_a_small_model_fits_a_v5e_8_and_the_compilers_figure_is_printed_beside_the_formulas(monkeypatch, capsys):
    aot = _needs_libtpu()
    made = []
    real = aot.compile
    monkeypatch.setattr(aot, "compile", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    assert cli.main(["plan"] + SMALL + V5E_8) == 0
    out = capsys.readouterr().out
    compiled = made[0]
    assert compiled.slice.name == "v5e-8" and compiled.fits
    assert compiled.memory["alias_size"] > 0, "the old state is donated: the new one reuses its memory"
    figure = plan.gib_text(compiled.bytes_per_device)
    assert f"v5e-8: fits: the TPU compiler needs {figure} GiB per chip of 16.00 GiB HBM" in out
    state = plan.gib_text(16 * 1_278_720 / 8)  # lm.Config(d_model=256, n_layers=1, vocab=1024, d_ff=640).n_params()
    assert f"(the formula's state alone: {state} GiB)" in out
    assert "TPU compiler check: v5e-8: 8 v5e chips" in out and "1,278,720 parameters" in out
    assert "Plan: 1.3e+06 parameters" in out, "the plan itself is printed first"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_wide_model_does_not_fit_a_v5e_8_exits_1_and_names_the_largest_allocations(as_json, capsys):
    _needs_libtpu()
    assert cli.main(["plan"] + WIDE + V5E_8 + (["--json"] if as_json else [])) == 1
    out = capsys.readouterr().out
    if as_json:
        check = json.loads(out)["compile"]
        assert check["slice_name"] == "v5e-8" and check["fits"] is False and "RESOURCE_EXHAUSTED" in check["message"]
        assert check["compiler_bytes"] > check["hbm_bytes"] > check["formula_bytes"] > 12 * 2**30
        assert any("embed/embedding" in line and "[380000, 1024]" in line for line in check["largest"])
        return
    needed, available = plan.compiler_figures(out)
    assert needed > available, "the compiler's own figures, read back from its message as printed"
    assert "v5e-8: does NOT fit: the TPU compiler refused it: RESOURCE_EXHAUSTED" in out
    assert f"{'total':<36}{'13.10':>9}{plan.gib_text(needed):>10}" in out  # formula beside the compiler
    assert "largest allocations (" in out
    assert (
        "state embed/embedding: float32[380000, 1024] of [380000, 8192] = 1.45 GiB per device x 3 (weights, mu, nu)"
        in out
    )


def test_a_program_the_compiler_accepts_but_that_exceeds_hbm_names_its_biggest_buffers(monkeypatch, capsys):
    aot = _needs_libtpu()
    from tpututor.hardware import slice_of

    text = """HloModule jit_train_step
ENTRY %main (p0: f32[1024,1024]) -> f32[4096,1024] {
  %p0 = f32[1024,1024]{1,0} parameter(0)
  ROOT %big = f32[4096,1024]{1,0} broadcast(f32[1024,1024]{1,0} %p0), dimensions={0,1}, \
metadata={op_name="jit(train_step)/broadcast_in_dim"}
}
"""
    over = {"argument_size": 10 * 2**30, "output_size": 10 * 2**30, "temp_size": 7 * 2**30, "alias_size": 10 * 2**30}
    fake = aot.Compiled(slice=slice_of("v5e-8"), hlo=text, memory=over, cost={}, seconds=0.1)
    monkeypatch.setattr(aot, "compile", lambda *a, **k: fake)
    assert cli.main(["plan"] + SMALL + V5E_8) == 1
    out = capsys.readouterr().out
    assert "v5e-8: does NOT fit: the TPU compiler needs 17.00 GiB per chip of 16.00 GiB HBM" in out
    assert "largest allocations (the biggest buffers in the compiled program, per device):" in out
    assert "f32[4096,1024] 0.0156 GiB (broadcast_in_dim)" in out


# ----------------------------------------------------------------- the batch: compute- or communication-bound


def test_the_gradient_sum_threshold_on_a_full_v5p_pod_is_the_scaling_books_850_tokens_per_chip():
    # scaling-book, training.md, "Data Parallelism": bf16 gradients over the three axes of a v5p pod, about 850
    p = plan.plan(70e9, 15e12, "v5p", 4096, batch=1024, seq_len=4096, param_bytes=2, grad_bytes=2)
    assert p.comm_threshold == pytest.approx(850, rel=0.05)
    assert p.tokens_per_chip == 1024 and p.communication_bound is False
    f32 = plan.plan(
        70e9, 15e12, "v5p", 4096, batch=1024, seq_len=4096
    )  # f32 gradients, as lesson 08a (training) sends: twice the bytes
    assert f32.comm_threshold == pytest.approx(2 * p.comm_threshold)


def test_a_batch_too_small_for_its_chips_is_flagged_communication_bound_and_a_bigger_one_is_not():
    small = plan.plan(
        1.2e9, 1e10, "v5e", 8, batch=16, seq_len=1024
    )  # 2,048 tokens per chip, as lesson 08a (training) runs a v5e-8
    assert small.communication_bound is True and small.tokens_per_chip == 2048
    assert "WARNING  communication-bound: 2,048 tokens per chip" in small.text()
    big = plan.plan(1.2e9, 1e10, "v5e", 8, batch=64, seq_len=1024)
    assert big.communication_bound is False and "compute-bound" in big.text() and "WARNING" not in big.text()
    assert plan.plan(1.2e9, 1e10, "v5e", 8).communication_bound is None  # no batch given: not asked
    assert plan.plan(1.2e9, 1e10, "H100", 8, batch=16).communication_bound is None  # no ICI model for GPUs


def test_the_cli_takes_the_global_batch_and_reports_it_in_json(capsys):
    assert (
        cli.main(
            [
                "plan",
                "--params",
                "1.2e9",
                "--tokens",
                "1e10",
                "--chip",
                "v5e",
                "--chips",
                "8",
                "--batch",
                "16",
                "--seq-len",
                "1024",
                "--json",
            ]
        )
        == 0
    )
    batch = json.loads(capsys.readouterr().out)["batch"]
    assert batch["tokens_per_chip"] == 2048 and batch["communication_bound"] is True
    assert batch["steps"] == pytest.approx(1e10 / (16 * 1024))


def test_large_figures_print_in_engineering_notation():
    assert plan.eng(1.234e13, "FLOP") == "12.3 TFLOP" and plan.eng(2048) == "2.05 k" and plan.eng(0.5) == "500 m"


def test_the_gated_mlp_width_keeps_about_twelve_d_model_squared_per_layer():
    assert plan.gated_width(4096) == 10880  # LLaMA's 11008 rounds its 8 d / 3 up to 256s; ours to 128s
    for d in (256, 1024, 4096):
        assert abs(3 * d * plan.gated_width(d) / (8 * d * d) - 1) < 0.07
