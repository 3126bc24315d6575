# SPDX-License-Identifier: MIT
# posenc.rope and posenc.Rope with the caller's own cos/sin tables (cos=, sin=), as the engines
# hold them: ONNX RotaryEmbedding (opset 23 and com.microsoft: 3-D input with num_heads, 4-D
# [batch, heads, seq, head], interleaved, rotary_embedding_dim, position_ids given or not), HF's
# rotate_half and GPT-J's repeat_interleave forms with full-width tables, and vLLM's
# cos_sin_cache as two views of one array. f32, f16 and bf16 q and tables, against float64
# transcriptions of each engine's own formula (and onnx.reference or onnxruntime where they are
# installed), with random tables that are not unit rotations. Refusals name the field and
# write nothing.
#
# Tolerance (tests/test_rope_tables.c's): |out - exact| <= 2 * 2^-24 * (|x_a c| + |x_b s|) for
# each rotated value (the two products and their sum, each rounded once in f32), plus one ulp of
# a 16-bit output (its rounding); dims past rotary_dim are bit-exact copies.
import numpy as np
import pytest

import posenc
from _reference import UNIT, ulp
from conftest import DTYPES

TABLE_ROWS = 40
DTYPE_IDS = [name for name, _ in DTYPES]


def _data(rng, shape, dt):
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def _table(rng, shape, dt):
    """Values as a caller may give them (ONNX's own tests use random caches): not unit
    rotations, so that a cos taken for a sin, or a value computed instead of read, shows."""
    return rng.uniform(-1.5, 1.5, shape).astype(np.float32).astype(dt)


def _f64(array):
    return np.asarray(array).astype(np.float64)


def _pair_dims(style, rotary_dim):
    half = rotary_dim // 2
    if style == "gptj":
        return np.arange(0, rotary_dim, 2), np.arange(1, rotary_dim, 2)
    return np.arange(half), np.arange(half, rotary_dim)


def _check(out, exact, x, c, s, style, rotary_dim, name, roundings=2):
    """out, exact, x: [batch, tokens, heads, head_dim]; c, s: the float64 values each token's
    pairs are rotated by, [batch or 1, tokens, rotary_dim/2]."""
    out = _f64(out)
    ia, ib = _pair_dims(style, rotary_dim)
    c, s = np.abs(c[:, :, None, :]), np.abs(s[:, :, None, :])
    xa, xb = np.abs(x[..., ia]), np.abs(x[..., ib])
    bound = np.zeros(np.broadcast_shapes(x.shape, exact.shape))
    bound[..., ia] = xa * c + xb * s
    bound[..., ib] = xa * s + xb * c
    tolerance = roundings * UNIT * bound[..., :rotary_dim]
    if name != "float32":
        tolerance = tolerance + ulp(name, exact[..., :rotary_dim])
    error = np.abs(out[..., :rotary_dim] - exact[..., :rotary_dim])
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (
        f"error {error[worst]:.3g} > tolerance {tolerance[worst]:.3g} at {worst}: "
        f"out {out[..., :rotary_dim][worst]!r}, exact {exact[..., :rotary_dim][worst]!r}")
    np.testing.assert_array_equal(out[..., rotary_dim:], x[..., rotary_dim:])


# ---- ONNX RotaryEmbedding ------------------------------------------------------------------

