"""tpututor.metrics: torch_xla's totals as records, on a fake and on the real torch_xla."""

from __future__ import annotations

import json

import pytest

from conftest import run_python
from tpututor import metrics


class FakeMet:
    """The parts of torch_xla.debug.metrics that tpututor.metrics reads."""

    def __init__(self):
        self.metrics = {
            "CompileTime": (2, 3_000_000_000.0, ()),
            "ExecuteTime": (5, 50_000_000.0, ()),
            "TransferToDeviceTime": (3, 1_000_000.0, ()),
        }
        self.counters = {"CachedCompile": 4, "MarkStep": 5, "aten::_local_scalar_dense": 2, "xla::add": 9}

    def metric_data(self, name):
        return self.metrics.get(name)

    def counter_value(self, name):
        return self.counters.get(name)

    def counter_names(self):
        return list(self.counters)


def test_snapshot_turns_nanoseconds_into_seconds_and_reads_counters():
    m = metrics.snapshot(FakeMet())
    assert (m.compiles, m.compile_seconds, m.executions, m.execute_seconds) == (2, 3.0, 5, 0.05)
    assert (m.transfers_to_device, m.transfers_from_device, m.cached_compiles, m.syncs) == (3, 0, 4, 5)
    assert m.fallbacks == {"aten::_local_scalar_dense": 2}


def test_expected_fallbacks_are_not_unexpected():
    fake = FakeMet()
    fake.counters.update({"aten::nonzero": 1, "aten::histc": 3})
    assert metrics.snapshot(fake).unexpected_fallbacks == {"aten::histc": 3}


def test_measure_gives_the_difference_over_the_block():
    fake = FakeMet()
    with metrics.measure(fake) as m:
        fake.metrics["CompileTime"] = (3, 4_000_000_000.0, ())
        fake.counters["aten::histc"] = 1
    assert m.compiles == 1 and m.compile_seconds == pytest.approx(1.0)
    assert m.executions == 0 and m.fallbacks == {"aten::histc": 1}


def test_missing_or_unknown_metrics_read_as_zero():
    class Empty(FakeMet):
        def metric_data(self, name):
            raise RuntimeError("no such metric")

        def counter_value(self, name):
            return None

    m = metrics.snapshot(Empty())
    assert m.compiles == 0 and m.compile_seconds == 0.0 and m.syncs == 0


def test_host_reads_count_scalar_reads_only():
    fake = FakeMet()
    fake.counters.update({"aten::histc": 3})
    m = metrics.snapshot(fake)
    assert m.host_reads == 2 and metrics.Metrics().host_reads == 0


def test_table_has_a_row_per_label():
    text = metrics.table({"a": metrics.Metrics(compiles=1), "b": metrics.Metrics(fallbacks={"aten::histc": 2})})
    lines = text.splitlines()
    assert lines[0].startswith("| run | compiles") and lines[2].startswith("| a | 1")
    assert "aten::histc x2" in lines[3]
    assert metrics.table({}) == ""


@pytest.mark.slow
def test_real_torch_xla_counts_compiles_executions_and_fallbacks():
    out = run_python(
        """
        import json, torch, torch_xla
        from tpututor import metrics
        d = torch_xla.device()
        x = torch.ones(16).to(d)
        with metrics.measure() as lazy:
            y = x * 2 + 1
        with metrics.measure() as first:
            torch_xla.sync()
        with metrics.measure() as again:
            y = x * 2 + 1
            torch_xla.sync()
        with metrics.measure() as fallback:
            h = torch.histc(x, bins=4)
            torch_xla.sync()
        z = torch.ones(512, 512).to(d) @ torch.ones(512, 512).to(d)
        torch_xla.sync()  # queued before the block: it must not count inside it
        with metrics.measure() as queued:
            pass
        print(json.dumps({k: v.row() | {"unexpected": v.unexpected_fallbacks}
                          for k, v in dict(lazy=lazy, first=first, again=again, fallback=fallback,
                                           queued=queued).items()}))
    """,
        env={"PJRT_DEVICE": "CPU"},
    )
    rows = json.loads(out.strip().splitlines()[-1])
    assert rows["lazy"]["compiles"] == 0 and rows["lazy"]["executions"] == 0
    assert rows["first"]["compiles"] == 1 and rows["first"]["executions"] == 1
    assert rows["again"]["compiles"] == 0 and rows["again"]["executions"] == 1
    assert rows["fallback"]["unexpected"] == {"aten::histc": 1}
    assert rows["queued"]["executions"] == 0 and rows["queued"]["compiles"] == 0, "measure waits before reading"
