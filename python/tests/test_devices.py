# SPDX-License-Identifier: MIT
# Every listed device (software ones too: CI provides lavapipe and PoCL) runs RoPE and the
# sinusoidal table from Python within the promise, in every dtype, on strided views.
import numpy as np
import pytest

import posenc
from _reference import check, rope as ref_rope, sinusoidal as ref_sin

DEVICES = [d["selector"] for d in posenc.devices()]


def test_devices_describe_themselves():
    listed = posenc.devices()
    assert listed, "the native CPU device is always listed"
    for d in listed:
        for key in ("name", "backend", "index", "selector", "kind", "memory_bytes",
                    "unified_memory", "host_memory_import"):
            assert key in d
        assert d["selector"] == f"{d['backend']}:{d['index']}"
    assert sum(d["native_cpu"] for d in listed) == 1


@pytest.mark.parametrize("selector", DEVICES)
def test_every_device(selector, dtype, rng):
    name, dt = dtype
    with posenc.Context(selector, allow_software=True) as ctx:
        assert ctx.device["selector"] == selector
        qkv = rng.standard_normal((2, 5, 3, 4, 32)).astype(np.float32).astype(dt)
        before = qkv.copy()
        q, k = qkv[:, :, 0], qkv[:, :, 1]
        positions = np.array([[0, 1, 2, 3, 2**31 - 1], [7, 9, 11, 13, 15]], np.int32)
        posenc.rope(q, k, positions=positions, style="gptj", context=ctx)
        for i in range(2):
            exact, scale = ref_rope(before[:, :, i].astype(np.float64),
                                    positions.astype(np.float64), style="gptj")
            check(qkv[:, :, i], exact, scale, name)
        np.testing.assert_array_equal(qkv[:, :, 2], before[:, :, 2])
        table = posenc.sinusoidal(rows=6, d_model=10, offset=100, dtype=name, context=ctx)
        exact = ref_sin(np.arange(100, 106), 10)
        check(table, exact, np.ones_like(exact), name)
