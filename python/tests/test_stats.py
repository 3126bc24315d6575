# SPDX-License-Identifier: MIT
# Context.stats(): the counters of posenc_context_stats as a dict, on every listed device.
import numpy as np
import pytest

import posenc

DEVICES = [d["selector"] for d in posenc.devices()]
KEYS = {"rope_calls", "sinusoidal_calls", "staged_bytes", "uploaded_bytes", "downloaded_bytes",
        "kernels_built", "kernels_loaded", "freq_tables", "buffer_bytes", "staging_bytes",
        "table_bytes", "device_bytes"}


@pytest.mark.parametrize("selector", DEVICES)
def test_stats_count_calls_and_staging(selector, rng):
    with posenc.Context(selector, allow_software=True) as ctx:
        gpu = not ctx.device["native_cpu"]
        start = ctx.stats()
        assert set(start) == KEYS
        assert start["rope_calls"] == 0 and start["staged_bytes"] == 0
        # A host array rotated in place is copied to staging and back on GPU backends (a
        # tensor this small is never imported), and used in place on the CPU.
        q = rng.standard_normal((5, 2, 16)).astype(np.float32)
        for _ in range(3):
            posenc.rope(q, context=ctx)
        table = posenc.sinusoidal(rows=4, d_model=8, context=ctx)
        s = ctx.stats()
        assert s["rope_calls"] == 3 and s["sinusoidal_calls"] == 1
        assert s["staged_bytes"] == (3 * 2 * q.nbytes + table.nbytes if gpu else 0)
        assert s["freq_tables"] == 2
        assert s["device_bytes"] == s["buffer_bytes"] + s["staging_bytes"] + s["table_bytes"]
        assert s["kernels_built"] + s["kernels_loaded"] > 0 if gpu else \
            s["kernels_built"] + s["kernels_loaded"] == 0


def test_stats_of_a_closed_context():
    ctx = posenc.Context("cpu")
    ctx.close()
    with pytest.raises(posenc.InvalidArgument, match="closed"):
        ctx.stats()
