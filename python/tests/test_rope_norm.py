# SPDX-License-Identifier: MIT
# posenc.rope and posenc.Rope with the QK RMSNorm fused before the rotation (q_norm_weight=,
# k_norm_weight=, norm_eps=, norm_weight_offset=), in the forms the models hold it: Qwen3's
# Qwen3RMSNorm over each head then HF's rotate_half RoPE, Gemma 3's x * (1 + w), OLMo 2's norm
# over the whole q or k projection before it is split into heads. f32, f16 and bf16 q, k and
# weights, GQA, in place and out of place, exact angles and caller cos/sin tables, the paged
# KV-cache write, against float64 transcriptions of HF's modules. Refusals name the field and
# write nothing.
#
# Tolerance (tests/test_rope_norm.c's, for the CPU device the tests run on): a normalized value
# x (w + offset) / sqrt(mean(x^2) + eps) is within N units of 2^-24 of itself, N = D / 2 + 6.5
# with D the rounded additions of the vector kernels' sum of squares (12.5 for head_dim 128;
# norm_units); the normalized pair (a, b) is rotated within the rotation's promise (8 units of
# the pair's norm; 2 units of |a c| + |b s| with tables): |out - exact| <= (N + 9) * 2^-24 *
# (|a| + |b|) * max(1, |c|, |s|) for f32; normalized dims past rotary_dim within N units of
# |exact|; plus one ulp of a 16-bit output (its rounding).
import numpy as np
import pytest

import posenc
from _reference import UNIT, inv_freq, sincos, ulp
from conftest import DTYPES

DTYPE_IDS = [name for name, _ in DTYPES]
TABLE_ROWS = 40
EPS = 1e-6


def _data(rng, shape, dt, scale=1.0):
    return (scale * rng.standard_normal(shape)).astype(np.float32).astype(dt)


def _f64(array):
    return np.asarray(array).astype(np.float64)


def rms_norm(x, weight, eps=EPS, offset=0.0):
    """HF's Qwen3RMSNorm / Olmo2RMSNorm (offset 0) and Gemma3RMSNorm (offset 1) over the last
    dim, in float64: x * rsqrt(mean(x^2) + eps) * (offset + weight)."""
    x = _f64(x)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (offset + _f64(weight))


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def hf_rope(x, c, s, rotary_dim):
    """apply_rotary_pos_emb on x [batch, tokens, heads, head_dim] (float64) with the half-width
    cos and sin of each token, [batch or 1, tokens, rotary_dim/2], duplicated as HF's emb is."""
    c4 = np.concatenate([c, c], axis=-1)[:, :, None]
    s4 = np.concatenate([s, s], axis=-1)[:, :, None]
    out = x.copy()
    out[..., :rotary_dim] = x[..., :rotary_dim] * c4 + rotate_half(x[..., :rotary_dim]) * s4
    return out


