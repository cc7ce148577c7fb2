"""tpututor.pprof on the device memory profile the installed JAX writes."""

from __future__ import annotations

import gzip

import jax
import jax.numpy as jnp
import pytest

from tpututor import pprof


def test_memory_profile_lists_live_buffers_with_their_call_site(tmp_path):
    kept = jnp.ones((256, 1024), jnp.float32) + 1  # 1 MiB, allocated on this line
    path = tmp_path / "memory.prof"
    jax.profiler.save_device_memory_profile(str(path))
    profile = pprof.read_memory_profile(path)
    assert profile.sample_types == [("allocations", "count"), ("space", "bytes")]
    ours = [a for a in profile.allocations if a.kind == "buffer" and a.bytes >= kept.nbytes]
    assert ours and any("test_memory_profile_lists_live_buffers" in a.site() for a in ours)
    assert profile.total("buffer") >= kept.nbytes
    assert pprof.read_memory_profile(path.read_bytes()).allocations == profile.allocations
    assert "| kind | device | count | MiB |" in pprof.memory_table(profile)


def test_a_file_that_is_not_a_memory_profile_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.prof"
    bad.write_bytes(gzip.compress(b"\x0a\xff"))  # a field that claims more bytes than there are
    with pytest.raises(ValueError, match="not a pprof memory profile.*save_device_memory_profile"):
        pprof.read_memory_profile(bad)
