# SPDX-License-Identifier: MIT
# Arrays given through __dlpack__ (objects without the buffer protocol: torch CPU tensors, jax):
# the same bits as the numpy path, any strides, the producer's deleter run after the call.
import sys

import numpy as np
import pytest

import posenc


class DLPackOnly:
    """A numpy array seen only through DLPack, as a torch or jax array is."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class Refuses:
    def __dlpack__(self, **kwargs):
        raise BufferError("no export")


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("bhtd", [False, True])
def test_same_bits_as_buffers(rng, dt, bhtd):
    q = rng.standard_normal((2, 5, 4, 32)).astype(dt)
    k = rng.standard_normal((2, 5, 2, 32)).astype(dt)
    if bhtd:  # non-contiguous views: DLPack's element strides
        q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
    layout = "bhtd" if bhtd else "bthd"
    q0, k0 = q.copy(), k.copy()
    refs = sys.getrefcount(q)
    posenc.rope(DLPackOnly(q), DLPackOnly(k), offset=3, layout=layout)
    posenc.rope(q0, k0, offset=3, layout=layout)
    np.testing.assert_array_equal(q.view(np.uint8 if dt == np.float32 else np.uint16),
                                  q0.view(np.uint8 if dt == np.float32 else np.uint16))
    np.testing.assert_array_equal(k, k0)
    assert sys.getrefcount(q) == refs  # the deleter gave back the producer's reference


def test_fast_path_and_out(rng):
    q = rng.standard_normal((3, 4, 16)).astype(np.float32)
    expect = q.copy()
    posenc.rope(expect, offset=5)
    got = q.copy()
    assert posenc.rope(DLPackOnly(got), offset=5).array is got
    np.testing.assert_array_equal(got, expect)
    out = np.zeros_like(q)
    posenc.rope(q, out=DLPackOnly(out), offset=5)
    np.testing.assert_array_equal(out, expect)


def test_wrong_dtype_and_refusal(rng):
    q = rng.standard_normal((3, 4, 16))  # float64
    before = q.copy()
    with pytest.raises(posenc.InvalidDtype, match="q: DLPack type code 2, 64 bits"):
        posenc.rope(DLPackOnly(q))
    np.testing.assert_array_equal(q, before)
    with pytest.raises(posenc.InvalidArgument, match="q: __dlpack__"):
        posenc.rope(Refuses())
    with pytest.raises(posenc.InvalidArgument, match="buffer protocol or __dlpack__"):
        posenc.rope(object())


def test_torch_tensors(rng):
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        q = torch.randn(2, 4, 3, 32).to(dtype)
        k = torch.randn(2, 4, 1, 32).to(dtype)
        q0, k0 = q.clone(), k.clone()
        posenc.rope(q, k, offset=7)  # the short path, by DLPack
        posenc.rope(q0, k0, offset=7, theta=10000.0)  # the general path's conversion
        assert torch.equal(q, q0) and torch.equal(k, k0)