def norm_units(head_dim):
    """N of the tolerance: the largest over the CPU variants' 4, 8 and 16 lanes of
    D = ceil(head_dim / (4 L)) + 2 + log2(L), halved, plus 6.5."""
    d = max(-(-head_dim // (4 * lanes)) + 2 + depth for lanes, depth in ((4, 2), (8, 3), (16, 4)))
    return d / 2 + 6.5


def _check(out, exact, normed, c, s, rotary_dim, name):
    """out, exact, normed (the float64 norm before the rotation): [batch, tokens, heads,
    head_dim]; c, s: [batch or 1, tokens, rotary_dim/2]. NeoX pairs (j, j + rotary_dim/2)."""
    out = _f64(out)
    half = rotary_dim // 2
    a, b = np.abs(normed[..., :half]), np.abs(normed[..., half:rotary_dim])
    scale = np.maximum(1.0, np.maximum(np.abs(c), np.abs(s)))[:, :, None]
    units = norm_units(normed.shape[-1])
    pair = (units + 9) * UNIT * (a + b) * scale
    tolerance = np.concatenate([pair, pair, units * UNIT * np.abs(normed[..., rotary_dim:])],
                               axis=-1)
    if name != "float32":
        tolerance = tolerance + ulp(name, exact)
    error = np.abs(out - exact)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (
        f"error {error[worst]:.3g} > tolerance {tolerance[worst]:.3g} at {worst}: "
        f"out {out[worst]!r}, exact {exact[worst]!r}")


def _angles(rng, kind, batch, tokens, rotary_dim, theta=1e6):
    """(call keywords, c, s) for each token: exact angles of random positions, or a random
    caller table [rows, rotary_dim/2] (values that are not unit rotations) read by position."""
    positions = rng.integers(0, TABLE_ROWS, (batch, tokens)).astype(np.int32)
    if kind == "exact":
        s, c = sincos(positions[..., None], inv_freq(rotary_dim, theta))
        return dict(positions=positions, theta=theta), c, s
    cos = rng.uniform(-1.5, 1.5, (TABLE_ROWS, rotary_dim // 2)).astype(np.float32)
    sin = rng.uniform(-1.5, 1.5, (TABLE_ROWS, rotary_dim // 2)).astype(np.float32)
    return dict(positions=positions, cos=cos, sin=sin), _f64(cos)[positions], _f64(sin)[positions]


# ---- Qwen3: RMSNorm over each head ---------------------------------------------------------

@pytest.mark.parametrize("place", ["in_place", "out_of_place"])
@pytest.mark.parametrize("angles", ["exact", "tables"])
@pytest.mark.parametrize("weight_dtype", DTYPES, ids=DTYPE_IDS)
def test_qwen3_norm_per_head(rng, dtype, weight_dtype, angles, place):
    # Qwen3Attention: q = q_norm(q_proj(x).view(b, t, -1, head_dim)).transpose(1, 2), k alike
    # with its own (fewer, GQA) heads and weights, then apply_rotary_pos_emb. posenc takes the
    # transposed views as they are (layout "bhtd") and normalizes on read.
    name, dt = dtype
    batch, tokens, heads, kv_heads, head = 2, 5, 8, 2, 64
    q_proj = _data(rng, (batch, tokens, heads * head), dt, scale=3.0)
    k_proj = _data(rng, (batch, tokens, kv_heads * head), dt, scale=0.5)
    q = q_proj.reshape(batch, tokens, heads, head).transpose(0, 2, 1, 3)
    k = k_proj.reshape(batch, tokens, kv_heads, head).transpose(0, 2, 1, 3)
    q_weight = rng.uniform(0.5, 2.0, head).astype(np.float32).astype(weight_dtype[1])
    k_weight = rng.uniform(0.5, 2.0, head).astype(np.float32).astype(weight_dtype[1])
    q0, k0 = q.copy(), k.copy()
    call, c, s = _angles(rng, angles, batch, tokens, head)
    outs = {}
    if place == "out_of_place":
        outs = dict(out=np.zeros_like(q), k_out=np.zeros_like(k))
    got_q, got_k = posenc.rope(q, k, q_norm_weight=q_weight, k_norm_weight=k_weight,
                               layout="bhtd", **call, **outs)
    if place == "out_of_place":
        assert got_q is outs["out"] and got_k is outs["k_out"]
        np.testing.assert_array_equal(q, q0)
        np.testing.assert_array_equal(k, k0)
    bthd = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
    for got, original, weight in ((got_q, q0, q_weight), (got_k, k0, k_weight)):
        normed = rms_norm(bthd(original), weight)
        _check(bthd(got), hf_rope(normed, c, s, head), normed, c, s, head, name)


# ---- Gemma 3: x * (1 + w), partial rotary, the KV cache ------------------------------------

@pytest.mark.parametrize("angles", ["exact", "tables"])
def test_gemma3_weight_offset_and_kv_cache(rng, dtype, angles):
    # Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), its weights stored as offsets from 1
    # (near 0, some below). A Rope holds the model's norm_eps and norm_weight_offset; the
    # weights are the layer's, given at each call. k goes, normalized and rotated, into a paged
    # cache (vLLM's slot_mapping); v is copied as it is; k itself stays as it was.
    name, dt = dtype
    tokens, heads, kv_heads, head, rotary_dim, slots = 6, 4, 2, 32, 16, 10
    eps = 1e-5
    q = _data(rng, (1, tokens, heads, head), dt)
    k = _data(rng, (1, tokens, kv_heads, head), dt)
    v = _data(rng, (1, tokens, kv_heads, head), dt)
    q_weight = rng.uniform(-0.8, 0.8, head).astype(np.float32).astype(dt)
    k_weight = rng.uniform(-0.8, 0.8, head).astype(np.float32).astype(dt)
    k_cache = np.full((slots, kv_heads, head), 7.0, dt)
    v_cache = np.full((slots, kv_heads, head), 7.0, dt)
    slot_mapping = np.array([9, 0, -1, 4, 3, 8], np.int32)
    call, c, s = _angles(rng, angles, 1, tokens, rotary_dim, theta=10000.0)
    theta = call.pop("theta", None)
    rope = posenc.Rope(theta=theta, rotary_dim=rotary_dim, norm_eps=eps, norm_weight_offset=1.0)
    q0, k0 = q.copy(), k.copy()
    rope(q, k, q_norm_weight=q_weight, k_norm_weight=k_weight, k_cache=k_cache,
         slot_mapping=slot_mapping, v=v, v_cache=v_cache, **call)
    np.testing.assert_array_equal(k, k0)

    normed_q = rms_norm(q0, q_weight, eps, 1.0)
    _check(q, hf_rope(normed_q, c, s, rotary_dim), normed_q, c, s, rotary_dim, name)
    normed_k = rms_norm(k0, k_weight, eps, 1.0)
    exact_k = hf_rope(normed_k, c, s, rotary_dim)
    written = slot_mapping >= 0
    rows = slot_mapping[written]
    _check(k_cache[rows][None], exact_k[:, written], normed_k[:, written], c[:, written],
           s[:, written], rotary_dim, name)
    np.testing.assert_array_equal(v_cache[rows], v[0, written])
    untouched = np.setdiff1d(np.arange(slots), rows)
    assert np.all(k_cache[untouched] == 7.0) and np.all(v_cache[untouched] == 7.0)


# ---- OLMo 2: RMSNorm over the whole projection ---------------------------------------------

@pytest.mark.parametrize("angles", ["exact", "tables"])
@pytest.mark.parametrize("weight_dtype", DTYPES, ids=DTYPE_IDS)
def test_olmo2_norm_per_token(rng, dtype, weight_dtype, angles):
    # Olmo2Attention: q = q_norm(q_proj(x)), k = k_norm(k_proj(x)) over the hidden size
    # (heads * head_dim), then view(b, t, -1, head_dim) and RoPE. posenc reads the projections
    # [batch, tokens, hidden] as heads (num_heads) and takes [heads * head_dim] weights, out of
    # place into arrays of the heads' shape.
    name, dt = dtype
    batch, tokens, heads, kv_heads, head = 2, 4, 4, 2, 32
    q = _data(rng, (batch, tokens, heads * head), dt, scale=2.0)
    k = _data(rng, (batch, tokens, kv_heads * head), dt)
    q_weight = rng.uniform(0.5, 2.0, heads * head).astype(np.float32).astype(weight_dtype[1])
    k_weight = rng.uniform(0.5, 2.0, kv_heads * head).astype(np.float32).astype(weight_dtype[1])
    call, c, s = _angles(rng, angles, batch, tokens, head, theta=500000.0)
    q0, k0 = q.copy(), k.copy()
    out = np.zeros((batch, tokens, heads, head), dt)
    k_out = np.zeros((batch, tokens, kv_heads, head), dt)
    posenc.rope(q, k, q_norm_weight=q_weight, k_norm_weight=k_weight, num_heads=heads, out=out,
                k_out=k_out, **call)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(k, k0)
    for got, original, weight, n in ((out, q0, q_weight, heads), (k_out, k0, k_weight, kv_heads)):
        normed = rms_norm(original, weight).reshape(batch, tokens, n, head)
        _check(got, hf_rope(normed, c, s, head), normed, c, s, head, name)


def test_q_alone_and_k_unnormalized(rng):
    # Either weight alone: q normalized without k, or q normalized beside a k rotated as it is.
    q = _data(rng, (3, 4, 16), np.float32)
    k = _data(rng, (3, 2, 16), np.float32)
    weight = rng.uniform(0.5, 2.0, 16).astype(np.float32)
    q0, k0 = q.copy(), k.copy()
    posenc.rope(q, k, q_norm_weight=weight, offset=5)
    expected_k = k0.copy()
    posenc.rope(expected_k, offset=5)
    np.testing.assert_array_equal(k, expected_k)
    positions = np.arange(5, 8, dtype=np.float64)[None]
    s, c = sincos(positions[..., None], inv_freq(16))
    normed = rms_norm(q0, weight)[None]
    _check(q[None], hf_rope(normed, c, s, 16), normed, c, s, 16, "float32")
    alone = q0.copy()
    posenc.rope(alone, q_norm_weight=weight, offset=5)
    np.testing.assert_array_equal(alone, q)


# ---- every way in --------------------------------------------------------------------------

class DLPackOnly:
    """A numpy array seen only through DLPack, as a torch or jax array is."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _norm_call(rng, dt=np.float32):
    q = _data(rng, (2, 5, 4, 16), dt)
    k = _data(rng, (2, 5, 2, 16), dt)
    weights = rng.uniform(-0.5, 0.5, 32).astype(np.float32)
    return q, k, weights[:16], weights[16:]


def test_every_way_in_gives_the_same_bits(rng):
    # posenc.rope, a Rope, _rope_resolved (the converted path), Context.prepare then the call,
    # weights through DLPack and as strided views: one descriptor, the same bits.
    q, k, q_weight, k_weight = _norm_call(rng)
    options = dict(norm_eps=1e-5, norm_weight_offset=1.0, style="gptj")
    expected_q, expected_k = q.copy(), k.copy()
    posenc.rope(expected_q, expected_k, q_norm_weight=q_weight, k_norm_weight=k_weight, offset=2,
                **options)
    assert not np.array_equal(expected_q, q)
    rope = posenc.Rope(**options)
    context = posenc.default_context()
    strided = np.zeros((16, 3), np.float32)
    strided[:, 1] = q_weight
    calls = [
        lambda a, b: rope(a, b, q_norm_weight=q_weight, k_norm_weight=k_weight, offset=2),
        lambda a, b: rope(a, b, q_norm_weight=DLPackOnly(q_weight),
                          k_norm_weight=DLPackOnly(k_weight), offset=2),
        lambda a, b: posenc.rope(a, b, q_norm_weight=strided[:, 1], k_norm_weight=k_weight,
                                 offset=2, **options),
        lambda a, b: posenc._posenc._rope_resolved(context, **posenc._rope_arguments(
            a, b, q_norm_weight=q_weight, k_norm_weight=k_weight, offset=2, **options)),
        lambda a, b: posenc.rope(a, b, q_norm_weight=q_weight, k_norm_weight=k_weight,
                                 positions=[[2, 3, 4, 5, 6]] * 2, **options),
    ]
    for call in calls:
        a, b = q.copy(), k.copy()
        call(a, b)
        np.testing.assert_array_equal(a, expected_q)
        np.testing.assert_array_equal(b, expected_k)
    a, b = q.copy(), k.copy()
    with posenc.Context("cpu") as cpu:
        cpu.prepare(rope=dict(q=a, k=b, q_norm_weight=q_weight, k_norm_weight=k_weight, offset=2,
                              **options))
        np.testing.assert_array_equal(a, q)  # prepared, nothing written
        posenc.rope(a, b, q_norm_weight=q_weight, k_norm_weight=k_weight, offset=2,
                    context=cpu, **options)
    np.testing.assert_array_equal(a, expected_q)
    np.testing.assert_array_equal(b, expected_k)


def test_bf16_weights_through_the_converter(rng):
    # ml_dtypes bf16 weights (no buffer protocol for numpy's bfloat16) go through the converter
    # with an f32 q: the same result as f32 weights holding the same values.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k, q_weight, k_weight = _norm_call(rng)
    q16, k16 = q_weight.astype(ml_dtypes.bfloat16), k_weight.astype(ml_dtypes.bfloat16)
    a, b, c, d = q.copy(), k.copy(), q.copy(), k.copy()
    posenc.rope(a, b, q_norm_weight=q16, k_norm_weight=k16, norm_weight_offset=1.0)
    posenc.rope(c, d, q_norm_weight=q16.astype(np.float32), k_norm_weight=k16.astype(np.float32),
                norm_weight_offset=1.0)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)


def test_config_rms_norm_eps(rng):
    # A config's rms_norm_eps is the norm's eps where a call passes weights (explicit norm_eps
    # wins), and a call without weights stays plain RoPE, not refused for an eps alone.
    config = {"model_type": "qwen3", "rope_theta": 1e6, "head_dim": 16, "rms_norm_eps": 0.25,
              "max_position_embeddings": 64}
    q, k, q_weight, k_weight = _norm_call(rng)
    weights = dict(q_norm_weight=q_weight, k_norm_weight=k_weight)

    def run(call, **keywords):
        a, b = q.copy(), k.copy()
        call(a, b, **keywords)
        return a, b

    expected = run(posenc.rope, theta=1e6, norm_eps=0.25, **weights)
    assert not np.array_equal(expected[0], run(posenc.rope, theta=1e6, **weights)[0])
    for got in (run(posenc.Rope(config), **weights),
                run(posenc.rope, scaling=config, **weights),
                run(posenc.Rope({"text_config": config}), **weights)):
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    explicit = run(posenc.rope, theta=1e6, norm_eps=1e-5, **weights)
    for got in (run(posenc.Rope(config, norm_eps=1e-5), **weights),
                run(posenc.rope, scaling=config, norm_eps=1e-5, **weights)):
        np.testing.assert_array_equal(got[0], explicit[0])
    plain = run(posenc.rope, theta=1e6)
    np.testing.assert_array_equal(run(posenc.Rope(config))[0], plain[0])
    np.testing.assert_array_equal(run(posenc.rope, scaling=config)[0], plain[0])


def test_settings_and_signature():
    rope = posenc.Rope(norm_eps=1e-5, norm_weight_offset=1)
    assert rope.settings["norm_eps"] == 1e-5 and rope.settings["norm_weight_offset"] == 1.0
    assert posenc.Rope().settings["norm_eps"] == 0.0
    for name in ("q_norm_weight", "k_norm_weight", "norm_eps", "norm_weight_offset"):
        assert f"{name}=None" in posenc.rope.__text_signature__
    with pytest.raises(TypeError, match="did you mean 'q_norm_weight'"):
        posenc.rope(np.zeros((2, 4), np.float32), q_norm_weights=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="did you mean 'k_norm_weight'"):
        posenc.Rope()(np.zeros((2, 4), np.float32), k_norm_weigth=np.ones(4, np.float32))
    with pytest.raises(TypeError, match="norm_eps"):
        posenc.Rope(norm_eps="small")


# ---- refusals ------------------------------------------------------------------------------

def _refusals(rng):
    """(what, call keywords, exception, message) of calls posenc refuses."""
    _, _, q_weight, k_weight = _norm_call(rng)
    return [
        ("q weight of neither length", dict(q_norm_weight=q_weight[:12]), posenc.InvalidShape,
         r"q_norm_weight.shape\[0\]: must be head_dim 16 \(a norm per head\) or heads \* "
         r"head_dim 64 \(per token\), got 12"),
        ("k weight of q's heads", dict(q_norm_weight=q_weight,
                                       k_norm_weight=np.tile(k_weight, 4)),
         posenc.InvalidShape, r"k_norm_weight.shape\[0\]: must be head_dim 16"),
        ("2-D weights", dict(q_norm_weight=np.tile(q_weight, (4, 1))), posenc.InvalidShape,
         "q_norm_weight.ndim: the weights are 1-D"),
        ("integer weights", dict(q_norm_weight=np.ones(16, np.int32)), posenc.InvalidDtype,
         "q_norm_weight"),
        ("k weight without k", dict(k=None, k_norm_weight=k_weight), posenc.InvalidArgument,
         "k_norm_weight: is set but k is not"),
        ("negative norm_eps", dict(q_norm_weight=q_weight, norm_eps=-1e-6),
         posenc.InvalidArgument, "norm_eps: must be a finite number > 0"),
        ("nan norm_eps", dict(q_norm_weight=q_weight, norm_eps=float("nan")),
         posenc.InvalidArgument, "norm_eps: must be a finite number > 0"),
        ("infinite offset", dict(q_norm_weight=q_weight, norm_weight_offset=float("inf")),
         posenc.InvalidArgument, "norm_weight_offset: must be finite"),
        ("norm_eps without weights", dict(norm_eps=1e-5), posenc.InvalidArgument,
         "norm_eps: has no effect without q_norm_weight or k_norm_weight"),
        ("offset without weights", dict(norm_weight_offset=1.0), posenc.InvalidArgument,
         "norm_weight_offset: has no effect without q_norm_weight or k_norm_weight"),
    ]


@pytest.mark.parametrize("way", ["rope", "Rope", "converted", "prepare"])
def test_refusals_name_the_field_and_write_nothing(rng, way):
    for what, keywords, error, message in _refusals(rng):
        q, k, *_ = _norm_call(np.random.default_rng(5))
        q0, k0 = q.copy(), k.copy()
        out, k_out = np.full_like(q, 7.0), np.full_like(k, 7.0)
        keywords = dict(dict(k=k, out=out, k_out=k_out), **keywords)
        if keywords["k"] is None:
            del keywords["k"], keywords["k_out"]
        if way == "Rope":
            options = {o: keywords.pop(o) for o in ("norm_eps", "norm_weight_offset")
                       if o in keywords}
            call = lambda: posenc.Rope(**options)(q, **keywords)  # noqa: E731
        elif way == "converted":  # what the converter hands C (op_args.c), as bf16 arrays go
            call = lambda: posenc._posenc._rope_resolved(  # noqa: E731
                posenc.default_context(), **posenc._rope_arguments(q, **keywords))
        elif way == "prepare":  # the same refusal, placed: "rope[0]."
            message = r"rope\[0\]\." + message
            call = lambda: posenc.default_context().prepare(  # noqa: E731
                rope=dict(q=q, **keywords))
        else:
            call = lambda: posenc.rope(q, **keywords)  # noqa: E731
        with pytest.raises(error, match=message):
            call()
        np.testing.assert_array_equal(q, q0, err_msg=what)
        np.testing.assert_array_equal(k, k0, err_msg=what)
        assert np.all(out == 7.0) and np.all(k_out == 7.0), what
