"""The program at each compiler stage, and HLO modules read as small tables.

* :func:`jax_stages` gives a JAX function's jaxpr, StableHLO, HLO before
  optimisation, optimised HLO, cost analysis and memory analysis;
  :func:`tf_stages` a ``tf.function(jit_compile=True)``'s HLO and optimised HLO;
  :func:`torch_xla_stages` a torch_xla lazy graph's IR and HLO.
* :func:`parse` reads HLO text into computations and instructions, tolerant of
  the differences between XLA versions and frameworks (``%`` or no ``%``,
  typed or untyped operands, tuples, metadata, source-location tables);
  :func:`summarize` turns a module into counts (ops, kernels, fusions, dots,
  collectives, parameters); :func:`compare` sets two summaries side by side.
* :func:`jaxpr_bytes` counts the bytes an op-by-op run moves; :func:`compiles`
  counts the compilations JAX does inside a ``with`` block.

No framework is imported until a function that needs it is called.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Instruction",
    "Computation",
    "Module",
    "Summary",
    "parse",
    "summarize",
    "compare",
    "fusions",
    "entry_text",
    "shape_bytes",
    "JaxStages",
    "jax_stages",
    "tf_stages",
    "torch_xla_stages",
    "cost_record",
    "memory_record",
    "jaxpr_bytes",
    "compiles",
    "COLLECTIVES",
    "ARRAY_SHAPE",
]

# Ops that move no data and launch no work of their own.
FREE_OPS = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})
COLLECTIVES = frozenset(
    {
        "all-reduce",
        "all-gather",
        "reduce-scatter",
        "all-to-all",
        "collective-permute",
        "collective-broadcast",
        "all-reduce-start",
        "all-reduce-done",
        "all-gather-start",
        "all-gather-done",
        "collective-permute-start",
        "collective-permute-done",
        "ragged-all-to-all",
    }
)
DOTS = frozenset({"dot", "convolution", "ragged-dot"})
# Library matmuls appear as custom-calls (cuBLAS on GPU, oneDNN on CPU).
_DOT_TARGETS = ("gemm", "matmul", "conv")
# Ways a program hands data to the host and back: infeed/outfeed always; send/recv only when marked
# is_host_transfer=true (without it they move data between devices, as in pipelined collectives).
HOST_OPS = frozenset({"send", "recv", "infeed", "outfeed"})


@dataclass
class Instruction:
    name: str
    opcode: str
    shape: str
    root: bool = False
    fusion_kind: str | None = None  # kLoop, kInput, kOutput, kCustom
    calls: list[str] = field(default_factory=list)
    custom_call_target: str | None = None
    text: str = ""  # operands and attributes, as written after the opcode


@dataclass
class Computation:
    name: str
    entry: bool = False
    instructions: list[Instruction] = field(default_factory=list)


@dataclass
class Module:
    name: str
    computations: dict[str, Computation]

    @property
    def entry(self) -> Computation:
        for comp in self.computations.values():
            if comp.entry:
                return comp
        if not self.computations:
            raise ValueError("the HLO module has no computations")
        return list(self.computations.values())[-1]  # XLA prints the entry last


_MODULE = re.compile(r"^HloModule\s+([^\s,]+)")
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\)\s*->\s*.*)?\{\s*$")
_NAME = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][\w\-]*)\(")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations)=\{?([%\w.\-, ]+)\}?")
_KIND = re.compile(r"\bkind=(k\w+)")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')


def _split_type(text: str) -> tuple[str, str]:
    """Split ``"(f32[2], s32[]) rest"`` or ``"f32[2]{0} rest"`` into (type, rest)."""
    if text.startswith("("):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return text[: i + 1], text[i + 1 :]
        return text, ""
    parts = text.split(None, 1)
    return parts[0], (" " + parts[1]) if len(parts) > 1 else ""


def parse(text: str) -> Module:
    """Read HLO text (optimised or not, from JAX, TensorFlow or torch_xla) into a :class:`Module`.

    Lines that are neither computation headers nor instructions (the
    ``FileNames``/``StackFrames`` tables of newer XLA, comments) are skipped.
    Raises ValueError when the text holds no HLO computation at all.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes HLO text, got {type(text).__name__}")
    name, comps, current = "module", {}, None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        m = _MODULE.match(line)
        if m:
            name = m.group(1)
            continue
        if current is None:
            h = _HEADER.match(line)
            if h and " = " not in line:
                current = Computation(h.group(2), entry=bool(h.group(1)))
            continue
        if line == "}":
            comps[current.name] = current
            current = None
            continue
        inst = _parse_instruction(line)
        if inst is not None:
            current.instructions.append(inst)
    if current is not None:  # unterminated last computation
        comps[current.name] = current
    if not comps:
        raise ValueError("no HLO computation found in the text (expected lines like 'ENTRY %main ... {')")
    return Module(name, comps)


