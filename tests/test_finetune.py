"""tpututor.finetune: the local stand-ins for a Hub checkpoint and data set, and bounded scripts."""

from __future__ import annotations

import json
import os
import textwrap
import time

import pytest

from conftest import run_python
from tpututor import finetune

SOURCE = '''"""Module docstring: this module parses the configuration files of a small project."""

import os


def read(path):
    """Read the whole file and return its lines as a list of strings."""
    with open(path) as f:
        return f.read().splitlines()


class Config:
    """Hold the settings that were found in the files given to the constructor."""

    def value(self, key, default=None):
        """Return the value stored under the key, or the default when it is missing."""
        result = self.values.get(key, default)
        return result if result is not None else default
'''


@pytest.fixture
def stdlib_like(tmp_path):
    """Ten small, different source files standing in for the standard library."""
    words = ["apple", "river", "stone", "cloud", "maple", "tiger", "piano", "lemon", "ocean", "forest"]
    for i, word in enumerate(words):
        text = SOURCE.replace("key", f"{word}_key").replace("path", f"{word}_path").replace("files", f"{word} files")
        (tmp_path / f"mod{i:02d}.py").write_text(text.replace("result", f"{word}_result"))
    (tmp_path / "broken.py").write_text("def f(:\n")  # does not parse: skipped
    return tmp_path


def test_sentences_are_labelled_balanced_and_held_out_by_file(stdlib_like):
    rows = finetune.stdlib_sentences(min_train=1000, root=stdlib_like)
    train, held = rows["train"], rows["validation"]
    assert train and held
    for split in (train, held):
        assert {r["label"] for r in split} == {0, 1}
        assert sum(r["label"] for r in split) * 2 == len(split), "as many code lines as prose lines"
        assert all(set(r) == {"sentence", "label"} for r in split)
    assert not {r["sentence"] for r in train} & {r["sentence"] for r in held}, "no held-out line was trained on"
    prose = {r["sentence"] for r in train + held if r["label"] == 1}
    code = {r["sentence"] for r in train + held if r["label"] == 0}
    assert any("Return the value stored" in s for s in prose)
    assert any(s.startswith("with open(apple_path)") for s in code)
    assert not any(s.startswith("#") for s in code) and not any("def f(:" in s for s in code)


def test_the_tiny_bert_is_the_same_on_every_run(tmp_path):
    texts = ["def read(path): return open(path).read()", "Read the whole file and return its lines."] * 3
    first = finetune.write_tiny_bert(tmp_path / "a", texts)
    second = finetune.write_tiny_bert(tmp_path / "b", texts)
    for name in ("tokenizer.json", "config.json", "model.safetensors"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_sentences_are_the_same_on_every_call_and_stop_once_there_are_enough(stdlib_like):
    assert finetune.stdlib_sentences(20, root=stdlib_like) == finetune.stdlib_sentences(20, root=stdlib_like)
    few = finetune.stdlib_sentences(4, root=stdlib_like)
    assert len(few["train"]) < len(finetune.stdlib_sentences(1000, root=stdlib_like)["train"])


def test_the_real_standard_library_gives_a_few_hundred_rows_quickly():
    t0 = time.perf_counter()
    rows = finetune.stdlib_sentences(400)
    assert len(rows["train"]) >= 400 and len(rows["validation"]) >= 100
    assert time.perf_counter() - t0 < 20


def test_bad_arguments_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="min_train"):
        finetune.stdlib_sentences(0)
    with pytest.raises(FileNotFoundError, match="root="):
        finetune.stdlib_sentences(10, root=tmp_path)
    with pytest.raises(ValueError, match="multiple of heads"):
        finetune.write_tiny_bert(tmp_path / "m", ["a b c"], width=63, heads=2)
    with pytest.raises(ValueError, match="texts is empty"):
        finetune.write_tiny_bert(tmp_path / "m", [])


def test_write_dataset_writes_one_jsonl_file_per_split(tmp_path):
    out = finetune.write_dataset(tmp_path / "d", {"train": [{"sentence": "x = 1", "label": 0}], "validation": []})
    assert json.loads((out / "train.jsonl").read_text()) == {"sentence": "x = 1", "label": 0}
    assert (out / "validation.jsonl").read_text() == ""


