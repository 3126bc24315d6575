# SPDX-License-Identifier: MIT
# posenc.rope's common call (arrays, offset, other options at their defaults) is done in C
# without the Python layer: it must give the converted call's bits and errors, have every other
# call converted as it came (and run by C itself), and `python -m posenc bench` runs.
import inspect
import sys

import numpy as np
import pytest

import posenc
from posenc import _posenc, bench


def _pair(rng, dt, tokens):
    q = rng.standard_normal((2, tokens, 4, 64)).astype(np.float32).astype(dt)
    k = rng.standard_normal((2, tokens, 2, 64)).astype(np.float32).astype(dt)
    return q, k


@pytest.mark.parametrize("offset", [0, 7, 4095, 2**31 - 8])
@pytest.mark.parametrize("tokens", [1, 5])
def test_same_bits_as_general_path(rng, dtype, offset, tokens):
    name, dt = dtype
    q, k = _pair(rng, dt, tokens)
    q0, k0 = q.copy(), k.copy()
    original = q.copy()
    # theta given (at its default value) sends the call down the general path.
    fast_q, fast_k = posenc.rope(q, k, offset=offset)
    general_q, general_k = posenc.rope(q0, k0, offset=offset, theta=10000.0)
    assert fast_q is q and fast_k is k
    if offset or tokens > 1:  # position 0 alone is the identity
        assert not np.array_equal(q.view(np.uint8), original.view(np.uint8)), name
    np.testing.assert_array_equal(q.view(np.uint8), q0.view(np.uint8))
    np.testing.assert_array_equal(k.view(np.uint8), k0.view(np.uint8))


def test_fast_path_rotates(rng):
    q, k = _pair(rng, np.float32, 3)
    q0 = q.copy()
    assert _posenc._rope_plain(posenc.default_context(), q, k, 11) is None
    assert not np.array_equal(q, q0)
    general = q0.copy()
    posenc.rope(general, None, offset=11, style="neox", layout="bthd", theta=10000.0)
    np.testing.assert_array_equal(q, general)


def test_q_alone_same_bits(rng):
    q, _ = _pair(rng, np.float16, 4)
    q0 = q.copy()
    assert posenc.rope(q, offset=3) is q
    posenc.rope(q0, offset=3, rotary_dim=64)
    np.testing.assert_array_equal(q.view(np.uint16), q0.view(np.uint16))


def test_left_to_general_path_untouched(rng):
    context = posenc.default_context()
    q, k = _pair(rng, np.float32, 2)
    q0 = q.copy()
    for args in ((q.astype(np.float64), None, 0), ([[1.0, 2.0]], None, 0),
                 (q, k.astype(np.int16), 0), (q, k, 2**40), (q, k, 1.5)):
        assert _posenc._rope_plain(context, *args) is NotImplemented
    np.testing.assert_array_equal(q, q0)


def test_errors_as_general_path(rng):
    q, k = _pair(rng, np.float32, 2)
    q.setflags(write=False)
    q0 = q.copy()
    with pytest.raises(posenc.InvalidArgument, match="q: the array is read-only"):
        posenc.rope(q, k)
    with pytest.raises(posenc.InvalidArgument, match="q: the array is read-only"):
        posenc.rope(q, k, theta=10000.0)
    np.testing.assert_array_equal(q, q0)
    # out of int32: refused naming the argument, never wrapped
    with pytest.raises(posenc.InvalidArgument, match="offset"):
        posenc.rope(q0, offset=2**40)
    np.testing.assert_array_equal(q, q0)


def test_bench_runs():
    lines = []
    assert bench.main(["--rounds", "1", "--decode-calls", "5", "--prefill-calls", "1",
                       "--prefill-tokens", "8", "--no-torch"], out=lines.append) == 0
    text = "\n".join(lines)
    for row in ("posenc from Python", "posenc_rope from C", "numpy (vectorized f32)",
                "decode Python overhead", "prefill C/Python", "call shapes",
                "Rope(config)(q, k, position_ids=) costs",
                "rope(q, k, positions=, theta=, scaling=config) costs"):
        assert row in text


def test_numpy_reference_matches_posenc(rng):
    # The bench's numpy contender is a real RoPE: it agrees with posenc to float32 rounding.
    q, k = _pair(rng, np.float32, 6)
    qn, kn = q.copy(), k.copy()
    posenc.rope(q, k, offset=9)
    bench._numpy_rope(64)(qn, kn, 9)
    np.testing.assert_allclose(qn, q, rtol=0, atol=1e-4)
    np.testing.assert_allclose(kn, k, rtol=0, atol=1e-4)


def test_onnxruntime_contender_matches_posenc(rng):
    # The bench's ONNX Runtime contender is a real RoPE too: its RotaryEmbedding operator on
    # the float32 cos/sin cache agrees with posenc to float32 rounding.
    onnxruntime = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    q = rng.standard_normal((1, 6, 4, 64)).astype(np.float32)
    k = rng.standard_normal((1, 6, 2, 64)).astype(np.float32)
    call = bench._onnxruntime_rope(onnxruntime, onnx, q, k, 9)
    call()
    posenc.rope(q, k, offset=9)
    np.testing.assert_allclose(call.outputs["q_rotated"].reshape(q.shape), q, rtol=0, atol=1e-4)
    np.testing.assert_allclose(call.outputs["k_rotated"].reshape(k.shape), k, rtol=0, atol=1e-4)


