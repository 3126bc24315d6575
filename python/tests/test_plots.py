# SPDX-License-Identifier: MIT
# posenc.plots: every picture renders to a readable PNG, and the numbers drawn have the
# properties the pictures claim (checked against the float64 reference where one exists).
import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.image  # noqa: E402

from posenc import plots  # noqa: E402

import _reference  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


PICTURE_NAMES = ("position-codes", "relative-dot-product", "rope-decay", "rope-accuracy",
                 "rope-clock-hands", "rope-scores")


def test_render_all_writes_readable_pngs(tmp_path):
    assert sorted(plots.PICTURES) == sorted(PICTURE_NAMES)  # every picture registered
    paths = plots.render_all(tmp_path)
    assert sorted(p.rsplit("/", 1)[-1] for p in paths) == sorted(
        name + ".png" for name in plots.PICTURES)
    for path in paths:
        data = open(path, "rb").read()
        assert data[:8] == PNG_SIGNATURE, path
        assert len(data) > 4096, (path, len(data))
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert np.ptp(image[..., :3]) > 0.5  # something drawn, not a blank canvas
    # no temporary file left beside them
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        name + ".png" for name in plots.PICTURES)


def test_main_usage_and_output(tmp_path, capsys):
    assert plots.main([]) == 2
    assert plots.main([str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out").glob("*.png"))) == len(plots.PICTURES)


def test_position_codes():
    data = plots.position_codes_data(positions=64, bits=6, d_model=32)
    binary = data["binary"]
    assert binary.shape == (64, 6)
    flips = np.count_nonzero(np.diff(binary, axis=0), axis=0)
    assert list(flips) == [63 // 2**i for i in range(6)]  # bit i flips every 2^i positions
    exact = _reference.sinusoidal(np.arange(64), 32)
    assert np.max(np.abs(data["sinusoidal"] - exact)) < 1e-6


def test_relative_dot_product_depends_on_offset_only():
    data = plots.relative_dot_data()
    dots = data["dots"]
    k0 = int(np.flatnonzero(data["k"] == 0)[0])
    assert np.allclose(dots[:, k0], 1.0, atol=1e-5)
    assert np.max(np.abs(dots - dots[0])) < 1e-5  # the same curve for every start p
    assert np.max(np.abs(dots - data["exact"])) < 1e-5
    assert np.allclose(dots, dots[:, ::-1], atol=1e-5)  # symmetric in k
    assert dots.min() < 0.5  # and it does fall off: not trivially constant


def test_rope_frequencies_match_the_reference():
    for scaling in (None, {"type": "linear", "factor": 8.0}, {"type": "ntk", "factor": 8.0}):
        got = plots.rope_frequencies(10000.0, scaling)
        want = _reference.inv_freq(plots.HEAD_DIM, 10000.0, scaling)
        assert np.allclose(got, want, rtol=1e-8, atol=0), scaling  # refined: 1e-10


def test_rope_decay():
    data = plots.rope_decay_data(max_distance=4096)
    assert data["labels"] == [label for label, _, _ in plots.ROPE_SETTINGS]
    for label, bound, wavelength in zip(data["labels"], data["bound"], data["wavelength"]):
        assert bound[0] == pytest.approx(1.0, abs=1e-6), label
        assert np.all(bound <= 1.0 + 1e-6), label
        tenth = len(bound) // 10
        # decays on average: the far distances well under the nearest ones
        assert bound[-tenth:].mean() < 0.8 * bound[1:9].mean(), label
        assert np.all(np.diff(wavelength) > 0), label  # slower frequency by frequency
    by = dict(zip(data["labels"], data["wavelength"]))
    base = by["base 10000"]
    assert np.allclose(by["linear x8"], 8 * base, rtol=1e-6)
    # Llama 3 keeps the fast frequencies and divides the slow ones by the factor
    assert np.allclose(by["Llama 3 x8"][:4], base[:4], rtol=1e-6)
    assert np.allclose(by["Llama 3 x8"][-4:], 8 * base[-4:], rtol=1e-6)


def test_accuracy():
    data = plots.accuracy_data(points=60)
    assert data["positions"].max() == 2**31 - 1
    assert np.all(data["posenc"] <= data["promise"] * 1.01)
    small = data["positions"] <= 8
    assert np.all(data["float32_table"][small] < 1e-6)  # the table is fine near 0...
    far = data["positions"] >= 2**20
    assert np.all(data["float32_table"][far] > 100 * data["posenc"][far])  # ...not far out
    assert data["float32_table"][-1] > 1e-2


def _wrapped(angle):
    """angle mod 2 pi, in [-pi, pi)."""
    return (angle + np.pi) % (2 * np.pi) - np.pi


def test_clock_hands_turn_by_position_times_inv_freq():
    data = plots.clock_hands_data()
    q, _ = plots.query_key()
    half = plots.HEAD_DIM // 2
    pairs = data["pairs"]
    start = np.stack([q[pairs], q[pairs + half]], axis=-1).astype(np.float64)  # [pairs, 2]
    hands = data["hands"]  # [pairs, positions, 2]
    assert hands.shape == (len(pairs), len(data["positions"]), 2)
    want = _reference.inv_freq(plots.HEAD_DIM)[pairs]
    assert np.allclose(data["inv_freq"], want, rtol=1e-8, atol=0)
    # posenc.h promises |out - exact| <= 8 * 2^-24 * |pair| for each rotated float32 pair, so
    # the hand's angle is within asin(8 * 2^-24) of p * inv_freq_j (asin(x) < 1.01 x here) and
    # its length within 8 * 2^-24 of the pair's; float64 atan2 and p * inv_freq add ~1e-15.
    tolerance = 1.01 * _reference.PROMISE
    p = data["positions"].astype(np.float64)
    turned = (np.arctan2(hands[..., 1], hands[..., 0])
              - np.arctan2(start[:, 1], start[:, 0])[:, None])
    error = _wrapped(turned - p[None, :] * want[:, None])
    assert np.max(np.abs(error)) <= tolerance, np.max(np.abs(error))
    radius = np.hypot(start[:, 0], start[:, 1])[:, None]
    length_error = np.abs(np.hypot(hands[..., 0], hands[..., 1]) - radius) / radius
    assert np.max(length_error) <= tolerance, np.max(length_error)
    # fast to slow: pair 0 turns past a full circle, the slowest not a quarter of one
    assert want[0] * p[-1] > 2 * np.pi and want[-1] * p[-1] < np.pi / 2


def _diagonal_spread(scores):
    """The largest max - min along any diagonal m - n = constant of a square matrix."""
    n = scores.shape[0]
    return max(np.ptp(np.diagonal(scores, offset)) for offset in range(1 - n, n))


def test_rope_scores_depend_on_m_minus_n_only():
    data = plots.rope_scores_data()
    q, k = data["q"].astype(np.float64), data["k"].astype(np.float64)
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    n = len(data["positions"])
    # float64 reference: R(m) q . R(n) k = q . R(n - m) k, with k rotated to every offset
    offsets = np.arange(1 - n, n)
    rotated_k, _ = _reference.rope(np.tile(k, (1, len(offsets), 1, 1)), offsets[None, :])
    rotated_k = rotated_k[0, :, 0, :]  # [offset, dim]
    m = np.arange(n)
    exact = rotated_k[m[None, :] - m[:, None] + n - 1] @ q  # [m, n]
    # each rotated vector is within 8 * 2^-24 * |v| of exact (the per-pair promise, summed in
    # quadrature), so each score within (2 * 8 * 2^-24 + (8 * 2^-24)^2) |q||k| of the
    # reference, and two scores on one diagonal within twice that of each other; float64 dot
    # products add ~1e-14 relative.
    tolerance = 2.01 * _reference.PROMISE * scale
    rope = data["rope"]
    assert np.max(np.abs(rope - exact)) <= tolerance, np.max(np.abs(rope - exact)) / scale
    assert _diagonal_spread(rope) <= 2 * tolerance, _diagonal_spread(rope) / scale
    assert np.allclose(np.diagonal(rope), q @ k, rtol=0, atol=tolerance)  # m = n: plain q . k
    assert np.ptp(rope) > 0.2 * scale  # and it does change with m - n: not trivially constant
    # no encoding: q . k at every (m, n); float64 dot products of the same float32 vectors,
    # summed in whatever order BLAS picks, differ by at most d * 2^-53 |q||k| (~1.4e-14)
    assert np.max(np.abs(data["plain"] - q @ k)) <= 1e-13 * scale


def test_additive_scores_are_not_diagonal_constant():
    data = plots.rope_scores_data()
    q, k = data["q"].astype(np.float64), data["k"].astype(np.float64)
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    n = len(data["positions"])
    pe = _reference.sinusoidal(np.arange(n), plots.HEAD_DIM)
    exact = (q + pe) @ (k + pe).T
    # each PE value within 1e-6 (test_position_codes), so each row within 1e-6 sqrt(d) and
    # each score within 1e-6 sqrt(d) (|q + PE(m)| + |k + PE(n)|) of the reference
    rows_q = np.linalg.norm(q + pe, axis=1)
    rows_k = np.linalg.norm(k + pe, axis=1)
    bound = 1e-6 * np.sqrt(plots.HEAD_DIM) * (rows_q[:, None] + rows_k[None, :])
    assert np.all(np.abs(data["additive"] - exact) <= bound)
    # q . PE(n) and PE(m) . k depend on m and n apart: along a diagonal the score moves by a
    # good share of |q||k| (0.28 with this q and k), a million times RoPE's float32 spread
    assert _diagonal_spread(data["additive"]) > 0.1 * scale
