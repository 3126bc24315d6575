# SPDX-License-Identifier: MIT
# Bad input: each case raises the right posenc.Error subclass, with a message naming the
# argument at fault, and leaves every array as it was.
import numpy as np
import pytest

import posenc


@pytest.fixture
def qk(rng):
    q = rng.standard_normal((1, 4, 2, 8)).astype(np.float32)
    k = rng.standard_normal((1, 4, 1, 8)).astype(np.float32)
    return q, k


def _untouched(arrays, call):
    before = [a.copy() for a in arrays]
    try:
        call()
    finally:
        for a, b in zip(arrays, before):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case, error, status, words", [
    ("f64 q", posenc.InvalidDtype, "POSENC_INVALID_DTYPE", "q"),
    ("int k", posenc.InvalidDtype, "POSENC_INVALID_DTYPE", "k"),
    ("5-D q", posenc.InvalidShape, "POSENC_INVALID_SHAPE", "q"),
    ("read-only q", posenc.InvalidArgument, "POSENC_INVALID_ARGUMENT", "read-only"),
    ("rotary_dim", posenc.InvalidShape, "POSENC_INVALID_SHAPE", "rotary_dim"),
    ("odd rotary_dim", posenc.InputError, None, "rotary_dim"),
    ("scaling key", posenc.InvalidArgument, "POSENC_INVALID_ARGUMENT", "bogus"),
    ("k tokens", posenc.InvalidShape, "POSENC_INVALID_SHAPE", "k"),
    ("out shape", posenc.InvalidShape, "POSENC_INVALID_SHAPE", "q_out"),
    ("positions shape", posenc.InvalidShape, "POSENC_INVALID_SHAPE", "positions"),
    ("style", posenc.InvalidArgument, "POSENC_INVALID_ARGUMENT", "style"),
    ("negative stride", posenc.InvalidLayout, "POSENC_INVALID_LAYOUT", "negative"),
    ("layout", posenc.InvalidArgument, "POSENC_INVALID_ARGUMENT", "layout"),
])
def test_rope_bad_input(qk, case, error, status, words):
    q, k = qk
    out = np.zeros((1, 4, 2, 6), np.float32)
    calls = {
        "f64 q": lambda: posenc.rope(q.astype(np.float64)),
        "int k": lambda: posenc.rope(q, k.astype(np.int32)),
        "5-D q": lambda: posenc.rope(q[None]),
        "read-only q": lambda: posenc.rope(_readonly(q)),
        "rotary_dim": lambda: posenc.rope(q, k, rotary_dim=10),
        "odd rotary_dim": lambda: posenc.rope(q, k, rotary_dim=5),
        "scaling key": lambda: posenc.rope(q, k, scaling={"type": "linear", "factor": 2.0,
                                                           "bogus": 1}),
        "k tokens": lambda: posenc.rope(q, np.zeros((1, 3, 1, 8), np.float32)),
        "out shape": lambda: posenc.rope(q, out=out),
        "positions shape": lambda: posenc.rope(q, positions=np.arange(9, dtype=np.int32)),
        "style": lambda: posenc.rope(q, style="sideways"),
        "negative stride": lambda: posenc.rope(q[:, ::-1]),
        "layout": lambda: posenc.rope(q, layout="tbhd"),
    }
    with pytest.raises(error) as info:
        _untouched([q, k, out], calls[case])
    assert isinstance(info.value, posenc.Error)
    if status:
        assert info.value.status == status
    assert words in str(info.value)


def _readonly(a):
    a.setflags(write=False)
    return a


def test_read_only_is_fine_with_out(qk):
    q, _ = qk
    q.setflags(write=False)
    out = np.zeros_like(q)
    posenc.rope(q, out=out)
    assert out.any()
    q.setflags(write=True)


