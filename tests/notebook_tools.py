"""Helpers the notebook tests and `make reference` share."""

from __future__ import annotations

from pathlib import Path

import nbformat

STABLE_TAG = "nbval-check-output"  # nbval (lax mode) compares these cells' outputs
REFERENCE = Path(__file__).resolve().parent / "reference"


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def cell_sources(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What makes two notebooks the same lesson: cell type, source and tags, in order."""
    return [(c.cell_type, c.source.strip(), tuple(tags(c))) for c in nb.cells]


def has_stable_cells(nb) -> bool:
    return any(STABLE_TAG in tags(c) for c in nb.cells)


def reference_from(executed) -> nbformat.NotebookNode:
    """Keep the outputs of the stable cells only; everything else is cleared."""
    nb = nbformat.from_dict(executed)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code" and STABLE_TAG not in tags(cell):
            cell.outputs = []
            cell.execution_count = None  # nbval only compares cells that have a count
    return nb
