# SPDX-License-Identifier: MIT
# posenc.rope against the float64 reference: styles, dtypes, layouts, partial rotary dims,
# positions (int32, float32, offset, up to 2^31-1), out= and strided views.
import numpy as np
import pytest

import posenc
from _reference import check, inv_freq, rope as ref_rope, sincos


def _data(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _expect(x, positions, name, **kw):
    exact, scale = ref_rope(np.asarray(x, np.float64), positions, **kw)
    return exact, scale


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_styles_dtypes_in_place(rng, dtype, style, rotary_dim):
    name, dt = dtype
    q = _data(rng, (2, 7, 3, 16), dt)
    k = _data(rng, (2, 7, 1, 16), dt)
    q0, k0 = q.copy(), k.copy()
    positions = np.broadcast_to(np.arange(7, dtype=np.float64), (2, 7))
    rq, rk = posenc.rope(q, k, style=style, rotary_dim=rotary_dim)
    assert rq is q and rk is k
    for got, orig in ((q, q0), (k, k0)):
        exact, scale = _expect(orig, positions, name, style=style, rotary_dim=rotary_dim)
        check(got, exact, scale, name)
    if rotary_dim:
        np.testing.assert_array_equal(q[..., rotary_dim:], q0[..., rotary_dim:])


@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_bhtd_layout_is_a_strided_view(rng, dtype, style):
    name, dt = dtype
    q = _data(rng, (2, 4, 6, 8), dt)  # [batch, heads, tokens, dim], HF's layout
    q0 = q.copy()
    posenc.rope(q, layout="bhtd", style=style, theta=500.0)
    positions = np.broadcast_to(np.arange(6, dtype=np.float64), (2, 6))
    exact, scale = _expect(q0.transpose(0, 2, 1, 3), positions, name, style=style, theta=500.0)
    check(q.transpose(0, 2, 1, 3), exact, scale, name)


def test_bhtd_equals_bthd_on_the_transposed_array(rng):
    q = _data(rng, (1, 4, 5, 8), np.float32)
    a = q.copy()
    b = np.ascontiguousarray(q.transpose(0, 2, 1, 3))
    posenc.rope(a, layout="bhtd")
    posenc.rope(b)
    np.testing.assert_array_equal(a.transpose(0, 2, 1, 3), b)


def test_inverse_round_trip(rng, dtype):
    name, dt = dtype
    q = _data(rng, (1, 9, 2, 32), dt)
    q0 = q.copy()
    posenc.rope(q, offset=1000)
    assert not np.array_equal(q, q0)
    posenc.rope(q, offset=1000, inverse=True)
    # two rotations: twice the error bound (plus, for 16-bit types, the rounding of each)
    tol = 4 * 8 * 2.0**-24 if name == "float32" else (2**-8 if name == "float16" else 2**-5)
    np.testing.assert_allclose(q.astype(np.float64), q0.astype(np.float64), rtol=0, atol=tol * 4)


def test_inverse_matches_reference(rng):
    q = _data(rng, (1, 5, 2, 16), np.float32)
    q0 = q.copy()
    posenc.rope(q, inverse=True, offset=7)
    positions = np.arange(7, 12, dtype=np.float64)[None]
    exact, scale = _expect(q0, positions, "float32", inverse=True)
    check(q, exact, scale, "float32")


@pytest.mark.parametrize("kind", ["int32", "float32", "offset", "list"])
def test_positions(rng, kind):
    q = _data(rng, (2, 5, 2, 16), np.float32)
    q0 = q.copy()
    values = rng.integers(0, 100000, size=(2, 5))
    if kind == "int32":
        posenc.rope(q, positions=values.astype(np.int32))
    elif kind == "float32":
        values = values + 0.5
        posenc.rope(q, positions=values.astype(np.float32))
    elif kind == "list":
        posenc.rope(q, positions=values.tolist())
    else:
        values = np.broadcast_to(np.arange(5) + 12345, (2, 5))
        posenc.rope(q, offset=12345)
    exact, scale = _expect(q0, values.astype(np.float64), "float32")
    check(q, exact, scale, "float32")


def test_positions_up_to_int32_max(rng):
    positions = np.array([2**31 - 1, 2**31 - 2, 2**30, 123456789, 0, -(2**31)], np.int32)
    q = _data(rng, (len(positions), 4, 64), np.float32)  # [tokens, heads, dim]
    q0 = q.copy()
    posenc.rope(q, positions=positions, theta=1e6)
    exact, scale = _expect(q0[None], positions[None].astype(np.float64), "float32", theta=1e6)
    check(q[None], exact, scale, "float32")


def test_out_equals_in_place(rng, dtype):
    name, dt = dtype
    q = _data(rng, (1, 6, 4, 16), dt)
    k = _data(rng, (1, 6, 2, 16), dt)
    q0, k0 = q.copy(), k.copy()
    q_out, k_out = np.zeros_like(q), np.zeros_like(k)
    rq, rk = posenc.rope(q, k, out=q_out, k_out=k_out, style="gptj")
    assert rq is q_out and rk is k_out
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(k, k0)
    posenc.rope(q, k, style="gptj")
    np.testing.assert_array_equal(q, q_out)
    np.testing.assert_array_equal(k, k_out)


def test_fused_qkv_slice(rng):
    # [tokens, 3 * heads * dim] as models store it: q, k and v are strided views, not copies.
    tokens, heads, dim = 8, 4, 16
    qkv = _data(rng, (1, tokens, 3, heads, dim), np.float32)
    before = qkv.copy()
    q, k = qkv[:, :, 0], qkv[:, :, 1]
    assert not q.flags.c_contiguous
    posenc.rope(q, k, offset=3)
    positions = np.arange(3, 3 + tokens, dtype=np.float64)[None]
    for i in range(2):
        exact, scale = _expect(before[:, :, i], positions, "float32")
        check(qkv[:, :, i], exact, scale, "float32")
    np.testing.assert_array_equal(qkv[:, :, 2], before[:, :, 2])  # v untouched


def test_shapes_decode_and_3d(rng):
    q = _data(rng, (4, 1, 8, 16), np.float32)  # one token per sequence
    q0 = q.copy()
    positions = np.array([[5], [17], [0], [99]], np.int32)
    posenc.rope(q, positions=positions)
    exact, scale = _expect(q0, positions.astype(np.float64), "float32")
    check(q, exact, scale, "float32")
    t = _data(rng, (5, 3, 8), np.float32)  # [tokens, heads, dim]
    t0 = t.copy()
    posenc.rope(t)
    exact, scale = _expect(t0[None], np.arange(5.0)[None], "float32")
    check(t[None], exact, scale, "float32")


@pytest.mark.parametrize("scaling", [{"type": "linear", "factor": 4.0},
                                     {"type": "ntk", "factor": 2.0}])
def test_scaling_posenc_form(rng, scaling):
    q = _data(rng, (1, 6, 2, 32), np.float32)
    q0 = q.copy()
    posenc.rope(q, scaling=scaling, offset=4000)
    exact, scale = _expect(q0, np.arange(4000.0, 4006.0)[None], "float32", scaling=scaling)
    check(q, exact, scale, "float32")


@pytest.mark.parametrize("n_ctx_orig", [0, 512])
def test_scaling_yarn_ggml(rng, n_ctx_orig):
    # ggml_rope_ext's arguments as they are: freq_scale above 1, a fractional ext_factor.
    scaling = {"type": "yarn_ggml", "freq_scale": 1.4245, "ext_factor": 0.7465,
               "original_max_positions": n_ctx_orig, "beta_fast": 32.0, "beta_slow": 1.0}
    q = _data(rng, (1, 6, 2, 32), np.float32)
    q0 = q.copy()
    posenc.rope(q, scaling=scaling, attention_factor=1.25, offset=4000)
    factor = 1.25 * (1.0 + 0.1 * np.log(1.0 / 1.4245))
    exact, scale = _expect(q0, np.arange(4000.0, 4006.0)[None], "float32", scaling=scaling,
                           attention_factor=factor)
    check(q, exact, scale, "float32")


def test_attention_factor(rng):
    q = _data(rng, (1, 3, 2, 16), np.float32)
    q0 = q.copy()
    posenc.rope(q, attention_factor=1.25)
    exact, scale = _expect(q0, np.arange(3.0)[None], "float32", attention_factor=1.25)
    check(q, exact, scale, "float32")


def test_context_cpu_and_devices(rng):
    listed = posenc.devices()
    assert any(d["backend"] == "cpu" for d in listed)
    with posenc.Context("cpu", num_threads=2) as ctx:
        assert ctx.device["backend"] == "cpu"
        q = _data(rng, (1, 4, 2, 8), np.float32)
        a = q.copy()
        posenc.rope(a, context=ctx)
        b = q.copy()
        posenc.rope(b)
        exact, scale = _expect(q, np.arange(4.0)[None], "float32")
        check(a, exact, scale, "float32")
    with pytest.raises(posenc.InvalidArgument, match="closed"):
        posenc.rope(q, context=ctx)


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    q = torch.randn(1, 4, 2, 16)
    q0 = q.clone().double().numpy()
    posenc.rope(q)
    exact, scale = _expect(q0, np.arange(4.0)[None], "float32")
    check(q.numpy(), exact, scale, "float32")


def test_threads_share_the_default_context(rng):
    import threading
    arrays = [_data(rng, (1, 64, 4, 32), np.float32) for _ in range(8)]
    before = [a.copy() for a in arrays]
    errors = []

    def work(a):
        try:
            for _ in range(20):
                posenc.rope(a, offset=5)
                posenc.rope(a, offset=5, inverse=True)
            posenc.rope(a, offset=5)
        except Exception as e:  # reported below: a thread's exception would be lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    positions = np.arange(5.0, 69.0)[None]
    for a, b in zip(arrays, before):
        exact, scale = _expect(b, positions, "float32")
        # 41 rotations accumulate rounding: bound each by the f32 promise
        check(a, exact, 41 * scale, "float32")


@pytest.mark.parametrize("kind", ["mrope", "mrope_interleaved"])
def test_mrope_with_equal_components_is_1d(rng, kind):
    # Text tokens of Qwen2-VL carry t = h = w: M-RoPE then reduces to plain RoPE.
    q = _data(rng, (1, 6, 2, 32), np.float32)
    a, b = q.copy(), q.copy()
    pos = np.arange(40, 46, dtype=np.int32)
    posenc.rope(a, positions=np.stack([pos] * 3, axis=-1), multimodal=kind,
                mrope_section=(4, 6, 6))
    posenc.rope(b, positions=pos)
    np.testing.assert_array_equal(a, b)


def test_mrope_components_differ(rng):
    q = _data(rng, (1, 3, 1, 16), np.float32)
    q0 = q.copy()
    pos = np.array([[1, 50, 900], [2, 60, 800], [3, 70, 700]], np.int32)  # [tokens, (t, h, w)]
    posenc.rope(q, positions=pos, multimodal="mrope", mrope_section=(2, 3, 3))
    # frequency j reads t for j < 2, h for 2 <= j < 5, w after (posenc.h)
    component = np.array([0, 0, 1, 1, 1, 2, 2, 2])
    out = q0.astype(np.float64).copy()
    freq = inv_freq(16)
    for t in range(3):
        s, c = sincos(pos[t, component].astype(np.float64), freq)
        a, b = q0[0, t, 0, :8].astype(np.float64), q0[0, t, 0, 8:].astype(np.float64)
        out[0, t, 0, :8] = a * c - b * s
        out[0, t, 0, 8:] = a * s + b * c
    _, scale = ref_rope(q0.astype(np.float64), np.zeros((1, 3)))
    check(q, out, scale, "float32")


def test_bhtd_three_dims(rng):
    q = _data(rng, (4, 6, 16), np.float32)  # [heads, tokens, dim]
    a = q.copy()
    posenc.rope(a, layout="bhtd", offset=2)
    b = np.ascontiguousarray(q.transpose(1, 0, 2))
    posenc.rope(b, offset=2)
    np.testing.assert_array_equal(a.transpose(1, 0, 2), b)


@pytest.mark.parametrize("style", ["neox", "gptj"])
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_rotary_offset(rng, dtype, style, rotary_dim):
    # the rotated dims start at rotary_offset: those before and after pass through
    name, dt = dtype
    q = _data(rng, (1, 5, 2, 24), dt)
    q0 = q.copy()
    posenc.rope(q, rotary_offset=8, rotary_dim=rotary_dim, style=style, offset=30,
                context=posenc.Context("cpu"))
    end = 8 + (rotary_dim or 16)
    exact, scale = _expect(q0[..., 8:end], np.arange(30.0, 35.0)[None], name, style=style)
    check(q[..., 8:end], exact, scale, name)
    np.testing.assert_array_equal(q[..., :8], q0[..., :8])
    np.testing.assert_array_equal(q[..., end:], q0[..., end:])
    q1 = q.copy()
    with pytest.raises(posenc.InputError, match="rotary_offset"):
        posenc.rope(q, rotary_offset=3)
    np.testing.assert_array_equal(q, q1)
