"""The error atlas: TPU and XLA errors learners meet, each with its cause, its fix and its proof.

Each :class:`Entry` quotes a message exactly as the framework versions in ``versions`` print it
(``…`` marks a part that changes from run to run: a number, a path, a name), says what causes it,
how to fix it and where the course teaches it. An entry that can happen on a CPU carries the code
that produces it (``example``) and the same code fixed (``fixed``); ``tests/test_errors.py`` runs
both, so a framework upgrade that rewords a message fails CI. An entry that needs a TPU or a GPU
says so and cites its source with the date it was read. ::

    from tpututor import errors
    for match in errors.explain(pasted_text):
        print(match.entry.title, match.entry.fix)

The same from a shell, on any machine with tpututor installed (Colab too, no clone needed):
``python -m tpututor doctor --explain "<the error text>"``. :func:`render_page` writes the atlas
as a page (``python -m tpututor_course errors_page`` keeps ``docs/errors.md`` in step).

The atlas speaks English and Korean (:data:`LANGS`): ``lang="ko"`` in :func:`explain`,
:func:`format_matches`, :func:`where_taught` and :func:`render_page` (``doctor --explain ... --lang ko``,
``docs/errors.ko.md``) gives each entry's title, cause, fix and notes in Korean, from
``tpututor/data/errors_ko.toml``; the quoted messages stay in English, as the frameworks print them.
Standard library only.
"""

from __future__ import annotations

import difflib
import math
import re
import textwrap
import tomllib
import unicodedata
from dataclasses import asdict, dataclass, replace
from functools import cache, lru_cache
from importlib import resources

from . import validate

__all__ = [
    "Entry",
    "Match",
    "BadText",
    "ENTRIES",
    "ATLAS_URL",
    "ATLAS_URLS",
    "LANGS",
    "POINTER",
    "get",
    "localized",
    "pieces",
    "quoted_in",
    "explain",
    "format_matches",
    "where_taught",
    "render_page",
    "GAP",
    "REPRO",
]

ATLAS_URL = "https://github.com/tpututor/tpututor/blob/main/docs/errors.md"
LANGS = validate.LANGUAGES  # the languages the atlas is written in: English, and Korean from data/errors_ko.toml
ATLAS_URLS = {"en": ATLAS_URL, "ko": ATLAS_URL.removesuffix("errors.md") + "errors.ko.md"}  # the page per language
POINTER = (
    'Seen an error? Paste it: python -m tpututor doctor --explain "<the error text>" '
    f"(or read the error atlas, {ATLAS_URL})."
)
GAP = "…"  # in a quoted message: a part that changes from run to run
READ = "2026-12-01"  # when the sources below were read
REPRO = {
    "cpu": "reproduced on a CPU",
    "faked": "reproduced on a CPU by the framework's own check, fed a faked machine or install",
    "tpu": "needs a TPU: not reproduced here",
    "gpu": "needs a GPU: not reproduced here",
    "install": "needs an install this environment does not have: not reproduced here",
}


@dataclass(frozen=True)
class Entry:
    """One error: what it says, why, what to do, where the course teaches it, and its proof."""

    id: str
    title: str
    framework: str  # "JAX", "TensorFlow", "PyTorch/XLA" or "TPU runtime (libtpu)"
    message: str  # exactly as printed; GAP marks a part that changes from run to run
    cause: str
    fix: str
    lesson: str  # the topic of the lesson that teaches it (or the nearest one), e.g. "xla_fusion"
    taught: str  # the heading of the section that teaches it ("Recompilation"); "" when none does yet
    versions: tuple[str, ...]  # the versions this message was seen with
    repro: str  # a key of REPRO
    variants: tuple[str, ...] = ()  # other texts the example also prints (asserted like ``message``)
    also: tuple[tuple[str, str], ...] = ()  # (where, text): the same problem elsewhere (another version,
    # a TPU), quoted from ``sources`` or, for "jax 0.7.2", checked under Colab's JAX when that venv exists
    keywords: tuple[str, ...] = ()  # words a learner may use for it instead of the message
    example: str = ""  # code that produces the message (repro "cpu" or "faked"), run by the tests
    fixed: str = ""  # the example with the fix applied, run by the tests ("" when the fix needs hardware)
    runner: str = ""  # "jax", "tensorflow", "torch_xla": one shared interpreter; "process": a fresh one
    silent: bool = False  # nothing is printed: ``message`` is the symptom, which ``example`` asserts
    hardware: str = ""  # "TPU" or "GPU" when what ``note`` says happens only there
    note: str = ""  # what the sources say that no test here checks
    sources: tuple[tuple[str, str], ...] = ()  # (title, url) behind ``note``
    read: str = ""  # when the sources were read

    @property
    def reproduced(self) -> bool:
        return self.repro in ("cpu", "faked")

    @property
    def texts(self) -> tuple[str, ...]:
        """Every quoted text: the message, the variants the example prints, and ``also``'s."""
        return (self.message, *self.variants, *(text for _, text in self.also))

    def to_dict(self) -> dict:
        return asdict(self)


# ------------------------------------------------------------------------------------------ entries

_JAX_8 = 'import jax\njax.config.update("jax_num_cpu_devices", 8)  # eight simulated CPU devices\n'

ENTRIES: tuple[Entry, ...] = (
    # ---------------------------------------------------------------------------------------- JAX
    Entry(
        id="jax-tracer-bool",
        title="A Python `if` on a traced value inside `jit`",
        framework="JAX",
        message="TracerBoolConversionError: Attempted boolean conversion of traced array with shape bool[].",
        cause="Under `jax.jit` the arguments are tracers: stand-ins with a shape and a dtype but no value, "
        "because JAX compiles one program for every value. A Python `if`, `while`, `and`/`or` or "
        "`bool(...)` on one needs the value now, so tracing stops.",
        fix="Keep the choice inside the program: `jnp.where(cond, a, b)` picks per element, "
        "`jax.lax.cond(cond, f, g, x)` runs one of two functions, `jax.lax.while_loop` replaces a "
        "`while`. If the value is really a setting (a mode, a flag) rather than data, mark it static: "
        "`jax.jit(f, static_argnames='flag')` compiles once per value.",
        lesson="jax_for_pytorch_users",
        taught="Control flow",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("python if", "if statement", "jit", "traced", "concretization", "bool", "condition"),
        example="""\
import jax
import jax.numpy as jnp

@jax.jit
def relu(x):
    if x > 0:  # a Python if on a traced value
        return x
    return jnp.zeros_like(x)

relu(jnp.float32(2.0))
""",
        fixed="""\
import jax
import jax.numpy as jnp

@jax.jit
def relu(x):
    return jnp.where(x > 0, x, jnp.zeros_like(x))  # the choice happens inside the compiled program

assert relu(jnp.float32(2.0)) == 2.0 and relu(jnp.float32(-1.0)) == 0.0
""",
    ),
    Entry(
        id="jax-concretization",
        title="`int()` (or `float()`, NumPy) on a traced value inside `jit`",
        framework="JAX",
        message="ConcretizationTypeError: Abstract tracer value encountered where concrete value is expected: "
        "traced array with shape … The problem arose with the `int` function.",
        cause="A Python number is needed from a value that only exists when the compiled program runs: "
        "`int(n)` to slice, `float(loss)` to log, `np.asarray(x)` inside the function. The slice "
        "length decides the output shape, and XLA needs every shape at compile time.",
        fix="If the value decides a shape or a Python branch, make it static: "
        "`jax.jit(f, static_argnames='n')` (each value compiles once, so keep the values few). If it "
        "is data, keep it an array (`x.astype(int)`, `jnp.where`, `jax.lax.dynamic_slice` with a "
        "fixed size). Read values after the call returns, or print them with `jax.debug.print`.",
        lesson="xla_fusion",
        taught="Recompilation",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("concrete value", "abstract tracer", "int", "static_argnames", "jit"),
        example="""\
import jax
import jax.numpy as jnp

@jax.jit
def first(x, n):
    return x[: int(n)]  # the length of the result depends on a traced value

first(jnp.arange(10), 3)
""",
        fixed="""\
import jax
import jax.numpy as jnp

def first(x, n):
    return x[:n]

first_jit = jax.jit(first, static_argnames="n")  # n is a Python int: one compile per value
assert first_jit(jnp.arange(10), 3).tolist() == [0, 1, 2]
""",
    ),
    Entry(
        id="jax-tracer-integer",
        title="A traced value used as a Python integer (`range(n)`, an index) inside `jit`",
        framework="JAX",
        message="TracerIntegerConversionError: The __index__() method was called on traced array with shape …",
        cause="Python needed an integer from a traced argument: `range(n)` for a loop, `x[n]` on a list, "
        "`[0] * n`. Under `jit` the argument has no value until the program runs.",
        fix="If it is a setting (a loop count, a layer count), mark it static: `jax.jit(f, "
        "static_argnames='n')`, one compile per value. If it must stay data, use "
        "`jax.lax.fori_loop(0, n, body, x)` (a traced bound works there) or `jax.lax.dynamic_slice`.",
        lesson="jax_for_pytorch_users",
        taught="jit: tracing, static arguments, purity",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("range", "loop count", "index", "integer", "static_argnames", "jit"),
        example="""\
import jax

def repeated_square(x, n):
    for _ in range(n):  # range() needs a Python int
        x = x * x
    return x

jax.jit(repeated_square)(1.01, 3)
""",
        fixed="""\
import jax

def repeated_square(x, n):
    for _ in range(n):
        x = x * x
    return x

square = jax.jit(repeated_square, static_argnames="n")
assert abs(float(square(1.01, n=3)) - 1.01 ** 8) < 1e-5
""",
    ),
    Entry(
        id="jax-immutable-arrays",
        title="`x[i] = y` on a JAX array",
        framework="JAX",
        message="TypeError: JAX arrays are immutable and do not support in-place item assignment. Instead of "
        "x[idx] = y, use x = x.at[idx].set(y) or another .at[] method:",
        cause="JAX arrays never change after they are made (that is what lets `jit`, `grad` and `vmap` "
        "reason about a function). PyTorch's and NumPy's in-place writes (`t[0] = 1`, `t.add_(1)`) "
        "have no JAX equivalent.",
        fix="Make a new array: `x = x.at[idx].set(y)` (also `.add`, `.multiply`, `.min`, `.max`). Under "
        "`jit`, XLA turns it into an in-place update when the old array is not used again.",
        lesson="jax_for_pytorch_users",
        taught="Arrays and devices",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("immutable", "item assignment", "in-place", "at set", "setitem"),
        example="""\
import jax.numpy as jnp

x = jnp.zeros(4)
x[0] = 1.0  # in place, as in NumPy or PyTorch
""",
        fixed="""\
import jax.numpy as jnp

x = jnp.zeros(4)
x = x.at[0].set(1.0)  # a new array
assert x.tolist() == [1.0, 0.0, 0.0, 0.0]
""",
    ),
    Entry(
        id="jax-traced-shape",
        title="A shape made from a traced value",
        framework="JAX",
        message="TypeError: Shapes must be 1D sequences of concrete values of integer type, got … "
        "If using `jit`, try using `static_argnums` or applying `jit` to smaller subfunctions.",
        cause="`jnp.zeros(n)`, `jnp.ones((n, d))`, `x.reshape(n, -1)` or `jnp.arange(n)` with an `n` "
        "that is an argument of a jitted function: the shape would depend on a runtime value, and "
        "XLA compiles for fixed shapes.",
        fix="Pass the size as a static argument (`jax.jit(f, static_argnames='n')`), or take it from an "
        "array's shape (`x.shape[0]` is a Python int even under `jit`).",
        lesson="xla_fusion",
        taught="Recompilation",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("shape", "concrete", "static_argnums", "zeros", "jit"),
        example="""\
import jax
import jax.numpy as jnp

@jax.jit
def padding(n):
    return jnp.zeros(n)  # the shape comes from a traced argument

padding(3)
""",
        fixed="""\
import jax
import jax.numpy as jnp

padding = jax.jit(lambda n: jnp.zeros(n), static_argnames="n")
assert padding(n=3).shape == (3,)
""",
    ),
    Entry(
        id="jax-non-array-argument",
        title="A string (or other non-array) passed to a jitted function",
        framework="JAX",
        message="TypeError: Error interpreting argument to … as an abstract array. The problematic value is "
        "of type <class 'str'> and was passed to the function at path …",
        cause="`jax.jit` turns every argument into a tracer, which only arrays and numbers can be. A "
        "string, a `None` you branch on, or a Python object that configures the function cannot.",
        fix="Mark the argument static: `jax.jit(f, static_argnames='kind')` (or `static_argnums`). Each "
        "distinct value compiles once; static values must be hashable.",
        lesson="xla_fusion",
        taught="Recompilation",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("static_argnames", "string argument", "abstract array", "jit"),
        example="""\
import jax
import jax.numpy as jnp

def activate(v, kind):
    return jnp.tanh(v) if kind == "tanh" else jax.nn.relu(v)

jax.jit(activate)(jnp.ones(4), "tanh")
""",
        fixed="""\
import jax
import jax.numpy as jnp

def activate(v, kind):
    return jnp.tanh(v) if kind == "tanh" else jax.nn.relu(v)

activate_jit = jax.jit(activate, static_argnames="kind")
assert activate_jit(jnp.ones(4), kind="relu").tolist() == [1.0, 1.0, 1.0, 1.0]
""",
    ),
    Entry(
        id="jax-unexpected-tracer",
        title="A tracer that escaped its function (a side effect under `jit`)",
        framework="JAX",
        message="UnexpectedTracerError: Encountered an unexpected tracer. A function transformed by JAX had "
        "a side effect, allowing for a reference to an intermediate value with type … to escape "
        "the scope of the transformation.",
        cause="A jitted (or `grad`, `vmap`, `scan`) function stored a traced value outside itself: appended "
        "it to a list, set it on `self` or a global. The stored tracer means nothing once tracing "
        "ends, and using it later fails. Models that keep state in attributes (a running mean, a "
        "cache) meet this first.",
        fix="Make the function pure: return everything you want to keep (`return y, new_state`) and pass "
        "state back in as an argument (Optax works this way; Flax NNX's `nnx.jit` does it for modules). To "
        "find where the leak happens, run once under `with jax.checking_leaks():` (or "
        "`JAX_CHECK_TRACER_LEAKS=1`).",
        lesson="jax_for_pytorch_users",
        taught="jit: tracing, static arguments, purity",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("side effect", "leaked", "tracer", "global", "escape"),
        example="""\
import jax

seen = []

@jax.jit
def step(x):
    seen.append(x)  # keeps a tracer after tracing ends
    return x * 2

step(1.0)
seen[0] + 1
""",
        fixed="""\
import jax

@jax.jit
def step(x):
    return x * 2, x  # return what you want to keep

y, kept = step(1.0)
assert kept + 1 == 2.0
""",
    ),
    Entry(
        id="jax-donated-buffer",
        title="Using an array after donating it",
        framework="JAX",
        message="RuntimeError: Array has been deleted with shape=…",
        cause="`jax.jit(f, donate_argnums=0)` lets XLA reuse the input's memory for the output (the usual "
        "way to update parameters and optimizer state in place). After the call the donated input "
        "is gone; reading the old name reads a deleted array.",
        fix="Rebind the name to the result (`params = update(params)`) and never touch a donated input "
        "again. Donate only what the step replaces (parameters, optimizer state, a KV cache), not "
        "inputs you still need.",
        lesson="training",
        taught="The memory budget",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("donate_argnums", "deleted", "donation", "buffer"),
        example="""\
import jax
import jax.numpy as jnp

update = jax.jit(lambda params: params - 0.1, donate_argnums=0)
params = jnp.ones(4)
new_params = update(params)
params + 1  # params was donated to the update
""",
        fixed="""\
import jax
import jax.numpy as jnp

update = jax.jit(lambda params: params - 0.1, donate_argnums=0)
params = jnp.ones(4)
params = update(params)  # the name now holds the result
assert abs(float(params[0]) - 0.9) < 1e-6
""",
    ),
    Entry(
        id="jax-sharding-type-matmul",
        title="`ShardingTypeError` from a matmul on Explicit mesh axes",
        framework="JAX",
        message="ShardingTypeError: Contracting dimensions are sharded and it is ambiguous how the output "
        "should be sharded. Please specify the output sharding via the `out_sharding` parameter.",
        cause="Since JAX 0.9 `jax.make_mesh` makes `Explicit` axes unless told otherwise: shardings are "
        "part of each array's type and JAX will not guess where a result lives when the answer "
        "needs communication. Here both operands are split along the dimension the matmul sums over.",
        fix="Say where the result goes: `jnp.matmul(a, b, out_sharding=P('data', None))` (or `jnp.einsum(..., "
        "out_sharding=...)`), or move an operand first with `jax.reshard(b, P(None, 'model'))`. To "
        "let the compiler choose as before 0.9, build the mesh with "
        "`axis_types=(jax.sharding.AxisType.Auto,) * 2`. Pass `axis_types` explicitly either way: the "
        "default differs between JAX versions (Colab's 0.7.2 defaults to Auto).",
        lesson="spmd_sharding",
        taught="Writing the communication yourself: jax.shard_map",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("explicit", "axis_types", "out_sharding", "sharding", "mesh", "matmul", "contracting"),
        example=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data", "model")))
with jax.set_mesh(mesh):
    x @ x.T  # both operands are split along the summed dimension: where should the result live?
""",
        fixed=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
x = jax.device_put(jnp.ones((8, 8)), NamedSharding(mesh, P("data", "model")))
with jax.set_mesh(mesh):
    gram = jnp.matmul(x, x.T, out_sharding=P("data", None))  # you say where the result lives
assert gram.sharding.spec == P("data", None) and jax.device_get(gram)[0, 0] == 8.0
""",
    ),
    Entry(
        id="jax-sharding-type-gather",
        title="`ShardingTypeError` from an embedding lookup on Explicit mesh axes",
        framework="JAX",
        message="ShardingTypeError: Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the "
        "gather indexing as out sharding could not be resolved unambiguously (or would require "
        "collectives on inputs).",
        cause="An embedding lookup (`table[tokens]`, `jnp.take`) is a gather. With `Explicit` axes (the "
        "default of `jax.make_mesh` since JAX 0.9) JAX wants to know where its result lives when "
        "the table and the indices are split along different axes.",
        fix="Give the output sharding: `table.at[tokens].get(out_sharding=P('data', None, 'model'))`, "
        "or build the mesh with `axis_types=(AxisType.Auto,) * n` and let the compiler decide. Flax "
        "models written before JAX 0.9 usually expect Auto axes.",
        lesson="spmd_sharding",
        taught="Writing the communication yourself: jax.shard_map",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="jax",
        keywords=("embedding", "gather", "explicit", "axis_types", "out_sharding", "take"),
        example=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
table = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, P(None, "model")))  # vocabulary x features
tokens = jax.device_put(jnp.zeros((8, 5), jnp.int32), NamedSharding(mesh, P("data", None)))
with jax.set_mesh(mesh):
    table[tokens]  # an embedding lookup
