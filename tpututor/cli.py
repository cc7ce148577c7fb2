"""``python -m tpututor``: doctor, chips, bench, plan and launch::

    python -m tpututor doctor [--json] [--no-probe] [--timeout S] [--preflight [--lesson NN_topic]]
    python -m tpututor doctor --explain "<pasted error text>" [--json] [--lang en|ko]   (--explain - reads
                                                        stdin; exit 1 when no error atlas entry matches)
    python -m tpututor chips [--json]
    python -m tpututor bench matmul --sizes 512,1024,2048 --dtype float32 [--framework jax] [--calls K|auto] [--json]
    python -m tpututor plan --params 8e9 --tokens 1e12 --chip v5p --chips 256 [--mfu 0.4] [--region R]
        [--batch 512 --seq-len 4096] [--json]
    python -m tpututor plan ... --chip v5e --chips 8 --compile v5e-8 [--layers L --d-model D] [--vocab V]
                        [--seq-len S] [--batch B]   (the TPU compiler's memory per chip beside the formula's;
                        exit 1 when it does not fit, 2 where libtpu is missing)
    python -m tpututor launch --hosts 4 --devices-per-host 2 [--timeout S] -- COMMAND ...
                                  (COMMAND once per host on 127.0.0.1, as a TPU slice's --worker=all would)

Exit status: 0 success, 1 a plan --compile does not fit (or doctor finds a blocker), 2 bad usage.
Running lessons headless is course tooling: ``python -m tpututor_course run`` in a clone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict

from . import __version__


def _atlas_languages() -> tuple[str, ...]:
    from .errors import LANGS

    return LANGS


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tpututor", description="Helpers for the tpututor course.")
    p.add_argument("--version", action="version", version=f"tpututor {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("doctor", help="what this runtime is and what each framework sees")
    d.add_argument("--json", action="store_true", help="print a JSON document instead of text")
    d.add_argument(
        "--no-probe",
        dest="probe",
        action="store_false",
        help="skip asking each framework for its devices (fast; devices are null)",
    )
    d.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="seconds each framework probe may take (default 120)"
    )
    d.add_argument(
        "--preflight",
        action="store_true",
        help="workshop pre-flight: one line per check with a fix; exit 1 if something blocks",
    )
    d.add_argument(
        "--lesson",
        metavar="NN_topic",
        default=None,
        help="with --preflight: check what this lesson needs (default: $TPUTUTOR_LESSON, "
        "which a lesson's setup cell sets; else the whole course)",
    )
    d.add_argument(
        "--explain",
        metavar="TEXT",
        default=None,
        help="seen an error? paste it: the error atlas entries it matches, with cause and fix "
        "('-' reads the text from standard input)",
    )
    d.add_argument(
        "--lang",
        choices=_atlas_languages(),
        default=None,
        help="with --explain: the language of the answer (default en; the quoted message stays English)",
    )

    c = sub.add_parser("chips", help="the chip table (TPUs and GPUs) with sources")
    c.add_argument("--json", action="store_true", help="print JSON rows instead of a table")

    b = sub.add_parser("bench", help="time matmul (or add) at several sizes on this machine")
    b.add_argument("op", choices=["matmul", "add"], help="the operation to time")
    b.add_argument(
        "--sizes",
        type=_sizes,
        default=[512, 1024, 2048],
        metavar="N,N,...",
        help="square sizes, comma-separated (default 512,1024,2048)",
    )
    b.add_argument(
        "--dtype", type=_dtype, default="float32", help="float32, bfloat16, float16, int8 or float64 (default float32)"
    )
    b.add_argument("--framework", default="jax", choices=["jax", "numpy", "torch", "torch_xla", "tensorflow"])
    b.add_argument("--repeats", type=_positive_int, default=5, help="timed runs per size (default 5)")
    b.add_argument(
        "--calls",
        type=_calls,
        default=1,
        metavar="K|auto",
        help="calls per wait for the device: 1 times each call blocked (default); K or 'auto' "
        "times K back-to-back calls and one wait, divided by K (dispatch overhead amortised)",
    )
    b.add_argument("--json", action="store_true", help="print a JSON list of records instead of a table")

    sub.add_parser(
        "run", help="moved: lessons run headless from a clone, python -m tpututor_course run", add_help=False
    )

    pl = sub.add_parser("plan", help="memory per chip, time and cost of a training run, with its assumptions")
    pl.add_argument("--params", type=_plan_number("--params", "8e9"), required=True, help="model parameters, e.g. 8e9")
    pl.add_argument("--tokens", type=_plan_number("--tokens", "1e12"), required=True, help="training tokens, e.g. 1e12")
    pl.add_argument("--chip", required=True, help="chip-table name: v5e, v5p, v6e, 7x, H100, ... (tpututor chips)")
    pl.add_argument(
        "--chips",
        type=_positive_int,
        required=True,
        help="how many chips (or GPUs), not TensorCores: a v5p-8 slice is 4 chips",
    )
    pl.add_argument("--mfu", type=_plan_fraction, default=0.4, help="model FLOPs utilisation, 0-1 (default 0.4)")
    pl.add_argument("--region", default="us-central1", help="price-table region (default us-central1)")
    pl.add_argument(
        "--price",
        type=_plan_number("--price", "2.70"),
        default=None,
        metavar="USD",
        help="your on-demand price per chip-hour (default: the table's list price)",
    )
    pl.add_argument(
        "--param-bytes",
        type=_plan_bytes,
        default=4.0,
        help="bytes per weight (default 4, f32 master weights as lesson 08a (training) trains; 2 for bf16)",
    )
    pl.add_argument("--grad-bytes", type=_plan_bytes, default=4.0, help="bytes per gradient (default 4, f32)")
    pl.add_argument(
        "--optimizer-bytes",
        type=_plan_bytes,
        default=8.0,
        help="optimizer bytes per parameter (default 8, Adam's two f32 moments)",
    )
    pl.add_argument(
        "--batch",
        type=_positive_int,
        default=None,
        help="sequences per step, all chips together: the plan then says whether the step is "
        "communication-bound (--compile builds this batch; default there one per JAX device)",
    )
    pl.add_argument("--seq-len", type=_positive_int, default=1024, help="tokens per sequence (default 1024)")
    pl.add_argument("--json", action="store_true", help="print a JSON document instead of text")
    co = pl.add_argument_group(
        "--compile: check the plan with the TPU compiler (libtpu; no TPU needed)",
        "build tpututor.lm's Transformer at the planned size as abstract arrays (nothing allocated), compile "
        "its real train step with FSDP for the slice and print the compiler's memory per chip beside the "
        "formula's; exit 1 when it does not fit (naming the largest allocations), 2 where libtpu is missing",
    )
    co.add_argument(
        "--compile",
        metavar="SLICE",
        default=None,
        help="the plan's slice as Cloud TPU names it, e.g. v5e-8 for --chip v5e --chips 8",
    )
    co.add_argument(
        "--layers",
        type=_positive_int,
        default=None,
        help="Transformer layers (default: derived from --params, width about 128 x depth)",
    )
    co.add_argument("--d-model", type=_positive_int, default=None, help="model width (default: derived from --params)")
    co.add_argument("--d-ff", type=_positive_int, default=None, help="MLP width (default 4 x d_model)")
    co.add_argument("--heads", type=_positive_int, default=None, help="attention heads (default d_model / 128)")
    co.add_argument("--vocab", type=_positive_int, default=32_000, help="vocabulary size (default 32000)")
    co.add_argument(
        "--remat",
        choices=["none", "full", "dots", "dots_all"],
        default="none",
        help="rematerialisation policy of each layer, as lesson 08a (training) names them (default none)",
    )

    sv = sub.add_parser("plan-serving", help="chips, batch, latency bounds and $ per million tokens of serving a model")
    sv.add_argument("--model", required=True, help="llama-3.1-8b, llama-3-70b or qwen2.5-0.5b")
    sv.add_argument("--chip", required=True, help="a TPU in the chip table: v5e, v5p, v6e, 7x")
    sv.add_argument("--prompt", type=_number, required=True, help="prompt tokens per request, e.g. 7680")
    sv.add_argument("--output", type=_number, required=True, help="output tokens per request, e.g. 512")
    sv.add_argument("--latency-ms", type=_number, default=None, help="per-token latency to keep, e.g. 50")
    sv.add_argument("--weight-bytes", type=_number, default=2.0, help="bytes per weight: 2 (bf16), 1 (int8)")
    sv.add_argument("--kv-bytes", type=_number, default=2.0, help="bytes per cached value: 2 (bf16), 1 (int8)")
    sv.add_argument("--region", default="us-central1", help="region of the price table (default us-central1)")
    sv.add_argument("--reserve", type=_number, default=0.1, help="share of HBM kept for the runtime (default 0.1)")
    # launch: several JAX hosts on this machine (tpututor/hosts.py)
    la = sub.add_parser("launch", help="run a command as N JAX hosts on 127.0.0.1, the way a TPU slice runs it")
    la.add_argument("--hosts", type=_positive_int, default=4, help="processes to start (default 4)")
    la.add_argument(
        "--devices-per-host", type=_positive_int, default=2, help="simulated CPU devices in each (default 2)"
    )
    la.add_argument("--port", type=_positive_int, default=None, help="the coordinator's port (default: a free one)")
    la.add_argument("--timeout", type=_number, default=600.0, help="seconds before every host is stopped (default 600)")
    la.add_argument(
        "--heartbeat-timeout",
        type=_positive_int,
        default=10,
        help="seconds without a heartbeat before JAX declares a host dead (default 10; JAX's own: 100)",
    )
    la.add_argument(
        "--init-timeout",
        type=_positive_int,
        default=60,
        help="seconds jax.distributed.initialize() waits for every host (default 60; JAX's own: 300)",
    )
    la.add_argument(
        "--grace",
        type=_number,
        default=None,
        help="after a host fails, seconds the others get to end on their own (default heartbeat + 15)",
    )
    la.add_argument("--quiet", action="store_true", help="print only the summary, not every host's lines")
    la.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command each host runs")
    return p


def _number(text: str) -> float:
    """``text`` as a float, or NaN when it is not a number (so every range check below refuses it)."""
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _plan_number(flag: str, example: str):
    def parse(text: str) -> float:
        value = _number(text)
        if not value > 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{flag} must be a positive number like {example}, got {text!r}")
        return value

    return parse


def _plan_fraction(text: str) -> float:
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"--mfu is a fraction in (0, 1], e.g. 0.4 for 40%, got {text!r}")
    return value


def _plan_bytes(text: str) -> float:
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"bytes per parameter must be a number >= 0 (2 for bf16, 4 for f32), got {text!r}"
        )
    return value


def _calls(text: str) -> int | str:
    if text == "auto":
        return "auto"
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--calls is a whole number >= 1 or 'auto', got {text!r}")
    return value


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be whole numbers separated by commas, got {text!r}") from None
    if not sizes or any(n <= 0 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive, got {text!r}")
    return sizes


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def _dtype(text: str) -> str:
    from .bench import check_dtype

    try:
        return check_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bench(args: argparse.Namespace) -> int:
    from . import bench, frameworks

    status = frameworks.status(args.framework)
    if not status.usable:
        print(
            f"python -m tpututor bench: error: {status.skipped('timing it')} "
            f"(pip install 'tpututor[...]' or the framework itself)",
            file=sys.stderr,
        )
        return 2
    records = []
    try:
        for n in args.sizes:
            records.append(bench.run(args.op, n, args.dtype, args.framework, repeats=args.repeats, calls=args.calls))
    except bench.UnsupportedError as exc:
        print(f"python -m tpututor bench: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_dict() for r in records], indent=2))
    else:
        print(bench.table(records))
        print(f"\npeak: {records[0].peak_basis}; compile time is not in the median")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import format_report, report

    if args.explain is not None:
        return _explain(args)
    if args.lang is not None:
        print("python -m tpututor doctor: error: --lang goes with --explain", file=sys.stderr)
        return 2
    if args.lesson and not args.preflight:
        print("python -m tpututor doctor: error: --lesson goes with --preflight", file=sys.stderr)
        return 2
    if args.preflight:
        from .preflight import format_checks, run

        checks = run(lesson=args.lesson, timeout=args.timeout)
        if args.json:
            print(json.dumps([asdict(c) for c in checks], indent=2))
        else:
            print(format_checks(checks))
        return 1 if any(c.status == "fail" for c in checks) else 0

    doc = report(probe=args.probe, timeout=args.timeout)
    print(json.dumps(doc, indent=2, sort_keys=False) if args.json else format_report(doc))
    return 0


def _explain(args: argparse.Namespace) -> int:
    from . import errors

    if args.preflight or args.lesson:
        print(
            "python -m tpututor doctor: error: --explain goes alone (with --json and --lang at most)", file=sys.stderr
        )
        return 2
    text = args.explain
    if text == "-":  # bytes, so that binary input gets the clear message below, not a UnicodeDecodeError
        text = sys.stdin.buffer.read().decode("utf-8", errors="surrogateescape")
    try:
        matches = errors.explain(text, lang=args.lang or "en")
    except errors.BadText as exc:
        print(f"python -m tpututor doctor: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([m.to_dict() for m in matches], indent=2, ensure_ascii=args.lang in (None, "en")))
    else:
        print(errors.format_matches(matches, lang=args.lang or "en"))
    return 0 if any(m.exact or m.confident for m in matches) else 1


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _chips(args: argparse.Namespace) -> int:
    from .hardware import chips

    rows = chips()
    if args.json:
        print(json.dumps([asdict(c) for c in rows], indent=2))
        return 0
    print(f"{'chip':<10} {'bf16 TFLOP/s':>12} {'HBM GiB':>7} {'HBM GB/s':>9} {'ICI/NVLink GB/s*':>16}  source")
    for c in rows:
        print(
            f"{c.name:<10} {_num(c.bf16_tflops):>12} {_num(c.hbm_gib):>7} {_num(c.hbm_gbps):>9} "
            f"{_num(c.interconnect_gbps):>16}  {c.source} ({c.source_date})"
        )
    print("* per chip, both directions together, as Google and NVIDIA quote it")
    return 0


def _run(rest: Sequence[str]) -> int:
    """``run`` moved to the course tooling; say where, with the same arguments."""
    print(
        "python -m tpututor run: error: running lessons headless is course tooling, which lives in a clone "
        "(it is not in the installed package): in a clone of the course, run "
        + " ".join(["python -m tpututor_course run", *rest]),
        file=sys.stderr,
    )
    return 2


def _plan(args: argparse.Namespace) -> int:
    from .plan import plan

    try:
        p = plan(
            args.params,
            args.tokens,
            args.chip,
            args.chips,
            args.mfu,
            region=args.region,
            price_per_chip_hour=args.price,
            param_bytes=args.param_bytes,
            grad_bytes=args.grad_bytes,
            optimizer_bytes=args.optimizer_bytes,
            batch=args.batch,
            seq_len=args.seq_len,
        )
    except ValueError as exc:
        print(f"python -m tpututor plan: error: {exc}", file=sys.stderr)
        return 2
    shape = {"layers": args.layers, "d_model": args.d_model, "d_ff": args.d_ff, "heads": args.heads}
    if args.compile is None:
        given = [f"--{k.replace('_', '-')}" for k, v in shape.items() if v is not None]
        given += [
            flag
            for flag, v, default in (("--vocab", args.vocab, 32_000), ("--remat", args.remat, "none"))
            if v != default
        ]
        if given:
            print(
                f"python -m tpututor plan: error: {', '.join(given)} describe the model --compile builds: "
                "add --compile SLICE (e.g. --compile v5e-8)",
                file=sys.stderr,
            )
            return 2
        print(json.dumps(p.to_dict(), indent=2) if args.json else p.text())
        return 0
    from . import plan as planner  # imports JAX and libtpu (tpututor.aot) only inside compile_check

    try:
        check = planner.compile_check(
            p, args.compile, vocab=args.vocab, seq_len=args.seq_len, remat=args.remat, batch=args.batch, **shape
        )
    except planner.CompilerUnavailable as exc:
        print(
            f"python -m tpututor plan: error: --compile {args.compile} needs the TPU compiler: {exc}", file=sys.stderr
        )
        return 2
    except ValueError as exc:
        print(f"python -m tpututor plan: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**p.to_dict(), "compile": check.to_dict()}, indent=2))
    else:
        print(p.text() + "\n\n" + check.text())
    return 0 if check.fits else 1


def _plan_serving(args: argparse.Namespace) -> int:
    from .serving.planner import Traffic, plan_serving

    def whole(x: float) -> int | float:
        return (
            int(x) if math.isfinite(x) and x == int(x) else x
        )  # NaN, inf and fractions stay, for the planner to refuse

    try:
        p = plan_serving(
            args.model,
            args.chip,
            Traffic(whole(args.prompt), whole(args.output), args.latency_ms),
            weight_bytes=args.weight_bytes,
            kv_bytes=args.kv_bytes,
            region=args.region,
            reserve=args.reserve,
        )
    except (ValueError, KeyError) as exc:
        print(f"python -m tpututor plan-serving: error: {exc}", file=sys.stderr)
        return 2
    print(p.text())
    return 0 if p.chosen is not None else 1


def _launch(args: argparse.Namespace) -> int:
    import signal

    from .hosts import Job

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        job = Job(
            command,
            args.hosts,
            args.devices_per_host,
            port=args.port,
            timeout=args.timeout,
            heartbeat_timeout=args.heartbeat_timeout,
            init_timeout=args.init_timeout,
            grace=args.grace,
            echo=not args.quiet,
        )
    except ValueError as exc:
        print(f"python -m tpututor launch: error: {exc}", file=sys.stderr)
        return 2
    job.start()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: job.signal(signal.SIGTERM))  # preemption: pass it on
    try:
        result = job.wait()
    except KeyboardInterrupt:  # Ctrl-C: every host is stopped (job.wait's cleanup), then say so
        print("python -m tpututor launch: interrupted; every host stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"launch: {result.summary()}", file=sys.stderr)
    return result.returncode


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:
        return _run(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(
            "python -m tpututor: error: choose a command: doctor, chips, bench, plan, plan-serving or launch",
            file=sys.stderr,
        )
        return 2
    return {
        "doctor": _doctor,
        "chips": _chips,
        "bench": _bench,
        "plan": _plan,
        "plan-serving": _plan_serving,
        "launch": _launch,
    }[args.command](args)