def test_read_only_out_refused(qk):
    q, _ = qk
    out = np.zeros_like(q)
    out.setflags(write=False)
    with pytest.raises(posenc.InvalidArgument, match="q_out.*read-only"):
        _untouched([q, out], lambda: posenc.rope(q, out=out))


def test_error_hierarchy():
    assert issubclass(posenc.InvalidShape, posenc.InputError)
    assert issubclass(posenc.InputError, posenc.Error)
    assert issubclass(posenc.InputError, ValueError)
    assert issubclass(posenc.Unsupported, posenc.DeviceFailure)
    assert issubclass(posenc.OutOfMemory, posenc.HostError)


def test_unknown_device():
    with pytest.raises(posenc.DeviceFailure) as info:
        posenc.Context("no-such-device-anywhere")
    assert "no-such-device-anywhere" in str(info.value)
    assert info.value.status.startswith("POSENC_")


def test_sinusoidal_bad_input():
    out = np.zeros((4, 8), np.float64)
    with pytest.raises(posenc.InvalidDtype, match="out"):
        _untouched([out], lambda: posenc.sinusoidal(out))
    out32 = np.zeros((4, 8), np.float32)
    x = np.ones((4, 6), np.float32)
    with pytest.raises(posenc.InvalidShape):
        _untouched([out32, x], lambda: posenc.sinusoidal(out32, x=x))
    with pytest.raises(posenc.InvalidArgument, match="layout"):
        posenc.sinusoidal(out32, layout="diagonal")
    with pytest.raises(posenc.InvalidArgument, match="output_scale"):
        posenc.sinusoidal(out32, output_scale=0.0)
    ro = np.zeros((4, 8), np.float32)
    ro.setflags(write=False)
    with pytest.raises(posenc.InvalidArgument, match="read-only"):
        posenc.sinusoidal(ro)
    with pytest.raises(posenc.InvalidArgument, match="d_model"):
        posenc.sinusoidal(rows=4)


def test_positions_out_of_int32(qk):
    q, _ = qk
    with pytest.raises(posenc.InvalidArgument, match="positions"):
        _untouched([q], lambda: posenc.rope(q, positions=np.array([0, 1, 2, 2**31])))


def test_stub_classes_exist():
    import pathlib
    import re
    stub = pathlib.Path(posenc.__file__).with_suffix(".pyi")
    if not stub.exists():
        pytest.skip("no stub beside the package")
    names = re.findall(r"^class (\w+)", stub.read_text(), re.M)
    assert len(names) > 10
    for name in names:
        assert isinstance(getattr(posenc, name), type), name
    errors = {n for n in vars(posenc) if isinstance(getattr(posenc, n), type)
              and issubclass(getattr(posenc, n), posenc.Error)}
    assert errors <= set(names), errors - set(names)


def test_hf_scaling_end_to_end(qk):
    # An HF dict or config reaches the same call as the posenc form it maps to, its rope_theta
    # included; a key posenc cannot honour is an InvalidArgument naming it, arrays untouched.
    q, k = qk
    hf = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    config = {"rope_scaling": hf, "rope_theta": 500000.0, "max_position_embeddings": 131072,
              "head_dim": q.shape[-1]}
    form = {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_positions": 8192}
    positions = np.array([0, 7, 9000, 2**31 - 1], np.int32)
    from_hf = posenc.rope(q.copy(), k.copy(), positions=positions, scaling=config)
    direct = posenc.rope(q.copy(), k.copy(), positions=positions, scaling=form, theta=500000.0)
    for a, b in zip(from_hf, direct):
        np.testing.assert_array_equal(a, b)
    plain = posenc.rope(q.copy(), k.copy(), positions=positions, scaling=form)
    assert not np.array_equal(plain[0], direct[0])  # the config's theta really applied

    bad = dict(hf, short_mscale=1.0)
    with pytest.raises(posenc.InvalidArgument, match="short_mscale"):
        _untouched([q, k], lambda: posenc.rope(q, k, scaling=bad))