""",
        fixed=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Explicit, AxisType.Explicit))
table = jax.device_put(jnp.ones((64, 16)), NamedSharding(mesh, P(None, "model")))
tokens = jax.device_put(jnp.zeros((8, 5), jnp.int32), NamedSharding(mesh, P("data", None)))
with jax.set_mesh(mesh):
    vectors = table.at[tokens].get(out_sharding=P("data", None, "model"))  # you say where it lives
assert vectors.shape == (8, 5, 16)
""",
    ),
    Entry(
        id="jax-mesh-too-big",
        title="A mesh with more devices than the machine has",
        framework="JAX",
        message="ValueError: Number of devices … must be >= the product of mesh_shape …",
        variants=("ValueError: Number of devices … must equal the product of mesh_shape …",),
        cause="The mesh shape asks for more devices than JAX sees: a tutorial written for a v3-8 or a "
        "v5e-8 (8 devices, or a 4x4 mesh for 16), run on Colab's free TPU v5e-1 (1 device) or on a "
        "CPU (1 device unless you simulate more). If you set XLA_FLAGS and still see one device, "
        "see the entry on flags set too late.",
        fix="Build the mesh from what is there: `n = jax.device_count()` and a shape whose product is n "
        "(keep the axis names, so the code that uses them does not change). To rehearse the big "
        "shape on a CPU, simulate devices: `jax.config.update('jax_num_cpu_devices', 16)` right after "
        "`import jax`. For eight real chips, Kaggle offers a TPU v5e-8; Colab's free tier has one chip.",
        lesson="spmd_sharding",
        taught="Devices and meshes",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="jax",
        keywords=("mesh", "mesh_shape", "number of devices", "make_mesh", "create_device_mesh"),
        example=_JAX_8
        + """\
from jax.experimental import mesh_utils
from jax.sharding import AxisType

try:
    jax.make_mesh((4, 4), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))  # 16 devices
except ValueError as err:
    print(f"ValueError: {err}")
mesh_utils.create_device_mesh((4, 4))  # the older helper words it differently
""",
        fixed=_JAX_8
        + """\
from jax.sharding import AxisType

n = jax.device_count()
shape = (n // 2, 2) if n % 2 == 0 else (n, 1)  # same names, sizes that fit
mesh = jax.make_mesh(shape, ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
assert mesh.size == n
""",
    ),
    Entry(
        id="jax-batch-not-divisible",
        title="A batch that does not divide over the data axis",
        framework="JAX",
        message="IndivisibleError: Sharding NamedSharding(…) implies that array axis 0 is partitioned … times, "
        "but the dimension size is … (full shape: …, per-dimension tiling factors: … should evenly "
        "divide the shape)",
        variants=(
            "ValueError: Sharding spec … implies that array axis 0 is partitioned … times, but does not "
            "evenly divide the dimension size …",
        ),
        also=(
            (
                "jax 0.7.2 (Colab's JAX)",
                "ValueError: One of device_put args was given the sharding of NamedSharding(…), which implies that "
                "the global size of its dimension 0 should be divisible by …, but it is equal to …",
            ),
        ),
        cause="Splitting a batch of 6 over a data axis of 4 devices would give uneven blocks, and a "
        "`NamedSharding` needs equal ones. It happens with the last, smaller batch of an epoch, or "
        "a batch size picked for another device count.",
        fix="Make the global batch a multiple of the data axis (batch per device x `mesh.shape['data']`), "
        "drop or pad the last batch (`drop_remainder=True` in grain or tf.data), or pad the rows and "
        "mask them out of the loss.",
        lesson="spmd_sharding",
        taught="NamedSharding and PartitionSpec",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="jax",
        keywords=("divisible", "evenly divide", "batch size", "sharding", "partitioned", "device_put"),
        example=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

batch = jnp.ones((6, 16))  # 6 rows over 4 devices
for kind in (AxisType.Auto, AxisType.Explicit):  # the two axis types word it differently
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(kind, kind))
    try:
        jax.device_put(batch, NamedSharding(mesh, P("data")))
    except ValueError as err:
        print(f"{type(err).__name__}: {err}")
