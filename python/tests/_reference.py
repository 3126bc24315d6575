# SPDX-License-Identifier: MIT
# The float64 reference for the Python tests: exactly reduced angles, RoPE and sinusoidal
# encodings, and the tolerances posenc.h promises (as tests/reference.c does for C).
import numpy as np

UNIT = 2.0**-24
PROMISE = 8 * UNIT  # posenc.h: |out - exact| / |pair| <= 8 * 2^-24 for f32

# 2*pi = P1 + P2 + P3 (tests/reference.c)
P1 = float.fromhex("0x1.921fb54442d18p+2")
P2 = float.fromhex("0x1.1a62633145c07p-52")
P3 = float.fromhex("-0x1.f1976b7ed8fbcp-108")


def _split(a):
    c = 134217729.0 * a  # 2^27 + 1: Veltkamp's split into two 26-bit halves
    hi = c - (c - a)
    return hi, a - hi


def _two_prod(a, b):
    """a * b = p + e exactly (Dekker), for float64 arrays."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def sincos(position, frequency):
    """sin and cos of position * frequency, reduced mod 2 pi exactly enough for |p| < 2^31."""
    position = np.asarray(position, np.float64)
    frequency = np.asarray(frequency, np.float64)
    position, frequency = np.broadcast_arrays(position, frequency)
    hi, lo = _two_prod(position, frequency)
    k = np.rint(hi / P1)
    p1, e1 = _two_prod(k, np.full_like(k, P1))
    head = hi - p1
    tail = ((lo - e1) - k * P2) - k * P3
    reduced = head + tail
    return np.sin(reduced), np.cos(reduced)


def inv_freq(rotary_dim, theta=10000.0, scaling=None):
    half = rotary_dim // 2
    scaling = scaling or {}
    factor = scaling.get("factor", 1.0)
    kind = scaling.get("type", "none")
    if kind == "ntk":
        theta = theta * factor ** (rotary_dim / (rotary_dim - 2.0))
    freq = theta ** (-(2.0 * np.arange(half)) / rotary_dim)
    if kind == "linear":
        freq = freq / factor
    if kind == "yarn_ggml":  # ggml's rope_yarn, docs/ggml.md
        def corr(beta):
            n_ctx = scaling.get("original_max_positions", 0)
            with np.errstate(divide="ignore"):
                return rotary_dim * np.log(n_ctx / (beta * 2 * np.pi)) / (2 * np.log(theta))
        low = max(0.0, np.floor(corr(scaling.get("beta_fast", 32.0))))
        high = min(rotary_dim - 1.0, np.ceil(corr(scaling.get("beta_slow", 1.0))))
        y = (np.arange(half) - low) / max(0.001, high - low)
        mix = (1.0 - np.clip(y, 0.0, 1.0)) * scaling.get("ext_factor", 0.0)
        freq = freq * (scaling.get("freq_scale", 1.0) * (1.0 - mix) + mix)
    return freq


def rope(x, positions, rotary_dim=None, theta=10000.0, style="neox", inverse=False,
         attention_factor=1.0, scaling=None):
    """x: float64 [batch, tokens, heads, dim]; positions: [batch, tokens] float64, or
    [batch, tokens, rotary_dim/2], frequency j's own position (multimodal kinds).
    Returns (rotated, pair norms broadcast to x's shape)."""
    x = np.asarray(x, np.float64)
    dim = x.shape[-1]
    rd = rotary_dim or dim
    half = rd // 2
    freq = inv_freq(rd, theta, scaling)
    positions = np.asarray(positions, np.float64)
    per_frequency = positions if positions.ndim == 3 else positions[..., None]
    s, c = sincos(per_frequency, freq)  # [batch, tokens, half]
    if inverse:
        s = -s
    s = s[:, :, None, :] * attention_factor
    c = c[:, :, None, :] * attention_factor
    if style == "neox":
        ia, ib = np.arange(half), np.arange(half) + half
    else:
        ia, ib = np.arange(0, rd, 2), np.arange(1, rd, 2)
    a, b = x[..., ia], x[..., ib]
    out = x.copy()
    out[..., ia] = a * c - b * s
    out[..., ib] = a * s + b * c
    norm = np.zeros_like(x)
    pair = np.hypot(a, b) * abs(attention_factor)
    norm[..., ia] = pair
    norm[..., ib] = pair
    # dims past rotary_dim pass through: their "pair" is the value itself
    norm[..., rd:] = np.abs(x[..., rd:])
    return out, norm


def sinusoidal(positions, d_model, layout="interleaved", base=10000.0, freq_shift=0.0):
    """PE rows for float64 positions [...]: [..., d_model]."""
    half = d_model // 2
    freq = base ** (-np.arange(half) / (half - freq_shift))
    s, c = sincos(np.asarray(positions, np.float64)[..., None], freq)
    pe = np.zeros(np.shape(positions) + (d_model,))
    if layout == "sin_cos":
        pe[..., :half], pe[..., half:2 * half] = s, c
    elif layout == "cos_sin":
        pe[..., :half], pe[..., half:2 * half] = c, s
    else:
        pe[..., 0:2 * half:2], pe[..., 1:2 * half:2] = s, c
    return pe


def ulp(dtype_name, value):
    """One unit in the last place of |value| in f16 or bf16 (tests/reference.c's ref_ulp)."""
    mantissa, min_exp = {"float16": (10, -14), "bfloat16": (7, -126), "float32": (23, -126)}[
        dtype_name]
    value = np.abs(np.asarray(value, np.float64))
    exp = np.where(value > 0, np.floor(np.log2(np.where(value > 0, value, 1.0))), min_exp)
    exp = np.maximum(exp, min_exp)
    return np.ldexp(1.0, (exp - mantissa).astype(np.int64))


def check(out, exact, scale, dtype_name, extra=0.0):
    """Asserts |out - exact| <= PROMISE * scale (+ one ulp of 16-bit types) everywhere."""
    out = np.asarray(out, np.float64)
    tolerance = PROMISE * np.asarray(scale, np.float64) + extra
    if dtype_name in ("float16", "bfloat16"):
        tolerance = tolerance + ulp(dtype_name, exact)
    error = np.abs(out - exact)
    worst = np.unravel_index(np.argmax(error - tolerance), error.shape)
    assert np.all(error <= tolerance), (
        f"error {error[worst]:.3g} > tolerance {tolerance[worst]:.3g} at {worst}: "
        f"out {out[worst]!r}, exact {exact[worst]!r}")
