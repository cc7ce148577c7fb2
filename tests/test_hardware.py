"""The chip table: sourced rows, device-kind lookup, the CPU estimate."""

from __future__ import annotations

import pytest

from tpututor import hardware

REQUIRED = {"v2", "v3", "v4", "v5e", "v5p", "v6e", "7x", "T4", "L4", "A100-40GB", "A100-80GB", "H100", "H200"}


def test_table_has_every_required_chip():
    assert REQUIRED <= {c.name for c in hardware.chips()}


@pytest.mark.parametrize("chip", hardware.chips(), ids=lambda c: c.name)
def test_every_row_has_a_public_source_and_a_date(chip):
    assert chip.source.startswith("https://")
    assert chip.source_date[:4].isdigit()


@pytest.mark.parametrize("chip", hardware.chips(), ids=lambda c: c.name)
def test_every_row_has_memory_and_bandwidth(chip):
    assert chip.hbm_gib and chip.hbm_gbps and chip.jax_devices_per_chip in (1, 2)


@pytest.mark.parametrize(
    "device_kind, name",
    [
        ("TPU v2", "v2"),
        ("TPU v3", "v3"),
        ("TPU v4", "v4"),
        ("TPU v5 lite", "v5e"),
        ("TPU v5e", "v5e"),
        ("TPU v5", "v5p"),
        ("TPU v6 lite", "v6e"),
        ("TPU7x", "7x"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H200", "H200"),
        ("  tpu   v5   lite ", "v5e"),
        ("v6e", "v6e"),
        ("TPU v6e", "v6e"),
        ("h100", "H100"),
    ],
)
def test_lookup_accepts_jax_device_kinds_and_table_names(device_kind, name):
    assert hardware.lookup(device_kind).name == name


@pytest.mark.parametrize(
    "device_kind", ["cpu", "TPU v4 lite", "NVIDIA H100 PCIe", "NVIDIA A100-PCIE-40GB", "TPU v9", "", "   "]
)
def test_unknown_device_kind_is_none_not_a_guess(device_kind):
    assert hardware.find(device_kind) is None


def test_find_tolerates_non_strings():
    assert hardware.find(None) is None and hardware.find(42) is None  # type: ignore[arg-type]


def test_lookup_of_unknown_chip_names_the_known_ones():
    with pytest.raises(KeyError, match="Known chips: v2, v3"):
        hardware.lookup("TPU v9")


def test_si_units_and_ridge_point():
    v5e = hardware.lookup("v5e")
    assert v5e.peak_flops == 197e12 and v5e.hbm_bandwidth == 819e9 and v5e.hbm_bytes == 16 * 2**30
    assert v5e.ridge_point == pytest.approx(240.5, rel=1e-3)
    assert hardware.lookup("T4").ridge_point is None  # no bf16 matrix unit


def test_cpu_estimate_uses_the_widest_simd_and_says_it_is_an_estimate():
    est = hardware.estimate_cpu("Xeon", 4, ["sse2", "avx", "avx2", "fma", "avx512f"], 2.0)
    assert est.estimate and est.simd == "AVX-512" and est.peak_flops == 4 * 2.0e9 * 64
    assert any("assumed" in a for a in est.assumptions)


@pytest.mark.parametrize(
    "model, per_cycle",
    [
        ("AMD EPYC", 32),
        ("AMD EPYC 9654 96-Core Processor", 32),
        ("AMD Ryzen 9 7950X", 32),  # Zen 4: 2 x 256-bit
        ("AMD EPYC 9755 128-Core Processor", 64),
        ("AMD Ryzen 9 9950X", 64),  # Zen 5: full-width AVX-512
    ],
)
def test_cpu_estimate_counts_zen4_avx512_at_256_bit_width(model, per_cycle):
    est = hardware.estimate_cpu(model, 2, ["avx2", "fma", "avx512f", "avx512_bf16"], 2.6)
    assert est.flops_per_cycle_per_core == per_cycle and est.peak_flops == 2 * 2.6e9 * per_cycle
    assert ("Zen 4" in est.assumptions[0]) == (per_cycle == 32)


def test_cpu_estimate_needs_fma_for_the_avx2_rate():
    assert hardware.estimate_cpu("old", 2, ["avx", "avx2"], 3.0).simd == "AVX"


def test_cpu_estimate_without_a_clock_has_no_peak():
    assert hardware.estimate_cpu("?", 2, [], None).peak_flops is None


def test_markdown_table_links_every_source_and_takes_an_extra_row():
    text = hardware.markdown_table(extra={"chip": "this CPU (estimate)"})
    assert text.count("](https://") == len(hardware.chips())
    assert text.splitlines()[-1].startswith("| this CPU (estimate) |")


def test_plot_marks_this_machine(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    ax = hardware.plot_chips(here=("this CPU", 1e11, 2e10))
    assert "this CPU" in [t.get_text() for t in ax.get_legend().get_texts()]
    ax.figure.savefig(tmp_path / "chips.png")


# ICI per axis and topology (jax-ml/scaling-book tpus.md, "TPU Networking" and the interconnect
# table "ICI BW/link (one-way / bidi)", read 2026-12-01)
@pytest.mark.parametrize(
    "name, one_way, bidi, topology",
    [
        ("v3", 1e11, 2e11, "2D torus"),
        ("v4", 4.5e10, 9e10, "3D torus"),
        ("v5p", 9e10, 1.8e11, "3D torus"),
        ("v5e", 4.5e10, 9e10, "2D torus"),
        ("v6e", 9e10, 1.8e11, "2D torus"),
    ],
)
def test_per_axis_ici_matches_scaling_books_interconnect_table(name, one_way, bidi, topology):
    chip = hardware.lookup(name)
    assert chip.ici_link_bandwidth == one_way and chip.ici_axis_bandwidth == bidi
    assert chip.ici_topology == topology


@pytest.mark.parametrize("chip", [c for c in hardware.chips() if c.ici_link_gbps], ids=lambda c: c.name)
def test_every_per_axis_figure_has_its_own_source_and_date(chip):
    assert chip.ici_source.startswith("https://") and chip.ici_source_date[:4].isdigit()


def test_derived_interconnect_figures_say_so_and_vendor_ones_sit_about_ten_percent_above_the_links():
    # Cloud TPU publishes no per-chip ICI figure for v3 and v4: the table's are links x per-link (scaling-book)
    for name, links in (("v3", 4), ("v4", 6)):
        chip = hardware.lookup(name)
        assert "derived" in chip.notes and chip.interconnect_gbps == links * 2 * chip.ici_link_gbps
    for name, links in (("v5e", 4), ("v6e", 4), ("v5p", 6)):  # vendor figures: 50/100/100 GB/s a link one way
        chip = hardware.lookup(name)
        assert "derived" not in chip.notes
        assert chip.interconnect_gbps / (links * 2 * chip.ici_link_gbps) == pytest.approx(1.11, abs=0.01)


def test_the_aggregate_interconnect_column_keeps_its_meaning():
    # vendors' per-chip figure, every link both ways: v5e 400 GB/s over 4 ports is not one axis
    assert hardware.lookup("v5e").interconnect_gbps == 400 and hardware.lookup("v5p").interconnect_gbps == 1200
    for name in ("v4", "v5e", "v5p", "v6e"):  # one axis gets a fraction of the chip's total
        chip = hardware.lookup(name)
        assert chip.ici_axis_bandwidth < chip.interconnect_gbps * 1e9 / 2


@pytest.mark.parametrize(
    "name, shape, wraps",
    [
        ("v5e", (2, 4), (False, False)),  # a v5e-8 (Cloud TPU docs: 2x4) wraps nowhere
        ("v5e", (8, 16), (False, True)),
        ("v6e", (16, 16), (True, True)),
        ("v5p", (4, 4, 4), (True, True, True)),
        ("v5p", (4, 4, 8), (True, True, True)),
        ("v5p", (2, 2, 4), (False, False, False)),
        ("v4", (2, 2, 1), (False, False, False)),
    ],
)
def test_wraparound_follows_each_torus_rule(name, shape, wraps):
    assert hardware.lookup(name).wraparound(shape) == wraps


def test_wraparound_refuses_a_shape_that_is_not_the_torus_and_a_chip_without_a_rule():
    with pytest.raises(ValueError, match=r"2D torus: give its slice as 2 positive integers, such as \(2, 4\)"):
        hardware.lookup("v5e").wraparound((2, 2, 2))
    with pytest.raises(ValueError, match="3D torus"):
        hardware.lookup("v5p").wraparound((4, 0, 4))
    with pytest.raises(ValueError, match="no ICI wraparound rule"):
        hardware.lookup("v3").wraparound((4, 4))
    assert hardware.lookup("H100").ici_axis_bandwidth is None and hardware.lookup("7x").ici_link_bandwidth is None