""",
        fixed=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
batch = jnp.ones((6, 16))
rows = -(-batch.shape[0] // mesh.shape["data"]) * mesh.shape["data"]  # round up to a multiple of 4
padded = jnp.pad(batch, ((0, rows - batch.shape[0]), (0, 0)))  # mask the padding out of the loss
assert jax.device_put(padded, NamedSharding(mesh, P("data"))).shape == (8, 16)
""",
    ),
    Entry(
        id="jax-num-cpu-devices-too-late",
        title="`jax_num_cpu_devices` set after JAX started",
        framework="JAX",
        message="RuntimeError: jax_num_cpu_devices config should be updated before backends are initialized "
        "i.e. before any JAX operation is executed. You should initialize this config immediately "
        "after `import jax`.",
        cause="The number of simulated CPU devices is fixed when JAX starts its backend, at the first "
        "operation or `jax.devices()` call. In a notebook, an earlier cell (or a library you "
        "imported) already did.",
        fix="Put `jax.config.update('jax_num_cpu_devices', 8)` right after `import jax`, before anything "
        "else touches JAX, and restart the kernel so that it runs first. From a shell, "
        "`JAX_NUM_CPU_DEVICES=8` does the same.",
        lesson="where_am_i",
        taught="Simulating 8 devices on a CPU",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        keywords=("simulate devices", "cpu devices", "config", "backend initialized"),
        example="""\
import jax
import jax.numpy as jnp

jnp.ones(2) + 1  # the first operation starts the backend
jax.config.update("jax_num_cpu_devices", 8)  # too late
""",
        fixed="""\
import jax

jax.config.update("jax_num_cpu_devices", 8)  # right after import jax
import jax.numpy as jnp

jnp.ones(2) + 1
assert jax.device_count() == 8
""",
    ),
    Entry(
        id="jax-xla-flags-too-late",
        title="`XLA_FLAGS` set after JAX started: no error, no effect",
        framework="JAX",
        message="jax.device_count() is still 1 after "
        "os.environ['XLA_FLAGS'] = '--xla_force_host_platform_device_count=8'",
        cause="XLA reads `XLA_FLAGS` once, when the backend starts; a change after that is silently "
        "ignored (JAX's docs: changing XLA_FLAGS after backend initialization will have no "
        "effect). The same holds for `--xla_dump_to` and every other XLA flag.",
        fix="Set the variable before the backend starts: in the shell "
        "(`XLA_FLAGS=--xla_force_host_platform_device_count=8 python train.py`), or in the first "
        "cell before `import jax`, then restart the kernel. For device counts, "
        "`jax.config.update('jax_num_cpu_devices', 8)` right after `import jax` says so loudly "
        "when it is too late.",
        lesson="where_am_i",
        taught="Simulating 8 devices on a CPU",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        silent=True,
        keywords=(
            "xla_flags",
            "xla_force_host_platform_device_count",
            "device count",
            "one device",
            "no effect",
            "ignored",
            "xla_dump_to",
        ),
        example="""\
import os
import jax

print(jax.device_count())  # the backend starts here
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # read at start-up only
assert jax.device_count() == 1  # the flag changed nothing
""",
        fixed="""\
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"  # before JAX starts
import jax

assert jax.device_count() == 8
""",
    ),
    Entry(
        id="jax-resource-exhausted",
        title="`RESOURCE_EXHAUSTED`: the program does not fit in memory",
        framework="JAX",
        message="RESOURCE_EXHAUSTED: Out of memory allocating … bytes.",
        also=(
            (
                "jax 0.7.2 (Colab's JAX)",
                "INTERNAL: Buffer Definition Event: Error preparing computation: Out of memory allocating … bytes.",
            ),
            (
                "TPU",
                "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
                "hbm. Used … of … hbm. Exceeded hbm capacity by …",
            ),
            (
                "PyTorch/XLA on a TPU",
                "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile "
                "permanent error. Ran out of memory in memory space …",
            ),
        ),
        cause="The arrays the program keeps (parameters, optimizer state, activations saved for the "
        "backward pass, temporaries such as an attention score matrix) need more memory than the "
        "device has. On a TPU the compiler adds up the whole program's memory before it runs and "
        "refuses it with the `hbm` message, naming the largest allocations; on a CPU the "
        "allocation itself fails. (HBM per chip: `python -m tpututor chips`.)",
        fix="Read what the program needs before running it: "
        "`jax.jit(f).lower(*args).compile().memory_analysis()` (temp, argument and output bytes). "
        "Then shrink the biggest term: a smaller batch (or gradient accumulation), bfloat16 "
        "activations, `jax.checkpoint` (remat) to recompute activations instead of storing them, "
        "sharding parameters and optimizer state over more chips (the SPMD lesson), donating buffers "
        "the step replaces, or reformulating so XLA never stores the big temporary (below, a fused "
        "reduction instead of a stored 32k x 32k matrix).",
        lesson="training",
        taught="The memory budget",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="process",
        keywords=("out of memory", "oom", "hbm", "memory", "does not fit", "too big", "allocate"),
        example="""\
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # give this process 3 GiB, like a small device
import jax
import jax.numpy as jnp

x = jnp.ones(2**15)
scores = jax.jit(lambda v: jnp.outer(v, v))(x)  # a 32768 x 32768 float32 matrix: 4 GiB
scores.block_until_ready()  # JAX runs asynchronously: the failure surfaces when you wait for the result
""",
        fixed="""\
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
import jax
import jax.numpy as jnp

x = jnp.ones(2**15)
row_sums = jax.jit(lambda v: jnp.outer(v, v).sum(axis=1))(x)  # fused: the matrix is never stored
row_sums.block_until_ready()
assert row_sums.shape == (2**15,) and float(row_sums[0]) == 2.0**15
""",
        hardware="TPU",
        note="the compiler refuses a program that does not fit in HBM before it runs, with the `hbm` message "
        "above and a list of the largest allocations (PyTorch/XLA raises it as `Bad StatusOr access`).",
        sources=(
            (
                "LargeWorldModel/LWM#60, RESOURCE_EXHAUSTED: XLA:TPU compile permanent",
                "https://github.com/LargeWorldModel/LWM/issues/60",
            ),
            ("pytorch/xla#9524, Bad StatusOr access: RESOURCE_EXHAUSTED", "https://github.com/pytorch/xla/issues/9524"),
        ),
        read=READ,
    ),
    Entry(
        id="jax-distributed-init-timeout",
        title="`DEADLINE_EXCEEDED` in `RegisterTask`: not every process reached the coordinator",
        framework="JAX",
        message="Terminating process because the JAX distributed service detected fatal errors. … "
        "DEADLINE_EXCEEDED: Deadline Exceeded … RPC: /…CoordinationService/RegisterTask",
        also=(
            (
                "jax 0.4 (a 2023 report)",
                "DEADLINE_EXCEEDED: Barrier timed out. Barrier_id: PjRT_Client_Connect. Timed out task names: …",
            ),
        ),
        cause="`jax.distributed.initialize` waits until all `num_processes` processes have registered with the "
        "coordinator, which process 0 runs at `coordinator_address`; after `initialization_timeout` "
        "seconds (300 by default) JAX ends the process with this message. One never arrived: process 0 "
        "was not started, or crashed before (its own log says why); the address is not process 0's (a "
        "wrong host or port, `localhost` on another machine, a firewall); fewer processes were started "
        "than `num_processes` says (the script run on one TPU VM worker instead of all of them); two got "
        "the same `process_id`; or one was still installing or importing when the time ran out. Every "
        "waiting process prints the same message, so it does not name the missing one.",
        fix="Start every process, each with the same `coordinator_address` and `num_processes` and its own "
        "`process_id` from 0 to `num_processes - 1`, process 0 on the machine the address names. On a TPU "
        "slice run the script on every worker (`gcloud compute tpus tpu-vm ssh NAME --worker=all "
        "--command=...`) and call `jax.distributed.initialize()` with no arguments: the TPU runtime "
        "supplies them. On one machine the course's launcher does the same (`python -m tpututor launch "
        "--hosts 2 -- python train.py`, or `tpututor.hosts.Job`). Read the other processes' logs for the "
        "one that is missing or died first. If some are only slow to start, raise "
        "`initialization_timeout=` (the launcher's `--init-timeout`, which a program reads with "
        "`hosts.initialize_options()`).",
        lesson="training",
        taught="Two processes, one training step",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        keywords=(
            "distributed",
            "initialize",
            "coordinator",
            "multi-host",
            "multi-process",
            "num_processes",
            "process_id",
            "registertask",
            "deadline exceeded",
            "initialization_timeout",
            "timed out",
            "connect",
            "hang",
        ),
        example="""\
# Process 1 of 2, started alone: process 0, which runs the coordinator, never comes up.
import socket
import jax

with socket.socket() as s:  # a port on this machine that nobody listens on
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=1,
                           initialization_timeout=5)  # seconds to wait for every process (default 300)
""",
        fixed="""\
# Start every process, each with the same coordinator address and process count and its own index:
# here with tpututor's launcher, on 127.0.0.1 (from a shell: python -m tpututor launch --hosts 2 -- CMD).
import sys
from tpututor import hosts

host = '''
import jax
jax.distributed.initialize(initialization_timeout=60)  # address, count and index from the launcher
print(f"process {jax.process_index()} of {jax.process_count()}: {jax.device_count()} devices")
jax.distributed.shutdown()
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:  # stops both, whatever happens
    result = job.wait()
assert result.ok, result.summary()
""",
        note="JAX 0.4 worded the same wait as a barrier: one process started of eight (`num_processes=8`) "
        "timed out at `PjRT_Client_Connect`, naming the seven missing tasks.",
        sources=(
            (
                "ayaka14732/llama-2-jax#20, DEADLINE_EXCEEDED when running train.py on GPU node",
                "https://github.com/ayaka14732/llama-2-jax/issues/20",
            ),
        ),
        read=READ,
    ),
    Entry(
        id="jax-distributed-port-in-use",
        title="`Failed to add port to server`: the coordinator's port is taken",
        framework="JAX",
        message="Failed to add port to server: No address added out of total 1 resolved for '…'",
        also=(
            (
                "Then, unless the process crashes first (as `JaxRuntimeError`; `XlaRuntimeError` in jax 0.7 and older)",
                "UNKNOWN: Failed to start RPC server",
            ),
        ),
        cause="Process 0 of a multi-process job starts the coordination service, a gRPC server on the port of "
        "`coordinator_address` (listening on every address of the machine, `[::]:PORT`, unless "
        "`coordinator_bind_address` or `JAX_COORDINATOR_BIND_ADDRESS` names one), and it could not "
        "listen there: another program holds that port (a server of yours, Jupyter, TensorBoard, a "
        "leftover process of an earlier run), or the bind address is not one this machine has. Then "
        "`initialize` raises `Failed to start RPC server`, or the process dies of a segmentation fault "
        "first. (A second JAX coordinator on the same port does not fail here: both start, and the "
        "processes time out as in `jax-distributed-init-timeout`.)",
        fix="See what holds the port (`ss -ltnp | grep :PORT`) and end it if it is yours, or pick another port "
        "and give the same `coordinator_address` to every process. Rather than a fixed number, take a free "
        "port when you launch (`tpututor.hosts.free_port()`; `python -m tpututor launch` does so unless "
        "given `--port`). Leave `coordinator_bind_address` unset, or give an address this machine has "
        "(`127.0.0.1:PORT` to accept only processes on this machine).",
        lesson="training",
        taught="Two processes, one training step",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        keywords=(
            "distributed",
            "initialize",
            "coordinator",
            "port",
            "address already in use",
            "port in use",
            "failed to start rpc server",
            "coordinator_address",
            "coordinator_bind_address",
            "bind",
            "grpc",
            "multi-host",
        ),
        example="""\
# Process 0 starts the coordinator on the port of the address, which something else holds already.
import socket
import jax

busy = socket.socket()
busy.bind(("127.0.0.1", 0))  # the port is taken
busy.listen()
port = busy.getsockname()[1]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0,
                           coordinator_bind_address=f"127.0.0.1:{port}")  # listen on this machine only
""",
        fixed="""\
import socket
import jax
from tpututor import hosts

busy = socket.socket()
busy.bind(("127.0.0.1", 0))
busy.listen()
port = hosts.free_port()  # a port nobody listens on (or end the program that holds the old one)
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=1, process_id=0,
                           coordinator_bind_address=f"127.0.0.1:{port}")
assert jax.process_count() == 1
jax.distributed.shutdown()
""",
        note="After the line above, jax 0.10.2 and 0.7.2 raise `Failed to start RPC server` in some runs and end "
        "with a segmentation fault in others (measured here with both), so the example asserts the line "
        "above only. The same pair was reported with jaxlib 0.3, from a worker told to listen on an "
        "address its machine did not have (`Cannot assign requested address`).",
        sources=(
            (
                "alpa-projects/alpa#701, alpa can not run the wresnet on 2 nodes",
                "https://github.com/alpa-projects/alpa/issues/701",
            ),
        ),
        read=READ,
    ),
    Entry(
        id="jax-distributed-heartbeat-timeout",
        title="`stopped sending heartbeats`: a process of the job died",
        framework="JAX",
        message="Terminating process because the JAX distributed service detected fatal errors. … "
        "UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):",
        variants=(
            "Use error polling to propagate the following error to all tasks: UNAVAILABLE: The following "
            "tasks are unhealthy (stopped sending heartbeats):",
        ),
        cause="After `jax.distributed.initialize`, every process sends the coordinator (process 0) a heartbeat. "
        "One that sends none for `heartbeat_timeout_seconds` (100 by default) is declared dead, and every "
        "other process is ended with this message, the dead one's index on the next line. That process "
        "is the one that failed: killed (preempted, out of host memory: the kernel's OOM killer), crashed "
        "in native code, left with `os._exit`, or stopped long enough to miss its heartbeats (a debugger "
        "breakpoint, a frozen machine). Its own log says why, not this one.",
        fix="Read the log of the process named under the message (and `dmesg` on its machine for the OOM killer) "
        "and fix that. A JAX job cannot go on without a process: restart every process (on a new port) and "
        "resume from the last checkpoint (the multi-host lesson kills a host, relaunches and resumes). "
        "Let every process run to the end and leave together through "
        "`jax.distributed.shutdown()` (JAX also calls it at exit). `heartbeat_timeout_seconds=` sets how "
        "soon the others learn of a death: lower than the default 100 s wastes less of a slice on a dead "
        "job (the course's launcher uses 10 s, `--heartbeat-timeout`), higher lets a process pause longer.",
        lesson="multi_host",
        taught="A dead host: the others' error, the timeouts, the resume",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        keywords=(
            "distributed",
            "heartbeat",
            "heartbeat_timeout_seconds",
            "unhealthy",
            "process died",
            "host died",
            "worker died",
            "preempted",
            "killed",
            "crashed",
            "multi-host",
            "multi-process",
            "terminating process",
            "fatal errors",
        ),
        example="""\
# Two processes join; then process 1 dies without a word, as a preempted or OOM-killed host does.
import sys
from tpututor import hosts

host = '''
import os, signal, time
import jax
jax.distributed.initialize(initialization_timeout=60, heartbeat_timeout_seconds=5)  # default 100 s
print(f"process {jax.process_index()} joined", flush=True)
time.sleep(1)
if jax.process_index() == 1:
    os.kill(os.getpid(), signal.SIGKILL)  # gone: no more heartbeats
time.sleep(60)  # process 0 carries on (a training step, a checkpoint) until JAX notices
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:  # stops both, whatever happens
    print(job.wait().summary())
""",
        fixed="""\
# Every process stays to the end and leaves through jax.distributed.shutdown(), together.
import sys
from tpututor import hosts

host = '''
import time
import jax
jax.distributed.initialize(initialization_timeout=60, heartbeat_timeout_seconds=5)
print(f"process {jax.process_index()} joined", flush=True)
time.sleep(1)  # the work
jax.distributed.shutdown()  # waits for every process (JAX also calls it at exit)
'''
with hosts.Job([sys.executable, "-c", host], hosts=2, timeout=180) as job:
    result = job.wait()
assert result.ok, result.summary()
""",
    ),
    Entry(
        id="jax-no-tpu-backend",
        title="`Unable to initialize backend 'tpu'`: no TPU runtime here",
        framework="JAX",
        message="RuntimeError: Unable to initialize backend 'tpu': … "
        "(set JAX_PLATFORMS='' to automatically choose an available backend)",
        cause="JAX was told to use a TPU (`JAX_PLATFORMS=tpu`, `jax.devices('tpu')`) in a process that "
        "has no TPU runtime: libtpu is not installed (`INTERNAL: Failed to open libtpu.so`), or this "
        "machine has no TPU chip although libtpu is installed (`NOT_FOUND: TPU initialization failed: "
        "No jellyfish device found`: a CPU or GPU runtime, a notebook copied from a TPU VM, or libtpu "
        "installed only to compile for TPUs, as the course does).",
        fix="On a TPU VM: `pip install -U 'jax[tpu]'` (it brings the matching libtpu) and restart. "
        "Elsewhere: do not force the platform (unset `JAX_PLATFORMS`, or set it to `cpu`) and write "
        "code that takes `jax.devices()` as it comes. `python -m tpututor doctor` says what this "
        "machine has.",
        lesson="where_am_i",
        taught="What each framework sees",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="cpu",
        runner="process",
        keywords=("libtpu", "backend", "jax_platforms", "tpu not found", "no tpu", "libtpu.so"),
        example="""\
import os
os.environ["JAX_PLATFORMS"] = "tpu"  # insist on a TPU, on a machine without one
import jax

jax.devices()
""",
        fixed="""\
import os
os.environ.pop("JAX_PLATFORMS", None)  # let JAX take the best backend this machine has
import jax

print(jax.devices())
""",
    ),
    Entry(
        id="jax-tpu-present-no-libtpu",
        title="`A Google TPU may be present on this machine`: JAX fell back to the CPU",
        framework="JAX",
        message="A Google TPU may be present on this machine, but either a TPU-enabled jaxlib or libtpu is "
        "not installed. Falling back to cpu.",
        cause="The machine has TPU chips but JAX found no libtpu, so it runs on the CPU: `pip install "
        "jax` without the `[tpu]` extra, a libtpu removed or replaced by another package "
        "(tensorflow-tpu brings its own), or a virtual environment without it.",
        fix="`pip install -U 'jax[tpu]'` (jax, jaxlib and the matching libtpu together), then restart the "
        "runtime. On Colab keep the preinstalled JAX: its libtpu matches it.",
        lesson="where_am_i",
        taught="What each framework sees",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="faked",
        runner="process",
        keywords=("falling back to cpu", "no tpu", "libtpu", "tpu not used", "cpu instead of tpu"),
        example="""\
# On a TPU VM without libtpu. Here: JAX's own start-up check, with its TPU probe faked.
import logging
logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
import jax
from jax._src import hardware_utils, xla_bridge

jax.devices()  # the CPU backend starts
hardware_utils.num_available_tpu_chips_and_device_id = lambda: (4, None)  # fake: four TPU chips attached
xla_bridge._suggest_missing_backends()  # the check JAX runs when it starts
""",
        hardware="TPU",
        note="a TPU VM whose JAX has no libtpu prints this warning and runs on the CPU (reported on Colab's TPU "
        "runtime after installing tensorflow-tpu over its JAX).",
        sources=(
            ("jax-ml/jax#29989, Cannot Initialize TPU on Google Colab", "https://github.com/jax-ml/jax/issues/29989"),
        ),
        read=READ,
    ),
    Entry(
        id="jax-gpu-present-cpu-jaxlib",
        title="`An NVIDIA GPU may be present on this machine`: JAX fell back to the CPU",
        framework="JAX",
        message="An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. "
        "Falling back to cpu.",
        cause="The machine has an NVIDIA GPU but the installed JAX has no CUDA plug-in (`pip install jax` "
        "installs the CPU build), so everything runs on the CPU.",
        fix="`pip install -U 'jax[cuda13]'` (the installation guide's command; `'jax[cuda12]'` for a "
        "CUDA 12 driver) and restart. "
        "`python -m tpututor doctor` says which platform JAX picked.",
        lesson="where_am_i",
        taught="What each framework sees",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="faked",
        runner="process",
        keywords=("cuda", "gpu", "falling back to cpu", "jaxlib"),
        example="""\
# On a GPU machine with the CPU-only JAX. Here: JAX's own start-up check, with its GPU probe faked.
import logging
logging.basicConfig(format="%(levelname)s:%(name)s:%(message)s")
import jax
from jax._src import hardware_utils, xla_bridge

jax.devices()  # the CPU backend starts
hardware_utils.has_visible_nvidia_gpu = lambda: True  # fake: an NVIDIA GPU is visible
xla_bridge._suggest_missing_backends()  # the check JAX runs when it starts
""",
        hardware="GPU",
        note="on a machine with an NVIDIA GPU, the CPU-only JAX prints this and runs on the CPU; the CUDA "
        "build comes from the `jax[cuda13]` extra (`jax[cuda12]` also exists in jax 0.10.2's metadata).",
        sources=(("JAX installation guide", "https://docs.jax.dev/en/latest/installation.html"),),
        read=READ,
    ),
    Entry(
        id="jax-jaxlib-version",
        title="jax and jaxlib versions that do not belong together",
        framework="JAX",
        message="RuntimeError: jaxlib is version …, but this version of jax requires version >= ….",
        variants=(
            "RuntimeError: jaxlib version … is newer than and incompatible with jax version …. Please "
            "update your jax and/or jaxlib packages.",
        ),
        cause="`jax` (Python) and `jaxlib` (the compiled part) are released together; upgrading one "
        "without the other (`pip install -U jax` over a preinstalled jaxlib, a pinned requirements "
        "file) leaves a pair that refuses to import.",
        fix="Install them in one command, with the extra for your hardware: `pip install -U 'jax[tpu]'`, "
        "`'jax[cuda13]'` or plain `jax` for a CPU; then restart the runtime. On Colab's TPU runtime "
        "keep the preinstalled pair (its libtpu matches it).",
        lesson="where_am_i",
        taught="What each framework sees",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="faked",
        runner="jax",
        keywords=("jaxlib", "version", "incompatible", "upgrade"),
        example="""\
# What import jax checks first, fed the versions of mismatched installs (a jaxlib too old, one too new):
import jax.version
from jax._src.lib import check_jaxlib_version

for jaxlib_version in ("0.4.0", "0.99.0"):
    try:
        check_jaxlib_version(jax.version.__version__, jaxlib_version, jax.version._minimum_jaxlib_version)
    except RuntimeError as err:
        print(f"RuntimeError: {err}")
""",
        fixed="""\
import jax.version
from jax._src.lib import check_jaxlib_version

check_jaxlib_version(jax.version.__version__, jax.version.__version__, jax.version._minimum_jaxlib_version)
""",
        note="Reported on Colab's TPU runtime (then with jaxlib 0.3.25) when a package's requirements "
        "upgraded jax alone; upgrading jaxlib too fixed it.",
        sources=(
            (
                "google-deepmind/weathernext#48, Jax Error only when TPU-enabled runtime selected",
                "https://github.com/google-deepmind/weathernext/issues/48",
            ),
        ),
        read=READ,
    ),
    Entry(
        id="jax-with-mesh-deprecated",
        title="`with mesh:` is deprecated",
        framework="JAX",
        message="DeprecationWarning: `with mesh:` context manager has been deprecated. Please use "
        "`with jax.set_mesh(mesh):` instead.",
        cause="Tutorials written before JAX 0.10.1 enter a mesh with `with mesh:`. JAX now has one way "
        "to make a mesh current, `jax.set_mesh`, which also sets the abstract mesh that Explicit "
        "sharding and bare `PartitionSpec`s use.",
        fix="Write `with jax.set_mesh(mesh):` (or call `jax.set_mesh(mesh)` once). It exists since JAX "
        "0.7.1, so it works on Colab's 0.7.2 too.",
        lesson="spmd_sharding",
        taught="Writing the communication yourself: jax.shard_map",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="jax",
        keywords=("with mesh", "set_mesh", "deprecated", "context manager"),
        example=_JAX_8
        + """\
from jax.sharding import AxisType

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
with mesh:  # the old way
    pass
""",
        fixed=_JAX_8
        + """\
from jax.sharding import AxisType

mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
with jax.set_mesh(mesh):
    pass
""",
    ),
    Entry(
        id="jax-experimental-shard-map",
        title="`jax.experimental.shard_map` is deprecated",
        framework="JAX",
        message="DeprecationWarning: jax.experimental.shard_map is deprecated in v0.8.0. Used jax.shard_map instead.",
        cause="`shard_map` moved to the top level (`jax.shard_map`, since JAX 0.6.1); the old module is "
        "deprecated since 0.8.0. The new one takes the mesh as a keyword (or from `jax.set_mesh`) "
        "and calls `check_rep` `check_vma`.",
        fix="`jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)`; rename `check_rep=` to "
        "`check_vma=`. Works on Colab's 0.7.2 too.",
        lesson="spmd_sharding",
        taught="Writing the communication yourself: jax.shard_map",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="jax",
        keywords=("shard_map", "experimental", "deprecated", "check_rep"),
        example="""\
from jax.experimental.shard_map import shard_map  # the old home
""",
        fixed=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Auto,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
assert float(total(jnp.arange(8.0))) == 28.0
""",
    ),
    Entry(
        id="jax-shard-map-in-specs",
        title="`in_specs` that do not match the input's sharding (Explicit axes)",
        framework="JAX",
        message="ValueError: in_specs passed to shard_map: … does not match the specs of the input: … for arg: …",
        cause="On a mesh with `Explicit` axes (the default of `jax.make_mesh` since JAX 0.9) every array "
        "carries its sharding, and since JAX 0.9.1 `jax.shard_map` checks `in_specs` against it "
        "instead of quietly resharding: here the input is whole (`P(None)`) and `in_specs` says "
        "split over `data`.",
        fix="Put the input where `in_specs` says first (`jax.device_put(x, NamedSharding(mesh, P('data')))` "
        "or `jax.reshard(x, P('data'))`), or leave `in_specs` out: with Explicit axes `shard_map` "
        "takes it from the arguments. With `Auto` axes the old behaviour (reshard to match) remains.",
        lesson="spmd_sharding",
        taught="Writing the communication yourself: jax.shard_map",
        versions=("jax 0.10.2",),
        repro="cpu",
        runner="jax",
        keywords=("shard_map", "in_specs", "does not match", "explicit", "reshard"),
        example=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
total(jnp.arange(8.0))  # the input is not split over data, but in_specs says it is
""",
        fixed=_JAX_8
        + """\
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
total = jax.shard_map(lambda x: jax.lax.psum(x.sum(), "data"), mesh=mesh, in_specs=P("data"), out_specs=P())
x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("data")))  # where in_specs says it is
assert float(total(x)) == 28.0
""",
    ),
    Entry(
        id="jax-hugepages",
        title="`Transparent hugepages are not enabled` on a TPU v5e or newer",
        framework="JAX",
        message="Transparent hugepages are not enabled. TPU runtime startup and shutdown time should be "
        "significantly improved on TPU v5e and newer.",
        cause="A warning, not an error: on TPU v5e and newer, JAX checks whether the Linux kernel's "
        "transparent hugepages are on, because the TPU runtime starts and stops faster with them.",
        fix='On a VM you control: `sudo sh -c "echo always > /sys/kernel/mm/transparent_hugepage/enabled"` '
        "(or bake it into the VM image). On a managed runtime you cannot change it: the warning is "
        "harmless, the program runs the same.",
        lesson="where_am_i",
        taught="",
        versions=("jax 0.10.2", "jax 0.7.2"),
        repro="faked",
        runner="process",
        keywords=("hugepages", "transparent", "startup", "warning", "v5e"),
        example="""\
# On a TPU v5e VM with hugepages off. Here: JAX's TPU start-up code, with its hardware probes faked.
import warnings
warnings.simplefilter("always")
from jax._src import cloud_tpu_init, hardware_utils

hardware_utils.num_available_tpu_chips_and_device_id = lambda: (1, hardware_utils.TpuVersion.v5e)
hardware_utils.transparent_hugepages_enabled = lambda: False
cloud_tpu_init.cloud_tpu_init()
""",
        hardware="TPU",
        note="JAX checks transparent hugepages on TPU v5e and newer only, at TPU start-up; the warning's text is"
        " in JAX's TPU start-up code.",
        sources=(
            (
                "jax-ml/jax, jax/_src/cloud_tpu_init.py",
                "https://github.com/jax-ml/jax/blob/main/jax/_src/cloud_tpu_init.py",
            ),
        ),
        read=READ,
    ),
    # ------------------------------------------------------------------------------ TPU runtime
    Entry(
        id="tpu-in-use",
        title="The TPU is held by another process",
        framework="TPU runtime (libtpu)",
        message="Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with "
        "pid …. Not attempting to load libtpu.so in this process.",
        also=(
            (
                "Older libtpu (2022)",
                "libtpu.so already in use by another process probably owned by another "
                'user. Run "$ sudo lsof -w /dev/accel0" to figure out which process is '
                "using the TPU. Not attempting to load libtpu.so in this process.",
            ),
            (
                "JAX started after PyTorch/XLA took the TPU in the same process",
                "RuntimeError: Unable to initialize backend 'tpu': INVALID_ARGUMENT: Mismatched PJRT plugin PJRT "
                "API version (…) and framework PJRT API version …).",
            ),
        ),
        cause="A TPU belongs to one process at a time. Another notebook kernel, a forgotten training "
        "script, a `tpututor doctor` probe run after the kernel started JAX, or PyTorch/XLA in the "
        "same process already opened the chips. JAX then falls back to the CPU (a warning, easy "
        "to miss) or fails.",
        fix="Find the holder: `sudo lsof -w /dev/accel*` (TPU v2 to v4) or `sudo lsof -w /dev/vfio/*` "
        "(v5e and newer); end it, or restart the runtime. Use one framework per process on a TPU: "
        "run the other in a subprocess after this one has finished, or on the CPU "
        "(`JAX_PLATFORMS=cpu`, `PJRT_DEVICE=CPU`).",
        lesson="where_am_i",
        taught="What runtime is this?",
        versions=("reports from 2022 to 2024, jax 0.4 with libtpu",),
        repro="tpu",
        keywords=("already in use", "another process", "busy", "held", "locked", "pid", "lsof"),
        hardware="TPU",
        note="a second process that starts JAX while another holds the chips gets the first message and runs on "
        "the CPU; JAX started in a process where PyTorch/XLA already holds the TPU reports the misleading "
        "PJRT version mismatch.",
        sources=(
            ("jax-ml/jax#22070, jaxlib not detected on TPU VM", "https://github.com/jax-ml/jax/issues/22070"),
            (
                "jax-ml/jax#20148, JAX reports inaccurate error when trying to acquire already-owned TPU",
                "https://github.com/jax-ml/jax/issues/20148",
            ),
            (
                "jax-ml/jax#10192, libtpu.so already in use but actually not used",
                "https://github.com/jax-ml/jax/issues/10192",
            ),
        ),
        read=READ,
    ),
    Entry(
        id="libtpu-version-mismatch",
        title="libtpu built for another JAX (or PyTorch/XLA) version",
        framework="TPU runtime (libtpu)",
        message="INVALID_ARGUMENT: Mismatched PJRT plugin PJRT API version (…) and framework PJRT API version ….",
        also=(
            (
                "A libtpu newer than the framework (2025)",
                "Unexpected PJRT_Plugin_Attributes_Args size: "
                "expected …, got …. The plugin is likely built with a later version than the framework.",
            ),
            (
                "JAX meeting the libtpu that tensorflow-tpu installed (2025)",
                "UserWarning: cloud_tpu_init failed: "
                "AttributeError(\"module 'libtpu' has no attribute 'get_library_path'\")",
            ),
        ),
        cause="libtpu (the TPU runtime, a PJRT plug-in) speaks a versioned interface, and each JAX or "
        "PyTorch/XLA release is built against one range of it. Upgrading JAX without libtpu (`pip "
        "install -U jax`), installing tensorflow-tpu (which brings its own libtpu) or an old "
        "`jax[tpu]` pin leaves the two out of step.",
        fix="Install the set in one command so pip picks the matching libtpu: `pip install -U "
        "'jax[tpu]'`, or for PyTorch `pip install torch==2.9.0 'torch_xla[tpu]==2.9.0'`; then "
        "restart. Keep JAX, PyTorch/XLA and TensorFlow-TPU in separate environments on one TPU VM. "
        "On Colab, keep the preinstalled JAX and libtpu.",
        lesson="where_am_i",
        taught="What each framework sees",
        versions=("reports from 2024 and 2025, jax 0.4 to 0.7 with libtpu", "torch_xla (2024)"),
        repro="tpu",
        keywords=("pjrt", "plugin", "api version", "mismatch", "libtpu", "version", "incompatible"),
        hardware="TPU",
        note="a libtpu from another release than the JAX or PyTorch/XLA that loads it fails at start-up with one"
        " of these messages; installing the framework with its `[tpu]` extra fixed each report.",
        sources=(
            ("google/flax#4122, MNIST tutorial broken for Colab TPU", "https://github.com/google/flax/issues/4122"),
            (
                "google-deepmind/weathernext#185, Unexpected PJRT_Plugin_Attributes_Args size",
                "https://github.com/google-deepmind/weathernext/issues/185",
            ),
            (
                "pytorch/xla#6949, Getting PJRT plugin and API version mismatch errors",
                "https://github.com/pytorch/xla/issues/6949",
            ),
        ),
        read=READ,
    ),
    Entry(
        id="mosaic-acc-32bit",
        title="`Expected matmul acc to be 32-bit`: a Pallas matmul accumulating in bf16",
        framework="TPU runtime (libtpu)",
        message="'tpu.matmul' op Expected matmul acc to be 32-bit",
        cause="Mosaic, the compiler of Pallas TPU kernels, turns a `jnp.dot` in a kernel into a matrix-unit "
        "operation, and the matrix unit accumulates in 32 bits. A dot whose `preferred_element_type` "
        "is bfloat16 (often `acc_ref.dtype` with a bf16 scratch) asks it for a 16-bit sum; Pallas "
        "refuses it while lowering the kernel for the TPU (JAX calls it an internal verification "
        "error). TPU interpret mode runs such a kernel without complaint.",
        fix="Accumulate in float32: `preferred_element_type=jnp.float32` and a float32 scratch "
        "(`pltpu.VMEM((bm, bn), jnp.float32)`), then cast once when writing the output block. Check "
        "a kernel with the TPU compiler before paying for a TPU: `tpututor.aot.compile` for `v5e-1`.",
        lesson="pallas_kernels",
        taught="A tiled matmul: a grid, a VMEM accumulator and dimension_semantics",
        versions=("jax 0.10.2 with libtpu 0.0.42.1",),
        repro="cpu",
        runner="process",
        keywords=("pallas", "mosaic", "accumulator", "bf16", "tpu.matmul", "32-bit", "preferred_element_type"),
        example="""\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def kernel(x_ref, y_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=acc_ref.dtype)
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, acc_dtype=jnp.bfloat16):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          scratch_shapes=[pltpu.VMEM(x.shape, acc_dtype)])(x, y)


x = aot.abstract((256, 256), jnp.bfloat16, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
try:
    aot.compile(matmul, x, x, slice="v5e-1")
except aot.CompileError as err:
    print(err.message)
""",
        fixed="""\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def kernel(x_ref, y_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          scratch_shapes=[pltpu.VMEM(x.shape, jnp.float32)])(x, y)


x = aot.abstract((256, 256), jnp.bfloat16, aot.mesh("v5e-1"))
print(aot.compile(matmul, x, x, slice="v5e-1").summary())
""",
    ),
    Entry(
        id="mosaic-vmem-oom",
        title="`Ran out of memory in memory space vmem`: a Pallas kernel's blocks do not fit VMEM",
        framework="TPU runtime (libtpu)",
        message="RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space vmem. "
        "Used … of … vmem. Exceeded vmem capacity by …",
        variants=("This allocation has 2 buffering levels",),
        also=(
            (
                "TPU, below the capacity but above the kernel's limit",
                "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: … Scoped allocation with size … and "
                "limit … exceeded scoped vmem limit by …",
            ),
        ),
        cause="A Pallas kernel's pipeline holds two VMEM buffers for every blocked input and output (the "
        "report says each window 'has 2 buffering levels'), plus its scratch. When that is more than "
        "the TensorCore's VMEM (128 MiB on a v5e or v6e, the number after 'of') the TPU compiler "
        "refuses the kernel. Below the capacity a kernel must still fit a default *scoped* limit: "
        "16 MiB on a v5e, 32 MiB on a v6e, refused with `CompileTimeScopedVmemOom`.",
        fix="Smaller blocks: VMEM is about 2 x (the input blocks + the output blocks) + scratch, so halving "
        "a block's rows halves its share. Above the scoped limit but within VMEM, raise the limit for "
        "that one kernel: `compiler_params=pltpu.CompilerParams(vmem_limit_bytes=...)`. "
        "`tpututor.aot.compile` for `v5e-1` or `v6e-1` checks it here, without a TPU.",
        lesson="pallas_kernels",
        taught="Honest performance: the block size on the roofline",
        versions=("jax 0.10.2 with libtpu 0.0.42.1",),
        repro="cpu",
        runner="process",
        keywords=(
            "vmem",
            "out of memory",
            "block",
            "pallas",
            "resource exhausted",
            "kernel",
            "scoped",
            "vmem_limit_bytes",
            "blockspec",
        ),
        example="""\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def copy_kernel(x_ref, o_ref):
    pltpu.sync_copy(x_ref, o_ref)


def copy(x, rows=2048):  # a (2048, 8192) float32 block: 64 MiB, held twice for the input and twice for the output
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                          in_specs=[spec], out_specs=spec)(x)


x = aot.abstract((8192, 8192), jnp.float32, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
try:
    aot.compile(copy, x, slice="v5e-1")
except aot.CompileError as err:
    print(err.message)
""",
        fixed="""\
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from tpututor import aot


def copy_kernel(x_ref, o_ref):
    pltpu.sync_copy(x_ref, o_ref)


def copy(x, rows):
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // rows,),
                          in_specs=[spec], out_specs=spec)(x)


x = aot.abstract((8192, 8192), jnp.float32, aot.mesh("v5e-1"))
print(aot.compile(functools.partial(copy, rows=64), x, slice="v5e-1").summary())  # 2 MiB blocks: 8 MiB
""",
    ),
    Entry(
        id="tpu-hbm-oom-compile",
        title="`Ran out of memory on HBM`: the TPU compiler refuses a program whose temporaries do not fit",
        framework="TPU runtime (libtpu)",
        message="RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO temporaries "
        "(…) exceeds available HBM (…).",
        cause="The TPU compiler adds up what the program needs in HBM before anything runs. Here a "
        "temporary (a 65536 x 65536 float32 matrix, and the buffers `sort` needs beside it: 32 GiB) "
        "is more than one chip has (15.75 GiB of a v5e's 16 GiB are available to a program), so "
        "it refuses the program at compile time, on a TPU VM or here, compiling for one.",
        fix="Read the program's memory before it runs: `jax.jit(f).lower(*args).compile().memory_analysis()`, "
        "or `tpututor.aot.compile(f, ..., slice='v5e-8').summary()` without a TPU. Then shrink the "
        "temporary: reformulate so XLA never stores it (below, a reduction the compiler fuses "
        "instead of a sorted matrix), a smaller batch, `jax.checkpoint`, or shard the work over "
        "more chips.",
        lesson="training",
        taught="The memory budget",
        versions=("jax 0.10.2 with libtpu 0.0.42.1",),
        repro="cpu",
        runner="process",
        keywords=("out of memory", "hbm", "temporaries", "does not fit", "resource exhausted", "compile", "memory"),
        example="""\
import jax.numpy as jnp

from tpututor import aot

v = aot.abstract((2**16,), jnp.float32, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
try:
    aot.compile(lambda v: jnp.sort(jnp.outer(v, v), axis=0)[0], v, slice="v5e-1")  # 16 GiB matrix, sorted
except aot.CompileError as err:
    print(err.message)
""",
        fixed="""\
import jax.numpy as jnp

from tpututor import aot

v = aot.abstract((2**16,), jnp.float32, aot.mesh("v5e-1"))
fused = aot.compile(lambda v: jnp.outer(v, v).min(axis=0), v, slice="v5e-1")  # the same first row
print(fused.summary())
assert fused.fits
""",
    ),
    Entry(
        id="mosaic-block-shape",
        title="`last two dimensions of your block shape are divisible by 8 and 128`: a block Mosaic rejects",
        framework="TPU runtime (libtpu)",
        message="ValueError: The Pallas TPU lowering currently requires that the last two dimensions of your "
        "block shape are divisible by 8 and 128 respectively, or be equal to the respective "
        "dimensions of the overall array.",
        cause="A TPU kernel works on (8, 128) tiles of 32-bit values: a `BlockSpec`'s last two dimensions "
        "must be multiples of 8 and 128, or the whole array's. Pallas checks it while lowering the "
        "kernel for the TPU, before the compiler runs; TPU interpret mode (`interpret=...`) does not, "
        "so a kernel that runs in interpret mode can still be refused here.",
        fix="Choose blocks whose last two dimensions are multiples of (8, 128) (16 rows for bfloat16 "
        "fills a tile) that divide the array, or take the whole dimension; pad the array if no such "
        "block exists. `tpututor.kernels.check_tile(shape, block)` applies the rule without JAX and "
        "suggests blocks.",
        lesson="pallas_kernels",
        taught="A first kernel: pallas_call, a grid and BlockSpecs",
        versions=("jax 0.10.2 with libtpu 0.0.42.1",),
        repro="cpu",
        runner="process",
        keywords=("block shape", "blockspec", "divisible", "8 and 128", "tile", "pallas", "mosaic"),
        example="""\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from tpututor import aot


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, block=(4, 100)):
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // block[0], x.shape[1] // block[1]), in_specs=[spec, spec],
                          out_specs=spec)(x, y)


x = aot.abstract((16, 200), jnp.float32, aot.mesh("v5e-1"))  # for a TPU v5e: nothing runs
aot.compile(add, x, x, slice="v5e-1")
""",
        fixed="""\
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from tpututor import aot


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, block):
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // block[0], x.shape[1] // block[1]), in_specs=[spec, spec],
                          out_specs=spec)(x, y)


x = aot.abstract((16, 200), jnp.float32, aot.mesh("v5e-1"))
print(aot.compile(functools.partial(add, block=(8, 200)), x, x, slice="v5e-1").summary())  # 8 rows, all 200
""",
    ),
    # ----------------------------------------------------------------------------------- TensorFlow
    Entry(
        id="tf-tpu-name",
        title="`TPUClusterResolver()` without an argument",
        framework="TensorFlow",
        message="ValueError: Please provide a TPU Name to connect to.",
        cause="With no `tpu=` the resolver looks for a TPU *node* by name (the Cloud TPU API, or "
        "`COLAB_TPU_ADDR` on the retired Colab TPU node). On a TPU VM (what Colab, Kaggle and "
        "Cloud TPU give today) there is no name to find: the chips are attached to this machine.",
        fix="`tf.distribute.cluster_resolver.TPUClusterResolver(tpu='local')`, then "
        "`tf.config.experimental_connect_to_cluster(resolver)`, "
        "`tf.tpu.experimental.initialize_tpu_system(resolver)` and "
        "`tf.distribute.TPUStrategy(resolver)`. `tpututor.strategy.choose()` does this and falls back "
        "to GPUs or CPUs.",
        lesson="tf_tpustrategy",
        taught="Connecting to a TPU",
        versions=("tensorflow-cpu 2.21.0",),
        repro="cpu",
        runner="tensorflow",
        keywords=("tpuclusterresolver", "tpu name", "resolver", "colab_tpu_addr", "tensorflow"),
        example="""\
import tensorflow as tf

tf.distribute.cluster_resolver.TPUClusterResolver()  # asks for a TPU node by name
""",
        fixed="""\
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")  # the chips on this VM
""",
    ),
    Entry(
        id="tf-tpus-not-found",
        title="`TPUs not found in the cluster`: TensorFlow without TPU support",
        framework="TensorFlow",
        message="NotFoundError: TPUs not found in the cluster. Failed in initialization: No OpKernel was "
        "registered to support Op 'ConfigureDistributedTPU' used by {{node ConfigureDistributedTPU}}",
        cause="`initialize_tpu_system` found no TPU kernels: this TensorFlow cannot drive a TPU "
        "(`tensorflow` or `tensorflow-cpu` rather than `tensorflow-tpu`), or the machine has no "
        "TPU. Colab's TPU runtime has not shipped TensorFlow since March 2025, and TPU7x does not "
        "support it.",
        fix="On a TPU VM: `pip install tensorflow-tpu --find-links="
        "https://storage.googleapis.com/libtpu-tf-releases/index.html` in its own environment (it "
        "brings its own libtpu), then restart. Without a TPU: catch `tf.errors.NotFoundError` and use "
        "`tf.distribute.MirroredStrategy()` (what `tpututor.strategy.choose()` does). For new work "
        "on TPUs, Keras 3 on JAX is the maintained route.",
        lesson="tf_tpustrategy",
        taught="Connecting to a TPU",
        versions=("tensorflow-cpu 2.21.0",),
        repro="cpu",
        runner="tensorflow",
        keywords=("configuredistributedtpu", "initialize_tpu_system", "tpustrategy", "no tpu", "tensorflow"),
        example="""\
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
tf.config.experimental_connect_to_cluster(resolver)
tf.tpu.experimental.initialize_tpu_system(resolver)  # this TensorFlow has no TPU kernels
""",
        fixed="""\
import tensorflow as tf

try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    strategy = tf.distribute.TPUStrategy(resolver)
except tf.errors.NotFoundError:  # no TPU here: use the GPUs, or the CPU
    strategy = tf.distribute.MirroredStrategy()
assert strategy.num_replicas_in_sync >= 1
""",
        hardware="TPU",
        note="Colab's TPU runtime has shipped no TensorFlow since March 2025 (`pip install tensorflow-tpu` "
        "with Google's find-links index adds it), and Cloud TPU7x does not support TensorFlow.",
        sources=(
            (
                "googlecolab/colabtools#5164, Colab upgrade to jax 0.5.2 (TensorFlow no longer "
                "pre-installed on TPU runtimes)",
                "https://github.com/googlecolab/colabtools/issues/5164",
            ),
            ("Cloud TPU docs, TPU7x (Ironwood)", "https://docs.cloud.google.com/tpu/docs/tpu7x"),
        ),
        read=READ,
    ),
    # ---------------------------------------------------------------------------------- PyTorch/XLA
    Entry(
        id="xla-tf-before-torch-xla",
        title="`LLVM ERROR: inconsistency in registered CommandLine options`: TensorFlow imported before torch_xla",
        framework="PyTorch/XLA",
        message="LLVM ERROR: inconsistency in registered CommandLine options",
        variants=(": CommandLine Error: Option 'nvptx-traverse-address-aliasing-limit' registered more than once!",),
        cause="TensorFlow and torch_xla each bundle their own copy of LLVM. Loaded in that order, the "
        "second copy registers a command-line option the first already registered, and LLVM aborts "
        "the whole process (exit status 134, SIGABRT). In a notebook the kernel just dies. The "
        "other order works.",
        fix="Import torch_xla before TensorFlow in any process that needs both (`tpututor.frameworks."
        "load` refuses the wrong order), or, better, keep them in separate processes. A library "
        "that imports TensorFlow for you counts as importing it.",
        lesson="where_am_i",
        taught="What runtime is this?",
        versions=("tensorflow-cpu 2.21.0", "torch 2.9.0", "torch-xla 2.9.0"),
        repro="cpu",
        runner="process",
        keywords=(
            "llvm",
            "commandline",
            "kernel died",
            "abort",
            "crash",
            "import order",
            "tensorflow",
            "torch_xla",
            "134",
        ),
        example="""\
import tensorflow as tf
import torch_xla  # aborts the process: LLVM ERROR
""",
        fixed="""\
import torch_xla  # first
import tensorflow as tf
""",
    ),
    Entry(
        id="xla-deprecated-device",
        title="`Use torch_xla.device instead` (and `Use torch_xla.sync instead`)",
        framework="PyTorch/XLA",
        message="DeprecationWarning: Use torch_xla.device instead",
        variants=("DeprecationWarning: Use torch_xla.sync instead",),
        cause="Tutorials from before torch_xla 2.8 (and PyTorch/XLA's own quickstart) write "
        "`xm.xla_device()` and `xm.mark_step()`. Both still work as deprecated aliases.",
        fix="`device = torch_xla.device()` and `torch_xla.sync()` at the end of each step (or "
        "`torch_xla.compile(step)`, which syncs around the step for you).",
        lesson="pytorch_xla",
        taught="The names in older tutorials",
        versions=("torch-xla 2.9.0",),
        repro="cpu",
        runner="torch_xla",
        keywords=("xla_device", "mark_step", "deprecated", "torch_xla.device", "torch_xla.sync"),
        example="""\
import torch_xla.core.xla_model as xm

device = xm.xla_device()  # the names in older tutorials
xm.mark_step()
""",
        fixed="""\
import torch_xla

device = torch_xla.device()
torch_xla.sync()
""",
    ),
    Entry(
        id="xla-cpu-fallback",
        title="Silent CPU fallbacks: `aten::` counters in the metrics",
        framework="PyTorch/XLA",
        message="Counter: aten::…",
        variants=(
            "pt-xla-profiler: Op(s) not lowered: aten::…,  Please open a GitHub issue with the above op "
            "lowering requests.",
        ),
        cause="An operator with no XLA lowering (here `torch.histc`) runs on the CPU: the graph is cut, "
        "inputs are copied to the host and the result back. Nothing is printed; the step is just "
        "slow. Each such operator gets an `aten::` counter. `aten::_local_scalar_dense` (`.item()`) "
        "and `aten::nonzero` are expected; any other means a missing lowering.",
        fix="Find them: `torch_xla.debug.metrics.executed_fallback_ops()` after one step, or run with "
        "`PT_XLA_DEBUG=1`. Then express the same result with operators XLA has (below: a histogram "
        "from comparisons and a sum), or move that part out of the step.",
        lesson="pytorch_xla",
        taught="CPU fallbacks: operators with no XLA lowering",
        versions=("torch-xla 2.9.0",),
        repro="cpu",
        runner="process",
        keywords=("fallback", "aten", "not lowered", "lowering", "slow", "metrics", "cpu fallback"),
        example="""\
import os
os.environ["PT_XLA_DEBUG"] = "1"  # report problems as they happen (else: read the metrics)
import torch
import torch_xla
import torch_xla.debug.metrics as met

device = torch_xla.device()
values = torch.randn(4096, device=device)
counts = torch.histc(values, bins=8, min=-3, max=3)  # no XLA lowering: computed on the CPU
torch_xla.sync()
print(met.metrics_report())
""",
        fixed="""\
import os
os.environ["PT_XLA_DEBUG"] = "1"
import torch
import torch_xla
import torch_xla.debug.metrics as met

device = torch_xla.device()
values = torch.randn(4096, device=device)
bins = ((values + 3) * 8 / 6).floor().clamp(0, 7).long()  # the bin of each value
inside = (values >= -3) & (values <= 3)
counts = ((bins[:, None] == torch.arange(8, device=device)) & inside[:, None]).sum(dim=0)
torch_xla.sync()
print(met.metrics_report())
assert not [name for name in met.counter_names() if name.startswith("aten::")]
""",
    ),
    Entry(
        id="xla-recompiles",
        title="Endless recompiles: `CompileTime too frequent`",
        framework="PyTorch/XLA",
        message="pt-xla-profiler: CompileTime too frequent: … counts during … steps",
        cause="PyTorch/XLA compiles one graph per distinct set of shapes. A batch whose sequence length "
        "changes every step (or a Python value baked into the graph) is a new graph, and a new "
        "compile, every step: the loop runs at compile speed. `PT_XLA_DEBUG=1` reports it; the "
        "`CompileTime` metric's sample count grows with the steps.",
        fix="Keep shapes fixed: pad each batch up to one of a few bucket lengths (and pass an attention "
        "mask), use `drop_last=True` in the DataLoader, pass changing Python numbers as tensors. "
        "Check with `torch_xla.debug.metrics.metric_data('CompileTime')[0]`: it should stop "
        "growing after the first steps.",
        lesson="pytorch_xla",
        taught="Dynamic shapes recompile; buckets fix it",
        versions=("torch-xla 2.9.0",),
        repro="cpu",
        runner="process",
        keywords=(
            "recompile",
            "recompiling",
            "recompilation",
            "compile",
            "dynamic shapes",
            "slow",
            "every step",
            "compiletime",
        ),
        example="""\
import os
os.environ["PT_XLA_DEBUG"] = "1"  # ask PyTorch/XLA to report what it sees
import torch
import torch_xla

device = torch_xla.device()
embed = torch.nn.Embedding(1000, 32).to(device)
for n in range(8, 24):  # a new sequence length every step
    out = embed(torch.randint(0, 1000, (4, n)).to(device)).mean()
    torch_xla.sync()
""",
        fixed="""\
import os
os.environ["PT_XLA_DEBUG"] = "1"
import torch
import torch_xla

device = torch_xla.device()
embed = torch.nn.Embedding(1000, 32).to(device)
for n in range(8, 24):
    batch = torch.nn.functional.pad(torch.randint(0, 1000, (4, n)), (0, 32 - n))  # one bucket: 32
    out = embed(batch.to(device)).mean()
    torch_xla.sync()
""",
    ),
    Entry(
        id="xla-default-cpu",
        title="`Defaulting to PJRT_DEVICE=CPU`: PyTorch/XLA found no TPU",
        framework="PyTorch/XLA",
        message="Defaulting to PJRT_DEVICE=CPU",
        cause="`PJRT_DEVICE` is not set and torch_xla found no libtpu with TPU chips, so it runs on the "
        "CPU. Expected on a laptop; on a TPU VM it means libtpu is missing (`pip install torch_xla` "
        "without `[tpu]`). PyTorch/XLA never picks a GPU by itself.",
        fix="Say what you want before importing torch_xla: `os.environ['PJRT_DEVICE'] = 'TPU'` (or "
        "`'CPU'`). On a TPU VM install the runtime: `pip install torch==2.9.0 "
        "'torch_xla[tpu]==2.9.0'`.",
        lesson="pytorch_xla",
        taught="Setup",
        versions=("torch-xla 2.9.0",),
        repro="cpu",
        runner="process",
        keywords=("pjrt_device", "cpu", "no tpu", "default", "torch_xla"),
        example="""\
import os
os.environ.pop("PJRT_DEVICE", None)  # nothing said
import torch_xla

print(torch_xla.device())
""",
        fixed="""\
import os
os.environ["PJRT_DEVICE"] = "CPU"  # or "TPU" on a TPU VM
import torch_xla

print(torch_xla.device())
""",
    ),
    Entry(
        id="xla-tensor-on-cpu",
        title="`Expected XLA tensor`: a CPU tensor given to a model on the XLA device",
        framework="PyTorch/XLA",
        message="RuntimeError: Expected XLA tensor. Got: torch.FloatTensor",
        cause="The model's weights are on the XLA device but the batch is still on the CPU (the PyTorch/XLA "
        'form of CUDA\'s "Expected all tensors to be on the same device").',
        fix="Move the batch too: `model(batch.to(device))`, or wrap the DataLoader in "
        "`torch_xla.distributed.parallel_loader.MpDeviceLoader(loader, device)`, which moves (and "
        "preloads) each batch.",
        lesson="pytorch_xla",
        taught="",
        versions=("torch-xla 2.9.0",),
        repro="cpu",
        runner="torch_xla",
        keywords=("same device", "cpu tensor", "to(device)", "xla tensor", "device mismatch"),
        example="""\
import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(4, 2).to(device)
model(torch.randn(3, 4))  # the batch is still on the CPU
""",
        fixed="""\
import torch
import torch_xla

device = torch_xla.device()
model = torch.nn.Linear(4, 2).to(device)
out = model(torch.randn(3, 4).to(device))
assert out.device.type == "xla"
""",
    ),
    Entry(
        id="xla-undefined-symbol",
        title="`undefined symbol` on `import torch_xla`: torch and torch_xla do not match",
        framework="PyTorch/XLA",
        message="ImportError: …/_XLAC.cpython-…-x86_64-linux-gnu.so: undefined symbol: …",
        cause="Each torch_xla release is built against one torch release (torch_xla 2.9 against torch "
        "2.9), and its wheel does not pin torch. Upgrading torch (`pip install -U torch`, or a "
        "package that pulls a newer torch) leaves a `_XLAC` library that calls functions the new "
        "torch no longer has. Measured on this course's build machine: torch 2.13 with torch-xla "
        "2.9.0 fails with `undefined symbol: _ZN5torch8autograd10deleteNodeEPNS0_4NodeE`.",
        fix="Install the pair together, same minor version: `pip install torch==2.9.0 "
        "'torch_xla[tpu]==2.9.0'` (torch-xla 2.9.0 is the last release), and pin torch so other "
        "installs do not move it. `python -m tpututor doctor` warns when the two disagree.",
        lesson="pytorch_xla",
        taught="Setup",
        versions=("torch-xla 2.9.0 with torch 2.13.0",),
        repro="install",
        keywords=("undefined symbol", "_xlac", "import torch_xla", "importerror", "torch version"),
        note="Reported for every torch_xla release whose torch was upgraded or downgraded underneath it.",
        sources=(
            ("pytorch/xla#2259, Can't import torch_xla in colab", "https://github.com/pytorch/xla/issues/2259"),
            (
                "marin-community/marin#731, Torch XLA and Torch Version Mismatch",
                "https://github.com/marin-community/marin/issues/731",
            ),
        ),
        read=READ,
    ),
)


