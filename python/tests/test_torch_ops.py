# SPDX-License-Identifier: MIT
# posenc.torch (only where torch imports): torch.ops.posenc.rope and rope_functional against the
# float64 reference in every dtype, their autograd (the inverse rotation, gradcheck), torch.compile
# with no graph break, other devices refused by name, bad input leaving tensors as they were, the
# HF and vLLM drop-ins against float64 forms of HF's and vLLM's own formulas (and HF itself where
# transformers imports), and registration whichever of torch and posenc is imported first.
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import posenc
from _reference import PROMISE, check, rope as ref_rope, sincos, inv_freq as ref_inv_freq

torch = pytest.importorskip("torch")
import posenc.torch as pt  # noqa: E402  (after the skip: it imports torch)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _float64(tensor):
    # every f16 and bf16 value is exact in float32, and numpy has no bfloat16 of its own
    return tensor.detach().float().numpy().astype(np.float64)


def _random(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _bthd(tensor, layout):
    return tensor if layout == "bthd" else tensor.transpose(1, 2)


# -- registration ---------------------------------------------------------------------------------

_ORDERS = {
    "posenc then torch": "import posenc, sys; assert 'torch' not in sys.modules; import torch",
    "torch then posenc": "import torch, posenc",
    "posenc.torch": "import posenc.torch, torch",
    "find_spec first": ("import importlib.util, posenc; importlib.util.find_spec('torch'); "
                        "import torch"),
}


@pytest.mark.parametrize("order", list(_ORDERS))
def test_registered_whichever_comes_first(order):
    # a fresh interpreter each: registration happens once per process
    script = (f"{_ORDERS[order]}\n"
              "assert hasattr(torch.ops.posenc, 'rope') and hasattr(torch.ops.posenc, "
              "'rope_functional')\n"
              "q = torch.ones(1, 2, 1, 4)\n"
              "torch.ops.posenc.rope(q, offset=1)\n"
              "assert not torch.equal(q, torch.ones(1, 2, 1, 4))\n"
              "assert type(torch.__spec__.loader).__module__.startswith('_frozen_importlib')\n")
    env = dict(os.environ)
    package = str(pathlib.Path(posenc.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_importing_posenc_leaves_torch_alone():
    env = dict(os.environ)
    package = str(pathlib.Path(posenc.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c",
                             "import sys, posenc; print('torch' in sys.modules)"],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.stdout.strip() == "False", result.stderr


# -- both operators against the float64 reference -------------------------------------------------

_SHAPES = {
    # name: (layout, q as made from its memory, k likewise, fused qkv or None)
    "bthd": "bthd",
    "bhtd": "bhtd",     # HF's [batch, heads, seq, head_dim]
    "fused qkv": "bthd",  # q and k slices of one [batch, seq, (4 + 2 + 2) * 16] projection
}


def _inputs(kind, dtype):
    layout = _SHAPES[kind]
    if kind == "fused qkv":
        qkv = _random(2, 5, 8 * 16, dtype=dtype, seed=1)
        return (qkv[..., :64].unflatten(-1, (4, 16)), qkv[..., 64:96].unflatten(-1, (2, 16)),
                layout, qkv)
    if layout == "bhtd":
        return (_random(2, 4, 5, 16, dtype=dtype, seed=1), _random(2, 2, 5, 16, dtype=dtype,
                                                                   seed=2), layout, None)
    return (_random(2, 5, 4, 16, dtype=dtype, seed=1), _random(2, 5, 2, 16, dtype=dtype, seed=2),
            layout, None)


# int64 positions as HF passes them, one row per batch, far enough out that f32 angles would not
# do (posenc reduces them exactly)
_POSITIONS = torch.tensor([[3, 4, 5, 6, 7], [0, 1000, 65536, 123457, 2**31 - 1]])


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("kind", list(_SHAPES))
@pytest.mark.parametrize("op", ["rope", "rope_functional"])
@pytest.mark.parametrize("style, rotary_dim", [("neox", 0), ("gptj", 0), ("neox", 10)])
def test_ops_against_reference(name, kind, op, style, rotary_dim):
    # Tolerance: posenc.h's promise, 8 * 2^-24 of each pair's norm in f32 plus one unit in the
    # last place in f16 and bf16 (the one rounding of the result), as every posenc test.
    q, k, layout, qkv = _inputs(kind, DTYPES[name])
    before = [_float64(_bthd(t, layout)) for t in (q, k)]
    v = None if qkv is None else qkv[..., 96:].clone()
    options = dict(layout=layout, style=style, rotary_dim=rotary_dim, theta=50000.0)
    if op == "rope":
        assert torch.ops.posenc.rope(q, k, _POSITIONS, **options) is None
        got = (q, k)
    else:
        q0, k0 = q.clone(), k.clone()
        got = torch.ops.posenc.rope_functional(q, k, _POSITIONS, **options)
        assert torch.equal(q, q0) and torch.equal(k, k0)  # the inputs are only read
        assert all(g.shape == t.shape and g.dtype == t.dtype for g, t in zip(got, (q, k)))
    for out, x in zip(got, before):
        exact, scale = ref_rope(x, _POSITIONS.double().numpy(), rotary_dim=rotary_dim or None,
                                theta=50000.0, style=style)
        check(_float64(_bthd(out, layout)), exact, scale, name)
    if qkv is not None:
        assert torch.equal(qkv[..., 96:], v)  # v untouched beside q and k


@pytest.mark.parametrize("name", list(DTYPES))
def test_scaling_and_attention_factor_options(name):
    # linear scaling and an attention factor travel as flat options; the reference has both
    q = _random(1, 6, 2, 32, dtype=DTYPES[name])
    positions = torch.arange(6) * 1000
    x = _float64(q)
    torch.ops.posenc.rope(q, None, positions, scaling_type="linear", factor=4.0,
                          attention_factor=0.75)
    exact, scale = ref_rope(x, np.broadcast_to(positions.double().numpy(), (1, 6)),
                            scaling={"type": "linear", "factor": 4.0}, attention_factor=0.75)
    check(_float64(q), exact, scale, name)


_CONFIGS = {
    "llama3": {"rope_theta": 500000.0, "max_position_embeddings": 131072, "head_dim": 32,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}},
    "yarn": {"rope_theta": 1e6, "max_position_embeddings": 32768, "head_dim": 32,
             "rope_scaling": {"type": "yarn", "factor": 4.0, "beta_fast": 16,
                              "original_max_position_embeddings": 8192, "mscale": 0.9}},
    "longrope": {"rope_theta": 10000.0, "max_position_embeddings": 131072,
                 "original_max_position_embeddings": 4096, "head_dim": 32,
                 "rope_scaling": {"type": "longrope",
                                  "short_factor": [1.0 + 0.01 * j for j in range(16)],
                                  "long_factor": [1.0 + 0.5 * j for j in range(16)]}},
    "dynamic": {"rope_theta": 10000.0, "max_position_embeddings": 2048, "head_dim": 32,
                "rope_scaling": {"type": "dynamic", "factor": 2.0}},
    "partial": {"rope_theta": 10000.0, "head_dim": 32, "partial_rotary_factor": 0.5},
    "posenc form": {"type": "yarn_ggml", "freq_scale": 0.25, "ext_factor": 1.0,
                    "original_max_positions": 4096, "beta_fast": 32.0, "beta_slow": 1.0},
}


@pytest.mark.parametrize("config", list(_CONFIGS))
def test_options_give_posenc_rope_bits(config):
    # rope_options flattens what posenc reads from a config into the operators' options, and
    # the operators put it back together: the same bits as posenc.rope given the config itself
    q = _random(1, 7, 3, 32, seed=3)
    k = _random(1, 7, 1, 32, seed=4)
    positions = torch.tensor([0, 5, 900, 4095, 8191, 20000, 100000])
    want_q, want_k = q.clone(), k.clone()
    posenc.rope(want_q, want_k, positions=positions, scaling=_CONFIGS[config])
    options = pt.rope_options(_CONFIGS[config], head_dim=32)
    torch.ops.posenc.rope(q, k, positions, **options)
    assert torch.equal(q, want_q) and torch.equal(k, want_k)


# -- autograd -------------------------------------------------------------------------------------

def test_functional_backward_is_the_inverse_rotation():
    # the gradient through out = R x is R^T g = R(-t) g: checked against float64
    q = _random(2, 5, 4, 16, seed=5).requires_grad_()
    k = _random(2, 5, 2, 16, seed=6).requires_grad_()
    gq, gk = _random(2, 5, 4, 16, seed=7), _random(2, 5, 2, 16, seed=8)
    out_q, out_k = torch.ops.posenc.rope_functional(q, k, _POSITIONS, theta=500.0,
                                                    attention_factor=1.25)
    torch.autograd.backward((out_q, out_k), (gq, gk))
    for grad, g in ((q.grad, gq), (k.grad, gk)):
        exact, scale = ref_rope(_float64(g), _POSITIONS.double().numpy(), theta=500.0,
                                inverse=True, attention_factor=1.25)
        check(_float64(grad), exact, scale, "float32")


# gradcheck in float32: posenc takes no float64. The op is linear in q and k, so central
# differences are exact but for rounding: each output is within 8 * 2^-24 |pair| (~2e-6 for these
# values), so a difference over 2 eps = 2^-5 is within ~1.3e-4; atol 1e-3 leaves a margin of 7.
_GRADCHECK = dict(eps=2.0**-6, atol=1e-3, rtol=1e-3)


@pytest.mark.filterwarnings("ignore:Input #")  # gradcheck's note that inputs are not float64
@pytest.mark.parametrize("op", ["rope", "rope_functional"])
def test_gradcheck_float32(op):
    q = _random(1, 3, 2, 8, seed=9).requires_grad_()
    k = _random(1, 3, 1, 8, seed=10).requires_grad_()
    positions = torch.tensor([1, 70, 3000])
    options = dict(theta=100.0, style="gptj", rotary_dim=6)

    if op == "rope":
        def f(q, k):
            q, k = q.clone(), k.clone()  # the op writes: rotate copies of gradcheck's inputs
            torch.ops.posenc.rope(q, k, positions, **options)
            return q, k
    else:
        def f(q, k):
            return torch.ops.posenc.rope_functional(q, k, positions, **options)
    assert torch.autograd.gradcheck(f, (q, k), **_GRADCHECK)
    assert torch.autograd.gradgradcheck(f, (q, k), **_GRADCHECK)


def _attention_step(x, weight, in_place):
    # an HF-like projection: q and k are head views of one matmul's output, [b, h, t, d]
    qk = (x @ weight).view(1, 5, 6, 16).transpose(1, 2)
    q, k = qk[:, :4], qk[:, 4:]
    if in_place:
        torch.ops.posenc.rope(q, k, torch.arange(5), layout="bhtd", theta=1000.0)
    else:
        q, k = torch.ops.posenc.rope_functional(q, k, torch.arange(5), layout="bhtd",
                                                theta=1000.0)
    # grouped-query: each k head serves two q heads
    return (q @ k.repeat_interleave(2, 1).transpose(-1, -2)).square().sum()


def test_in_place_backward_through_views():
    x = _random(1, 5, 32, seed=11).requires_grad_()
    weight = _random(32, 96, seed=12)
    grads = []
    for in_place in (True, False):
        x.grad = None
        _attention_step(x, weight, in_place).backward()
        grads.append(x.grad.clone())
    assert torch.equal(grads[0], grads[1])  # the same rotations either way, the same bits


def test_in_place_write_of_a_saved_tensor_is_refused():
    # the op bumps the version counters of what it writes: a backward that needs the old values
    # fails loudly, as after any torch in-place op, instead of using the rotated ones
    a = _random(1, 2, 1, 8, seed=13).requires_grad_()
    b = a * 1.0
    loss = (b * b).sum()  # saves b
    torch.ops.posenc.rope(b, offset=3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    with torch.no_grad():  # without grad too: the version still changes
        c = a.detach() * 1.0
    c.requires_grad_()
    loss = (c.sin()).sum()
    with torch.no_grad():
        torch.ops.posenc.rope(c, offset=3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_in_place_on_a_leaf_that_requires_grad_is_refused():
    q = _random(1, 2, 1, 8).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        torch.ops.posenc.rope(q)


@pytest.mark.parametrize("op", ["rope", "rope_functional"])
def test_opcheck(op):
    # torch's own checks of a custom op: schema (what is written), fake kernel, autograd
    # registration, and AOT dispatch with dynamic shapes
    q = _random(2, 5, 4, 16, seed=14)
    k = _random(2, 5, 2, 16, seed=15)
    if op == "rope_functional":
        q.requires_grad_()
        k.requires_grad_()
    result = torch.library.opcheck(getattr(torch.ops.posenc, op).default, (q, k, _POSITIONS),
                                   {"theta": 500.0, "scaling_type": "linear", "factor": 2.0})
    assert set(result.values()) == {"SUCCESS"}, result


# -- torch.compile --------------------------------------------------------------------------------

def _compiled(fn, backend="aot_eager"):
    # fullgraph: a graph break is an error, not a silent fallback to eager
    torch._dynamo.reset()
    return torch.compile(fn, fullgraph=True, backend=backend)


def test_compile_in_place_and_functional_no_graph_break():
    def step(q, k, positions):
        q = q * 2.0
        k = k + 1.0
        torch.ops.posenc.rope(q, k, positions, theta=5e5)
        a, b = torch.ops.posenc.rope_functional(q, k, positions, theta=5e5, inverse=True)
        return q.sum(-1), a, b

    q, k = _random(2, 5, 4, 16, seed=16), _random(2, 5, 2, 16, seed=17)
    want = step(q, k, _POSITIONS)
    got = _compiled(step)(q, k, _POSITIONS)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_compile_training_step_no_graph_break():
    x = _random(1, 5, 32, seed=18).requires_grad_()
    weight = _random(32, 96, seed=19)
    for in_place in (True, False):
        x.grad = None
        _attention_step(x, weight, in_place).backward()
        want = x.grad.clone()
        x.grad = None
        _compiled(_attention_step)(x, weight, in_place).backward()
        assert torch.equal(x.grad, want)


def test_compile_drop_ins_no_graph_break():
    config = _CONFIGS["llama3"]
    rotary = pt.RotaryEmbedding(32, 16, 4096, 10000.0, False)

    def step(q, k, position_ids, tokens, query, key):
        a, b = pt.apply_rotary_pos_emb(q, k, position_ids, config)
        query, key = rotary(tokens, query * 1.0, key * 1.0)
        return a, b, query, key

    args = (_random(1, 4, 5, 32, seed=20), _random(1, 2, 5, 32, seed=21),
            torch.arange(5)[None] + 100, torch.arange(5) * 7, _random(5, 4 * 32, seed=22),
            _random(5, 32, seed=23))
    want = step(*args)
    got = _compiled(step)(*args)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_compile_inductor():
    # the default backend too, which generates C++ for the code around the op
    pytest.importorskip("torch._inductor")

    def step(q, k, positions):
        q, k = torch.ops.posenc.rope_functional(q.relu(), k, positions, style="gptj")
        return q * 3.0, k

    q, k = _random(2, 5, 4, 16, seed=24), _random(2, 5, 2, 16, seed=25)
    want = step(q, k, _POSITIONS)
    got = _compiled(step, backend="inductor")(q, k, _POSITIONS)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


# -- other devices, bad input ---------------------------------------------------------------------

def _devices():
    # meta: a device other than the CPU that every build of torch has; CUDA where there is one
    return ["meta"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", _devices())
@pytest.mark.parametrize("where", ["q", "k", "positions"])
@pytest.mark.parametrize("op", ["rope", "rope_functional"])
def test_other_devices_refused_by_name(device, where, op):
    tensors = {"q": _random(1, 4, 2, 8), "k": _random(1, 4, 1, 8), "positions": torch.arange(4)}
    kept = {name: t.clone() for name, t in tensors.items()}
    tensors[where] = tensors[where].to(device)
    with pytest.raises(posenc.InvalidArgument, match=f"^{where}: a torch tensor on {device}"):
        getattr(torch.ops.posenc, op)(tensors["q"], tensors["k"], tensors["positions"])
    for name, t in tensors.items():
        if t.device.type == "cpu":
            assert torch.equal(t, kept[name])


def test_drop_ins_refuse_other_devices_by_name():
    meta = torch.empty(1, 2, 4, 8, device="meta")
    with pytest.raises(posenc.InvalidArgument, match="^q: a torch tensor on meta"):
        pt.apply_rotary_pos_emb(meta, _random(1, 1, 4, 8), None, None)
    rotary = pt.RotaryEmbedding(8, 8, 64, 10000.0, True)
    with pytest.raises(posenc.InvalidArgument, match="^positions: a torch tensor on meta"):
        rotary(torch.arange(4, device="meta"), _random(4, 16), _random(4, 8))


@pytest.mark.parametrize("case, error, words", [
    ("positions past int32", posenc.InvalidArgument, "positions"),
    ("k head size", posenc.InvalidShape, "k"),
    ("f64 k", posenc.InvalidDtype, "k"),
    ("style", posenc.InvalidArgument, "style"),
    ("scaling type", posenc.InvalidArgument, "scaling"),
    ("odd rotary_dim", posenc.InvalidShape, "rotary_dim"),
    ("offset with positions", posenc.InvalidArgument, "offset|position_offset"),
])
@pytest.mark.parametrize("op", ["rope", "rope_functional"])
def test_bad_input_leaves_tensors_untouched(case, error, words, op):
    q, k = _random(1, 4, 2, 8, seed=26), _random(1, 4, 1, 8, seed=27)
    positions = torch.arange(4)
    options = {}
    if case == "positions past int32":
        positions = torch.tensor([0, 1, 2, 2**40])
    elif case == "k head size":
        k = _random(1, 4, 1, 6)
    elif case == "f64 k":
        k = k.double()
    elif case == "style":
        options["style"] = "rotate_half"
    elif case == "scaling type":
        options.update(scaling_type="yarn2", factor=2.0)
    elif case == "odd rotary_dim":
        options["rotary_dim"] = 5
    else:
        options["offset"] = 3
    kept = [t.clone() for t in (q, k, positions)]
    with pytest.raises(error, match=words):
        getattr(torch.ops.posenc, op)(q, k, positions, **options)
    for t, before in zip((q, k, positions), kept):
        assert torch.equal(t, before)


# -- HF transformers' apply_rotary_pos_emb --------------------------------------------------------

def _hf_float64(q, k, positions, theta, rotary_dim, attention=1.0, inv=None):
    """HF's formula in float64: cos, sin of cat(freqs, freqs), q * cos + rotate_half(q) * sin
    on the first rotary_dim dims (HF's partial rotary), angles reduced exactly."""
    inv = ref_inv_freq(rotary_dim, theta) if inv is None else inv
    s, c = sincos(np.asarray(positions, np.float64)[..., None], inv)  # [b, t, rd/2]
    cos = np.concatenate([c, c], -1)[:, None] * attention            # [b, 1, t, rd]
    sin = np.concatenate([s, s], -1)[:, None] * attention

    def rotate_half(x):
        half = x.shape[-1] // 2
        return np.concatenate([-x[..., half:], x[..., :half]], -1)

    out = []
    for x in (_float64(q), _float64(k)):
        rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
        out.append(np.concatenate([rot * cos + rotate_half(rot) * sin, rest], -1))
    return out


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("shared_positions", [False, True])
def test_hf_drop_in_against_float64(name, shared_positions):
    # Llama-shaped: GQA (4 q heads, 2 kv heads), HF's [b, h, t, d] views of a projection,
    # partial rotary from the config; position_ids [b, t], or [1, t] shared by the batch
    dtype = DTYPES[name]
    config = {"rope_theta": 20000.0, "head_dim": 32, "partial_rotary_factor": 0.75,
              "max_position_embeddings": 4096}
    proj = _random(2, 6, 6 * 32, dtype=dtype, seed=28)
    q = proj[..., :128].view(2, 6, 4, 32).transpose(1, 2)
    k = proj[..., 128:].view(2, 6, 2, 32).transpose(1, 2)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 4000, 4001, 4002]])
    if shared_positions:
        position_ids = position_ids[1:]
    q0, k0 = q.clone(), k.clone()
    q_embed, k_embed = pt.apply_rotary_pos_emb(q, k, position_ids, config)
    assert torch.equal(q, q0) and torch.equal(k, k0)  # new tensors, the inputs as they were
    positions = np.broadcast_to(position_ids.numpy(), (2, 6))
    want = _hf_float64(q, k, positions, 20000.0, 24)
    for got, x, exact in zip((q_embed, k_embed), (q, k), want):
        _, scale = ref_rope(_float64(x.transpose(1, 2)), positions, rotary_dim=24,
                            theta=20000.0)
        check(_float64(got), exact, scale.transpose(0, 2, 1, 3), name)


def test_hf_drop_in_options_and_layouts():
    # config as rope_options' result, and [b, t, h, d] with unsqueeze_dim=2, give the same bits
    q, k = _random(1, 4, 6, 32, seed=29), _random(1, 2, 6, 32, seed=30)
    position_ids = torch.arange(6)[None] + 50
    config = _CONFIGS["yarn"]
    want = pt.apply_rotary_pos_emb(q, k, position_ids, config)
    got = pt.apply_rotary_pos_emb(q, k, position_ids, pt.rope_options(config, head_dim=32))
    assert all(torch.equal(g, w) for g, w in zip(got, want))
    got = pt.apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), position_ids, config,
                                  unsqueeze_dim=2)
    assert all(torch.equal(g.transpose(1, 2), w) for g, w in zip(got, want))


def test_hf_drop_in_mrope_position_ids():
    # Qwen2-VL: position_ids [3, batch, seq] are read as posenc's [batch, seq, 3]
    config = {"rope_theta": 1e6, "head_dim": 32,
              "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]}}
    q, k = _random(2, 2, 5, 32, seed=31), _random(2, 1, 5, 32, seed=32)
    ids = torch.randint(0, 500, (3, 2, 5), generator=torch.Generator().manual_seed(0))
    got = pt.apply_rotary_pos_emb(q, k, ids, config)
    want_q, want_k = q.clone(), k.clone()
    posenc.rope(want_q, want_k, positions=ids.permute(1, 2, 0).contiguous(), layout="bhtd",
                multimodal="mrope", mrope_section=(4, 6, 6), theta=1e6)
    assert torch.equal(got[0], want_q) and torch.equal(got[1], want_k)


def test_hf_drop_in_backward():
    q = _random(1, 4, 6, 32, seed=33).requires_grad_()
    k = _random(1, 2, 6, 32, seed=34).requires_grad_()
    position_ids = torch.arange(6)[None] * 11
    q_embed, k_embed = pt.apply_rotary_pos_emb(q, k, position_ids, None)
    gq, gk = torch.ones_like(q_embed), _random(1, 2, 6, 32, seed=35)
    torch.autograd.backward((q_embed, k_embed), (gq, gk))
    positions = position_ids.double().numpy()
    for grad, g in ((q.grad, gq), (k.grad, gk)):
        exact, scale = ref_rope(_float64(g.transpose(1, 2)), positions, inverse=True)
        check(_float64(grad.transpose(1, 2)), exact, scale, "float32")


_HF_CONFIGS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 1024},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
}