def onnx_rotary_embedding(x, cos_cache, sin_cache, position_ids=None, interleaved=0,
                          rotary_embedding_dim=0, num_heads=0):
    """ONNX RotaryEmbedding (opset 23), the reference function of its specification
    transcribed in float64: x [batch, heads, seq, head] or [batch, seq, hidden] (num_heads
    heads); cos/sin [max_position, rotary_dim/2] picked by position_ids [batch, seq], or
    [batch, seq, rotary_dim/2] without them."""
    x = _f64(x)
    shape = x.shape
    if x.ndim == 4:
        x = x.transpose(0, 2, 1, 3)
    else:
        x = x.reshape(shape[0], shape[1], num_heads, shape[2] // num_heads)
    rotary_dim = rotary_embedding_dim or x.shape[3]
    cos_cache, sin_cache = _f64(cos_cache), _f64(sin_cache)
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    assert cos_cache.shape[-1] == sin_cache.shape[-1] == rotary_dim // 2
    c, s = cos_cache[:, :, None, :], sin_cache[:, :, None, :]
    rotated = x[..., :rotary_dim]
    if interleaved:
        x1, x2 = rotated[..., 0::2], rotated[..., 1::2]
    else:
        x1, x2 = np.split(rotated, 2, axis=-1)
    real, imag = c * x1 - s * x2, s * x1 + c * x2
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(rotated.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    out = np.concatenate([rotated, x[..., rotary_dim:]], axis=-1)
    return out.reshape(shape) if len(shape) == 3 else out.transpose(0, 2, 1, 3)


def _onnx_model(inputs, domain, attributes):
    """One RotaryEmbedding node: inputs [(name, onnx element type)] in the node's order."""
    from onnx import helper
    node = helper.make_node("RotaryEmbedding", [name for name, _ in inputs], ["Y"],
                            domain=domain, **attributes)
    elem = inputs[0][1]
    graph = helper.make_graph(
        [node], "rotary", [helper.make_tensor_value_info(n, t, None) for n, t in inputs],
        [helper.make_tensor_value_info("Y", elem, None)])
    opsets = [helper.make_opsetid("", 23 if domain == "" else 17)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    if domain:
        model.ir_version = 8  # what every onnxruntime of the test extra reads
    return model


def _onnx_reference(x, cos_cache, sin_cache, position_ids=None, interleaved=0,
                    rotary_embedding_dim=0, num_heads=0):
    """The same through onnx.reference's own RotaryEmbedding, in float64."""
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator
    double = TensorProto.DOUBLE
    inputs = [("X", double), ("cos_cache", double), ("sin_cache", double)]
    feeds = {"X": _f64(x), "cos_cache": _f64(cos_cache), "sin_cache": _f64(sin_cache)}
    if position_ids is not None:
        inputs.append(("position_ids", TensorProto.INT64))
        feeds["position_ids"] = np.asarray(position_ids, np.int64)
    attributes = dict(interleaved=interleaved)
    if rotary_embedding_dim:
        attributes["rotary_embedding_dim"] = rotary_embedding_dim
    if num_heads:
        attributes["num_heads"] = num_heads
    return ReferenceEvaluator(_onnx_model(inputs, "", attributes)).run(None, feeds)[0]


def _has_onnx_reference():
    """Whether onnx.reference runs RotaryEmbedding (onnx 1.18 and later, opset 23; the test
    extra pins an older onnx on Python < 3.11, where the transcription is the only oracle)."""
    try:
        import onnx
        from onnx.reference.ops import op_rotary_embedding  # noqa: F401
        onnx.defs.get_schema("RotaryEmbedding", 23, "")
    except Exception:
        return False
    return True


# Oracles are listed, not skipped: every Python runs the transcription.
ONNX_ORACLES = {"spec": onnx_rotary_embedding}
if _has_onnx_reference():
    ONNX_ORACLES["onnx.reference"] = _onnx_reference


@pytest.mark.parametrize("oracle", list(ONNX_ORACLES))
@pytest.mark.parametrize("form", ["3d", "4d"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_embedding_dim", [0, 8])
@pytest.mark.parametrize("with_ids", [True, False], ids=["position_ids", "gathered"])
@pytest.mark.parametrize("table_dtype", DTYPES, ids=DTYPE_IDS)
def test_onnx_rotary_embedding(rng, dtype, table_dtype, oracle, form, interleaved,
                               rotary_embedding_dim, with_ids):
    name, dt = dtype
    batch, seq, heads, kv_heads, head = 2, 5, 4, 2, 16
    rotary_dim = rotary_embedding_dim or head
    rows = (TABLE_ROWS,) if with_ids else (batch, seq)
    cos = _table(rng, rows + (rotary_dim // 2,), table_dtype[1])
    sin = _table(rng, rows + (rotary_dim // 2,), table_dtype[1])
    ids = rng.integers(0, TABLE_ROWS, (batch, seq)) if with_ids else None
    if with_ids:
        ids[0, 0] = TABLE_ROWS - 1  # the last row is in the table
    if form == "3d":
        q = _data(rng, (batch, seq, heads * head), dt)
        k = _data(rng, (batch, seq, kv_heads * head), dt)
        options = dict(num_heads=heads)
    else:
        q = _data(rng, (batch, heads, seq, head), dt)
        k = _data(rng, (batch, kv_heads, seq, head), dt)
        options = dict(layout="bhtd", num_heads=heads)
    q0, k0 = q.copy(), k.copy()
    style = "gptj" if interleaved else "neox"
    rq, rk = posenc.rope(q, k, cos=cos, sin=sin, positions=ids, style=style,
                         rotary_dim=rotary_embedding_dim or None, **options)
    assert rq is q and rk is k

    c = _f64(cos)[ids] if with_ids else _f64(cos)
    s = _f64(sin)[ids] if with_ids else _f64(sin)
    for got, original, n in ((q, q0, heads), (k, k0, kv_heads)):
        exact = ONNX_ORACLES[oracle](original, cos, sin, ids, interleaved, rotary_embedding_dim,
                                     n if form == "3d" else 0)
        canon = (lambda a: a.reshape(batch, seq, n, head)) if form == "3d" else (
            lambda a: a.transpose(0, 2, 1, 3))
        _check(canon(got), canon(exact), canon(_f64(original)), c, s, style, rotary_dim, name)


def test_onnx_oracles_agree(rng):
    # The transcription is the operator: where onnx.reference runs it, they give the same bits.
    if "onnx.reference" not in ONNX_ORACLES:
        return  # the transcription alone (Python < 3.11: onnx < 1.18)
    x = rng.standard_normal((2, 3, 24))
    cos, sin = rng.uniform(-1.5, 1.5, (2, 10, 4))
    ids = rng.integers(0, 10, (2, 3))
    for interleaved in (0, 1):
        np.testing.assert_array_equal(
            _onnx_reference(x, cos, sin, ids, interleaved, 8, 2),
            onnx_rotary_embedding(x, cos, sin, ids, interleaved, 8, 2))


def _onnxruntime():
    try:
        import onnx  # noqa: F401
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("ids_form", ["batch_seq", "start"])
def test_com_microsoft_rotary_embedding(rng, interleaved, ids_form):
    # com.microsoft's RotaryEmbedding (onnxruntime's contrib operator): inputs in the order
    # (input, position_ids, cos_cache, sin_cache); position_ids [batch, seq], or [1], the
    # first token's position (posenc's offset). Checked against the transcription, which is the
    # same arithmetic, and against onnxruntime itself where it is installed (f32).
    batch, seq, heads, head, rotary_dim = 2, 4, 3, 16, 12
    x = _data(rng, (batch, seq, heads * head), np.float32)
    cos = _table(rng, (TABLE_ROWS, rotary_dim // 2), np.float32)
    sin = _table(rng, (TABLE_ROWS, rotary_dim // 2), np.float32)
    if ids_form == "start":
        ids = np.array([TABLE_ROWS - seq], np.int64)
        per_token = np.broadcast_to(np.arange(seq) + ids[0], (batch, seq))
        options = dict(offset=int(ids[0]))
    else:
        per_token = ids = rng.integers(0, TABLE_ROWS, (batch, seq))
        options = dict(positions=ids)
    exact = onnx_rotary_embedding(x, cos, sin, per_token, interleaved, rotary_dim, heads)
    got = x.copy()
    posenc.rope(got, cos=cos, sin=sin, num_heads=heads, rotary_dim=rotary_dim,
                style="gptj" if interleaved else "neox", **options)
    as_heads = (lambda a: a.reshape(batch, seq, heads, head))
    style = "gptj" if interleaved else "neox"
    c, s = _f64(cos)[per_token], _f64(sin)[per_token]
    _check(as_heads(got), as_heads(exact), as_heads(_f64(x)), c, s, style, rotary_dim, "float32")

    onnxruntime = _onnxruntime()
    if onnxruntime is None:
        return
    from onnx import TensorProto
    f32 = TensorProto.FLOAT
    model = _onnx_model([("X", f32), ("position_ids", TensorProto.INT64), ("cos_cache", f32),
                         ("sin_cache", f32)], "com.microsoft",
                        dict(interleaved=interleaved, num_heads=heads,
                             rotary_embedding_dim=rotary_dim))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    theirs = session.run(None, {"X": x, "position_ids": ids, "cos_cache": cos,
                                "sin_cache": sin})[0]
    # onnxruntime's own f32 arithmetic (its order, maybe fused multiply-adds) rounds apart
    # from posenc's: a looser bound for it, the same exact values.
    _check(as_heads(theirs), as_heads(exact), as_heads(_f64(x)), c, s, style, rotary_dim,
           "float32", roundings=4)


# ---- HF transformers ----------------------------------------------------------------------

def rotate_half(x):
    """HF's rotate_half (Llama and most models): (-x2, x1) of the halves."""
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rotate_every_two(x):
    """HF's GPT-J rotate_every_two: (-x_odd, x_even) interleaved."""
    return np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)


@pytest.mark.parametrize("form", ["gathered", "unsqueezed", "by_position"])
@pytest.mark.parametrize("rotary_dim", [None, 24])
@pytest.mark.parametrize("table_dtype", DTYPES, ids=DTYPE_IDS)
def test_hf_rotate_half(rng, dtype, table_dtype, form, rotary_dim):
    # apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, q [batch, heads, seq, head_dim]
    # (layout "bhtd"), cos/sin the rotary embedding's [batch, seq, dim] (duplicated halves,
    # rows gathered by position_ids), unsqueezed to [batch, 1, seq, dim]; partial rotary
    # (partial_rotary_factor) rotates q[..., :dim] only.
    name, dt = dtype
    batch, heads, kv_heads, seq, head = 2, 4, 2, 6, 32
    dim = rotary_dim or head
    half_cos = _table(rng, (TABLE_ROWS, dim // 2), table_dtype[1])
    half_sin = _table(rng, (TABLE_ROWS, dim // 2), table_dtype[1])
    cache_cos = np.concatenate([half_cos, half_cos], axis=-1)  # emb = cat(freqs, freqs)
    cache_sin = np.concatenate([half_sin, half_sin], axis=-1)
    position_ids = rng.integers(0, TABLE_ROWS, (batch, seq))
    cos, sin = cache_cos[position_ids], cache_sin[position_ids]  # [batch, seq, dim]
    q = _data(rng, (batch, heads, seq, head), dt)
    k = _data(rng, (batch, kv_heads, seq, head), dt)
    q0, k0 = q.copy(), k.copy()
    if form == "gathered":
        tables = dict(cos=cos, sin=sin)
    elif form == "unsqueezed":
        tables = dict(cos=cos[:, None], sin=sin[:, None])
    else:
        tables = dict(cos=cache_cos, sin=cache_sin, position_ids=position_ids)
    posenc.rope(q, k, layout="bhtd", rotary_dim=rotary_dim, **tables)

    c4, s4 = _f64(cos)[:, None], _f64(sin)[:, None]
    for got, original in ((q, q0), (k, k0)):
        x = _f64(original)
        exact = x.copy()
        exact[..., :dim] = x[..., :dim] * c4 + rotate_half(x[..., :dim]) * s4
        t = lambda a: a.transpose(0, 2, 1, 3)  # noqa: E731
        _check(t(got), t(exact), t(x), _f64(half_cos)[position_ids],
               _f64(half_sin)[position_ids], "neox", dim, name)


@pytest.mark.parametrize("table_dtype", DTYPES, ids=DTYPE_IDS)
def test_hf_gptj_repeat_interleave(rng, dtype, table_dtype):
    # GPT-J's apply_rotary_pos_emb: sin, cos = repeat_interleave(..., 2) of the half-width
    # sinusoids at each token's position; q [batch, seq, heads, head_dim] rotated over its first
    # rotary_dim dims as q * cos + rotate_every_two(q) * sin.
    name, dt = dtype
    batch, seq, heads, head, dim = 2, 5, 4, 32, 16
    half_cos = _table(rng, (TABLE_ROWS, dim // 2), table_dtype[1])
    half_sin = _table(rng, (TABLE_ROWS, dim // 2), table_dtype[1])
    position_ids = rng.integers(0, TABLE_ROWS, (batch, seq))
    cos = np.repeat(half_cos[position_ids], 2, axis=-1)  # [batch, seq, dim]
    sin = np.repeat(half_sin[position_ids], 2, axis=-1)
    q = _data(rng, (batch, seq, heads, head), dt)
    q0 = q.copy()
    posenc.rope(q, cos=cos, sin=sin, style="gptj", rotary_dim=dim)
    x = _f64(q0)
    exact = x.copy()
    c4, s4 = _f64(cos)[:, :, None], _f64(sin)[:, :, None]
    exact[..., :dim] = x[..., :dim] * c4 + rotate_every_two(x[..., :dim]) * s4
    _check(q, exact, x, _f64(half_cos)[position_ids], _f64(half_sin)[position_ids], "gptj",
           dim, name)


# ---- vLLM --------------------------------------------------------------------------------

def vllm_rotary_embedding(positions, x, cos_sin_cache, head_size, rotary_dim, is_neox_style):
    """vLLM's RotaryEmbedding.forward_native for one of query or key, [num_tokens, heads *
    head_size], in float64."""
    cos_sin = _f64(cos_sin_cache)[positions]
    cos, sin = np.split(cos_sin, 2, axis=-1)
    x = _f64(x).reshape(len(positions), -1, head_size)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    cos, sin = cos[:, None, :], sin[:, None, :]
    if is_neox_style:
        x1, x2 = np.split(rot, 2, axis=-1)
    else:
        x1, x2 = rot[..., ::2], rot[..., 1::2]
    o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
    if is_neox_style:
        rot = np.concatenate([o1, o2], axis=-1)
    else:
        rot = np.stack([o1, o2], axis=-1).reshape(rot.shape)
    return np.concatenate([rot, rest], axis=-1)


@pytest.mark.parametrize("is_neox_style", [True, False])
@pytest.mark.parametrize("rotary_dim", [32, 16])
@pytest.mark.parametrize("table_dtype", DTYPES, ids=DTYPE_IDS)
def test_vllm_cos_sin_cache(rng, dtype, table_dtype, is_neox_style, rotary_dim):
    # cos_sin_cache [max_position, rotary_dim]: cos in the first half of each row, sin in the
    # second, passed as two views of the one array; query and key [num_tokens, heads *
    # head_size] read with num_heads.
    name, dt = dtype
    tokens, heads, kv_heads, head = 7, 4, 2, 32
    cache = _table(rng, (TABLE_ROWS, rotary_dim), table_dtype[1])
    cos, sin = cache[:, :rotary_dim // 2], cache[:, rotary_dim // 2:]
    assert np.shares_memory(cos, cache) and np.shares_memory(sin, cache)
    positions = rng.integers(0, TABLE_ROWS, tokens)
    query = _data(rng, (tokens, heads * head), dt)
    key = _data(rng, (tokens, kv_heads * head), dt)
    query0, key0 = query.copy(), key.copy()
    style = "neox" if is_neox_style else "gptj"
    posenc.rope(query, key, cos=cos, sin=sin, positions=positions, num_heads=heads,
                rotary_dim=rotary_dim, style=style)
    c, s = _f64(cos)[positions][None], _f64(sin)[positions][None]
    for got, original, n in ((query, query0, heads), (key, key0, kv_heads)):
        exact = vllm_rotary_embedding(positions, original, cache, head, rotary_dim,
                                      is_neox_style)
        shaped = lambda a: np.asarray(a).reshape(1, tokens, n, head)  # noqa: E731
        _check(shaped(got), shaped(exact), shaped(_f64(original)), c, s, style, rotary_dim,
               name)


# ---- the ways in ---------------------------------------------------------------------------

class DLPackOnly:
    """A numpy array seen only through DLPack, as a torch or jax array is."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def _tables_call(rng, dt=np.float32):
    q = _data(rng, (2, 5, 4, 16), dt)
    k = _data(rng, (2, 5, 2, 16), dt)
    cache = _table(rng, (TABLE_ROWS, 16), np.float32)
    positions = rng.integers(0, TABLE_ROWS, (2, 5)).astype(np.int32)
    return q, k, cache[:, :8], cache[:, 8:], positions


def test_every_way_in_gives_the_same_bits(rng):
    # posenc.rope, a Rope, _rope_resolved (the converted path), Context.prepare then the call,
    # and tables given through DLPack: one descriptor, the same bits.
    q, k, cos, sin, positions = _tables_call(rng)
    expected_q, expected_k = q.copy(), k.copy()
    posenc.rope(expected_q, expected_k, cos=cos, sin=sin, positions=positions, style="gptj")
    assert not np.array_equal(expected_q, q)
    rope = posenc.Rope(style="gptj")
    context = posenc.default_context()
    calls = [
        lambda a, b: rope(a, b, cos=cos, sin=sin, positions=positions),
        lambda a, b: rope(a, b, cos=DLPackOnly(cos), sin=DLPackOnly(sin), positions=positions),
        lambda a, b: posenc.rope(a, b, cos=DLPackOnly(cos), sin=sin, positions=positions,
                                 style="gptj"),
        lambda a, b: posenc._posenc._rope_resolved(context, **posenc._rope_arguments(
            a, b, cos=cos, sin=sin, positions=positions, style="gptj")),
        lambda a, b: posenc.rope(a, b, cos=cos, sin=sin, positions=positions.tolist(),
                                 style="gptj"),
    ]
    for call in calls:
        a, b = q.copy(), k.copy()
        call(a, b)
        np.testing.assert_array_equal(a, expected_q)
        np.testing.assert_array_equal(b, expected_k)
    a, b = q.copy(), k.copy()
    with posenc.Context("cpu") as cpu:
        cpu.prepare(rope=dict(q=a, k=b, cos=cos, sin=sin, positions=positions, style="gptj"))
        np.testing.assert_array_equal(a, q)  # prepared, nothing written
        posenc.rope(a, b, cos=cos, sin=sin, positions=positions, style="gptj", context=cpu)
    np.testing.assert_array_equal(a, expected_q)


def test_bf16_tables_through_the_converter(rng):
    # ml_dtypes bf16 tables (no buffer protocol for numpy's bfloat16) go through the converter
    # with an f32 q: the same rotation as the f32 tables holding the same values.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, _, cos, sin, positions = _tables_call(rng)
    cos16, sin16 = cos.astype(ml_dtypes.bfloat16), sin.astype(ml_dtypes.bfloat16)
    a, b = q.copy(), q.copy()
    posenc.rope(a, cos=cos16, sin=sin16, positions=positions)
    posenc.rope(b, cos=cos16.astype(np.float32), sin=sin16.astype(np.float32),
                positions=positions)
    np.testing.assert_array_equal(a, b)


def test_inverse_negates_sin(rng, dtype):
    name, dt = dtype
    q, _, cos, sin, positions = _tables_call(rng, dt)
    q0 = q.copy()
    posenc.rope(q, cos=cos, sin=sin, positions=positions, inverse=True, style="gptj")
    c, s = _f64(cos)[positions], -_f64(sin)[positions]
    x = _f64(q0)
    exact = x.copy()
    a, b = x[..., 0::2], x[..., 1::2]
    exact[..., 0::2] = a * c[:, :, None] - b * s[:, :, None]
    exact[..., 1::2] = a * s[:, :, None] + b * c[:, :, None]
    _check(q, exact, x, c, s, "gptj", 16, name)


def test_out_of_place_leaves_q_and_tables(rng):
    q, k, cos, sin, positions = _tables_call(rng)
    q0, cos0, sin0 = q.copy(), cos.copy(), sin.copy()
    expected = q.copy()
    posenc.rope(expected, cos=cos, sin=sin, positions=positions)
    out = np.zeros_like(q)
    assert posenc.rope(q, cos=cos, sin=sin, positions=positions, out=out) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(cos, cos0)
    np.testing.assert_array_equal(sin, sin0)


# ---- refusals ------------------------------------------------------------------------------

def _refusals(rng):
    """(what, call keywords, exception, message) of calls posenc refuses."""
    q, k, cos, sin, positions = _tables_call(rng)
    outside = positions.copy()
    outside[1, 3] = TABLE_ROWS
    return [
        ("position outside", dict(cos=cos, sin=sin, positions=outside), posenc.InvalidArgument,
         rf"positions: position {TABLE_ROWS} is outside the cos/sin tables' {TABLE_ROWS} rows"),
        ("negative position", dict(cos=cos, sin=sin, positions=-1 - positions),
         posenc.InvalidArgument, "positions: position -"),
        ("offset past the rows", dict(cos=cos, sin=sin, offset=TABLE_ROWS - 2),
         posenc.InvalidArgument, "position_offset: positions"),
        ("width of neither form", dict(cos=cos[:, :6], sin=sin[:, :6], positions=positions),
         posenc.InvalidShape, r"cos.shape\[1\]: the width must be rotary_dim/2 = 8"),
        ("cos without sin", dict(cos=cos, positions=positions), posenc.InvalidArgument,
         "cos: is set but sin is not"),
        ("sin without cos", dict(sin=sin, positions=positions), posenc.InvalidArgument,
         "sin: is set but cos is not"),
        ("cos with theta", dict(cos=cos, sin=sin, positions=positions, theta=10000.0),
         posenc.InvalidArgument, "theta: has no effect with caller cos/sin tables"),
        ("cos with a scaling", dict(cos=cos, sin=sin, positions=positions,
                                    scaling={"type": "linear", "factor": 2.0}),
         posenc.InvalidArgument, "scaling.type: has no effect with caller cos/sin tables"),
        ("cos with attention_factor", dict(cos=cos, sin=sin, positions=positions,
                                           attention_factor=2.0),
         posenc.InvalidArgument, "attention_factor: has no effect"),
        ("gathered rows with positions", dict(cos=cos[:5][None], sin=sin[:5][None],
                                              positions=positions),
         posenc.InvalidArgument, "positions: has no effect with cos/sin rows gathered"),
        ("gathered rows, wrong tokens", dict(cos=cos[:4][None], sin=sin[:4][None]),
         posenc.InvalidShape, r"cos.shape\[1\]: gathered rows are one per token"),
    ]


@pytest.mark.parametrize("way", ["rope", "Rope", "converted"])
def test_refusals_name_the_field_and_write_nothing(rng, way):
    for what, keywords, error, message in _refusals(rng):
        q, k, *_ = _tables_call(np.random.default_rng(5))
        q0, k0 = q.copy(), k.copy()
        out = np.full_like(q, 7.0)
        keywords = dict(keywords, out=out)
        if way == "Rope":
            options = {o: keywords.pop(o) for o in ("theta", "scaling", "attention_factor")
                       if o in keywords}
            call = lambda: posenc.Rope(**options)(q, k, **keywords)  # noqa: E731
        elif way == "converted":  # what the converter hands C (op_args.c), as bf16 arrays go
            call = lambda: posenc._posenc._rope_resolved(  # noqa: E731
                posenc.default_context(), **posenc._rope_arguments(q, k, **keywords))
        else:
            call = lambda: posenc.rope(q, k, **keywords)  # noqa: E731
        with pytest.raises(error, match=message):
            call()
        np.testing.assert_array_equal(q, q0, err_msg=what)
        np.testing.assert_array_equal(k, k0, err_msg=what)
        assert np.all(out == 7.0), what


def test_num_heads_refusals(rng):
    q = _data(rng, (2, 5, 60), np.float32)
    k = _data(rng, (2, 5, 20), np.float32)
    cos, sin = _table(rng, (2, TABLE_ROWS, 6), np.float32)
    q0 = q.copy()
    with pytest.raises(posenc.InvalidShape, match="num_heads: q's hidden size 60 is not a "
                       "multiple of 7 heads"):
        posenc.rope(q, offset=1, cos=cos, sin=sin, num_heads=7)
    with pytest.raises(posenc.InvalidShape, match=r"k.shape\[2\]: 20 is not a whole number "
                       "of heads of 12 dims"):
        posenc.rope(q, k, offset=1, cos=cos, sin=sin, num_heads=5)
    with pytest.raises(posenc.InvalidShape, match=r"num_heads: 3, but q has 4 heads "
                       r"\(q.shape\[1\]\)"):
        posenc.rope(q.reshape(2, 5, 4, 15).transpose(0, 2, 1, 3), layout="bhtd", num_heads=3)
    with pytest.raises(posenc.InvalidArgument, match="layout: 'bhtd' reads 4-D arrays"):
        posenc.rope(q, layout="bhtd", num_heads=5)
    np.testing.assert_array_equal(q, q0)


def test_num_heads_is_a_view(rng):
    # [batch, seq, hidden] with num_heads rotates exactly as the [batch, seq, heads, head]
    # view of it: a slice of a fused qkv array works too (no copy).
    qkv = _data(rng, (2, 5, 3 * 64), np.float32)
    q = qkv[..., :64]
    expected = np.ascontiguousarray(q).reshape(2, 5, 4, 16)
    posenc.rope(expected, offset=3, theta=500.0)
    posenc.rope(q, offset=3, theta=500.0, num_heads=4)
    np.testing.assert_array_equal(q.reshape(2, 5, 4, 16), expected)