def get(entry_id: str) -> Entry:
    """The entry with this id; an unknown id is a KeyError listing the known ones."""
    for entry in ENTRIES:
        if entry.id == entry_id:
            return entry
    raise KeyError(f"no error atlas entry {entry_id!r}; the entries are {', '.join(e.id for e in ENTRIES)}")


# ------------------------------------------------------------------------------------ languages


@cache
def _catalogue(lang: str) -> dict:
    """The translation of the atlas into ``lang`` (not English): ``tpututor/data/errors_<lang>.toml``."""
    return tomllib.loads(
        resources.files("tpututor").joinpath("data", f"errors_{lang}.toml").read_text(encoding="utf-8")
    )


@cache
def localized(entry: Entry, lang: str = "en") -> Entry:
    """The entry with its prose (title, cause, fix, taught, note, the labels of ``also``, versions said in
    words) in ``lang``; the quoted messages, code and sources stay as they are. English is the entry itself."""
    if validate.language(lang) == "en":
        return entry
    words = _catalogue(lang)["entries"].get(entry.id, {})
    labels = words.get("also", [])
    also = tuple((labels[n] if n < len(labels) else where, text) for n, (where, text) in enumerate(entry.also))
    versions = tuple(words.get("versions", entry.versions))
    return replace(
        entry,
        also=also,
        versions=versions,
        **{field: words.get(field, getattr(entry, field)) for field in ("title", "cause", "fix", "taught", "note")},
    )


