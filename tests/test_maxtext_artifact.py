"""The MaxText run that lesson 13b (LoRA and export) cites: its record is complete and agrees with the lesson.

The record is written by ``make maxtext-run`` (tpututor_course/maxtext_run.py) in its own Python 3.12
venv; nothing here needs MaxText.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re

import pytest

from conftest import ROOT
from tpututor_course import maxtext_run

ARTIFACT = ROOT / "docs" / "artifacts" / "maxtext-cpu-run.json"
LESSON = ROOT / "notebooks" / "13b_lora_and_export.md"  # its stack table cites the run


@pytest.fixture(scope="module")
def record() -> dict:
    assert ARTIFACT.exists(), f"{ARTIFACT.relative_to(ROOT)} is missing: run make maxtext-run and commit it"
    return json.loads(ARTIFACT.read_text())


def test_the_run_ended_ok_with_every_command_recorded(record):
    assert record["ok"] is True
    names = [c["name"] for c in record["commands"]]
    assert names == ["versions", "checkpoint", "convert", "train", "inspect"]
    for c in record["commands"]:
        assert c["returncode"] == 0 and not c["timed_out"] and c["wall_s"] > 0 and c["argv"], c["name"]
        assert " ".join(c["argv"]) in c["shell"]
    by = {c["name"]: c for c in record["commands"]}
    assert "maxtext.checkpoint_conversion.to_maxtext" in by["convert"]["argv"]
    assert "maxtext.trainers.pre_train.train" in by["train"]["argv"]
    assert "hardware=cpu" in by["train"]["argv"]
    assert any(a.startswith("load_parameters_path=") for a in by["train"]["argv"])
    assert "HF_HUB_OFFLINE=1" in by["convert"]["shell"]


def test_it_carries_versions_a_date_and_the_machine(record):
    mt = record["versions"]["maxtext_venv"]
    assert mt["python"].startswith("3.12.") and mt["maxtext"] and mt["jax"] and mt["jaxlib"] and mt["transformers"]
    assert "libtpu" in mt and record["versions"]["main_venv"]["transformers"]
    pins = dict(
        line.split("==")
        for line in (ROOT / record["install"]["requirements"]).read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert pins["maxtext"] == mt["maxtext"] and pins["jax"] == mt["jax"], "the record is not of the pinned venv"
    assert f"maxtext=={mt['maxtext']}" in record["install"]["pip_freeze"]
    when = dt.datetime.strptime(record["date_utc"], "%Y-%m-%dT%H:%M:%SZ")
    assert dt.datetime(2026, 1, 1) < when <= dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert record["machine"]["cpu"] and record["machine"]["cores"] >= 1


def test_the_losses_are_finite_and_parsed_from_maxtexts_own_lines(record):
    training = record["training"]
    losses = [s["loss"] for s in training["losses"]]
    assert training["steps"] == len(losses) > 0 and all(math.isfinite(x) for x in losses)
    assert [s["step"] for s in training["losses"]] == list(range(len(losses)))
    assert training["first_loss"] == losses[0] and training["last_loss"] == losses[-1]
    # a random model starts near ln(vocab); the log holds the lines the losses were read from
    assert abs(losses[0] - training["ln_vocab"]) < 0.1
    log = (ARTIFACT.parent / record["log"]).read_text()
    assert maxtext_run.parse_losses(log)[-1] == training["losses"][-1]


def test_the_converted_checkpoint_is_summarised(record):
    ckpt = record["checkpoint"]
    assert ckpt["tensors"] and not ckpt["missing"] and not ckpt["unexpected"]
    shapes = {t["name"]: t["shape"] for t in ckpt["tensors"]}
    m = record["model"]
    assert shapes["token_embedder/embedding"] == [m["vocab_size"], m["hidden_size"]]
    assert ckpt["n_parameters"] == sum(math.prod(s) for s in shapes.values())


def test_lesson_13_cites_the_artifact_and_its_figures():
    row = next(line for line in LESSON.read_text().splitlines() if line.startswith("| MaxText |"))
    record = json.loads(ARTIFACT.read_text())
    assert "docs/artifacts/maxtext-cpu-run.json" in row
    by = {c["name"]: c for c in record["commands"]}
    for figure in (
        record["date_utc"][:10],
        f"maxtext {record['versions']['maxtext_venv']['maxtext']}",
        f"JAX {record['versions']['maxtext_venv']['jax']}",
        f"{record['training']['steps']} steps",
        f"{record['training']['first_loss']:.3f} to {record['training']['last_loss']:.3f}",
        f"in {by['convert']['wall_s']:.0f} s",
        f"in {by['train']['wall_s']:.0f} s",
    ):
        assert figure in row, (
            f"the MaxText row of lesson 13b (LoRA and export) does not say {figure!r}, as the record does"
        )


def test_the_losses_parser_reads_maxtexts_step_lines():
    text = (
        "I1204 metric_logger.py:265] completed step: 0, seconds: 0.067, TFLOP/s/device: 0.001, "
        "Tokens/s/device: 1923.915, total_weights: 128, loss: 5.548, lm_loss: 5.548, perplexity: 256.7\n"
    ) * 2
    text += "completed step: 1, seconds: 0.334, TFLOP/s/device: 0.000, total_weights: 128, loss: 5.310, lm_loss: 5.3\n"
    assert maxtext_run.parse_losses(text) == [
        {"step": 0, "loss": 5.548, "seconds": 0.067},
        {"step": 1, "loss": 5.31, "seconds": 0.334},
    ]
    assert re.search(r"maxtext==\d", (ROOT / "binder" / "maxtext-requirements.txt").read_text())