def _parse_instruction(line: str) -> Instruction | None:
    m = _NAME.match(line)
    if not m:
        return None
    shape, rest = _split_type(line[m.end() :])
    op = _OPCODE.match(rest)
    if not op:
        return None
    calls = [c.strip().lstrip("%") for group in _CALLS.findall(rest) for c in group.split(",") if c.strip()]
    kind = _KIND.search(rest)
    target = _TARGET.search(rest)
    return Instruction(
        m.group(2),
        op.group(1),
        shape,
        bool(m.group(1)),
        kind.group(1) if kind and op.group(1) == "fusion" else None,
        calls,
        target.group(1) if target else None,
        rest[op.end() :],
    )


_DTYPE_BITS = {
    "pred": 8,
    "s4": 4,
    "u4": 4,
    "s8": 8,
    "u8": 8,
    "s16": 16,
    "u16": 16,
    "f16": 16,
    "bf16": 16,
    "s32": 32,
    "u32": 32,
    "f32": 32,
    "s64": 64,
    "u64": 64,
    "f64": 64,
    "c64": 64,
    "c128": 128,
}
ARRAY_SHAPE = re.compile(r"\b([a-z]\w*)\[([\d,\s]*)\]")


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO shape such as ``f32[16,16]{1,0}`` or a tuple ``(f32[2], s32[])``.

    Unknown element types (token, opaque) count as zero bytes.
    """
    total = 0
    for dtype, dims in ARRAY_SHAPE.findall(shape):
        bits = _DTYPE_BITS.get(dtype)
        if bits is None and dtype.startswith("f8"):
            bits = 8
        if bits is None:
            continue
        n = 1
        for d in filter(None, (x.strip() for x in dims.split(","))):
            n *= int(d)
        total += n * bits // 8
    return total


@dataclass
class Summary:
    """What an HLO module does, as counts."""

    name: str
    ops: Counter  # opcode -> count in the entry computation
    kernels: int  # entry ops that do work (not parameter/constant/tuple/get-tuple-element/bitcast)
    fusions: Counter  # fusion kind -> count
    fused_ops: Counter  # opcodes inside fusions
    dots: int  # dot/convolution (or a library matmul custom-call), anywhere in the program
    collectives: Counter
    parameters: int
    custom_calls: list[str]
    host_calls: int  # host callbacks, infeed/outfeed and host send/recv: round trips to the host

    def row(self) -> dict[str, Any]:
        """The summary as one flat row (for tables)."""
        return {
            "module": self.name,
            "kernels": self.kernels,
            "fusions": sum(self.fusions.values()),
            "fusion kinds": ", ".join(f"{k} {v}" for k, v in sorted(self.fusions.items())) or "-",
            "dots": self.dots,
            "collectives": sum(self.collectives.values()),
            "host calls": self.host_calls,
            "parameters": self.parameters,
            "top ops": ", ".join(f"{k} {v}" for k, v in self.ops.most_common(4)),
        }

    def markdown(self) -> str:
        row = self.row()
        return "| " + " | ".join(row) + " |\n|" + "---|" * len(row) + "\n| " + " | ".join(map(str, row.values())) + " |"


def _called(module: Module, names: Sequence[str]) -> list[Computation]:
    """The computations reached from ``names`` (fusion bodies and what they call)."""
    seen, todo, out = set(), list(names), []
    while todo:
        n = todo.pop()
        if n in seen or n not in module.computations:
            continue
        seen.add(n)
        comp = module.computations[n]
        out.append(comp)
        todo.extend(c for inst in comp.instructions for c in inst.calls)
    return out


def _bodies(module: Module, inst: Instruction) -> list[Computation]:
    """The computations an instruction calls directly (a fusion's body)."""
    return [module.computations[c] for c in inst.calls if c in module.computations]


def summarize(module: Module | str) -> Summary:
    """Count what a module's entry computation runs; accepts a :class:`Module` or HLO text."""
    module = parse(module) if isinstance(module, str) else module
    entry = module.entry
    ops = Counter(i.opcode for i in entry.instructions)
    fusions = Counter(i.fusion_kind or "unknown" for i in entry.instructions if i.opcode == "fusion")
    bodies = [comp for i in entry.instructions if i.opcode == "fusion" for comp in _bodies(module, i)]
    fused_ops = Counter(i.opcode for comp in bodies for i in comp.instructions if i.opcode != "parameter")
    everything = _called(module, [entry.name])
    all_ops = Counter(i.opcode for comp in everything for i in comp.instructions)
    targets = [
        i.custom_call_target
        for comp in everything
        for i in comp.instructions
        if i.opcode == "custom-call" and i.custom_call_target
    ]
    library_dots = sum(any(t in target.lower() for t in _DOT_TARGETS) for target in targets)
    return Summary(
        name=module.name,
        ops=ops,
        kernels=sum(n for op, n in ops.items() if op not in FREE_OPS),
        fusions=fusions,
        fused_ops=fused_ops,
        dots=sum(all_ops[d] for d in DOTS) + library_dots,
        collectives=Counter({op: n for op, n in all_ops.items() if op in COLLECTIVES}),
        parameters=ops["parameter"],
        custom_calls=targets,
        host_calls=sum(_to_host(i) for comp in everything for i in comp.instructions)
        + sum("callback" in t.lower() for t in targets),
    )


def _to_host(inst: Instruction) -> bool:
    """Whether an instruction hands data to the host or takes it back (see HOST_OPS)."""
    if inst.opcode in ("send", "recv"):
        return "is_host_transfer=true" in inst.text
    return inst.opcode in HOST_OPS


def fusions(module: Module | str) -> list[tuple[str, str, list[str]]]:
    """(name, kind, ops inside) for each fusion in the entry computation, in program order.

    The ops are the fused computation's own instructions, in its order; the tiny
    computations a reduce applies (its ``add`` or ``maximum``) are not listed.
    """
    module = parse(module) if isinstance(module, str) else module
    out = []
    for inst in module.entry.instructions:
        if inst.opcode == "fusion":
            ops = [i.opcode for comp in _bodies(module, inst) for i in comp.instructions if i.opcode != "parameter"]
            out.append((inst.name, inst.fusion_kind or "unknown", ops))
    return out


def entry_text(text: str) -> str:
    """Only the ENTRY computation of HLO text: the program's top level, one line per kernel or value."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("ENTRY"):
            inside = True
        if inside:
            lines.append(re.sub(r",\s*(metadata|backend_config|frontend_attributes)=.*$", "", line))
            if line.strip() == "}":
                break
    return "\n".join(lines)


def compare(a: Summary, b: Summary, labels: tuple[str, str] = ("before", "after")) -> str:
    """Two summaries side by side as a Markdown table."""
    ra, rb = a.row(), b.row()
    lines = [f"| | {labels[0]} | {labels[1]} |", "|---|---|---|"]
    lines += [f"| {k} | {ra[k]} | {rb[k]} |" for k in ra]
    return "\n".join(lines)


# --------------------------------------------------------------------------- stages


@dataclass
class JaxStages:
    """A JAX function at each stage, from Python down to what the device runs."""

    jaxpr: str
    stablehlo: str
    hlo: str  # the lowered module as HLO, before XLA's optimisation passes
    optimized_hlo: str
    cost: dict[str, float]
    memory: dict[str, int]
    compiled: Any = field(repr=False, default=None)

    @property
    def unoptimized(self) -> Summary:
        return summarize(self.hlo)

    @property
    def optimized(self) -> Summary:
        return summarize(self.optimized_hlo)


def jax_stages(fn, *args, static_argnames: Sequence[str] = (), **kwargs) -> JaxStages:
    """Trace, lower and compile ``fn(*args, **kwargs)`` with ``jax.jit``; keep every stage."""
    import jax

    jitted = jax.jit(fn, static_argnames=tuple(static_argnames))
    traced = jitted.trace(*args, **kwargs)
    lowered = traced.lower()
    compiled = lowered.compile()
    return JaxStages(
        jaxpr=str(traced.jaxpr),
        stablehlo=lowered.as_text(),
        hlo=lowered.as_text(dialect="hlo"),
        optimized_hlo=compiled.as_text(),
        cost=cost_record(compiled),
        memory=memory_record(compiled),
        compiled=compiled,
    )


def tf_stages(function, *args) -> dict[str, str]:
    """HLO before and after optimisation of a ``tf.function(jit_compile=True)``."""
    get_ir = getattr(function, "experimental_get_compiler_ir", None)
    if get_ir is None:
        raise TypeError("tf_stages() takes a tf.function; wrap it: tf.function(f, jit_compile=True)")
    ir = get_ir(*args)
    return {"hlo": ir(stage="hlo"), "optimized_hlo": ir(stage="optimized_hlo")}


def torch_xla_stages(*tensors) -> dict[str, str]:
    """The pending lazy graph of torch_xla tensors: its IR and its HLO (call before torch_xla.sync())."""
    import torch_xla

    tensors = list(tensors)
    return {"ir": torch_xla._XLAC._get_xla_tensors_text(tensors), "hlo": torch_xla._XLAC._get_xla_tensors_hlo(tensors)}


def cost_record(compiled) -> dict[str, float]:
    """XLA's cost analysis as {flops, transcendentals, bytes accessed, ...}, per-operand keys dropped."""
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):  # JAX before 0.4.38 returned a one-element list
        cost = cost[0] if cost else {}
    return {k: float(v) for k, v in cost.items() if "{" not in k}


_MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "temp_size_in_bytes",
    "alias_size_in_bytes",
    "generated_code_size_in_bytes",
)


def memory_record(compiled) -> dict[str, int]:
    """XLA's memory analysis: argument, output, temporary, aliased and code bytes (as far as known)."""
    stats = compiled.memory_analysis()
    if stats is None:
        return {}
    return {f.removesuffix("_in_bytes"): int(getattr(stats, f)) for f in _MEMORY_FIELDS if hasattr(stats, f)}


# --------------------------------------------------------------------------- op-by-op bytes


def jaxpr_bytes(fn, *args) -> list[tuple[str, int]]:
    """(primitive, bytes) for each step of ``fn`` run op by op: it reads its inputs and writes its outputs.

    This is what eager dispatch moves through memory; a fused program moves
    only what its cost analysis reports.
    """
    import jax
    import numpy as np

    closed = jax.make_jaxpr(fn)(*args)
    out = []
    for eqn in closed.jaxpr.eqns:
        n = 0
        for v in list(eqn.invars) + list(eqn.outvars):
            aval = getattr(v, "aval", None)
            if aval is not None and hasattr(aval, "shape"):
                n += int(np.prod(aval.shape, dtype=np.int64)) * aval.dtype.itemsize
        out.append((eqn.primitive.name, n))
    return out


# --------------------------------------------------------------------------- compilations


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.names: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        m = re.match(r"Compiling (\S+)", record.getMessage())
        if m:
            self.names.append(m.group(1))


@contextlib.contextmanager
def compiles() -> Iterator[list[str]]:
    """Collect the names of the programs JAX compiles inside the block (via ``jax_log_compiles``)::

        with hlo.compiles() as log:
            f(x)
        len(log)  # how many compilations

    Every program counts, including the small ones JAX compiles for single operations (making
    inputs inside the block adds some): create inputs before the block.
    """
    import jax

    logger = logging.getLogger("jax")
    handler = _Collector()
    previous = (jax.config.jax_log_compiles, logger.propagate, logger.level, logger.handlers[:])
    jax.config.update("jax_log_compiles", True)
    # Keep the log lines out of the notebook (some JAX versions give "jax" its own stderr
    # handler); the names are returned instead.
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    try:
        yield handler.names
    finally:
        jax.config.update("jax_log_compiles", previous[0])
        logger.propagate = previous[1]
        logger.setLevel(previous[2])
        logger.handlers = previous[3]