# The words around the entries, in English; a translation has the same keys in its catalogue's [text].
_TEXT = {
    "one_match": "1 matching entry in the error atlas:",
    "n_matches": "{n} matching entries in the error atlas, best first:",
    "exact": "the message matches",
    "fuzzy": "a fuzzy match, {score}",
    "message": "Message:",
    "cause": "Cause:",
    "fix": "Fix:",
    "course": "Course:",
    "proof": "Proof:",
    "more": "More:",
    "source": "; source: {url}",
    "near": " The closest topics in the atlas, which may be unrelated: {topics}.",
    "no_match": "No entry in the error atlas matches this text: the atlas does not say what causes it.{near} Read "
    "the atlas: {url} ({page} in a clone); or search the framework's issue tracker for the message's "
    "first line, without the numbers and paths that are yours.",
    "lesson": "lesson {number} ({title})",
    "nearest_lesson": "the {title} lesson",
    "section": '{lesson}, section "{taught}"',
    "not_taught": "not taught in a lesson yet; nearest: {lesson}",
    "page_comment": "<!-- Generated from tpututor/errors.py by `python -m tpututor_course errors_page`: edit the "
    "entries there. -->",
    "page_title": "# Error atlas",
    "page_intro": "The TPU and XLA errors learners paste into a search box, each with what causes it, how to fix it "
    "and where the course teaches it. Every message is quoted as the versions under *Seen with* "
    "print it; `{gap}` marks a part that changes from run to run (a number, a path, a name). {cpu} "
    "of the {total} entries happen on a CPU too: each comes with the code that produces it and the "
    "code that fixes it, and `tests/test_errors.py` runs both, so a framework upgrade that rewords "
    "a message fails CI and the entry gets updated. {faked} more are produced by the framework's "
    "own code with its hardware check faked. The rest need a TPU (or a mismatched install) and "
    "cite their source.",
    "page_seen": '**Seen an error?** Paste it: `python -m tpututor doctor --explain "<the error text>"` (or '
    "`--explain -` to read it from standard input) finds the matching entries and prints the cause "
    "and the fix, on any machine with tpututor installed, Colab included.",
    "page_table": "| Entry | The message starts | Proof |",
    "silent": "Nothing is printed: this is the symptom.",
    "cause_label": "**Cause.**",
    "fix_label": "**Fix.**",
    "reproduce": "**Reproduce it** ({repro}; {check} `tests/test_errors.py`):",
    "asserted": "asserted by",
    "text_asserted": "its text asserted by",
    "fixed": "**Fixed:**",
    "in_course": "**In the course:** {where}. **Seen with:** {versions}. **Id:** `{id}`.",
    "hardware_note": "> **On a {hardware} (not checked here):** {note} {cited}",
    "cited": "Source: {ref}, read {read}.",
    "cited_also": " Also: {ref}, read {read}.",
}
_SHORT = {
    "cpu": "reproduced",
    "faked": "reproduced, faked input",
    "tpu": "needs a TPU; sourced",
    "gpu": "needs a GPU; sourced",
    "install": "needs another install; sourced",
}


