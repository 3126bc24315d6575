# SPDX-License-Identifier: MIT
# `python -m posenc bench`: posenc.rope from Python beside the same call timed in C, numpy's
# vectorized RoPE and, where they import, ONNX Runtime's RotaryEmbedding operator and HF
# transformers' apply_rotary_pos_emb (torch), in one run.
"""Side-by-side RoPE timings: a decode step and a prefill, f32, rotated in place.

posenc from Python and the same call from C run in rounds that alternate between the two, so
that a slow moment of a shared machine falls on both alike, each after one untimed call
(arrays in cache); numpy, ONNX Runtime and torch then take their rounds the same way. The report gives each
one's median time per call over the rounds and the spread (fastest and slowest round). The
Python overhead is posenc's median from Python minus the median of the same posenc_rope call
timed in C on the same arrays (posenc._posenc._bench_c_rope: the clock read around the C calls
alone).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import posenc
from . import _posenc

THETA = 10000.0
DECODE_TARGET_US = 1.0  # at most this much more from Python than from C
PREFILL_TARGET = 0.95  # C time / Python time at least this
# The calls model code makes, at most this much more than posenc.rope(q, k, offset=n).
ROPE_OBJECT_TARGET_US = 0.6
ROPE_KEYWORDS_TARGET_US = 2.5

# Llama 3.1 8B's config.json (its RoPE fields, sizes and the keys around them), as
# posenc.hf.load_config would read it.
LLAMA_3_1 = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 128000,
    "eos_token_id": 128001, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 128256,
}


def _numpy_rope(head_dim):
    """numpy's best RoPE, neox style, in place on [batch, tokens, heads, head_dim] float32:
    cos/sin made from the positions in float32 as HF does, then x1*cos - x2*sin and
    x2*cos + x1*sin into preallocated scratch, written back into the two halves."""
    half = head_dim // 2
    inv_freq = (1.0 / THETA ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim)).astype(
        np.float32)

    def apply(x, offset, scratch={}):
        tokens = x.shape[1]
        angles = (np.arange(offset, offset + tokens, dtype=np.float32)[:, None]
                  * inv_freq[None, :])[None, :, None, :]
        cos = np.cos(angles)
        sin = np.sin(angles)
        x1 = x[..., :half]
        x2 = x[..., half:]
        key = x1.shape
        if key not in scratch:
            scratch[key] = (np.empty(key, np.float32), np.empty(key, np.float32))
        a, b = scratch[key]
        np.multiply(x1, cos, out=a)
        np.multiply(x2, sin, out=b)
        np.subtract(a, b, out=a)  # x1 cos - x2 sin
        np.multiply(x2, cos, out=b)
        np.multiply(x1, sin, out=x2)
        np.add(x2, b, out=x2)  # x2 cos + x1 sin
        x1[...] = a

    def call(q, k, offset):
        apply(q, offset)
        apply(k, offset)

    return call


def _torch_rope(torch, head_dim):
    """HF transformers' Llama RoPE as written there: LlamaRotaryEmbedding's cos/sin (its
    default attention_scaling, 1.0, applied as HF applies it) and apply_rotary_pos_emb with
    rotate_half, on [batch, heads, tokens, head_dim] tensors."""
    inv_freq = 1.0 / (THETA ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float()
                                / head_dim))
    attention_scaling = 1.0

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed

    def call(q, k, offset):
        with torch.no_grad():
            position_ids = torch.arange(offset, offset + q.shape[2])[None, :]
            inv_freq_expanded = inv_freq[None, :, None].float().expand(
                position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = (emb.cos() * attention_scaling).to(dtype=q.dtype)
            sin = (emb.sin() * attention_scaling).to(dtype=q.dtype)
            q_embed, k_embed = apply_rotary_pos_emb(q, k, cos, sin)
            q.copy_(q_embed)  # in place, as the others are
            k.copy_(k_embed)

    return call


def _onnxruntime_rope(onnxruntime, onnx, q, k, offset):
    """ONNX Runtime's RoPE as an exported Llama graph runs it: the com.microsoft RotaryEmbedding
    operator (NeoX pairs) on q and k of [batch, tokens, heads * head_dim], with the float32
    cos/sin cache of every position up to the last one and int64 position ids, on the CPU
    execution provider with its default threads. It cannot work in place: its outputs are
    bound to arrays made once, so that no call allocates."""
    from onnx import TensorProto, helper

    _, tokens, q_heads, head_dim = q.shape
    kv_heads = k.shape[2]
    positions = offset + tokens
    graph = helper.make_graph(
        [helper.make_node("RotaryEmbedding", [name, "position_ids", "cos_cache", "sin_cache"],
                          [name + "_rotated"], domain="com.microsoft", interleaved=0,
                          num_heads=heads)
         for name, heads in (("q", q_heads), ("k", kv_heads))],
        "rope",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, tokens, q_heads * head_dim]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, tokens, kv_heads * head_dim]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, tokens]),
         helper.make_tensor_value_info("cos_cache", TensorProto.FLOAT, [positions, head_dim // 2]),
         helper.make_tensor_value_info("sin_cache", TensorProto.FLOAT, [positions, head_dim // 2])],
        [helper.make_tensor_value_info(name + "_rotated", TensorProto.FLOAT,
                                       [1, tokens, heads * head_dim])
         for name, heads in (("q", q_heads), ("k", kv_heads))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    # The oldest IR version opset 17 allows, not the installed onnx's newest: an older
    # onnxruntime (the last ones for CPython 3.9 and 3.10) refuses IR versions it predates.
    model.ir_version = 8
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    inv_freq = 1.0 / THETA ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    arrays = {"q": q.reshape(1, tokens, -1), "k": k.reshape(1, tokens, -1),
              "position_ids": np.arange(offset, positions, dtype=np.int64)[None, :],
              "cos_cache": np.cos(angles).astype(np.float32),
              "sin_cache": np.sin(angles).astype(np.float32)}
    outputs = {"q_rotated": np.empty_like(arrays["q"]), "k_rotated": np.empty_like(arrays["k"])}
    binding = session.io_binding()
    for name, array in arrays.items():
        binding.bind_cpu_input(name, array)
    for name, array in outputs.items():
        binding.bind_output(name, "cpu", 0, np.float32, array.shape, array.ctypes.data)

    def call():
        session.run_with_iobinding(binding)

    call.outputs = outputs
    return call


def _rounds(contenders, calls, rounds):
    """{name: [seconds per call, one per round]}; each contender takes its turn each round,
    the order turning by one each round. Before its timed calls a contender makes one untimed
    call, so that each is timed with its arrays in cache, not after another's (a prefill's
    arrays are tens of MB: who ran just before would otherwise decide the result)."""
    times = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            contenders[name](1)
            times[name].append(contenders[name](calls))
    return times


def _timed(function, *args):
    def run(calls):
        start = time.perf_counter()
        for _ in range(calls):
            function(*args)
        return (time.perf_counter() - start) / calls
    return run


def _case(title, tokens, q_heads, kv_heads, head_dim, calls, rounds, torch, onnx_runtime,
          out):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, tokens, q_heads, head_dim), dtype=np.float32)
    k = rng.standard_normal((1, tokens, kv_heads, head_dim), dtype=np.float32)
    offset = 4095 if tokens == 1 else 0  # a decode step late in a 4k context
    context = posenc.default_context()
    rope = posenc.rope

    def python(calls):  # the call as a user writes it, with no wrapper around it
        start = time.perf_counter()
        for _ in range(calls):
            rope(q, k, offset=offset)
        return (time.perf_counter() - start) / calls

    contenders = {
        "posenc from Python": python,
        "posenc_rope from C": lambda n: _posenc._bench_c_rope(context, q, k, offset, n),
        "numpy (vectorized f32)": _timed(_numpy_rope(head_dim), q.copy(), k.copy(), offset),
    }
    if onnx_runtime is not None:
        contenders["ONNX Runtime RotaryEmbedding"] = _timed(
            _onnxruntime_rope(*onnx_runtime, q.copy(), k.copy(), offset))
    if torch is not None:
        qt = torch.from_numpy(q.transpose(0, 2, 1, 3).copy())
        kt = torch.from_numpy(k.transpose(0, 2, 1, 3).copy())
        contenders["torch, HF apply_rotary_pos_emb"] = _timed(
            _torch_rope(torch, head_dim), qt, kt, offset)
    for run in contenders.values():  # warm up: first-call allocations, thread start
        run(max(1, calls // 10))
    # posenc from Python and from C alternate with each other only: long single-threaded
    # numpy or torch runs in between slowed whichever posenc call came next, beyond the one
    # untimed call, on a busy machine, and the comparison that matters is the posenc pair.
    pair = list(contenders)[:2]
    times = _rounds({name: contenders[name] for name in pair}, calls, rounds)
    times.update(_rounds({name: run for name, run in contenders.items() if name not in pair},
                         calls, rounds))
    out(f"\n{title}: q [1, {tokens}, {q_heads}, {head_dim}] + k [1, {tokens}, {kv_heads}, "
        f"{head_dim}] f32 in place, {rounds} rounds of {calls} calls")
    medians = _table(times, 32, out)
    fastest = {name: min(values) for name, values in times.items()}
    return medians, fastest


def _table(times, width, out):
    """Prints each contender's median, fastest and slowest round; returns the medians."""
    out(f"  {'':{width}} {'median':>10} {'fastest':>10} {'slowest':>10}")
    medians = {}
    for name, values in times.items():
        medians[name] = statistics.median(values)
        out(f"  {name:{width}} " + " ".join(_us(v) for v in
                                             (medians[name], min(values), max(values))))
    return medians


