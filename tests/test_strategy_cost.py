"""tpututor.strategy on the real CPU path and on faked TPU/GPU discovery; tpututor.cost."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import run_python
from tpututor import cost, fakes, strategy


class FakeTF:
    """Just enough of tensorflow for strategy.choose: devices, resolver, strategies."""

    def __init__(self, gpus=0, tpu_ok=True, mirrored_fails=False, started=False):
        self.calls = []
        self.logical = ["/device:CPU:0"]
        fake = self

        class Strategy:
            def __init__(self, kind, n):
                self.kind, self.num_replicas_in_sync = kind, n

        def resolver(tpu=None):
            fake.calls.append(("resolver", tpu))
            return SimpleNamespace(tpu=tpu)

        def initialize(r):
            fake.calls.append(("initialize", r.tpu))
            if not tpu_ok:
                raise RuntimeError("TPUs not found in the cluster.\nmore detail")

        def mirrored(devices=None):
            if mirrored_fails:
                raise RuntimeError("no devices")
            return Strategy("mirrored", len(devices) if devices else gpus)

        def set_logical(device, configs):
            if started:
                raise RuntimeError("Virtual devices cannot be modified after being initialized")
            fake.logical = [f"/device:CPU:{i}" for i in range(len(configs))]

        self.distribute = SimpleNamespace(
            cluster_resolver=SimpleNamespace(TPUClusterResolver=resolver),
            TPUStrategy=lambda r: Strategy("tpu", 8),
            MirroredStrategy=mirrored,
            get_strategy=lambda: Strategy("default", 1),
        )
        self.tpu = SimpleNamespace(experimental=SimpleNamespace(initialize_tpu_system=initialize))
        self.config = SimpleNamespace(
            experimental_connect_to_cluster=lambda r: fake.calls.append(("connect", r.tpu)),
            list_physical_devices=lambda kind: ["gpu"] * gpus if kind == "GPU" else ["cpu"],
            set_logical_device_configuration=set_logical,
            LogicalDeviceConfiguration=lambda: object(),
            list_logical_devices=lambda kind: [SimpleNamespace(name=n) for n in fake.logical],
        )


def test_a_tpu_vm_gets_tpu_strategy_through_the_local_resolver(fake):
    tf = FakeTF()
    chosen = strategy.choose(tf=tf, host=fake("tpu-vm-v6e-8"))
    assert (chosen.kind, chosen.replicas) == ("tpu", 8)
    assert tf.calls == [("resolver", "local"), ("connect", "local"), ("initialize", "local")]
    assert "TPU v6e x8" in chosen.reason and "tpu='local'" in chosen.reason


def test_a_tpu_that_tensorflow_cannot_use_falls_back_and_says_why(fake):
    machine = fakes.Machine(
        "TPU VM with tensorflow-tpu but the TPU busy",
        pci=[("0x1ae0", "0x0063")] * 8,
        dev=[f"vfio/{i}" for i in range(8)],
        packages={"tensorflow-tpu": "2.20.0"},
    )
    chosen = strategy.choose(4, tf=FakeTF(tpu_ok=False), host=fake(machine))
    assert (chosen.kind, chosen.replicas) == ("cpu", 4)
    assert "TPUStrategy failed (RuntimeError: TPUs not found in the cluster.)" in chosen.reason
    assert "tensorflow-tpu" in chosen.reason and "4 logical CPU" in chosen.reason


def test_tensorflow_cpu_on_a_tpu_vm_does_not_even_try_the_tpu(fake):
    tf = FakeTF()
    chosen = strategy.choose(4, tf=tf, host=fake("kaggle-v5e-8"))  # Kaggle ships tensorflow-cpu
    assert tf.calls == [] and chosen.replicas == 4
    assert "TensorFlow here is tensorflow-cpu, which cannot use a TPU" in chosen.reason


def test_gpus_get_mirrored_strategy(fake):
    chosen = strategy.choose(tf=FakeTF(gpus=2), host=fake("colab-t4"))
    assert (chosen.kind, chosen.replicas) == ("gpu", 2) and "no TPU attached" in chosen.reason


def test_a_cpu_is_split_into_logical_replicas(fake):
    chosen = strategy.choose(3, tf=FakeTF(), host=fake("laptop-cpu"))
    assert (chosen.kind, chosen.replicas) == ("cpu", 3)
    assert chosen.reason.endswith(
        "MirroredStrategy over 3 logical CPU device(s) (split the CPU into 3 logical devices)"
    )


def test_a_started_tensorflow_keeps_its_devices_and_says_so(fake):
    chosen = strategy.choose(4, tf=FakeTF(started=True), host=fake("laptop-cpu"))
    assert chosen.replicas == 1 and "already started" in chosen.reason


def test_never_raises_on_a_cpu_even_when_mirrored_fails(fake):
    chosen = strategy.choose(tf=FakeTF(mirrored_fails=True), host=fake("laptop-cpu"))
    assert chosen.replicas == 1 and "the default strategy" in chosen.reason


def test_zero_replicas_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 1"):
        strategy.choose(0, tf=FakeTF())


@pytest.mark.slow
def test_the_real_cpu_path_gives_four_replicas_and_trains():
    out = run_python(
        """
        import numpy as np, keras
        from tpututor import strategy
        chosen = strategy.choose(4)
        with chosen.strategy.scope():
            model = keras.Sequential([keras.layers.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
        x = np.ones((64, 4), "float32")
        model.fit(x, x.sum(1, keepdims=True), batch_size=16, epochs=1, verbose=0)
        print(chosen.kind, chosen.replicas, type(chosen.strategy).__name__)
    """,
        env={"PATH": "/usr/bin:/bin", "TF_CPP_MIN_LOG_LEVEL": "3", "HOME": "/tmp"},
        clean_env=True,
    )
    assert out.split()[-3:] == ["cpu", "4", "MirroredStrategy"]


# ----------------------------------------------------------------- cost


@pytest.mark.parametrize("name, chips", [("v5litepod-8", 8), ("v6e-16", 16), ("v4-32", 16), ("v5p-8", 4), ("v5e-1", 1)])
def test_chips_in_a_slice(name, chips):
    assert cost.chips_in(name) == chips


@pytest.mark.parametrize(
    "generation, chips, name",
    [("v5p", 4, "v5p-8"), ("v5p", 16, "v5p-32"), ("v6e", 16, "v6e-16"), ("v5e", 8, "v5litepod-8"), ("v4", 16, "v4-32")],
)
def test_slice_name_is_the_inverse_of_chips_in(generation, chips, name):
    assert cost.slice_name(generation, chips) == name and cost.chips_in(name) == chips
    assert cost.slice_name("7x", 8) is None
    with pytest.raises(ValueError, match="whole number >= 1"):
        cost.slice_name("v5p", 0)


@pytest.mark.parametrize(
    "where, region", [("us-east5-a", "us-east5"), ("projects/p/locations/europe-west4-b/nodes/n", "europe-west4")]
)
def test_region_of_a_zone_or_a_resource_name(where, region):
    assert cost.region_of(where) == region
    with pytest.raises(ValueError, match="is not a zone"):
        cost.region_of("us-east5")


def test_estimate_is_chips_times_price_times_hours():
    e = cost.estimate("v6e-16", 2.5, hours=3)
    assert (e.per_hour, e.per_day, e.total) == (40.0, 960.0, 120.0)
    assert (
        e.line() == "v6e-16 (16 chips) at $2.50 per chip-hour: $40.00/hour, $960.00/day left running, $120.00 for 3 h"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (("v9-8", 1.0), "not a TPU type"),
        (("v5e-8", -1.0), "non-negative"),
        (("v5e-8", float("nan")), "non-negative"),
        (("v5e-8", "cheap"), "non-negative"),
        (("v5e-8", 1.0, -2), "non-negative"),
    ],
)
def test_bad_cost_inputs_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        cost.estimate(*args)


def test_every_price_row_names_its_source_and_the_date_it_was_read():
    rows = cost.prices()
    assert {(p.chip, p.region) for p in rows} >= {
        ("v5e", "us-central1"),
        ("v5p", "us-central1"),
        ("v6e", "us-central1"),
    }
    for p in rows:
        assert p.source.startswith("https://") and len(p.source_date) == 10 and p.source_date[:2] == "20"
        assert 0 < p.on_demand_usd < 20 and (p.spot_usd is None or 0 < p.spot_usd < p.on_demand_usd)


def test_estimate_without_a_price_uses_the_tables_row_and_says_so():
    e = cost.estimate("v6e-16", hours=2)
    row = cost.price("v6e")
    assert e.price_per_chip_hour == row.on_demand_usd and e.total == 16 * row.on_demand_usd * 2
    assert "on-demand list price for v6e in us-central1" in e.basis and row.source_date in e.basis
    spot = cost.estimate("v5litepod-8", region="europe-west4", spot=True)
    assert (
        spot.price_per_chip_hour
        == cost.price("v5e", "europe-west4").spot_usd
        < cost.price("v5e", "europe-west4").on_demand_usd
    )


def test_a_slice_name_finds_its_generations_price():
    assert cost.price("v5litepod-8") == cost.price("v5e") and cost.price("v5p-8").chip == "v5p"


@pytest.mark.parametrize("chip, region", [("v4", "us-central1"), ("v6e", "mars-north1"), ("v4-32", "us-central1")])
def test_a_price_the_table_lacks_is_a_clear_error_naming_the_fix(chip, region):
    with pytest.raises(
        ValueError,
        match=r"no price for .* look it up on https://cloud.google.com/tpu/pricing and pass price_per_chip_hour=",
    ):
        cost.price(chip, region)
    if "-" in chip:
        with pytest.raises(ValueError, match="price_per_chip_hour="):
            cost.estimate(chip, region=region)


def test_price_table_renders_every_row_with_its_source_and_status():
    table = cost.price_table()
    assert table.count("\n") == 1 + len(cost.prices()) and "skypilot-catalog" in table
    assert "**doubtful**" in table and "**unverified**" in table and "as read" in table
    assert cost.price_table("europe-west4").count("europe-west4") == sum(
        p.region == "europe-west4" for p in cost.prices()
    )


def test_a_committed_use_price_the_table_lacks_says_where_it_comes_from():
    with pytest.raises(
        ValueError, match=r"no 1y committed-use price for v6e in us-central1.*sales.*pass price_per_chip_hour="
    ):
        cost.price("v6e").per_chip_hour(commitment="1y")
    with pytest.raises(ValueError, match="price_per_chip_hour="):
        cost.estimate("v5litepod-8", hours=10, commitment="3y")
    with pytest.raises(ValueError, match="commitment must be one of 1y, 3y"):
        cost.price("v6e").per_chip_hour(commitment="5y")
    with pytest.raises(ValueError, match="spot and a commitment do not combine"):
        cost.price("v6e").per_chip_hour(spot=True, commitment="1y")


def test_a_committed_use_price_in_the_table_is_used_and_named_in_the_basis():
    row = cost.Price("v6e", "us-central1", 2.70, 0.65, "https://example.com/p", "2026-12-01", "", 1.89, 1.22)
    assert (row.per_chip_hour(commitment="1y"), row.per_chip_hour(commitment="3y")) == (1.89, 1.22)


def test_the_h100_is_priced_per_gpu_hour_per_region_with_its_source():
    gpus = [p for p in cost.prices() if p.kind == "gpu"]
    assert {(p.chip, p.region) for p in gpus} >= {
        ("H100", "us-central1"),
        ("H100", "us-east4"),
        ("H100", "europe-west4"),
    }
    for p in gpus:
        assert p.source.startswith("https://") and "a3-highgpu-8g" in p.notes and "over 8 GPUs" in p.notes
        assert not p.trusted and "gpus-pricing" in p.notes, "no H100 row was checked against Google's GPU pricing page"
    assert (
        cost.price("H100", "us-central1").status == "doubtful" and "DOUBTFUL" in cost.price("H100", "us-central1").notes
    )
    assert all(p.trusted for p in cost.prices() if p.kind == "tpu")
    assert cost.price("H100", "us-east4").on_demand_usd == pytest.approx((78.37241 + 9.46006) / 8, rel=1e-4)
    with pytest.raises(ValueError, match="compute/gpus-pricing"):
        cost.price("H100", "asia-east9")
    assert cost.regions("H100") == ["europe-west4", "us-central1", "us-east4"]


def test_the_price_table_shows_commitment_columns_and_filters_by_kind():
    table = cost.price_table(kind="tpu")
    assert "1-year commitment" in table and "3-year commitment" in table and "H100" not in table
    assert "H100" in cost.price_table(kind="gpu") and "v6e" not in cost.price_table(kind="gpu")


def test_every_empty_committed_use_column_says_why_with_the_pages_and_the_date():
    for p in cost.prices():
        if p.kind == "tpu" and (p.commit_1y_usd is None or p.commit_3y_usd is None):
            assert "not published on the pages read (2026-12-04)" in p.notes, p
            assert "https://cloud.google.com/tpu/pricing" in p.notes and "long-term-reservation" in p.notes
    with pytest.raises(ValueError, match="not published on the pages read"):
        cost.estimate("v6e-16", hours=1, commitment="1y")


def test_won_conversion_uses_a_dated_rate_or_yours():
    rate, day = cost.KRW_PER_USD
    assert rate == 1439.0 and day == "2025-12-30"
    assert cost.to_krw(100.0) == 143_900.0 and cost.to_krw(2.0, 1500) == 3000.0
    for bad in (0, -1, float("nan"), "1400", True):
        with pytest.raises(ValueError, match="krw_per_usd"):
            cost.to_krw(1.0, bad)
