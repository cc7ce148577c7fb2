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
    [("TPU v2", "v2"), ("TPU v3", "v3"), ("TPU v4", "v4"), ("TPU v5 lite", "v5e"), ("TPU v5e", "v5e"),
     ("TPU v5", "v5p"), ("TPU v6 lite", "v6e"), ("TPU7x", "7x"), ("Tesla T4", "T4"), ("NVIDIA L4", "L4"),
     ("NVIDIA A100-SXM4-40GB", "A100-40GB"), ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
     ("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA H200", "H200"), ("  tpu   v5   lite ", "v5e"),
     ("v6e", "v6e"), ("TPU v6e", "v6e"), ("h100", "H100")],
)
def test_lookup_accepts_jax_device_kinds_and_table_names(device_kind, name):
    assert hardware.lookup(device_kind).name == name


@pytest.mark.parametrize("device_kind", ["cpu", "TPU v4 lite", "NVIDIA H100 PCIe", "TPU v9", "", "   "])
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
