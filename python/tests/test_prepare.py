# SPDX-License-Identifier: MIT
# Context.prepare (posenc_prepare): calls described by posenc.rope's and posenc.sinusoidal's
# keywords are validated as the calls would be, a bad one named by its place, nothing written;
# on GPU devices the kernels are built then and the calls that follow build none.
import numpy as np
import pytest

import posenc
from _reference import check, rope as ref_rope, sinusoidal as ref_sin

DEVICES = [d["selector"] for d in posenc.devices()]


def _data(rng, shape, dt=np.float32):
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def _kernels(ctx):
    """Kernels the context has made: built, or loaded from a cache of built programs."""
    stats = ctx.stats()
    return stats["kernels_built"] + stats["kernels_loaded"]


@pytest.mark.parametrize("selector", DEVICES)
def test_prepare_then_call(selector, dtype, rng):
    name, dt = dtype
    q = _data(rng, (1, 5, 4, 32), dt)
    k = _data(rng, (1, 5, 2, 32), dt)
    q0, k0 = q.copy(), k.copy()
    table = np.zeros((6, 16), dt)
    with posenc.Context(selector, allow_software=True) as ctx:
        native_cpu = ctx.device["native_cpu"]
        before = _kernels(ctx)
        assert ctx.prepare(
            rope=[dict(q=q, k=k, theta=1e6, style="gptj"),
                  dict(q=q, positions=np.zeros((5, 2), np.int32), multimodal="positions_map",
                       components=2, component_map=[0, 1] * 8, layout="bthd")],
            sinusoidal=dict(out=table, offset=3)) is None
        # nothing computed or written
        np.testing.assert_array_equal(q, q0)
        np.testing.assert_array_equal(k, k0)
        np.testing.assert_array_equal(table, 0)
        built = _kernels(ctx)
        if native_cpu:
            assert built == before  # the native CPU path only validates
        else:
            assert built > before
        posenc.rope(q, k, theta=1e6, style="gptj", context=ctx)
        posenc.sinusoidal(table, offset=3, context=ctx)
        if not native_cpu:
            assert _kernels(ctx) == built  # prepared: nothing more to build
    p = np.arange(5.0)[None]
    for got, orig in ((q, q0), (k, k0)):
        exact, scale = ref_rope(orig.astype(np.float64), p, theta=1e6, style="gptj")
        check(got, exact, scale, name)
    exact = ref_sin(np.arange(3, 9), 16)
    check(table, exact, np.ones_like(exact), name)


def test_prepare_kv_cache_and_bhtd_on_the_cpu(rng):
    q = _data(rng, (1, 4, 3, 8))  # [batch, heads, tokens, dim]: layout bhtd
    k = _data(rng, (1, 2, 3, 8))
    cache = np.zeros((2, 2, 4, 8), np.float32)  # [blocks, heads, block_size, dim]
    with posenc.Context("cpu") as ctx:
        ctx.prepare(rope=[dict(q=q, k=k, layout="bhtd", k_cache=cache,
                               slot_mapping=[5, 0, 2])])
        with pytest.raises(posenc.InvalidShape, match=r"rope\[0\]\.slot_mapping\.shape"):
            ctx.prepare(rope=[dict(q=q, k=k, layout="bhtd", k_cache=cache,
                                   slot_mapping=[5, 0])])
    np.testing.assert_array_equal(cache, 0)