@pytest.mark.parametrize("kind", list(_HF_CONFIGS))
def test_hf_drop_in_against_transformers(kind):
    # HF's own LlamaRotaryEmbedding + apply_rotary_pos_emb with the same config object. HF
    # computes in float32: its inv_freq (a power and a reciprocal) and angle (position * inv_freq)
    # are each within a few units of 2^-24 relative, so its angle is off by up to about
    # 4 * 2^-24 * angle: at positions below 600 that is 4 * 2^-24 * 600 |pair| on each value,
    # beside posenc's own 8 * 2^-24.
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama as llama

    config = transformers.LlamaConfig(
        hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        max_position_embeddings=4096,
        rope_parameters={**_HF_CONFIGS[kind], "rope_theta": 50000.0})
    q, k = _random(2, 4, 7, 64, seed=36), _random(2, 2, 7, 64, seed=37)
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [90, 91, 92, 300, 301, 598, 599]])
    cos, sin = llama.LlamaRotaryEmbedding(config)(q, position_ids)
    want = llama.apply_rotary_pos_emb(q, k, cos, sin)
    got = pt.apply_rotary_pos_emb(q, k, position_ids, config)
    for g, w, x in zip(got, want, (q, k)):
        _, scale = ref_rope(_float64(x.transpose(1, 2)), position_ids.double().numpy())
        scale = scale.transpose(0, 2, 1, 3)
        attention = 1.0 + 0.1 * np.log(4.0) if kind == "yarn" else 1.0  # HF's mscale
        tolerance = (PROMISE + 4 * 2.0**-24 * 600) * scale * attention + 2.0**-24
        assert np.all(np.abs(_float64(g) - _float64(w)) <= tolerance), kind