@pytest.mark.slow
def test_stand_ins_load_offline_with_from_pretrained_and_load_dataset_and_the_task_is_learnable(tmp_path):
    """The lesson's code path, offline: from_pretrained and load_dataset on the folders, and the ci
    profile's epoch (60 plain-PyTorch steps of the tiny BERT) reaches held-out accuracy well above chance."""
    out = run_python(
        """
        import json, sys
        import datasets, torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding
        from tpututor import finetune
        model_dir, data_dir = finetune.write_stand_ins(sys.argv[1], min_train=1920)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
        raw = datasets.load_dataset(data_dir, None, cache_dir=sys.argv[1] + "/cache")
        enc = raw.map(lambda b: tokenizer(b["sentence"], truncation=True, max_length=64), batched=True,
                      remove_columns=["sentence"])
        collate = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=32)
        torch.manual_seed(0)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        loader = torch.utils.data.DataLoader(enc["train"], batch_size=32, shuffle=True, collate_fn=collate,
                                             drop_last=True, generator=torch.Generator().manual_seed(0))
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward(); opt.step(); opt.zero_grad()
            if step == 59:
                break
        model.eval()
        right = 0
        with torch.no_grad():
            for batch in torch.utils.data.DataLoader(enc["validation"], batch_size=64, collate_fn=collate):
                right += int((model(**batch).logits.argmax(-1) == batch["labels"]).sum())
        print(json.dumps({"accuracy": right / len(enc["validation"]), "labels": model.config.id2label,
                          "splits": {k: len(v) for k, v in raw.items()}, "pad": tokenizer.pad_token}))
    """,
        str(tmp_path),
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    result = json.loads(out.strip().splitlines()[-1])
    assert result["accuracy"] > 0.75, result
    assert result["labels"] == {"0": "code", "1": "prose"} and result["pad"] == "[PAD]"
    assert result["splits"]["train"] >= 1920 and result["splits"]["validation"] >= 450


def _script(tmp_path, body: str):
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_run_script_returns_output_results_and_exit_code(tmp_path):
    path = _script(
        tmp_path,
        """
        import json, os, sys
        print("RESULT " + json.dumps({"argv": sys.argv[1:], "env": os.environ["SCRIPT_TEST"]}))
        print("some noise")
        print("oops", file=sys.stderr)
    """,
    )
    run = finetune.run_script(path, "a", env={"SCRIPT_TEST": "yes"}, timeout=60)
    assert run.ok and run.returncode == 0 and not run.timed_out
    assert finetune.results(run.stdout) == [{"argv": ["a"], "env": "yes"}]
    assert run.tail(contains="oops") == "oops"
    failing = finetune.run_script(_script(tmp_path, "raise SystemExit(3)"), timeout=60)
    assert failing.returncode == 3 and not failing.ok


def test_a_script_that_overruns_is_killed_with_the_processes_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    path = _script(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        print("started", flush=True)
        time.sleep(60)
    """,
    )
    running = finetune.start_script(path, timeout=3)
    t0 = time.perf_counter()
    run = running.wait()
    assert run.timed_out and run.returncode is None and not run.ok
    assert time.perf_counter() - t0 < 10 and "started" in run.stdout
    child = int(pid_file.read_text())
    for _ in range(50):  # the child is gone (or a zombie of a dead parent) within a moment
        try:
            os.kill(child, 0)
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the script's child process outlived the timeout")


def test_waiting_twice_on_a_script_returns_the_same_record(tmp_path):
    running = finetune.start_script(_script(tmp_path, "print('RESULT 1')"), timeout=30)
    first = running.wait()
    assert running.wait() is first and first.ok and finetune.results(first.stdout) == [1]


def test_stop_when_kills_a_script_once_its_stderr_says_so(tmp_path):
    path = _script(
        tmp_path,
        """
        import sys, time
        print("waiting for the others", file=sys.stderr, flush=True)
        time.sleep(60)
    """,
    )
    t0 = time.perf_counter()
    run = finetune.start_script(path, timeout=30).wait(stop_when=lambda err: "waiting" in err)
    assert run.stopped and not run.timed_out and run.returncode is None and not run.ok
    assert time.perf_counter() - t0 < 10 and "waiting for the others" in run.stderr


def test_start_script_refuses_a_missing_script_or_a_bad_timeout(tmp_path):
    with pytest.raises(FileNotFoundError):
        finetune.start_script(tmp_path / "nope.py")
    with pytest.raises(ValueError, match="timeout"):
        finetune.start_script(_script(tmp_path, "pass"), timeout=0)


def test_optimized_hlo_reads_the_dumped_programs_in_compile_order(tmp_path):
    (tmp_path / "module_0001.SyncTensorsGraph.9.cpu_after_optimizations.txt").write_text("HloModule second")
    (tmp_path / "module_0000.SyncTensorsGraph.4.cpu_after_optimizations.txt").write_text("HloModule first")
    (tmp_path / "module_0000.SyncTensorsGraph.4.cpu_after_optimizations-buffer-assignment.txt").write_text("no")
    (tmp_path / "module_0000.SyncTensorsGraph.4.before_optimizations.txt").write_text("no")
    assert finetune.optimized_hlo(tmp_path) == ["HloModule first", "HloModule second"]
    with pytest.raises(FileNotFoundError, match="xla_dump_to"):
        finetune.optimized_hlo(tmp_path / "missing")


def test_importing_the_module_imports_no_framework():
    out = run_python("""
        import sys
        import tpututor.finetune
        print(sorted(m for m in ("torch", "transformers", "tokenizers", "datasets", "jax") if m in sys.modules))
    """)
    assert out.strip() == "[]"
