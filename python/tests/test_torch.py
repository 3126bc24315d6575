# SPDX-License-Identifier: MIT
# torch CPU tensors (only where torch imports): rotated in their own memory against the float64
# reference in every dtype and through strided views, positions as tensors, and bad tensors
# refused with a posenc.Error and left as they were.
import numpy as np
import pytest

import posenc
from posenc import bench
from _reference import check, rope as ref_rope, sinusoidal as ref_sinusoidal

torch = pytest.importorskip("torch")

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _float64(tensor):
    # every f16 and bf16 value is exact in float32, and numpy has no bfloat16 of its own
    return tensor.detach().float().numpy().astype(np.float64)


def _views(kind, dtype):
    """q, k, their [b, t, h, d] views, the layout to pass, and the fused qkv tensor if any."""
    g = torch.Generator().manual_seed(7)
    if kind == "contiguous":
        q = torch.randn(2, 5, 4, 16, generator=g).to(dtype)
        k = torch.randn(2, 5, 2, 16, generator=g).to(dtype)
        return q, k, q, k, "bthd", None
    if kind == "transposed":  # [b, t, h, d] views of [b, h, t, d] memory
        base_q = torch.randn(2, 4, 5, 16, generator=g).to(dtype)
        base_k = torch.randn(2, 2, 5, 16, generator=g).to(dtype)
        q, k = base_q.transpose(1, 2), base_k.transpose(1, 2)
        assert not q.is_contiguous()
        return q, k, q, k, "bthd", None
    if kind == "bhtd":  # HF's [batch, heads, tokens, head_dim], as layout="bhtd"
        q = torch.randn(2, 4, 5, 16, generator=g).to(dtype)
        k = torch.randn(2, 2, 5, 16, generator=g).to(dtype)
        return q, k, q.transpose(1, 2), k.transpose(1, 2), "bhtd", None
    # a fused qkv projection [batch, tokens, (4 + 2 + 2) heads * 16]: q and k are slices of it
    qkv = torch.randn(2, 5, 8 * 16, generator=g).to(dtype)
    q = qkv[..., :64].unflatten(-1, (4, 16))
    k = qkv[..., 64:96].unflatten(-1, (2, 16))
    assert not q.is_contiguous()
    return q, k, q, k, "bthd", qkv


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("kind", ["contiguous", "transposed", "bhtd", "fused qkv"])
@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
def test_in_place_against_reference(name, kind, general):
    q, k, q_bthd, k_bthd, layout, qkv = _views(kind, DTYPES[name])
    before = [_float64(t) for t in (q_bthd, k_bthd)]
    v = qkv[..., 96:].clone() if qkv is not None else None
    pointers = [t.data_ptr() for t in (q, k)]
    # theta=10000.0 is the default, given only to take the general path
    options = {"theta": 10000.0} if general else {}
    rq, rk = posenc.rope(q, k, offset=3, layout=layout, **options)
    assert rq is q and rk is k
    assert [t.data_ptr() for t in (q, k)] == pointers
    positions = np.broadcast_to(np.arange(3.0, 8.0), (2, 5))
    for got, orig in zip((q_bthd, k_bthd), before):
        exact, scale = ref_rope(orig, positions)
        check(_float64(got), exact, scale, name)
    if qkv is not None:
        assert torch.equal(qkv[..., 96:], v)  # v untouched


@pytest.mark.parametrize("name", list(DTYPES))
def test_same_bits_as_numpy(name):
    q = torch.randn(1, 6, 3, 32).to(DTYPES[name])
    bits = q.view(torch.int16).numpy().copy()  # numpy has no bfloat16 of its own
    if name == "bfloat16":
        array = bits.view(pytest.importorskip("ml_dtypes").bfloat16)
    else:
        array = bits.view(np.float32 if name == "float32" else np.float16)
    posenc.rope(q, offset=11, style="gptj")
    posenc.rope(array, offset=11, style="gptj")
    np.testing.assert_array_equal(q.view(torch.int16).numpy(), bits)