def _call_shapes(calls, rounds, out):
    """A decode step as model code calls it (q [1, 32, 1, 128] and k [1, 8, 1, 128] in HF's
    layout, the Llama 3.1 config, int64 position ids), each call shape beside the plain call on
    the same bytes and the C call: {name: median seconds}."""
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 32, 1, 128), dtype=np.float32)
    k = rng.standard_normal((1, 8, 1, 128), dtype=np.float32)
    q_plain, k_plain = q.reshape(1, 1, 32, 128), k.reshape(1, 1, 8, 128)  # one token: same bytes
    position_ids = np.array([[4095]], np.int64)
    context = posenc.default_context()
    rope = posenc.rope
    prepared = posenc.Rope(LLAMA_3_1, layout="bhtd")

    def loop(call):
        def run(n):
            start = time.perf_counter()
            for _ in range(n):
                call()
            return (time.perf_counter() - start) / n
        return run

    contenders = {
        "posenc_rope from C": lambda n: _posenc._bench_c_rope(context, q_plain, k_plain, 4095, n),
        "rope(q, k, offset=n)": loop(lambda: rope(q_plain, k_plain, offset=4095)),
        "Rope(config)(q, k, position_ids=)": loop(lambda: prepared(q, k,
                                                                   position_ids=position_ids)),
        "rope(q, k, positions=, theta=, scaling=config)": loop(
            lambda: rope(q, k, positions=position_ids, theta=500000.0, scaling=LLAMA_3_1,
                         layout="bhtd")),
    }
    for run in contenders.values():
        run(max(1, calls // 10))
    times = _rounds(contenders, calls, rounds)
    out(f"\ncall shapes: the decode step as model code calls it (Llama 3.1 config, layout "
        f"bhtd, int64 position ids), {rounds} rounds of {calls} calls")
    medians = _table(times, 48, out)
    plain = medians["rope(q, k, offset=n)"]
    for name, target in (("Rope(config)(q, k, position_ids=)", ROPE_OBJECT_TARGET_US),
                         ("rope(q, k, positions=, theta=, scaling=config)",
                          ROPE_KEYWORDS_TARGET_US)):
        extra = (medians[name] - plain) * 1e6
        out(f"  {name} costs {extra:+.2f} us beside rope(q, k, offset=n) (target <= "
            f"{target} us: {'met' if extra <= target else 'NOT met'})")
    return medians


def _us(seconds):
    return f"{seconds * 1e6:8.2f}us" if seconds < 1e-3 else f"{seconds * 1e3:8.3f}ms"


def main(argv=None, out=print) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="rounds per contender")
    parser.add_argument("--decode-calls", type=int, default=2000, help="decode calls per round")
    parser.add_argument("--prefill-calls", type=int, default=5, help="prefill calls per round")
    parser.add_argument("--prefill-tokens", type=int, default=4096)
    parser.add_argument("--no-torch", action="store_true", help="leave torch out")
    parser.add_argument("--no-onnxruntime", action="store_true", help="leave ONNX Runtime out")
    args = parser.parse_args(argv)
    onnx_runtime = None
    if not args.no_onnxruntime:
        try:
            import onnx
            import onnxruntime
            onnx_runtime = (onnxruntime, onnx)
        except ImportError:
            onnx_runtime = None
    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            torch = None
    device = posenc.default_context().device
    name = device.get("name") if isinstance(device, dict) else device
    out(f"posenc {posenc.version()} on {name}; numpy {np.__version__}"
        + (f"; onnxruntime {onnx_runtime[0].__version__}" if onnx_runtime is not None
           else "; onnxruntime not installed")
        + (f"; torch {torch.__version__}" if torch is not None else "; torch not installed"))
    decode = _case("decode", 1, 32, 8, 128, args.decode_calls, args.rounds, torch,
                   onnx_runtime, out)
    prefill = _case("prefill", args.prefill_tokens, 32, 8, 128, args.prefill_calls,
                    args.rounds, torch, onnx_runtime, out)
    _call_shapes(args.decode_calls, args.rounds, out)
    py, c = "posenc from Python", "posenc_rope from C"
    out("")
    # Medians are the verdict; the fastest rounds show what a quiet machine gives, where other
    # work made the medians wander.
    for label, index in (("medians", 0), ("fastest rounds", 1)):
        overhead = (decode[index][py] - decode[index][c]) * 1e6
        ratio = prefill[index][c] / prefill[index][py]
        out(f"{label:>14}: decode Python overhead {overhead:.2f} us (target <= "
            f"{DECODE_TARGET_US} us: {'met' if overhead <= DECODE_TARGET_US else 'NOT met'}); "
            f"prefill C/Python {ratio:.3f} (target >= {PREFILL_TARGET}: "
            f"{'met' if ratio >= PREFILL_TARGET else 'NOT met'})")
    return 0
