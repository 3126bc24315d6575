# SPDX-License-Identifier: MIT
# posenc.rope's paged KV cache write (k_cache, slot_mapping, v, v_cache) against the float64
# reference on every device: 3-D and 4-D caches, both layouts, strided caches, and bad input
# that names its field and leaves every array as it was.
import numpy as np
import pytest

import posenc
from _reference import check, rope as ref_rope

DEVICES = [d["selector"] for d in posenc.devices()]

BATCH, TOKENS, Q_HEADS, KV_HEADS, DIM = 2, 5, 4, 2, 16
BLOCKS, BLOCK_SIZE = 3, 4  # 12 slots
# -1 is vLLM's padding; 12 and 100 are past the cache: those tokens write nothing.
SLOTS = np.array([[3, -1, 7, 11, 12], [0, 5, 9, 100, 2]], np.int32)


def _data(rng, shape, dt):
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def _heads_first(a):
    """A bthd array as the bhtd one holding the same values ([b, t, h, d] -> [b, h, t, d],
    a cache [blocks, block_size, h, d] -> [blocks, h, block_size, d], [slots, h, d] ->
    [h, slots, d]), its memory in that order."""
    axes = (0, 2, 1, 3) if a.ndim == 4 else (1, 0, 2)
    return np.ascontiguousarray(a.transpose(axes))


def _bthd(a):
    return a.transpose((0, 2, 1, 3) if a.ndim == 4 else (1, 0, 2))


def _expected_caches(k_rotated, v, k_cache0, v_cache0, slots):
    """The caches after the call, in [slots, heads, dim] form, and which slots were written."""
    k_rows = k_cache0.reshape(-1, KV_HEADS, DIM).astype(np.float64)
    v_rows = v_cache0.reshape(-1, KV_HEADS, DIM).astype(np.float64)
    written = np.zeros(len(k_rows), bool)
    for b in range(slots.shape[0]):
        for t in range(slots.shape[1]):
            s = slots[b, t]
            if 0 <= s < len(k_rows):
                k_rows[s] = k_rotated[b, t]
                v_rows[s] = v[b, t]
                written[s] = True
    return k_rows, v_rows, written


@pytest.mark.parametrize("selector", DEVICES)
@pytest.mark.parametrize("cache_dims", [3, 4])
@pytest.mark.parametrize("layout", ["bthd", "bhtd"])
def test_cache_write_every_device(selector, dtype, rng, cache_dims, layout):
    name, dt = dtype
    q0 = _data(rng, (BATCH, TOKENS, Q_HEADS, DIM), dt)
    k0 = _data(rng, (BATCH, TOKENS, KV_HEADS, DIM), dt)
    v = _data(rng, (BATCH, TOKENS, KV_HEADS, DIM), dt)
    cache_shape = ((BLOCKS * BLOCK_SIZE, KV_HEADS, DIM) if cache_dims == 3
                   else (BLOCKS, BLOCK_SIZE, KV_HEADS, DIM))
    # rows without a slot must keep these bytes
    k_cache0 = _data(rng, cache_shape, dt)
    v_cache0 = _data(rng, cache_shape, dt)
    positions = np.array([[0, 1, 2, 3, 4], [17, 18, 19, 2**31 - 1, 21]], np.int32)
    arrays = [q0, k0, v, k_cache0, v_cache0]
    if layout == "bhtd":
        arrays = [_heads_first(a) for a in arrays]
    q, k, vv, k_cache, v_cache = [a.copy() for a in arrays]
    with posenc.Context(selector, allow_software=True) as ctx:
        result = posenc.rope(q, k, positions=positions, style="gptj", k_cache=k_cache,
                             slot_mapping=SLOTS, v=vv, v_cache=v_cache, layout=layout,
                             context=ctx)
    assert result[0] is q and result[1] is k
    if layout == "bhtd":
        q, k, vv, k_cache, v_cache = [_bthd(a) for a in (q, k, vv, k_cache, v_cache)]
    p = positions.astype(np.float64)
    exact_q, scale_q = ref_rope(q0.astype(np.float64), p, style="gptj")
    check(q, exact_q, scale_q, name)
    np.testing.assert_array_equal(k, k0)  # only read: no k_out
    np.testing.assert_array_equal(vv, v)
    exact_k, scale_k = ref_rope(k0.astype(np.float64), p, style="gptj")
    k_rows, v_rows, written = _expected_caches(exact_k, v, k_cache0, v_cache0, SLOTS)
    got_k = k_cache.reshape(-1, KV_HEADS, DIM)
    got_v = v_cache.reshape(-1, KV_HEADS, DIM)
    np.testing.assert_array_equal(got_k[~written], k_cache0.reshape(-1, KV_HEADS, DIM)[~written])
    np.testing.assert_array_equal(got_v, v_rows.astype(dt))  # copied bit for bit
    slot_scale = np.zeros_like(k_rows)
    for b in range(BATCH):
        for t in range(TOKENS):
            if 0 <= SLOTS[b, t] < len(k_rows):
                slot_scale[SLOTS[b, t]] = scale_k[b, t]
    check(got_k[written], k_rows[written], slot_scale[written], name)


