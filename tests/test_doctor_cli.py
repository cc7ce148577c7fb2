"""`python -m tpututor doctor` and `chips` as a user calls them, and `run` pointing at the course tooling."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from conftest import CPU_ONLY, HERE, PYTHON, ROOT
from tpututor import doctor, runtime


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "tpututor", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_doctor_json_says_what_detection_says_and_lists_the_four_frameworks():
    out = cli("doctor", "--json", "--no-probe")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["platform"]["name"] == HERE.platform.name
    assert doc["accelerator"]["kind"] == HERE.accelerator.kind
    for name in ("jax", "tensorflow", "torch", "torch_xla"):
        assert doc["frameworks"][name]["version"], name
        assert doc["frameworks"][name]["devices"] is None  # not probed


def test_doctor_json_has_the_stable_keys():
    doc = json.loads(cli("doctor", "--json", "--no-probe").stdout)
    assert {"schema", "platform", "accelerator", "frameworks", "warnings", "notes", "probed"} <= set(doc)
    assert {"kind", "generation", "count"} <= set(doc["accelerator"])
    assert all({"version", "devices"} <= set(f) for f in doc["frameworks"].values())
    assert doc["schema"] == doctor.SCHEMA_VERSION and isinstance(doc["warnings"], list)


@pytest.mark.slow
@CPU_ONLY
def test_doctor_probes_each_framework_in_its_own_process_and_all_see_the_cpu():
    out = cli("doctor", "--json")
    assert out.returncode == 0, out.stderr
    fw = json.loads(out.stdout)["frameworks"]
    assert fw["jax"]["devices"] == ["cpu:0"] and fw["jax"]["device_kind"] == "cpu"
    assert fw["tensorflow"]["devices"] == ["/device:CPU:0"]
    assert fw["torch"]["devices"] == ["cpu"]
    assert fw["torch_xla"]["devices"] == ["CPU:0"]
    assert all(f["error"] is None for f in fw.values())


def test_doctor_text_report_names_platform_accelerator_and_frameworks():
    out = cli("doctor", "--no-probe")
    assert out.returncode == 0
    accelerator = "none: CPU only" if HERE.accelerator.kind == "cpu" else HERE.accelerator.kind
    for word in (
        f"platform     {HERE.platform.name}",
        f"accelerator  {accelerator}",
        "jax",
        "torch_xla",
        "(not probed)",
    ):
        assert word in out.stdout


@pytest.mark.parametrize("args", [["--bogus"], ["doctor", "--jsn"], ["frobnicate"], []])
def test_bad_flags_exit_2_with_a_usage_line(args):
    out = cli(*args)
    assert out.returncode == 2
    assert out.stderr.startswith("usage: python -m tpututor")


def test_doctor_explain_in_an_unknown_language_exits_2_naming_the_languages():
    out = cli("doctor", "--explain", "RuntimeError: x", "--lang", "fr")
    assert out.returncode == 2 and out.stderr.startswith("usage: python -m tpututor doctor")
    assert re.search(r"argument --lang: invalid choice: 'fr' \(choose from '?en'?, '?ko'?\)", out.stderr), out.stderr


def test_chips_lists_the_table_with_sources():
    out = cli("chips")
    assert out.returncode == 0 and "v6e" in out.stdout and "https://" in out.stdout
    assert len(json.loads(cli("chips", "--json").stdout)) >= 13


def test_run_in_the_learner_cli_exits_2_naming_the_course_tooling_command_with_the_same_arguments():
    out = cli("run", "--profile", "ci", "notebooks/00a_where_am_i.ipynb")
    assert out.returncode == 2
    assert "python -m tpututor_course run --profile ci notebooks/00a_where_am_i.ipynb" in out.stderr


def test_a_failing_probe_is_an_error_line_not_a_crash(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ImportError: libtpu.so: cannot open shared object' >&2\nexit 1\n")
    broken.chmod(0o755)
    result = runtime.probe_frameworks(["jax"], python=str(broken))
    assert result["jax"]["error"].startswith("ImportError: libtpu.so")


def test_a_hanging_probe_times_out(tmp_path):
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    assert "no answer within" in runtime.probe_frameworks(["jax"], python=str(slow), timeout=1)["jax"]["error"]


def test_unknown_probe_name_is_a_clear_error():
    with pytest.raises(ValueError, match="no probe for"):
        runtime.probe_frameworks(["mxnet"])


def test_jax_seeing_only_cpu_on_a_tpu_machine_warns_to_install_jax_tpu(fake):
    rt = runtime.detect(fake("tpu-vm-v6e-8"))
    warnings = doctor.warnings_for(rt, {"jax": {"platform": "cpu", "devices": ["cpu:0"]}})
    assert "TPU chips are present but JAX sees only the CPU: pip install 'jax[tpu]'." in warnings


def test_torch_xla_with_the_wrong_torch_warns_with_the_pin(fake):
    from tpututor import fakes

    m = fakes.Machine("mismatch", packages={"torch": "2.13.0+cpu", "torch-xla": "2.9.0"})
    warnings = doctor.warnings_for(runtime.detect(fake(m)))
    assert any("torch==2.9.0" in w for w in warnings)