@pytest.mark.parametrize("name", list(DTYPES))
def test_out_and_k_out(name):
    dtype = DTYPES[name]
    q = torch.randn(1, 4, 4, 16).to(dtype)
    k = torch.randn(1, 4, 2, 16).to(dtype)
    q0, k0 = q.clone(), k.clone()
    out, k_out = torch.zeros_like(q), torch.zeros_like(k)
    rq, rk = posenc.rope(q, k, out=out, k_out=k_out, offset=9)
    assert rq is out and rk is k_out
    assert torch.equal(q, q0) and torch.equal(k, k0)
    posenc.rope(q, k, offset=9)
    assert torch.equal(out, q) and torch.equal(k_out, k)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("batched", [False, True])
def test_integer_positions_tensors(dtype, batched):
    q = torch.randn(2, 5, 2, 16)
    q0 = _float64(q)
    values = torch.tensor([[7, 0, 4096, 123456, 2**31 - 1], [1, 2, 3, 5, 8]])
    posenc.rope(q, positions=(values if batched else values[0]).to(dtype))
    expect = values if batched else values[0].expand(2, 5)
    exact, scale = ref_rope(q0, expect.double().numpy())
    check(_float64(q), exact, scale, "float32")


def test_float_positions_tensor():
    q = torch.randn(1, 4, 2, 16)
    q0 = _float64(q)
    positions = torch.tensor([0.5, 1.25, 100.0, 4095.75])
    posenc.rope(q, positions=positions)
    exact, scale = ref_rope(q0, positions.double().numpy()[None])
    check(_float64(q), exact, scale, "float32")


@pytest.mark.parametrize("name", list(DTYPES))
def test_sinusoidal_into_a_tensor(name):
    out = torch.zeros(6, 32, dtype=DTYPES[name])
    pointer = out.data_ptr()
    assert posenc.sinusoidal(out, positions=torch.arange(6) * 7) is out
    assert out.data_ptr() == pointer
    exact = ref_sinusoidal(np.arange(6) * 7.0, 32)
    check(_float64(out), exact, np.ones_like(exact), name)


def _meta(*shape):
    # a tensor on a device other than the CPU, as a CUDA one is, that any build of torch has
    return torch.empty(*shape, device="meta")