@pytest.mark.parametrize("rope, sinusoidal, error, words", [
    # checked by posenc_prepare itself
    ([dict(q="q"), dict(q="q", rotary_dim=3)], None, posenc.InvalidShape,
     r"^rope\[1\]\.rotary_dim"),
    (None, [dict(out="table"), dict(out="table", layout=7)], posenc.InputError,
     r"^sinusoidal\[1\]\.layout"),
    ([dict(q="q", k="k", k_cache="cache")], None, posenc.InvalidArgument,
     r"^rope\[0\]\.slot_mapping: is required"),
    # by the binding, as it reads the arrays
    ([dict(q="q"), dict(q="f64")], None, posenc.InvalidDtype, r"^rope\[1\]\.q:"),
    ([dict(q="q", component_map=[0, 1], multimodal="positions_map", components=2)], None,
     posenc.InvalidShape, r"^rope\[0\]\.component_map: 2 entries"),
    # by the Python layer, as posenc.rope converts them
    ([dict(q="q", style="sideways")], None, posenc.InvalidArgument, r"^rope\[0\]\.style"),
    ([dict(q="q", slot_mapping=[0.5])], None, posenc.InvalidDtype,
     r"^rope\[0\]\.slot_mapping"),
    ([dict(q="q"), dict(q="q", bogus=1)], None, posenc.InvalidArgument,
     r"^rope\[1\]: rope\(\) got an unexpected keyword argument 'bogus'"),
    ([dict(k="k")], None, posenc.InvalidArgument, r"^rope\[0\]: .*q"),
    ([dict(q="q"), "q"], None, posenc.InvalidArgument, r"^rope\[1\]: a dict"),
    ([dict(q="q", context=None)], None, posenc.InvalidArgument, r"^rope\[0\]\.context"),
    (None, [dict(rows=3)], posenc.InvalidArgument, r"^sinusoidal\[0\]\.d_model"),
])
def test_bad_description_names_its_place(rng, rope, sinusoidal, error, words):
    arrays = {"q": _data(rng, (1, 4, 2, 8)), "k": _data(rng, (1, 4, 1, 8)),
              "f64": np.zeros((1, 4, 2, 8)), "table": np.zeros((4, 8), np.float32),
              "cache": np.zeros((4, 1, 8), np.float32)}
    before = {key: a.copy() for key, a in arrays.items()}

    def fill(calls):
        if calls is None:
            return None
        return [{key: arrays.get(value, value) if isinstance(value, str) else value
                 for key, value in call.items()} if isinstance(call, dict) else call
                for call in calls]

    with posenc.Context("cpu") as ctx:
        with pytest.raises(error, match=words):
            ctx.prepare(rope=fill(rope), sinusoidal=fill(sinusoidal))
        ctx.prepare()  # nothing to prepare: nothing to do
    for key, a in arrays.items():
        np.testing.assert_array_equal(a, before[key])


def test_prepare_on_a_closed_context(rng):
    ctx = posenc.Context("cpu")
    ctx.close()
    with pytest.raises(posenc.InvalidArgument, match="closed"):
        ctx.prepare(rope=dict(q=_data(rng, (1, 2, 1, 8))))


@pytest.mark.parametrize("selector", DEVICES)
def test_prepare_a_kv_cache_call(selector, rng):
    q = _data(rng, (1, 3, 4, 16))
    k = _data(rng, (1, 3, 2, 16))
    v = _data(rng, (1, 3, 2, 16))
    k0 = k.copy()
    k_cache, v_cache = np.zeros((2, 4, 2, 16), np.float32), np.zeros((2, 4, 2, 16), np.float32)
    call = dict(q=q, k=k, v=v, k_cache=k_cache, v_cache=v_cache, slot_mapping=[6, 0, 3])
    with posenc.Context(selector, allow_software=True) as ctx:
        ctx.prepare(rope=call)
        np.testing.assert_array_equal(k_cache, 0)
        np.testing.assert_array_equal(v_cache, 0)
        made = _kernels(ctx)
        posenc.rope(**call, context=ctx)
        assert _kernels(ctx) == made
    exact, scale = ref_rope(k0.astype(np.float64), np.arange(3.0)[None])
    rows = k_cache.reshape(8, 2, 16)[[6, 0, 3]]
    check(rows[None], exact, scale, "float32")
    np.testing.assert_array_equal(v_cache.reshape(8, 2, 16)[[6, 0, 3]], v[0])