def _words(lang: str) -> tuple[dict, dict, dict]:
    """(the words around the entries, REPRO, the page's short REPRO) in ``lang``."""
    if validate.language(lang) == "en":
        return _TEXT, REPRO, _SHORT
    catalogue = _catalogue(lang)
    return {**_TEXT, **catalogue["text"]}, {**REPRO, **catalogue["repro"]}, {**_SHORT, **catalogue["short"]}


# ------------------------------------------------------------------------------------ matching


class BadText(ValueError):
    """What was given to :func:`explain` is not error text (empty, binary, control characters)."""


@dataclass(frozen=True)
class Match:
    entry: Entry
    score: float  # 1.0: the quoted message is in the text; below 1: how much of it (or of the text) agrees
    exact: bool
    confident: bool = True  # False: only a nearby topic, the atlas does not hold this error (no cause claimed)
    lang: str = "en"  # the language of to_dict's prose (a key of LANGS)

    def to_dict(self) -> dict:
        """The match as JSON: in another language than English, with the quoted (English) ``message`` too."""
        entry = localized(self.entry, self.lang)
        out = {"id": entry.id, "title": entry.title}
        if self.lang != "en":
            out["message"] = entry.message
        out.update(
            score=round(self.score, 3),
            exact=self.exact,
            confident=self.confident,
            url=f"{ATLAS_URLS[self.lang]}#{entry.id}",
        )
        if self.confident:
            out.update(cause=entry.cause, fix=entry.fix, taught=where_taught(self.entry, self.lang))
        return out


