# SPDX-License-Identifier: MIT
# posenc.sinusoidal against the float64 reference: every layout, dtype, option, add mode.
import numpy as np
import pytest

import posenc
from _reference import UNIT, check, sinusoidal as ref_sin


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize("d_model", [16, 7])
def test_table_layouts(dtype, layout, d_model):
    name, dt = dtype
    out = posenc.sinusoidal(rows=9, d_model=d_model, layout=layout, offset=3, dtype=name)
    assert out.shape == (9, d_model) and out.dtype == np.dtype(dt)
    exact = ref_sin(np.arange(3, 12), d_model, layout)
    check(out, exact, np.ones_like(exact), name)


def test_options_and_positions(rng):
    positions = rng.integers(0, 2**31 - 1, size=(2, 5)).astype(np.int32)
    out = posenc.sinusoidal(positions=positions, d_model=32, base=1000.0, freq_shift=1.0,
                            output_scale=2.0)
    assert out.shape == (2, 5, 32)
    exact = 2.0 * ref_sin(positions, 32, base=1000.0, freq_shift=1.0)
    check(out, exact, np.full_like(exact, 2.0), "float32")
    timesteps = np.array([0.5, 999.0, 10.25], np.float32)
    out = posenc.sinusoidal(positions=timesteps, d_model=8, position_scale=4.0,
                            layout="cos_sin")
    exact = ref_sin(timesteps.astype(np.float64) * 4.0, 8, "cos_sin")
    check(out, exact, np.ones_like(exact), "float32")


def test_add_mode_and_in_place(rng):
    x = rng.standard_normal((2, 6, 16)).astype(np.float32)
    out = posenc.sinusoidal(x=x, input_scale=4.0, output_scale=0.5)
    assert out.shape == x.shape and out is not x
    pe = 0.5 * ref_sin(np.arange(6), 16)[None]
    exact = x.astype(np.float64) * 4.0 + pe
    # posenc.h: table bound times |output_scale| plus the f32 rounding of the sum
    extra = UNIT * (np.abs(x * 4.0) + np.abs(pe))
    check(out, exact, np.full_like(exact, 0.5), "float32", extra=extra)
    y = x.copy()
    r = posenc.sinusoidal(y, x=y, input_scale=4.0, output_scale=0.5)
    assert r is y
    np.testing.assert_array_equal(y, out)
    # Without x a scale of x would be ignored: refused, not dropped.
    with pytest.raises(posenc.InvalidArgument, match="input_scale"):
        posenc.sinusoidal(np.zeros((6, 16), np.float32), input_scale=4.0)


def test_strided_out():
    big = np.zeros((10, 40), np.float32)
    view = big[::2, 4:20]
    posenc.sinusoidal(view)
    exact = ref_sin(np.arange(5), 16)
    check(view, exact, np.ones_like(exact), "float32")
    assert not big[1::2].any() and not big[:, :4].any() and not big[:, 20:].any()

