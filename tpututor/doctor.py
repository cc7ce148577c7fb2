"""``tpututor doctor``: what this runtime is, what each framework sees, what to fix.

:func:`report` returns a JSON-ready document (schema below); :func:`format_report`
turns it into text for people. The document's top-level keys are stable:

``schema``, ``tpututor``, ``python``, ``platform``, ``accelerator`` {``kind``,
``generation``, ``count``, ...}, ``cpu``, ``frameworks`` {name: {``version``,
``devices``, ...}}, ``packages``, ``env``, ``warnings`` [str] (faults, each
naming its fix), ``notes`` [str] (advice), ``probed``.
"""

from __future__ import annotations

from . import __version__
from .hardware import estimate_cpu
from .runtime import Host, Runtime, detect, probe_frameworks, tensorflow_can_use_tpu

__all__ = ["report", "warnings_for", "notes_for", "format_report", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1


def _minor(version: str | None) -> str | None:
    if not version:
        return None
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def warnings_for(rt: Runtime, probes: dict[str, dict] | None = None) -> list[str]:
    """Things a learner should fix or know, each with the fix in the sentence."""
    out: list[str] = list(rt.accelerator.problems)
    acc, fw, pk = rt.accelerator, rt.frameworks, rt.packages
    libtpu = pk.get("libtpu") or pk.get("libtpu-nightly")
    if rt.platform.hint:
        out.append(rt.platform.hint)
    if acc.kind == "tpu":
        if not libtpu:
            out.append(
                "TPU chips are present but libtpu is not installed, so JAX and PyTorch/XLA will "
                "run on the CPU: pip install 'jax[tpu]' (or 'torch_xla[tpu]')."
            )
        if fw["tensorflow"].version and not tensorflow_can_use_tpu(fw["tensorflow"].distribution):
            out.append(
                f"TensorFlow here is '{fw['tensorflow'].distribution}', which cannot use the TPU; "
                "on a TPU VM install 'tensorflow-tpu' (TPU7x does not support TensorFlow)."
            )
    tx, torch = fw["torch_xla"].version, fw["torch"].version
    if tx and torch and _minor(tx) != _minor(torch):  # each torch_xla release is built for one torch
        out.append(
            f"torch_xla {tx} needs torch {_minor(tx)}.x but torch {torch} is installed, so "
            f"import torch_xla will fail: pip install torch=={_minor(tx)}.0"
        )
    for name, result in (probes or {}).items():
        if result.get("error"):
            out.append(f"{name} is installed but failed to start: {result['error']}")
    jax_probe = (probes or {}).get("jax") or {}
    seen = jax_probe.get("platform")
    if seen == "cpu" and acc.kind == "tpu":
        out.append("TPU chips are present but JAX sees only the CPU: pip install 'jax[tpu]'.")
    if seen == "cpu" and acc.kind == "gpu":
        out.append("An NVIDIA GPU is present but JAX sees only the CPU: pip install 'jax[cuda12]'.")
    xla_probe = (probes or {}).get("torch_xla") or {}
    if xla_probe.get("platform") == "cpu" and acc.kind == "tpu" and not rt.env.get("PJRT_DEVICE"):
        out.append("TPU chips are present but PyTorch/XLA chose the CPU: set PJRT_DEVICE=TPU.")
    return out


def notes_for(rt: Runtime) -> list[str]:
    """Advice that is not a fault: true of a healthy course environment too."""
    out = []
    if rt.frameworks["torch_xla"].version and rt.frameworks["tensorflow"].version:
        out.append(
            "TensorFlow and torch_xla are both installed: in one process import torch_xla before "
            "tensorflow (the other order aborts the process with an LLVM error)."
        )
    if rt.accelerator.kind == "cpu":
        out.append(
            "No accelerator: lessons run on the CPU. For more devices set "
            "XLA_FLAGS=--xla_force_host_platform_device_count=8 before JAX starts."
        )
    return out


def report(host: Host | None = None, *, probe: bool = True, timeout: float = 120.0) -> dict:
    """The doctor document. With ``probe`` each installed framework is asked for its devices.

    Probes run one at a time when an accelerator is present (a TPU belongs to
    one process at a time) and side by side on a CPU-only machine.
    """
    rt = detect(host)
    probes: dict[str, dict] = {}
    if probe:
        names = [n for n, f in rt.frameworks.items() if f.version]
        probes = probe_frameworks(names, parallel=rt.accelerator.kind == "cpu", timeout=timeout)
        for name, result in probes.items():
            f = rt.frameworks[name]
            f.devices = result.get("devices")
            f.platform = result.get("platform")
            f.device_kind = result.get("device_kind")
            f.error = result.get("error")
            f.seconds = result.get("seconds")
    doc = rt.to_dict()
    cpu = rt.cpu
    est = estimate_cpu(cpu.model, cpu.cores, cpu.simd, cpu.ghz)
    doc["cpu"]["peak_flops_estimate"] = est.peak_flops
    acc = doc["accelerator"]
    acc.pop("problems", None)
    return {
        "schema": SCHEMA_VERSION,
        "tpututor": __version__,
        "python": doc["python"],
        "summary": rt.summary(),
        "platform": doc["platform"],
        "accelerator": acc,
        "cpu": doc["cpu"],
        "frameworks": doc["frameworks"],
        "packages": doc["packages"],
        "env": doc["env"],
        "probed": probe,
        "warnings": warnings_for(rt, probes),
        "notes": notes_for(rt),
    }


def format_report(doc: dict) -> str:
    """The doctor document as text for a terminal or a notebook cell."""
    p, a, c = doc["platform"], doc["accelerator"], doc["cpu"]
    lines = [f"tpututor {doc['tpututor']} doctor · Python {doc['python']}", ""]
    lines.append(f"platform     {p['name']}" + (f" (legacy: {p['legacy']})" if p.get("legacy") else ""))
    lines.append(f"  evidence   {'; '.join(p['evidence']) or '-'}")
    if a["kind"] == "cpu":
        lines.append(f"accelerator  none: CPU only ({c['cores']} cores)")
    else:
        mem = f", {a['memory_gb']} GiB each" if a.get("memory_gb") else ""
        atype = f" [{a['accelerator_type']}]" if a.get("accelerator_type") else ""
        lines.append(f"accelerator  {a['kind']}: {a['name']} x{a['count']}{atype}{mem}")
    lines.append(f"  evidence   {'; '.join(a['evidence'][:4]) or '-'}")
    ghz = f" @ {c['ghz']} GHz" if c.get("ghz") else ""
    lines.append(f"cpu          {c['model']}, {c['cores']} cores{ghz}, {c['arch']}, SIMD: {' '.join(c['simd']) or '-'}")
    lines.append("")
    lines.append("framework    version     sees")
    for name, f in doc["frameworks"].items():
        if not f["version"]:
            sees = "not installed"
        elif f.get("error"):
            sees = f"ERROR: {f['error']}"
        elif f.get("devices") is not None:
            shown = ", ".join(f["devices"][:8]) + (" ..." if len(f["devices"]) > 8 else "")
            sees = f"{shown}  ({f.get('device_kind')})"
        else:
            sees = "(not probed)"
        lines.append(f"{name:<12} {f['version'] or '-':<11} {sees}")
    extras = {k: v for k, v in doc["packages"].items() if v and k != "tpututor"}
    if extras:
        lines.append("packages     " + ", ".join(f"{k} {v}" for k, v in extras.items()))
    if doc["env"]:
        lines.append("env          " + ", ".join(f"{k}={v}" for k, v in doc["env"].items()))
    lines.append("")
    if doc["warnings"]:
        lines.append("warnings")
        lines += [f"  ! {w}" for w in doc["warnings"]]
    else:
        lines.append("no warnings")
    lines += [f"  i {n}" for n in doc.get("notes", [])]
    return "\n".join(lines)