def pieces(message: str) -> list[str]:
    """The fixed parts of a quoted message, between its GAPs."""
    return [part.strip() for part in message.split(GAP) if part.strip()]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quoted_in(message: str, text: str, *, loose: bool = False) -> bool:
    """Whether ``text`` contains ``message``: every fixed part, in order (runs of whitespace count as one
    space). ``loose`` also ignores case, for text a learner pasted."""
    haystack = _squash(text)
    if loose:
        haystack = haystack.lower()
    at = 0
    for part in pieces(message):
        needle = _squash(part).lower() if loose else _squash(part)
        found = haystack.find(needle, at)
        if found < 0:
            return False
        at = found + len(needle)
    return True


_WINDOW = 20_000  # characters from the end of a pasted text that fuzzy matching reads (exact matching reads all)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
into is it its me my of on or so than that the then there these this to too use used using was we were what
when where which while who why will with without you your error errors get got getting says said see seen
please try tried happens happened keep keeps""".split()
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _word_tokens(word: str) -> set[str]:
    """A word and its parts (snake_case, CamelCase, a::b), lower case, stemmed, stop words dropped."""
    out = set()
    for part in {word} | set(word.split("_")) | set(word.split("::")) | set(_CAMEL.findall(word)):
        part = part.lower().strip("_:")
        if len(part) >= 2 and part not in _STOP:
            out.add(_stem(part))
    return out


def _tokens(text: str) -> set[str]:
    return set().union(*(_word_tokens(word) for word in _WORD.findall(text)))


@dataclass(frozen=True)
class _Index:
    messages: dict[str, list[set[str]]]  # entry id -> token set of each quoted text
    bags: dict[str, set[str]]  # entry id -> every token that points to it
    idf: dict[str, float]
    vocabulary: tuple[str, ...]


@lru_cache(maxsize=1)
def _index() -> _Index:
    messages = {e.id: [_tokens(m) for m in e.texts] for e in ENTRIES}
    bags = {e.id: set().union(*messages[e.id], _tokens(e.title), *(_tokens(k) for k in e.keywords)) for e in ENTRIES}
    df: dict[str, int] = {}
    for bag in bags.values():
        for token in bag:
            df[token] = df.get(token, 0) + 1
    idf = {t: math.log(1 + len(ENTRIES) / n) for t, n in df.items()}
    return _Index(messages, bags, idf, tuple(sorted(df)))


def _check(text: object) -> str:
    if not isinstance(text, str):
        raise BadText(f"expected the error text as a string, got {type(text).__name__}")
    text = _ANSI.sub("", text)
    if not text.strip():
        raise BadText(
            'nothing to explain: give the error text, e.g. doctor --explain "ValueError: ..." '
            "(or --explain - to read it from standard input)"
        )
    odd = sum(
        1 for ch in text if (ord(ch) < 32 and ch not in "\n\r\t") or 0xD800 <= ord(ch) <= 0xDFFF or ch in "\ufffd\x7f"
    )
    if "\x00" in text or odd > max(2, len(text) // 50):
        raise BadText(
            "this does not look like error text (binary data or control characters): copy the "
            "message itself, as the framework printed it"
        )
    if sum(ch.isalpha() for ch in text) < 3:
        raise BadText("this has no words to match: copy the message itself, as the framework printed it")
    return text


def explain(text: str, *, limit: int = 3, lang: str = "en") -> list[Match]:
    """The atlas entries that match a pasted error text, best first (an empty list when none does).

    An entry matches exactly when its quoted message is in the text; otherwise by how many of its
    message's words the text has, or how many of the text's words point to it (typos forgiven), so a
    paraphrase or a half-remembered message works too. Raises :class:`BadText` for empty or binary input.
    Matching reads English (the frameworks' language); ``lang`` (one of :data:`LANGS`, else ValueError)
    is the language of the matches' prose (``Match.to_dict``, :func:`format_matches`).
    """
    validate.language(lang)
    text = _check(text)
    index = _index()
    words = []  # per word of the text, the atlas tokens it stands for (a typo is read as its closest token)
    guesses = 200  # typo guesses are slow (difflib): enough for a pasted message, not for a whole log
    for word in dict.fromkeys(_WORD.findall(text[-_WINDOW:])):  # a traceback ends with its error
        known_tokens = set()
        for token in _word_tokens(word):
            if token in index.idf:
                known_tokens.add(token)
            elif len(token) >= 5 and guesses > 0:
                guesses -= 1
                known_tokens.update(difflib.get_close_matches(token, index.vocabulary, n=1, cutoff=0.85))
        if known_tokens:
            words.append(known_tokens)
    query = set().union(*words)
    known = sum(index.idf[t] for t in query)
    scored = []
    for entry in ENTRIES:
        if any(quoted_in(m, text, loose=True) for m in entry.texts):
            scored.append(Match(entry, 1.0, True, lang=lang))
            continue
        recall = max(
            sum(index.idf.get(t, 0) for t in tokens & query) / (sum(index.idf.get(t, 0) for t in tokens) or 1)
            for tokens in index.messages[entry.id]
        )
        bag = index.bags[entry.id]
        hit = sum(index.idf[t] for t in query & bag)
        agreeing = sum(1 for tokens in words if tokens & bag)
        coverage = hit / known if known and agreeing >= 2 else 0.0  # one word is not evidence
        evidence = min(1.0, hit / 7.0)  # two or three telling words, not two common ones
        score = min(0.99, max(recall, coverage * evidence))  # 1.0 is kept for the quoted message itself
        if score >= 0.45:
            scored.append(Match(entry, score, False, _confident(score, words, text), lang))
    scored.sort(key=lambda m: (not m.exact, not m.confident, -m.score, m.entry.id))
    if scored:
        best = scored[0].score
        scored = [m for m in scored if m.exact or m.score >= best - 0.2]
        if scored[0].exact or scored[0].confident:  # a nearby topic is not listed beside a real answer
            scored = [m for m in scored if m.exact or m.confident]
    return scored[:limit]


# A fuzzy match names a cause only when it is strong, when most of the text's words are words the atlas
# uses, and when the text names no exception class the atlas does not hold. Calibrated on the entries'
# own messages, paraphrases of them, and real messages the atlas does not hold
# (tests/data/explain_held_out.txt): on those, fuzzy scores reached 0.77, with up to 73% of the words
# unknown to the atlas, or a class of its own (TracerArrayConversionError scored 0.76 against
# TracerIntegerConversionError); paraphrases of entries scored 0.82 and above with at most 25% unknown.
CONFIDENT_SCORE = 0.75
MOST_UNKNOWN = 0.3
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")


@lru_cache(maxsize=1)
def _atlas_exceptions() -> tuple[str, ...]:
    return tuple(sorted({name for e in ENTRIES for m in e.texts for name in _EXCEPTION.findall(m)}))


def _confident(score: float, words: list[set[str]], text: str) -> bool:
    """Whether a fuzzy match may claim the entry's cause (see CONFIDENT_SCORE)."""
    if score < CONFIDENT_SCORE:
        return False
    every = [t for t in (_word_tokens(w) for w in dict.fromkeys(_WORD.findall(text[-_WINDOW:]))) if t]
    if every and 1 - len(words) / len(every) > MOST_UNKNOWN:
        return False
    held = _atlas_exceptions()
    for name in set(_EXCEPTION.findall(text[-_WINDOW:])) - {"Error", "Exception"}:
        if not difflib.get_close_matches(name, held, n=1, cutoff=0.85):
            return False  # an exception the atlas does not hold (a typo of one it holds is forgiven)
    return True


# ------------------------------------------------------------------------------------ output


def _lesson_names() -> dict[str, tuple[str, str]]:
    """topic -> (number, title), from the lesson table shipped with the package."""
    from .lessons import table

    return {name.split("_", 1)[1]: (name.split("_", 1)[0], meta["title"]) for name, meta in table().items()}


def where_taught(entry: Entry, lang: str = "en") -> str:
    """'lesson 03 (XLA compilation and fusion), section "Recompilation"', or the nearest lesson; in ``lang``."""
    text = _words(lang)[0]
    number, title = _lesson_names().get(entry.lesson, ("", entry.lesson.replace("_", " ")))
    if lang != "en":
        title = _catalogue(lang)["lessons"].get(entry.lesson, title)
    lesson = text["lesson"].format(number=number, title=title) if number else text["nearest_lesson"].format(title=title)
    taught = localized(entry, lang).taught
    return text["section"].format(lesson=lesson, taught=taught) if taught else text["not_taught"].format(lesson=lesson)


def _width(text: str) -> int:
    """Columns a terminal gives ``text``: two for a wide (East Asian) character."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _fill(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """textwrap.fill by terminal columns, for text with wide characters (Korean): breaks at spaces only."""
    lines, line = [], initial_indent
    for word in text.split():
        if line.strip() and _width(line) + 1 + _width(word) > width:
            lines.append(line)
            line = subsequent_indent + word
        else:
            line += (" " if line.strip() else "") + word
    return "\n".join([*lines, line])


def format_matches(matches: list[Match], width: int = 100, *, lang: str | None = None) -> str:
    """Text for a terminal: each match's cause, fix and where the course teaches it; or where to look.
    ``lang`` (one of :data:`LANGS`) defaults to the matches' own (English when there are none); in another
    language than English each match also shows the quoted message, which stays in English."""
    lang = validate.language(lang) if lang is not None else (matches[0].lang if matches else "en")
    text, repro, _ = _words(lang)
    url = ATLAS_URLS[lang]
    if not any(m.exact or m.confident for m in matches):
        near = ""
        if matches:
            near = text["near"].format(
                topics="; ".join(f"{localized(m.entry, lang).title} ({url}#{m.entry.id})" for m in matches)
            )
        page = "docs/" + url.rsplit("/", 1)[1]
        if lang != "en":
            return _fill(text["no_match"].format(near=near, url=url, page=page), width)
        return textwrap.fill(
            text["no_match"].format(near=near, url=url, page=page),
            width,
            break_on_hyphens=False,
            break_long_words=False,
        )

    def para(label: str, body: str) -> str:
        label = text[label]
        indent = "   " + label + " " * max(0, 8 - _width(label))
        if lang != "en":
            return _fill(body, width, indent, " " * 11)
        return textwrap.fill(
            body,
            width,
            initial_indent=indent,
            subsequent_indent=" " * 11,
            break_on_hyphens=False,
            break_long_words=False,
        )

    out = [text["one_match"] if len(matches) == 1 else text["n_matches"].format(n=len(matches))]
    for n, m in enumerate(matches, 1):
        e = localized(m.entry, lang)
        how = text["exact"] if m.exact else text["fuzzy"].format(score=f"{m.score:.0%}")
        head = f"{n}. {e.framework}: {e.title} [{e.id}; {how}]"
        out += [
            "",
            textwrap.fill(head, width, subsequent_indent="   ") if lang == "en" else _fill(head, width, "", "   "),
        ]
        if lang != "en":
            out.append(para("message", e.message))
        out += [
            para("cause", e.cause),
            para("fix", e.fix),
            para("course", where_taught(m.entry, lang)),
            para("proof", repro[e.repro] + (text["source"].format(url=e.sources[0][1]) if e.sources else "")),
            para("more", f"{url}#{e.id}"),
        ]
    return "\n".join(out)


_GROUPS = ("JAX", "TPU runtime (libtpu)", "TensorFlow", "PyTorch/XLA")


def _note(entry: Entry, lang: str = "en") -> str:
    """The sourced part of an entry, in the course's note style when it is about a TPU or a GPU."""
    if not entry.sources:
        return ""
    text = _words(lang)[0]
    refs = [f"[{title}]({url})" for title, url in entry.sources]
    cited = text["cited"].format(ref=refs[0], read=entry.read) + "".join(
        text["cited_also"].format(ref=r, read=entry.read) for r in refs[1:]
    )
    if entry.hardware:
        return text["hardware_note"].format(hardware=entry.hardware, note=entry.note, cited=cited)
    return f"{entry.note} {cited}"


def render_page(lang: str = "en") -> str:
    """The atlas as a Markdown page, generated from :data:`ENTRIES`: ``docs/errors.md``, or with ``lang="ko"``
    ``docs/errors.ko.md`` (the prose in Korean, the quoted messages and the code as in English)."""
    text, repro, short = _words(lang)
    cpu = [e for e in ENTRIES if e.repro == "cpu"]
    faked = [e for e in ENTRIES if e.repro == "faked"]
    lines = [
        text["page_comment"],
        "",
        text["page_title"],
        "",
        text["page_intro"].format(gap=GAP, cpu=len(cpu), total=len(ENTRIES), faked=len(faked)),
        "",
        text["page_seen"],
        "",
        text["page_table"],
        "|---|---|---|",
    ]
    for e in sorted((localized(e, lang) for e in ENTRIES), key=lambda e: _GROUPS.index(e.framework)):
        start = e.message if len(e.message) <= 60 else e.message[:57].rsplit(" ", 1)[0] + " " + GAP
        start = start.replace("`", "'").replace("|", "\\|")
        lines.append(f"| [{e.title.replace('|', '/')}](#{e.id}) | `{start}` | {short[e.repro]} |")
    for group in _GROUPS:
        lines += ["", f"## {group}"]
        for original in [e for e in ENTRIES if e.framework == group]:
            e = localized(original, lang)
            lines += ["", f'<a id="{e.id}"></a>', "", f"### {e.title}", "", "```text", e.message, *e.variants, "```"]
            if e.silent:
                lines += ["", text["silent"]]
            for where, quoted in e.also:
                lines += ["", f"{where}:", "", "```text", quoted, "```"]
            lines += ["", f"{text['cause_label']} {e.cause}", "", f"{text['fix_label']} {e.fix}"]
            if e.example:
                check = text["asserted"] if e.repro == "cpu" else text["text_asserted"]
                lines += [
                    "",
                    text["reproduce"].format(repro=repro[e.repro], check=check),
                    "",
                    "```python",
                    e.example.rstrip(),
                    "```",
                ]
            if e.fixed:
                lines += ["", text["fixed"], "", "```python", e.fixed.rstrip(), "```"]
            lines += [
                "",
                text["in_course"].format(where=where_taught(original, lang), versions=", ".join(e.versions), id=e.id),
            ]
            note = _note(e, lang)
            if note:
                lines += ["", note]
    return "\n".join(lines) + "\n"