def test_k_out_and_cache_hold_the_same_bits(rng):
    q = _data(rng, (1, 6, 4, 32), np.float32)
    k = _data(rng, (1, 6, 2, 32), np.float32)
    k0 = k.copy()
    k_out = np.zeros_like(k)
    cache = np.zeros((8, 2, 32), np.float32)
    slots = np.array([7, 6, 5, 4, 3, 2], np.int32)
    rq, rk = posenc.rope(q, k, offset=9, k_out=k_out, k_cache=cache, slot_mapping=slots)
    assert rk is k_out
    np.testing.assert_array_equal(k, k0)
    np.testing.assert_array_equal(cache[slots], k_out[0])
    np.testing.assert_array_equal(cache[:2], 0)
    exact, scale = ref_rope(k0.astype(np.float64), np.arange(9.0, 15.0)[None])
    check(k_out, exact, scale, "float32")
    # k_out may be k itself: rotated in place and cached in one call
    cache2 = np.zeros_like(cache)
    posenc.rope(q.copy(), k, offset=9, k_out=k, k_cache=cache2, slot_mapping=slots)
    np.testing.assert_array_equal(k, k_out)
    np.testing.assert_array_equal(cache2, cache)


def test_strided_caches_and_hnd_as_a_view(rng):
    # vLLM's HND cache [blocks, heads, block_size, dim] given to the bthd layout as a
    # transposed view, inside a larger array whose other bytes stay as they were.
    k = _data(rng, (1, 4, 2, 8), np.float32)
    v = _data(rng, (1, 4, 2, 8), np.float32)
    store = _data(rng, (2, 2, 2, 4, 8), np.float32)  # [k|v, blocks, heads, block_size, dim]
    before = store.copy()
    k_cache = store[0].transpose(0, 2, 1, 3)  # [blocks, block_size, heads, dim], strided
    v_cache = store[1].transpose(0, 2, 1, 3)
    slots = np.array([6, 1, -1, 4], np.int32)
    posenc.rope(_data(rng, (1, 4, 2, 8), np.float32), k, k_cache=k_cache, slot_mapping=slots,
                v=v, v_cache=v_cache, offset=3)
    exact, scale = ref_rope(k.astype(np.float64), np.arange(3.0, 7.0)[None])
    for token, slot in enumerate(slots):
        if slot < 0:
            continue
        block, row = divmod(int(slot), 4)
        check(k_cache[block, row][None, None], exact[0, token][None, None],
              scale[0, token][None, None], "float32")
        np.testing.assert_array_equal(v_cache[block, row], v[0, token])
    untouched = np.ones((2, 2, 2, 4), bool)  # [k|v, blocks, heads, block_size]
    for slot in (6, 1, 4):
        untouched[:, slot // 4, :, slot % 4] = False
    np.testing.assert_array_equal(store[untouched], before[untouched])


def test_k_cache_without_v_and_slot_lists(rng):
    q = _data(rng, (3, 4, 8), np.float32)  # [tokens, heads, dim]
    k = _data(rng, (3, 1, 8), np.float32)
    cache = np.full((4, 1, 8), 7.0, np.float32)
    posenc.rope(q, k, k_cache=cache, slot_mapping=[2, 0, 3])  # a list, made int32
    exact, scale = ref_rope(k[None].astype(np.float64), np.arange(3.0)[None])
    check(cache[[2, 0, 3]][None], exact, scale, "float32")
    np.testing.assert_array_equal(cache[1], 7.0)
    int64 = np.zeros_like(cache)
    posenc.rope(q.copy(), k, k_cache=int64, slot_mapping=np.array([2, 0, 3], np.int64))
    np.testing.assert_array_equal(int64[[2, 0, 3]], cache[[2, 0, 3]])


def test_dlpack_caches(rng):
    from test_dlpack import DLPackOnly
    k = _data(rng, (1, 3, 2, 16), np.float16)
    v = _data(rng, (1, 3, 2, 16), np.float16)
    a, b = np.zeros((4, 2, 16), np.float16), np.zeros((4, 2, 16), np.float16)
    c, d = np.zeros_like(a), np.zeros_like(b)
    slots = np.array([1, 3, 0], np.int32)
    q = _data(rng, (1, 3, 2, 16), np.float16)
    posenc.rope(q.copy(), k, k_cache=a, v=v, v_cache=b, slot_mapping=slots)
    posenc.rope(q.copy(), DLPackOnly(k), k_cache=DLPackOnly(c), v=DLPackOnly(v),
                v_cache=DLPackOnly(d), slot_mapping=DLPackOnly(slots))
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)
    assert np.any(a != 0)