@pytest.mark.parametrize("case, error, words", [
    ("requires grad", posenc.InvalidArgument, "q: .*requires grad"),
    ("requires grad k", posenc.InvalidArgument, "k: .*requires grad"),
    ("requires grad out", posenc.InvalidArgument, "q_out: .*requires grad"),
    ("f64", posenc.InvalidDtype, "q: torch.float64"),
    ("int32 k", posenc.InvalidDtype, "k: torch.int32"),
    ("5-D", posenc.InvalidShape, "q: 5 dims"),
    ("k heads dim", posenc.InvalidShape, "k"),
    ("broadcast", posenc.InvalidLayout, "q: dim 1 has stride 0"),
    ("other device", posenc.InvalidArgument, "q: a torch tensor on meta"),
    ("other device out", posenc.InvalidArgument, "q_out: a torch tensor on meta"),
    ("positions device", posenc.InvalidArgument, "positions: a torch tensor on meta"),
    ("positions range", posenc.InvalidArgument, "positions: .*outside int32"),
    ("positions bf16", posenc.InvalidDtype, "positions: torch.bfloat16"),
    ("positions shape", posenc.InvalidShape, "positions"),
    ("sparse", posenc.InvalidArgument, "k: .*sparse"),
    ("negated view", posenc.InvalidArgument, "q: .*resolve_neg"),
    # the calls C takes itself: DLPack would hand over the memory without the negation
    ("negated view, plain call", posenc.InvalidArgument, "q: .*resolve_neg"),
    ("negated bf16 view", posenc.InvalidArgument, "k: .*resolve_neg"),
    ("negated view, Rope", posenc.InvalidArgument, "q: .*resolve_neg"),
])
def test_bad_tensors_untouched(case, error, words):
    q = torch.randn(1, 4, 2, 8)
    k = torch.randn(1, 4, 1, 8)
    watched = []

    def w(tensor):  # its values now, before the call: it must still hold them after
        watched.append((tensor, tensor.detach().clone()))
        return tensor

    w(q)
    w(k)

    calls = {
        "requires grad": lambda: posenc.rope(w(q.clone().requires_grad_()), k),
        "requires grad k": lambda: posenc.rope(q, w(k.clone().requires_grad_())),
        "requires grad out": lambda: posenc.rope(q, out=w(torch.ones_like(q).requires_grad_())),
        "f64": lambda: posenc.rope(w(q.double()), k),
        "int32 k": lambda: posenc.rope(q, w(k.int())),
        "5-D": lambda: posenc.rope(q[None]),
        "k heads dim": lambda: posenc.rope(q, w(torch.ones(1, 4, 1, 6))),
        "broadcast": lambda: posenc.rope(w(torch.ones(1, 1, 2, 8)).expand(1, 4, 2, 8)),
        "other device": lambda: posenc.rope(_meta(1, 4, 2, 8), k),
        "other device out": lambda: posenc.rope(q, k, out=_meta(1, 4, 2, 8)),
        "positions device": lambda: posenc.rope(q, k, positions=_meta(4)),
        "positions range": lambda: posenc.rope(q, k, positions=torch.tensor([0, 1, 2, 2**40])),
        "positions bf16": lambda: posenc.rope(q, positions=torch.zeros(4, dtype=torch.bfloat16)),
        "positions shape": lambda: posenc.rope(q, k, positions=torch.arange(5)),
        "sparse": lambda: posenc.rope(q, torch.ones(4, 8).to_sparse(), theta=500.0),
        "negated view": lambda: posenc.rope(torch._neg_view(q), k, theta=500.0),
        "negated view, plain call": lambda: posenc.rope(torch._neg_view(q), k, offset=3),
        "negated bf16 view": lambda: posenc.rope(
            w(q.bfloat16()), torch._neg_view(w(k.bfloat16())), offset=3),
        "negated view, Rope": lambda: posenc.Rope(theta=5.0)(torch._neg_view(q), k),
    }
    with pytest.raises(error, match=words) as info:
        calls[case]()
    assert isinstance(info.value, posenc.Error) and info.value.status.startswith("POSENC_")
    for tensor, values in watched:
        assert torch.equal(tensor.detach(), values)


def test_requires_grad_read_only_is_fine():
    # a tensor posenc only reads may require grad: with out= given, q is not written
    q = torch.randn(1, 4, 2, 8, requires_grad=True)
    out = torch.zeros(1, 4, 2, 8)
    posenc.rope(q, out=out)
    expect = q.detach().clone()
    posenc.rope(expect)
    assert torch.equal(out, expect)


def test_bench_hf_rope_matches_posenc():
    # The bench's torch contender is a real RoPE: HF's apply_rotary_pos_emb agrees with posenc
    # (layout "bhtd", HF's) to float32 rounding of its angles at these small positions.
    q = torch.randn(1, 4, 6, 64)
    k = torch.randn(1, 2, 6, 64)
    qh, kh = q.clone(), k.clone()
    posenc.rope(q, k, offset=9, layout="bhtd")
    bench._torch_rope(torch, 64)(qh, kh, 9)
    torch.testing.assert_close(qh, q, rtol=0, atol=1e-4)
    torch.testing.assert_close(kh, k, rtol=0, atol=1e-4)


def test_bench_reports_torch():
    lines = []
    assert bench.main(["--rounds", "1", "--decode-calls", "5", "--prefill-calls", "1",
                       "--prefill-tokens", "8"], out=lines.append) == 0
    text = "\n".join(lines)
    assert f"torch {torch.__version__}" in text
    assert text.count("torch, HF apply_rotary_pos_emb") == 2  # decode and prefill
