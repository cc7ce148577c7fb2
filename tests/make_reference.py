"""Write tests/reference/NN_topic.ipynb: each lesson with the outputs of its stable cells.

Run by `make reference` after a lesson's stable output changes on purpose; the
notebook test then runs nbval (lax) against these files, so an output that
changes by accident fails CI.
"""

from __future__ import annotations

import sys
import tempfile

import nbformat

from notebook_tools import REFERENCE, has_stable_cells, reference_from
from tpututor import runner


def main() -> int:
    REFERENCE.mkdir(exist_ok=True)
    status = 0
    with tempfile.TemporaryDirectory() as out:
        for path in runner.discover():
            if not has_stable_cells(nbformat.read(path, as_version=4)):
                continue
            result = runner.execute(path, out, profile="ci")
            if result.status != "ok":
                print(f"{path.name}: failed, reference not written: {result.error}")
                status = 1
                continue
            nbformat.write(reference_from(nbformat.read(result.output, as_version=4)), REFERENCE / path.name)
            print(f"wrote {REFERENCE.name}/{path.name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
