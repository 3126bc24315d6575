# SPDX-License-Identifier: MIT
# The pictures of docs/pictures.md, computed by posenc itself (numpy only for what posenc does
# not compute: binary codes, a random q and k, dot products, the float32-table baseline) and
# drawn with matplotlib.
"""Pictures of position encodings, every curve computed by posenc.

Each ``*_data`` function returns the numbers (numpy arrays in a dict) and each ``figure_*``
function draws them, returning a :class:`matplotlib.figure.Figure` (no pyplot, so no display
is needed). ``python -m posenc.plots OUTDIR`` writes all six as PNG files.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

import posenc

__all__ = [
    "position_codes_data", "figure_position_codes",
    "relative_dot_data", "figure_relative_dot",
    "rope_decay_data", "figure_rope_decay",
    "accuracy_data", "figure_accuracy",
    "query_key", "clock_hands_data", "figure_clock_hands",
    "rope_scores_data", "figure_rope_scores",
    "PICTURES", "render_all", "main",
]

HEAD_DIM = 128  # a Llama-sized head for the RoPE pictures
ORIGINAL_CONTEXT = 4096  # the pre-training context the scaled settings extend (factor 8)
FACTOR = 8.0

# (label, theta, scaling) of the RoPE decay and wavelength picture.
ROPE_SETTINGS = (
    ("base 10000", 10000.0, None),
    ("base 500000", 500000.0, None),
    ("linear x8", 10000.0, {"type": "linear", "factor": FACTOR}),
    ("NTK x8", 10000.0, {"type": "ntk", "factor": FACTOR}),
    ("YaRN x8", 10000.0, {"type": "yarn", "factor": FACTOR,
                          "original_max_positions": ORIGINAL_CONTEXT}),
    ("Llama 3 x8", 10000.0, {"type": "llama3", "factor": FACTOR,
                             "original_max_positions": ORIGINAL_CONTEXT}),
)


def _unit_pairs(tokens, head_dim):
    """[tokens, head_dim] float32 with every NEOX pair (x_j, x_{j+d/2}) = (1, 0): rotated by
    posenc, pair j holds attention_factor * (cos t_j, sin t_j)."""
    q = np.zeros((tokens, head_dim), np.float32)
    q[:, :head_dim // 2] = 1.0
    return q


def _rope_cos_sin(positions, theta, scaling, head_dim=HEAD_DIM):
    """cos and sin [len(positions), head_dim/2] of the angles posenc applies (float64 copies of
    its float32 output, divided by the pair's length so attention factors drop out)."""
    positions = np.asarray(positions, np.int32)
    q = posenc.rope(_unit_pairs(len(positions), head_dim), positions=positions, theta=theta,
                    scaling=scaling)
    half = head_dim // 2
    c = q[:, :half].astype(np.float64)
    s = q[:, half:].astype(np.float64)
    length = np.hypot(c, s)
    return c / length, s / length


def rope_frequencies(theta, scaling, head_dim=HEAD_DIM):
    """inv_freq [head_dim/2] (radians per position) as posenc applies it, read back from its
    rotations: the angle at position 1, refined at positions 2^10 and 2^20 (where the same
    float32 error is a 2^10 and 2^20 times smaller share of the angle)."""
    steps = (1, 2**10, 2**20)
    c, s = _rope_cos_sin(steps, theta, scaling, head_dim)
    angle = np.arctan2(s, c)  # in (-pi, pi]
    freq = angle[0]
    for row, position in enumerate(steps[1:], start=1):
        turns = np.rint((position * freq - angle[row]) / (2 * np.pi))
        freq = (angle[row] + 2 * np.pi * turns) / position
    return freq


# --- 1. binary position codes beside the sinusoidal table ------------------------------------

def position_codes_data(positions=256, bits=8, d_model=64):
    """Bits of the positions (as -1 / +1, bit i flipping every 2^i positions) and posenc's
    sinusoidal table of the same positions, [positions, dims] each."""
    p = np.arange(positions)
    binary = ((p[:, None] >> np.arange(bits)[None, :]) & 1) * 2.0 - 1.0
    table = posenc.sinusoidal(rows=positions, d_model=d_model).astype(np.float64)
    return {"binary": binary, "sinusoidal": table}


def _figure(width, height):
    from matplotlib.figure import Figure
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def figure_position_codes(data=None):
    data = data or position_codes_data()
    fig = _figure(10, 5)
    left, right = fig.subplots(1, 2, width_ratios=(1, 2))
    for ax, key, title, xlabel in (
            (left, "binary", "binary code: bit i flips every $2^i$ positions", "bit i"),
            (right, "sinusoidal", "posenc.sinusoidal: sin/cos at $10000^{-2i/d}$",
             "dimension (sin, cos interleaved)")):
        image = ax.imshow(data[key], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                          interpolation="nearest", origin="upper")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("position")
    fig.colorbar(image, ax=[left, right], shrink=0.8)
    fig.suptitle("Position codes: fast to slow from left to right")
    return fig


# --- 2. PE(p) . PE(p + k) depends on k only --------------------------------------------------

def relative_dot_data(d_model=128, starts=(256, 384, 512, 640, 767), max_offset=256):
    """PE(p) . PE(p + k) / (d_model / 2) for k in [-max_offset, max_offset], one row per p,
    from a posenc.sinusoidal table (1 at k = 0; the same for every p); and sum_i cos(k w_i)
    / (d_model / 2) in float64, what it equals."""
    rows = max(starts) + max_offset + 1
    table = posenc.sinusoidal(rows=rows, d_model=d_model).astype(np.float64)
    k = np.arange(-max_offset, max_offset + 1)
    half = d_model // 2
    dots = np.stack([table[p + k] @ table[p] for p in starts]) / half
    omega = 10000.0 ** (-np.arange(half) / half)
    exact = np.cos(k[:, None] * omega[None, :]).sum(axis=1) / half
    return {"k": k, "starts": np.asarray(starts), "dots": dots, "exact": exact}


def figure_relative_dot(data=None):
    data = data or relative_dot_data()
    fig = _figure(8, 4.5)
    ax = fig.subplots()
    for p, row, width in zip(data["starts"], data["dots"], np.linspace(5, 1, len(data["dots"]))):
        ax.plot(data["k"], row, linewidth=width, label=f"p = {p}")
    ax.plot(data["k"], data["exact"], "k:", linewidth=1, label=r"$\sum_i \cos(k\,\omega_i)$")
    ax.set_xlabel("offset k")
    ax.set_ylabel(r"PE(p) $\cdot$ PE(p+k) / (d/2)")
    ax.set_title("Sinusoidal encodings (d = 128): the dot product depends on k only",
                 fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


# --- 3. RoPE's long-range decay and each scaling's wavelengths --------------------------------

def _decay_bound(c, s):
    """RoFormer's relative upper bound (1 / (d/2)) sum_j |S_j|, S_j = sum_{i<j} e^{i r theta_i},
    per distance r (the rows of c, s), divided by its value d/2 + 1 over 2 at r = 0."""
    partial = np.cumsum(c + 1j * s, axis=1)
    n = c.shape[1]
    return np.abs(partial).mean(axis=1) / ((n + 1) / 2.0)


def rope_decay_data(max_distance=2**16, bins=100, settings=ROPE_SETTINGS, head_dim=HEAD_DIM):
    """Per setting: the decay bound at every distance 0..max_distance (angles from posenc
    rotations), its maximum over log-spaced bins, and the wavelengths 2 pi / inv_freq."""
    distances = np.arange(max_distance + 1)
    edges = np.unique(np.rint(np.geomspace(1, max_distance + 1, bins)).astype(np.int64))
    out = {"distances": distances, "edges": edges, "labels": [], "bound": [],
           "envelope": [], "wavelength": []}
    for label, theta, scaling in settings:
        c, s = _rope_cos_sin(distances, theta, scaling, head_dim)
        bound = _decay_bound(c, s)
        out["labels"].append(label)
        out["bound"].append(bound)
        out["envelope"].append(np.maximum.reduceat(bound, edges[:-1]))
        out["wavelength"].append(2 * np.pi / rope_frequencies(theta, scaling, head_dim))
    return out


def figure_rope_decay(data=None):
    data = data or rope_decay_data()
    fig = _figure(12, 4.8)
    left, right = fig.subplots(1, 2)
    edges = data["edges"]
    for label, bound, envelope, wavelength in zip(data["labels"], data["bound"],
                                                  data["envelope"], data["wavelength"]):
        line, = left.step(edges[:-1], envelope, where="post", label=label, linewidth=1.2)
        right.plot(np.arange(len(wavelength)), wavelength, color=line.get_color(), label=label)
    left.set_xscale("log")
    left.set_xlabel("relative distance m - n")
    left.set_ylabel("relative upper bound (1 at distance 0)")
    left.set_title("Long-range decay (RoFormer's bound; max over log bins)", fontsize=10)
    left.grid(alpha=0.3, which="both")
    left.legend(fontsize=8)
    right.axhline(ORIGINAL_CONTEXT, color="k", linestyle="--", linewidth=1)
    right.axhline(ORIGINAL_CONTEXT * FACTOR, color="grey", linestyle=":", linewidth=1)
    right.text(0, ORIGINAL_CONTEXT * 1.15, f"original context {ORIGINAL_CONTEXT}", fontsize=8)
    right.text(0, ORIGINAL_CONTEXT * FACTOR * 1.15,
               f"extended context {int(ORIGINAL_CONTEXT * FACTOR)}", fontsize=8)
    right.set_yscale("log")
    right.set_xlabel("frequency index i (of d/2 = 64)")
    right.set_ylabel(r"wavelength $2\pi / \theta_i$ (positions)")
    right.set_title("Wavelengths posenc applies, per scaling", fontsize=10)
    right.grid(alpha=0.3, which="both")
    right.legend(fontsize=8)
    fig.suptitle(f"RoPE, head dim {HEAD_DIM}: angles read back from posenc.rope rotations")
    return fig


# --- 4. accuracy against position ------------------------------------------------------------

def _exact_sincos(position, frequency):
    """sin and cos of position * frequency in float64 with the product reduced mod 2 pi
    exactly enough for integer |position| < 2^31 (Dekker products, 2 pi in three parts)."""
    p1 = float.fromhex("0x1.921fb54442d18p+2")
    p2 = float.fromhex("0x1.1a62633145c07p-52")
    p3 = float.fromhex("-0x1.f1976b7ed8fbcp-108")

    def split(a):
        c = 134217729.0 * a
        hi = c - (c - a)
        return hi, a - hi

    def two_prod(a, b):
        p = a * b
        ah, al = split(a)
        bh, bl = split(b)
        return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl

    position, frequency = np.broadcast_arrays(np.asarray(position, np.float64),
                                              np.asarray(frequency, np.float64))
    hi, lo = two_prod(position, frequency)
    k = np.rint(hi / p1)
    kp, ke = two_prod(k, np.full_like(k, p1))
    reduced = (hi - kp) + (((lo - ke) - k * p2) - k * p3)
    return np.sin(reduced), np.cos(reduced)


def accuracy_data(points=240, head_dim=HEAD_DIM, theta=10000.0):
    """Worst error over the frequencies, |(cos, sin) - exact| of a unit pair, per position up
    to 2^31 - 1: posenc.rope (float32 output), and a float32 table as frameworks build it
    (cos(float32(p) * float32 inv_freq) in float32)."""
    positions = np.unique(np.rint(np.geomspace(1, 2**31 - 1, points)).astype(np.int64))
    half = head_dim // 2
    freq = theta ** (-(2.0 * np.arange(half)) / head_dim)
    s_exact, c_exact = _exact_sincos(positions[:, None], freq[None, :])
    q = posenc.rope(_unit_pairs(len(positions), head_dim), positions=positions.astype(np.int32),
                    theta=theta)
    posenc_error = np.hypot(q[:, :half] - c_exact, q[:, half:] - s_exact).max(axis=1)
    angle32 = positions.astype(np.float32)[:, None] * freq.astype(np.float32)[None, :]
    table_error = np.hypot(np.cos(angle32).astype(np.float64) - c_exact,
                           np.sin(angle32).astype(np.float64) - s_exact).max(axis=1)
    return {"positions": positions, "posenc": posenc_error, "float32_table": table_error,
            "promise": 8 * 2.0**-24}


def figure_accuracy(data=None):
    data = data or accuracy_data()
    fig = _figure(8, 4.8)
    ax = fig.subplots()
    floor = 2.0**-30  # exact results drawn on the axis, not lost to log(0)
    ax.plot(data["positions"], np.maximum(data["float32_table"], floor), label=(
        "float32 table: cos(float32(p) * inv_freq)"), color="tab:red")
    ax.plot(data["positions"], np.maximum(data["posenc"], floor), label="posenc.rope (float32)",
            color="tab:blue")
    ax.axhline(data["promise"], color="k", linestyle="--", linewidth=1,
               label=r"posenc's bound $8 \cdot 2^{-24}$")
    ax.axvline(2**24, color="grey", linestyle=":", linewidth=1)
    ax.text(2**24 * 1.2, 1e-4, "$2^{24}$: float32 stops\nholding every integer", fontsize=8,
            va="top")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, 4)
    ax.set_xlabel("position")
    ax.set_ylabel("worst |(cos, sin) - exact| over 64 frequencies")
    ax.set_title(f"RoPE accuracy against position (head dim {HEAD_DIM}, base 10000; "
                 "exact: float64, reduced mod 2$\\pi$)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    return fig


# --- 5. RoPE's clock hands: one pair of q turning with position ------------------------------

# Pair indices j of the clock hands, fast to slow: 1, 10^-0.5, 0.1 and 0.01 radians per
# position at base 10000, head dim 128.
CLOCK_PAIRS = (0, 8, 16, 32)


def query_key(head_dim=HEAD_DIM, seed=0):
    """One fixed q and one fixed k (float32 [head_dim] each) of the clock hands and the q . k
    pictures: q standard normal, k = (q + noise) / sqrt 2, a key that matches its query (q . k
    near |q||k| / sqrt 2) as a trained one would, so where RoPE's score peaks shows."""
    q, noise = np.random.default_rng(seed).standard_normal((2, head_dim))
    return q.astype(np.float32), ((q + noise) / np.sqrt(2.0)).astype(np.float32)


def clock_hands_data(positions=17, pairs=CLOCK_PAIRS, theta=10000.0, head_dim=HEAD_DIM):
    """Pair j = (q_j, q_{j+d/2}) of query_key()'s q, rotated by posenc.rope to positions
    0..positions-1: "hands" [len(pairs), positions, 2] (float64 copies), and "inv_freq" of each
    pair as posenc applies it (read back by rope_frequencies)."""
    q, _ = query_key(head_dim)
    p = np.arange(positions, dtype=np.int32)
    rotated = posenc.rope(np.tile(q, (positions, 1)), positions=p, theta=theta)
    pairs = np.asarray(pairs)
    half = head_dim // 2
    hands = np.stack([rotated[:, pairs], rotated[:, pairs + half]], axis=-1)
    return {"positions": p, "pairs": pairs, "hands": hands.transpose(1, 0, 2).astype(np.float64),
            "inv_freq": rope_frequencies(theta, None, head_dim)[pairs]}


def figure_clock_hands(data=None):
    import matplotlib
    data = data or clock_hands_data()
    positions = data["positions"]
    fig = _figure(13, 4)
    axes = fig.subplots(1, len(data["pairs"]))
    cmap = matplotlib.colormaps["viridis"]
    colors = cmap(np.linspace(0, 1, len(positions)))
    circle = np.linspace(0, 2 * np.pi, 200)
    for ax, j, hands, freq in zip(axes, data["pairs"], data["hands"], data["inv_freq"]):
        radius = np.hypot(*hands[0])
        ax.plot(radius * np.cos(circle), radius * np.sin(circle), color="0.8", linewidth=1)
        for p, (x, y), color in zip(positions, hands, colors):
            ax.annotate("", xy=(x, y), xytext=(0, 0),
                        arrowprops=dict(arrowstyle="-|>", color=color, linewidth=1.2,
                                        shrinkA=0, shrinkB=0))
        # number every hand where the hands stand apart, every fourth where they crowd, and
        # only the first and the last where they overlap
        step = np.hypot(*np.diff(hands[:2], axis=0)[0]) / radius
        labelled = positions if step > 0.25 else (positions[:1] if step < 0.06 else positions[::4])
        for p in sorted(set(labelled) | {positions[-1]}):
            x, y = hands[p] * 1.14
            ax.text(x, y, str(p), fontsize=7, ha="center", va="center", color=colors[p])
        limit = 1.3 * radius
        ax.set_xlim(-limit, limit)
        ax.set_ylim(-limit, limit)
        ax.set_aspect("equal")
        ax.axhline(0, color="0.9", linewidth=0.8, zorder=0)
        ax.axvline(0, color="0.9", linewidth=0.8, zorder=0)
        ax.set_xlabel(f"$q_{{{j}}}$")
        ax.set_ylabel(f"$q_{{{j + HEAD_DIM // 2}}}$")
        ax.set_title(f"pair j = {j}: {freq:.3g} rad/position\n"
                     f"(a turn every {2 * np.pi / freq:.3g} positions)", fontsize=10)
    mappable = matplotlib.cm.ScalarMappable(
        matplotlib.colors.Normalize(positions[0], positions[-1]), cmap)
    fig.colorbar(mappable, ax=list(axes), shrink=0.8, label="position p")
    fig.suptitle(f"RoPE turns each pair of q by p $\\cdot$ inv_freq[j] (head dim {HEAD_DIM}, "
                 "base 10000; posenc.rope, positions 0 to "
                 f"{positions[-1]})")
    return fig


# --- 6. q . k over (m, n): RoPE's depends on m - n only --------------------------------------

def rope_scores_data(positions=64, theta=10000.0, head_dim=HEAD_DIM):
    """S[m, n] = q_m . k_n for query_key()'s q at every position m and its k at every position
    n, m, n in 0..positions-1, three ways: "plain" (no encoding: q . k everywhere),
    "additive" (q + PE(m)) . (k + PE(n)) with PE from posenc.sinusoidal (d_model = head dim),
    and "rope" rope(q, m) . rope(k, n) with posenc.rope. Dot products in float64."""
    q, k = query_key(head_dim)
    p = np.arange(positions, dtype=np.int32)
    qs, ks = np.tile(q, (positions, 1)), np.tile(k, (positions, 1))
    table = posenc.sinusoidal(rows=positions, d_model=head_dim)
    rq, rk = posenc.rope(qs.copy(), ks.copy(), positions=p, theta=theta)  # rotates in place

    def scores(a, b):
        return a.astype(np.float64) @ b.astype(np.float64).T

    return {"positions": p, "q": q, "k": k, "plain": scores(qs, ks),
            "additive": scores(qs + table, ks + table), "rope": scores(rq, rk)}


def figure_rope_scores(data=None):
    data = data or rope_scores_data()
    fig = _figure(14, 4.6)
    axes = fig.subplots(1, 3)
    last = data["positions"][-1]
    # no encoding and RoPE on one colour scale: RoPE's diagonal m = n is q . k itself
    shared = (min(data["plain"].min(), data["rope"].min()),
              max(data["plain"].max(), data["rope"].max()))
    for ax, key, title, limits in zip(axes, ("plain", "rope", "additive"), (
            "no encoding: q $\\cdot$ k, the same everywhere",
            "RoPE: R(m) q $\\cdot$ R(n) k = q $\\cdot$ R(n - m) k",
            "additive sinusoidal: (q + PE(m)) $\\cdot$ (k + PE(n))"),
            (shared, shared, (data["additive"].min(), data["additive"].max()))):
        image = ax.imshow(data[key], cmap="viridis", vmin=limits[0], vmax=limits[1],
                          interpolation="nearest", origin="upper",
                          extent=(-0.5, last + 0.5, last + 0.5, -0.5))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key position n")
        ax.set_ylabel("query position m")
        if key != "plain":
            fig.colorbar(image, ax=ax, shrink=0.8,
                         label="score (both left panels)" if key == "rope" else "score")
    fig.suptitle(f"q $\\cdot$ k of one fixed q and k (head dim {HEAD_DIM}) placed at every "
                 "(m, n): RoPE's depends on m - n only, an additive encoding's does not")
    return fig


# --- rendering --------------------------------------------------------------------------------

PICTURES = {
    "position-codes": figure_position_codes,
    "relative-dot-product": figure_relative_dot,
    "rope-decay": figure_rope_decay,
    "rope-accuracy": figure_accuracy,
    "rope-clock-hands": figure_clock_hands,
    "rope-scores": figure_rope_scores,
}


def render_all(outdir, dpi=100):
    """Writes every picture to OUTDIR/<name>.png (through a temporary file renamed into place,
    so a reader never sees half a file); returns the paths."""
    os.makedirs(outdir, exist_ok=True)
    paths = []
    for name, make in PICTURES.items():
        fig = make()
        path = os.path.join(outdir, name + ".png")
        fd, temp = tempfile.mkstemp(prefix="." + name + ".", suffix=".png", dir=outdir)
        try:
            os.chmod(temp, 0o644)  # mkstemp's 0600 would hide the picture from other users
            with os.fdopen(fd, "wb") as file:
                fig.savefig(file, format="png", dpi=dpi)
            os.replace(temp, path)
        except BaseException:
            os.unlink(temp)
            raise
        paths.append(path)
    return paths


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m posenc.plots OUTDIR", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    for path in render_all(argv[0]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
