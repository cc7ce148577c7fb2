"""Fine-tuning a Hugging Face BERT on XLA: local stand-ins for the Hub, and bounded training scripts.

With internet, a learner fine-tunes a named checkpoint on a named data set::

    tokenizer = AutoTokenizer.from_pretrained("google-bert/bert-base-uncased")
    data = datasets.load_dataset("nyu-mll/glue", "sst2")

CI has no network, so :func:`write_stand_ins` writes the same two things into a folder, and the
lesson runs the very same ``from_pretrained`` / ``load_dataset`` calls on the folder's paths:

* a labelled data set made from the Python standard library's own source files (on every machine,
  Colab included): is a line *code*, or *English prose* from a docstring? Held-out lines come from
  other files than the training lines. It is written as ``train.jsonl`` and ``validation.jsonl``
  with SST-2's columns (``sentence``, ``label``), which ``load_dataset(folder)`` reads;
* a tiny BERT (random weights) and a WordPiece tokenizer whose vocabulary comes from the training
  lines, both written with ``save_pretrained``, the same bytes on every run.

:func:`start_script` runs a training script in a fresh interpreter, bounded in time: the whole
process group is killed when it overruns, so a hung collective cannot hang the notebook.
:func:`optimized_hlo` reads the compiled programs XLA dumps (``--xla_dump_to``).

torch, transformers and tokenizers are imported inside the functions that need them.
"""

from __future__ import annotations

import ast
import json
import os
import random
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LABELS",
    "stdlib_sentences",
    "write_dataset",
    "write_tiny_bert",
    "write_stand_ins",
    "ScriptRun",
    "Running",
    "start_script",
    "run_script",
    "results",
    "optimized_hlo",
]

LABELS = ("code", "prose")  # label 0 and label 1
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


# --------------------------------------------------------------------------- the data set


def _is_prose(line: str, min_words: int, max_words: int) -> bool:
    words = line.split()
    if not min_words <= len(words) <= max_words or ">>>" in line:
        return False
    return sum(c.isalpha() or c == " " for c in line) > 0.85 * len(line)  # words, not symbols


def _file_lines(path: Path, min_words: int, max_words: int) -> tuple[list[str], list[str]]:
    """(code lines, docstring prose lines) of one source file; ([], []) when it does not parse."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return [], []
    docstring_lines: set[int] = set()
    prose: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        doc = ast.get_docstring(node, clean=True)
        if not doc:
            continue
        first = node.body[0]
        docstring_lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        prose += [s for s in (ln.strip() for ln in doc.splitlines()) if _is_prose(s, min_words, max_words)]
    code = []
    for number, line in enumerate(source.splitlines(), start=1):
        s = line.strip()
        if number in docstring_lines or not s or s.startswith("#"):
            continue
        if 3 <= len(s.split()) <= max_words:
            code.append(s)
    return code, prose


def stdlib_sentences(
    min_train: int = 1000,
    *,
    held_out_every: int = 5,
    min_words: int = 4,
    max_words: int = 24,
    seed: int = 0,
    root: str | os.PathLike | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Lines of the standard library's source, labelled 0 (code) or 1 (docstring prose), balanced.

    Files are read in name order until the training split holds at least ``min_train`` examples and
    the validation split a quarter of that; every ``held_out_every``-th file goes to validation, so
    the held-out lines come from files the model never saw. Duplicates, and validation lines that
    also occur in training, are dropped. Returns ``{"train": [...], "validation": [...]}``, each row
    ``{"sentence": str, "label": int}``, shuffled.
    """
    if min_train < 1 or held_out_every < 2:
        raise ValueError(f"need min_train >= 1 and held_out_every >= 2, got {min_train} and {held_out_every}")
    folder = Path(root) if root is not None else Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in folder.glob("*.py") if p.stat().st_size < 150_000)
    if not files:
        raise FileNotFoundError(f"no Python source files in {folder}: pass root= a folder of .py files")
    rows: dict[str, list[dict[str, Any]]] = {"train": [], "validation": []}
    seen: dict[str, set[str]] = {"train": set(), "validation": set()}
    for index, path in enumerate(files):
        split = "validation" if index % held_out_every == held_out_every - 1 else "train"
        code, prose = _file_lines(path, min_words, max_words)
        code = [s for s in dict.fromkeys(code) if s not in seen[split]]
        prose = [s for s in dict.fromkeys(prose) if s not in seen[split]]
        random.Random(f"{seed}:{path.name}").shuffle(code)
        n = min(len(code), len(prose))  # as many code lines as prose lines: chance is 50%
        for sentence, label in [*((s, 1) for s in prose[:n]), *((s, 0) for s in code[:n])]:
            rows[split].append({"sentence": sentence, "label": label})
            seen[split].add(sentence)
        if len(rows["train"]) >= min_train and len(rows["validation"]) >= min_train // 4:
            break
    held = [r for r in rows["validation"] if r["sentence"] not in seen["train"]]
    per_label = min(sum(r["label"] == label for r in held) for label in (0, 1))  # balanced again
    kept = {0: 0, 1: 0}
    rows["validation"] = []
    for r in held:
        if kept[r["label"]] < per_label:
            rows["validation"].append(r)
            kept[r["label"]] += 1
    for split, items in rows.items():
        random.Random(f"{seed}:{split}").shuffle(items)
    return rows