def _rope_signature():
    """posenc.rope's signature as the Python layer converts its arguments: _rope_arguments'
    parameters and context."""
    converted = inspect.signature(posenc._rope_arguments)
    context = inspect.Parameter("context", inspect.Parameter.KEYWORD_ONLY, default=None)
    return converted.replace(parameters=[*converted.parameters.values(), context])


def test_signature_is_the_converters():
    # posenc.rope is C; its documented signature must be the one its converter takes.
    assert str(inspect.signature(posenc.rope)) == str(_rope_signature())
    assert "Rotary position embedding" in posenc.rope.__doc__


def test_converted_calls_run_in_c(rng, monkeypatch):
    # A call C cannot take as it comes is converted in Python and run by C itself: the
    # converter returns keywords and never calls the operation back.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    q, k = _pair(rng, ml_dtypes.bfloat16, 3)
    expected_q, expected_k = q.copy(), k.copy()
    posenc.Rope()(expected_q, expected_k, offset=5)

    def refused(*args, **kwargs):
        raise AssertionError("_rope_resolved called from Python")

    monkeypatch.setattr(_posenc, "_rope_resolved", refused)
    assert posenc.rope(q, k, offset=5) == (q, k)
    np.testing.assert_array_equal(q.view(np.uint16), expected_q.view(np.uint16))
    np.testing.assert_array_equal(k.view(np.uint16), expected_k.view(np.uint16))


def test_resolved_entry_same_bits(rng):
    # _posenc._rope_resolved takes what the converter returns, as posenc.rope runs it.
    q, k = _pair(rng, np.float32, 3)
    q0, k0 = q.copy(), k.copy()
    posenc.rope(q, k, offset=6, rotary_dim=32)
    assert _posenc._rope_resolved(posenc.default_context(), **posenc._rope_arguments(
        q0, k0, offset=6, rotary_dim=32)) is None
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(k, k0)


def test_keyword_forms_same_bits(rng):
    q, k = _pair(rng, np.float32, 3)
    expected_q, expected_k = q.copy(), k.copy()
    posenc.rope(expected_q, expected_k, offset=4, theta=10000.0)
    context = posenc.default_context()
    for call in (lambda a, b: posenc.rope(a, k=b, offset=4),
                 lambda a, b: posenc.rope(a, b, offset=4, context=context),
                 lambda a, b: posenc.rope(a, b, context=None, offset=4)):
        a, b = q.copy(), k.copy()
        result = call(a, b)
        assert result[0] is a and result[1] is b
        np.testing.assert_array_equal(a, expected_q)
        np.testing.assert_array_equal(b, expected_k)


def test_bad_calls_raise_as_python_does(rng):
    q, _ = _pair(rng, np.float32, 2)
    q0 = q.copy()
    with pytest.raises(TypeError, match="rotary"):
        posenc.rope(q, rotary=8)
    with pytest.raises(TypeError):
        posenc.rope()
    with pytest.raises(TypeError):
        posenc.rope(q, None, 3)
    with pytest.raises(TypeError, match="'q'"):
        posenc.rope(q, q=q)
    with pytest.raises(TypeError, match="posenc.Context"):
        posenc.rope(q, context="cpu")
    np.testing.assert_array_equal(q, q0)


def test_default_context_is_one_object():
    assert posenc.default_context() is posenc.default_context()
    assert isinstance(posenc.default_context(), posenc.Context)


def test_no_reference_leaks(rng):
    q, k = _pair(rng, np.float32, 1)
    calls = [lambda: posenc.rope(q, k, offset=1), lambda: posenc.rope(q, offset=1),
             lambda: posenc.rope(q, k, offset=1, theta=10000.0)]
    for call in calls:
        call()
    before = (sys.getrefcount(q), sys.getrefcount(k))
    for _ in range(1000):
        for call in calls:
            call()
    assert (sys.getrefcount(q), sys.getrefcount(k)) == before


def test_stub_has_every_keyword():
    # the type stub offers what posenc.rope takes, and Context's methods
    import pathlib
    import re
    stub = pathlib.Path(posenc.__file__).with_suffix(".pyi")
    if not stub.exists():
        pytest.skip("no stub beside the package")
    text = stub.read_text()
    overloads = re.findall(r"^def rope\((.*?)\) ->", text, re.M | re.S)
    assert len(overloads) == 2
    for keyword in _rope_signature().parameters:
        for overload in overloads:
            assert re.search(rf"\b{keyword}:", overload), keyword
    for method in ("prepare", "stats", "close"):
        assert f"def {method}(" in text and callable(getattr(posenc.Context, method))


def test_resolved_entry_names_a_bad_layout(rng):
    # The Python layer checks layout first; the C entry's own check shows the value too.
    q, k = _pair(rng, np.float32, 3)
    arguments = posenc._rope_arguments(q, k, rotary_dim=32)
    arguments["layout"] = "tbhd"
    with pytest.raises(posenc.InvalidArgument, match=r"layout: 'tbhd' is not 'bthd' or 'bhtd'"):
        _posenc._rope_resolved(posenc.default_context(), **arguments)