def _bad(rng, case):
    q = _data(rng, (1, 4, 2, 8), np.float32)
    k = _data(rng, (1, 4, 1, 8), np.float32)
    v = _data(rng, (1, 4, 1, 8), np.float32)
    kc = _data(rng, (2, 4, 1, 8), np.float32)
    vc = _data(rng, (2, 4, 1, 8), np.float32)
    slots = np.array([0, 1, 2, 3], np.int32)
    kw = dict(k_cache=kc, slot_mapping=slots, v=v, v_cache=vc)
    if case == "no slot_mapping":
        del kw["slot_mapping"]
    elif case == "float slot_mapping":
        kw["slot_mapping"] = slots.astype(np.float32)
    elif case == "float64 slot_mapping":
        kw["slot_mapping"] = slots.astype(np.float64)
    elif case == "slot_mapping tokens":
        kw["slot_mapping"] = slots[:3]
    elif case == "slot_mapping batch":
        kw["slot_mapping"] = np.stack([slots, slots])
    elif case == "k_cache heads":
        kw["k_cache"] = _data(rng, (2, 4, 2, 8), np.float32)
    elif case == "k_cache dtype":
        kw["k_cache"] = kc.astype(np.float16)
    elif case == "k_cache ndim":
        kw["k_cache"] = kc.reshape(8, 8)
    elif case == "read-only k_cache":
        kc.flags.writeable = False
    elif case == "v without v_cache":
        del kw["v_cache"]
    elif case == "v_cache shape":
        kw["v_cache"] = _data(rng, (4, 2, 1, 8), np.float32)
    elif case == "no k":
        k = None
    elif case == "slot_mapping alone":
        kw = dict(slot_mapping=slots)
    elif case == "k_cache overlaps v_cache":
        kw["v_cache"] = kc
    return q, k, kw


@pytest.mark.parametrize("case, error, words", [
    ("no slot_mapping", posenc.InvalidArgument, "slot_mapping: is required"),
    ("float slot_mapping", posenc.InvalidDtype, "slot_mapping"),
    ("float64 slot_mapping", posenc.InvalidDtype, "slot_mapping"),
    ("slot_mapping tokens", posenc.InvalidShape, "slot_mapping.shape"),
    ("slot_mapping batch", posenc.InvalidShape, "slot_mapping.shape"),
    ("k_cache heads", posenc.InvalidShape, "k_cache"),
    ("k_cache dtype", posenc.InvalidDtype, "k_cache.dtype"),
    ("k_cache ndim", posenc.InvalidShape, "k_cache.ndim"),
    ("read-only k_cache", posenc.InvalidArgument, "k_cache"),
    ("v without v_cache", posenc.InvalidArgument, "v: is set but v_cache is not"),
    ("v_cache shape", posenc.InvalidShape, "v_cache"),
    ("no k", posenc.InvalidArgument, "k_cache: is set but k is not"),
    ("slot_mapping alone", posenc.InvalidArgument, "slot_mapping: is set but k_cache"),
    ("k_cache overlaps v_cache", posenc.InputError, "v_cache"),
])
def test_bad_input_names_the_field(rng, case, error, words):
    q, k, kw = _bad(rng, case)
    arrays = [a for a in (q, k, *kw.values()) if isinstance(a, np.ndarray)]
    before = [a.copy() for a in arrays]
    with pytest.raises(error, match=words.replace(".", r"\.")):
        posenc.rope(q, k, **kw)
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)