def write_dataset(folder: str | os.PathLike, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> Path:
    """Write each split as ``<split>.jsonl`` in ``folder``: ``datasets.load_dataset(folder)`` reads it."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for item in items:
                f.write(json.dumps(dict(item)) + "\n")
    return out


# --------------------------------------------------------------------------- the model


def _vocabulary(texts: Sequence[str], size: int) -> dict[str, int]:
    """A WordPiece vocabulary, the same on every run: the special tokens, every character (alone and as a
    ``##`` continuation), then the most frequent words (seen at least twice; ties broken alphabetically).
    (``tokenizers``' own WordPiece trainer is not deterministic from run to run.)"""
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers

    normalize, split = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    counts = Counter(word for text in texts for word, _ in split.pre_tokenize_str(normalize.normalize_str(text)))
    chars = sorted({c for word in counts for c in word})
    tokens = [*SPECIAL_TOKENS, *chars, *(f"##{c}" for c in chars)]
    words = [w for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if n >= 2 and len(w) > 1]
    tokens += words[: max(0, size - len(tokens))]
    return {token: i for i, token in enumerate(dict.fromkeys(tokens))}


def write_tiny_bert(
    folder: str | os.PathLike,
    texts: Sequence[str],
    *,
    vocab_size: int = 2000,
    layers: int = 1,
    width: int = 64,
    heads: int = 2,
    max_length: int = 64,
    seed: int = 0,
) -> Path:
    """A WordPiece tokenizer with a vocabulary from ``texts`` and a randomly initialised BERT classifier
    (two labels, no dropout), both written to ``folder`` with ``save_pretrained``. Returns the folder."""
    if width % heads:
        raise ValueError(f"width {width} must be a multiple of heads {heads}")
    if not texts:
        raise ValueError("texts is empty: the tokenizer needs text to learn a vocabulary from")
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    wordpiece = Tokenizer(models.WordPiece(_vocabulary(texts, vocab_size), unk_token="[UNK]"))
    wordpiece.normalizer = normalizers.BertNormalizer(lowercase=True)
    wordpiece.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wordpiece.decoder = decoders.WordPiece()
    cls, sep = wordpiece.token_to_id("[CLS]"), wordpiece.token_to_id("[SEP]")
    wordpiece.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = BertTokenizerFast(tokenizer_object=wordpiece, model_max_length=max_length)
    tokenizer.save_pretrained(out)
    config = BertConfig(
        vocab_size=wordpiece.get_vocab_size(),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        max_position_embeddings=max(max_length, 64),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=len(LABELS),
        pad_token_id=wordpiece.token_to_id("[PAD]"),
        id2label=dict(enumerate(LABELS)),
        label2id={name: i for i, name in enumerate(LABELS)},
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(out)
    return out


def write_stand_ins(
    folder: str | os.PathLike,
    *,
    min_train: int = 1000,
    layers: int = 1,
    width: int = 64,
    max_length: int = 64,
    seed: int = 0,
) -> tuple[str, str]:
    """Write the local data set and the tiny BERT under ``folder``: (model folder, data set folder),
    the paths to give ``from_pretrained`` and ``load_dataset`` in place of Hub names."""
    rows = stdlib_sentences(min_train, seed=seed)
    data = write_dataset(Path(folder) / "stdlib-code-or-prose", rows)
    model = write_tiny_bert(
        Path(folder) / "tiny-bert",
        [r["sentence"] for r in rows["train"]],
        layers=layers,
        width=width,
        max_length=max_length,
        seed=seed,
    )
    return str(model), str(data)


# --------------------------------------------------------------------------- scripts in a fresh interpreter


@dataclass
class ScriptRun:
    """How a script ended: its exit code (None when it was killed for overrunning), its output, and the
    seconds from its start until it was collected (it may have ended earlier)."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    stopped: bool = False  # killed by the caller's ``stop_when`` (see :meth:`Running.wait`)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, lines: int = 6, *, contains: str | None = None) -> str:
        """The last ``lines`` lines of stderr (those containing ``contains``, if given)."""
        rows = [ln for ln in self.stderr.splitlines() if ln.strip() and (contains is None or contains in ln)]
        return "\n".join(rows[-lines:])


@dataclass
class Running:
    """A script started by :func:`start_script`; :meth:`wait` returns its :class:`ScriptRun`."""

    process: subprocess.Popen
    started: float
    timeout: float
    outputs: tuple[Any, Any] = field(repr=False, default=(None, None))
    _done: ScriptRun | None = field(repr=False, default=None)

    def wait(self, stop_when: Callable[[str], bool] | None = None, poll: float = 0.25) -> ScriptRun:
        """Wait for the script, killing it at its time limit, or as soon as ``stop_when(stderr so far)``
        is true (checked every ``poll`` seconds). A second call returns the same record."""
        if self._done is not None:
            return self._done
        deadline = self.started + self.timeout
        timed_out = stopped = False
        while True:
            left = max(0.0, deadline - time.perf_counter())
            try:
                self.process.wait(timeout=min(left, poll) if stop_when else left)
                break
            except subprocess.TimeoutExpired:
                if time.perf_counter() >= deadline:
                    timed_out = True
                elif stop_when is not None and stop_when(self._peek(self.outputs[1])):
                    stopped = True
                else:
                    continue
                _kill_group(self.process)
                break
        out, err = (self._read(f) for f in self.outputs)
        self._done = ScriptRun(
            None if timed_out or stopped else self.process.returncode,
            out,
            err,
            round(time.perf_counter() - self.started, 2),
            timed_out,
            stopped,
        )
        return self._done

    @staticmethod
    def _peek(f) -> str:
        """What the script has written so far, read without moving the file offset it shares."""
        if f is None:
            return ""
        f.flush()
        size = os.fstat(f.fileno()).st_size
        return os.pread(f.fileno(), size, 0).decode("utf-8", "replace")

    @staticmethod
    def _read(f) -> str:
        f.seek(0)
        text = f.read()
        f.close()
        return text


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # the script and every process it started
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def start_script(
    path: str | os.PathLike,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    cwd: str | os.PathLike | None = None,
) -> Running:
    """Start ``python path args...`` in its own process group, with ``env`` added to this environment.

    The script runs while the caller goes on; :meth:`Running.wait` collects it, and kills the whole
    group if ``timeout`` seconds (counted from the start) have passed.
    """
    import tempfile

    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"no script at {path}")
    outputs = (tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+"))
    process = subprocess.Popen(
        [sys.executable, str(path), *args],
        stdout=outputs[0],
        stderr=outputs[1],
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,
        text=True,
    )
    return Running(process, time.perf_counter(), timeout, outputs)


def run_script(
    path: str | os.PathLike,
    *args: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    cwd: str | os.PathLike | None = None,
) -> ScriptRun:
    """:func:`start_script`, then wait for it."""
    return start_script(path, *args, env=env, timeout=timeout, cwd=cwd).wait()


def results(stdout: str, marker: str = "RESULT ") -> list[Any]:
    """The JSON value after ``marker`` on each line of ``stdout`` that starts with it."""
    return [json.loads(line[len(marker) :]) for line in stdout.splitlines() if line.startswith(marker)]


def optimized_hlo(dump_dir: str | os.PathLike) -> list[str]:
    """The optimised HLO of each module XLA compiled with ``--xla_dump_to=dump_dir --xla_dump_hlo_as_text``,
    in compile order (the ``*after_optimizations.txt`` files; their reports are left out)."""
    folder = Path(dump_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} does not exist: was XLA_FLAGS=--xla_dump_to={folder} set before the run?")
    files = sorted(p for p in folder.glob("module_*after_optimizations.txt"))
    return [p.read_text() for p in files]