# -- vLLM's RotaryEmbedding -----------------------------------------------------------------------

def _vllm_float64(positions, query, key, head_size, rotary_dim, base, is_neox_style):
    """vLLM's RotaryEmbedding.forward_native in float64 (angles reduced exactly): cos and sin
    of positions * inv_freq, query viewed [tokens, heads, head_size], its first rotary_dim dims
    split as halves (NeoX) or even/odd (GPT-J) and rotated, the rest passed through."""
    inv = 1.0 / base ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)
    s, c = sincos(positions.numpy().astype(np.float64)[:, None], inv)  # [tokens, rd/2]
    cos, sin = c[:, None, :], s[:, None, :]
    out = []
    for x in (query, key):
        x = _float64(x).reshape(x.shape[0], -1, head_size)
        rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
        if is_neox_style:
            x1, x2 = rot[..., :rotary_dim // 2], rot[..., rotary_dim // 2:]
        else:
            x1, x2 = rot[..., ::2], rot[..., 1::2]
        o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        if is_neox_style:
            rot = np.concatenate([o1, o2], -1)
        else:
            rot = np.stack([o1, o2], -1).reshape(rot.shape)
        out.append(np.concatenate([rot, rest], -1).reshape(x.shape[0], -1))
    return out


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize("is_neox_style", [True, False], ids=["neox", "gptj"])
@pytest.mark.parametrize("rotary_dim", [64, 32], ids=["full", "partial"])
def test_vllm_rotary_embedding_against_float64(name, is_neox_style, rotary_dim):
    # query and key are slices of one fused qkv [tokens, (4 + 2 + 2) * 64], rotated where they lie
    dtype = DTYPES[name]
    rotary = pt.RotaryEmbedding(64, rotary_dim, 131072, 500000.0, is_neox_style, dtype)
    qkv = _random(9, 8 * 64, dtype=dtype, seed=38)
    query, key, value = qkv.split([4 * 64, 2 * 64, 2 * 64], dim=-1)
    value0 = value.clone()
    positions = torch.tensor([0, 1, 2, 17, 4096, 4097, 65535, 131071, 100000])
    want = _vllm_float64(positions, query, key, 64, rotary_dim, 500000.0, is_neox_style)
    before = [_float64(t).reshape(1, 9, -1, 64) for t in (query, key)]
    got_query, got_key = rotary(positions, query, key)
    assert got_query is query and got_key is key  # in place, as vLLM's kernel
    assert torch.equal(value, value0)
    for got, x, exact in zip((query, key), before, want):
        _, scale = ref_rope(x, positions.double().numpy()[None], rotary_dim=rotary_dim,
                            style="neox" if is_neox_style else "gptj")
        check(_float64(got), exact, scale.reshape(exact.shape), name)


def test_vllm_rotary_embedding_shapes_and_scaling():
    # [tokens, heads, head_size] views, no key, offsets, and an HF rope_scaling dict: the same
    # bits as posenc.rope given the same settings
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    rotary = pt.RotaryEmbedding(32, 32, 131072, 500000.0, True, scaling=scaling)
    query = _random(5, 3, 32, seed=39)
    want = query.clone()
    positions = torch.tensor([1, 2, 3, 50000, 60000])
    posenc.rope(want, positions=positions + 10, theta=500000.0,
                scaling={**scaling, "rope_theta": 500000.0})
    got, key = rotary(positions, query, None, offsets=torch.full((5,), 10))
    assert key is None and got is query
    assert torch.equal(query, want)
    assert "rotary_dim=32" in repr(rotary)
