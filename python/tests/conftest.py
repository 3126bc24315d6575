# SPDX-License-Identifier: MIT
# Shared fixtures of the posenc Python tests: dtypes, with bf16 only where ml_dtypes imports.
import numpy as np
import pytest


def _dtypes():
    names = [("float32", np.float32), ("float16", np.float16)]
    try:
        import ml_dtypes
        names.append(("bfloat16", ml_dtypes.bfloat16))
    except ImportError:
        pass
    return names


DTYPES = _dtypes()


@pytest.fixture(params=DTYPES, ids=[name for name, _ in DTYPES])
def dtype(request):
    """(name, numpy dtype) of every data type the package accepts."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
