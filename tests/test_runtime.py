"""Runtime detection: each faked machine is classified right; bad inputs never crash it."""

from __future__ import annotations

import dataclasses

import pytest

from tpututor import fakes, runtime
from tpututor.doctor import report

# machine -> (platform, accelerator kind, generation, chip count)
EXPECTED = {
    "laptop-cpu": ("local", "cpu", None, 4),
    "colab-cpu": ("colab", "cpu", None, 4),
    "colab-t4": ("colab", "gpu", "T4", 1),
    "colab-v5e-1": ("colab", "tpu", "v5e", 1),
    "kaggle-v5e-8": ("kaggle", "tpu", "v5e", 8),
    "tpu-vm-v4-8": ("cloud-tpu-vm", "tpu", "v4", 4),
    "tpu-vm-v6e-8": ("cloud-tpu-vm", "tpu", "v6e", 8),
    "colab-tpu-node": ("colab", "cpu", None, 4),
    "tpu-no-libtpu": ("cloud-tpu-vm", "tpu", "v5e", 4),
}


def test_every_fake_machine_has_an_expectation():
    assert set(EXPECTED) == set(fakes.MACHINES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fake_machine_is_classified_right(fake, name):
    rt = runtime.detect(fake(name))
    platform, kind, generation, count = EXPECTED[name]
    assert (rt.platform.name, rt.accelerator.kind, rt.accelerator.generation, rt.accelerator.count) == (
        platform,
        kind,
        generation,
        count,
    )


def test_colab_gpu_reports_the_name_and_memory_from_nvidia_smi(fake):
    acc = runtime.detect(fake("colab-t4")).accelerator
    assert acc.name == "Tesla T4" and acc.memory_gb == 15.0
    assert "/dev/nvidiactl exists" in acc.evidence


def test_retired_colab_tpu_node_is_reported_as_legacy_with_a_hint(fake):
    doc = report(fake("colab-tpu-node"), probe=False)
    assert doc["platform"]["legacy"] == "colab-tpu-node"
    assert any("retired" in w and "Change runtime type" in w for w in doc["warnings"])


def test_tpu_chips_without_libtpu_warn_to_install_jax_tpu(fake):
    doc = report(fake("tpu-no-libtpu"), probe=False)
    assert doc["accelerator"]["kind"] == "tpu"
    assert any("libtpu is not installed" in w and "jax[tpu]" in w for w in doc["warnings"])


def test_kaggle_tensorflow_cpu_on_a_tpu_gets_a_warning(fake):
    doc = report(fake("kaggle-v5e-8"), probe=False)
    assert any("tensorflow-tpu" in w for w in doc["warnings"])


def test_healthy_colab_tpu_has_no_warnings(fake):
    assert report(fake("colab-v5e-1"), probe=False)["warnings"] == []


def test_v2_and_v3_share_a_pci_id_and_the_subsystem_tells_them_apart(fake):
    v3 = fakes.Machine(
        "v3-8", pci=[("0x1ae0", "0x0027", "0x004f")] * 4, dev=[f"accel{i}" for i in range(4)], packages={"libtpu": "1"}
    )
    acc = runtime.detect(fake(v3)).accelerator
    assert (acc.kind, acc.generation, acc.count) == ("tpu", "v3", 4)


def test_google_network_card_is_not_a_tpu(fake):
    gvnic = fakes.Machine("a GCE VM with gVNIC", pci=[("0x1ae0", "0x0042")])
    assert runtime.detect(fake(gvnic)).accelerator.kind == "cpu"


def test_dev_accel_nodes_alone_count_as_tpu_chips_of_unknown_generation(fake):
    acc = runtime.detect(fake(fakes.Machine("accel only", dev=["accel0", "accel1"]))).accelerator
    assert (acc.kind, acc.generation, acc.count) == ("tpu", None, 2)


def test_vfio_nodes_alone_are_not_a_tpu(fake):
    # /dev/vfio is also how GPUs and NICs are passed through to VMs.
    assert runtime.detect(fake(fakes.Machine("vfio only", dev=["vfio/0"]))).accelerator.kind == "cpu"


def test_accelerator_type_without_chips_is_a_problem_not_a_tpu(fake):
    m = fakes.Machine("env only", env={"TPU_ACCELERATOR_TYPE": "v5litepod-8"})
    doc = report(fake(m), probe=False)
    assert doc["accelerator"]["kind"] == "cpu"
    assert any("no TPU chip is visible" in w for w in doc["warnings"])


@pytest.mark.parametrize("value", ["banana", "v9-8", "v5e-0", "v5e-", "-8", "v5e-8x", "😀", " "])
def test_garbage_accelerator_type_is_unknown_not_a_crash(fake, value):
    m = fakes.Machine("garbage env", pci=[("0x1ae0", "0x0063")], dev=["vfio/0"], env={"TPU_ACCELERATOR_TYPE": value})
    acc = runtime.detect(fake(m)).accelerator
    assert (acc.kind, acc.generation, acc.count) == ("tpu", "v5e", 1)  # the PCI bus still tells


def test_unreadable_and_malformed_sysfs_files_are_skipped(fake, tmp_path):
    host = fake(fakes.Machine("broken sysfs", pci=[("0x1ae0", "0x0063"), ("garbage\x00", "0x0063"), ("", "")]))
    pci = host.path("/sys/bus/pci/devices")
    broken = pci / "0000:00:10.0"
    (broken / "vendor").mkdir(parents=True)  # a directory where a file should be: read fails
    (pci / "0000:00:11.0").mkdir()  # no files at all
    (pci / "0000:00:12.0").mkdir()
    (pci / "0000:00:12.0" / "vendor").write_bytes(b"\xff\xfe\x00")  # not text
    acc = runtime.detect(host).accelerator
    assert (acc.kind, acc.generation, acc.count) == ("tpu", "v5e", 1)


def test_nvidia_driver_without_nvidia_smi_still_reports_a_gpu(fake):
    m = fakes.Machine("driver, no smi", dev=["nvidiactl", "nvidia0", "nvidia1"])
    acc = runtime.detect(fake(m)).accelerator
    assert (acc.kind, acc.count, acc.generation) == ("gpu", 2, None)
    assert acc.problems and "nvidia-smi" in acc.problems[0]


def test_garbled_nvidia_smi_output_does_not_crash(fake):
    m = fakes.Machine("garbled smi", dev=["nvidiactl"], commands={"nvidia-smi": ",,\n\nNVIDIA H200, lots\n"})
    acc = runtime.detect(fake(m)).accelerator
    assert acc.name == "NVIDIA H200" and acc.generation == "H200" and acc.memory_gb is None


def test_empty_machine_is_local_cpu_with_unknown_model(fake):
    rt = runtime.detect(fake(fakes.Machine("nothing at all")))
    assert rt.platform.name == "local" and rt.accelerator.kind == "cpu"
    assert rt.cpu.cores == 4 and rt.cpu.simd == []


def test_empty_colab_tpu_addr_is_not_legacy(fake):
    rt = runtime.detect(fake(fakes.Machine("blank", env={"COLAB_TPU_ADDR": "  "})))
    assert rt.platform.legacy is None and rt.platform.name == "local"


def test_colab_enterprise_is_told_apart_from_colab(fake):
    m = fakes.Machine("enterprise", env={"VERTEX_PRODUCT": "COLAB_ENTERPRISE", "COLAB_RELEASE_TAG": "x"})
    assert runtime.detect(fake(m)).platform.name == "colab-enterprise"


def test_cpuinfo_gives_model_clock_and_simd_flags(fake):
    cpu = runtime.detect(fake("laptop-cpu")).cpu
    assert cpu.model.startswith("Intel(R) Xeon(R)") and cpu.ghz == 2.2
    assert {"avx2", "fma", "avx512f"} <= set(cpu.simd)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("v5litepod-8", ("v5e", 8)),
        ("v5e-1", ("v5e", 1)),
        ("v6e-8", ("v6e", 8)),
        ("v4-8", ("v4", 4)),
        ("v2-8", ("v2", 4)),
        ("v3-32", ("v3", 16)),
        ("v5p-8", ("v5p", 4)),
        ("tpu7x-8", ("7x", 4)),
        ("V6E-4", ("v6e", 4)),
        ("nonsense", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_accelerator_type(value, expected):
    assert runtime.parse_accelerator_type(value) == expected


def test_installed_frameworks_read_package_metadata_only(fake):
    fw = runtime.detect(fake("kaggle-v5e-8")).frameworks
    assert fw["tensorflow"].version == "2.20.0" and fw["tensorflow"].distribution == "tensorflow-cpu"
    assert fw["torch_xla"].version == "2.8.0" and fw["jax"].devices is None


def test_runtime_document_is_json_ready(fake):
    import json

    json.dumps(dataclasses.asdict(runtime.detect(fake("colab-t4"))))


def test_cpu_clock_prefers_the_maximum_cpufreq_reports(fake):
    m = fakes.Machine(
        "throttled laptop",
        files={
            "/proc/cpuinfo": "processor\t: 0\nmodel name\t: Some CPU\ncpu MHz\t\t: 800.000\nflags\t\t: avx2 fma\n",
            "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq": "3600000\n",
        },
    )
    assert runtime.detect(fake(m)).cpu.ghz == 3.6


def test_cpu_clock_garbage_is_unknown(fake):
    m = fakes.Machine("garbage clock", files={"/proc/cpuinfo": "model name\t: X\ncpu MHz\t\t: fast\n"})
    assert runtime.detect(fake(m)).cpu.ghz is None
