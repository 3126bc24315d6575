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


def test_render_all_writes_readable_pngs(tmp_path):
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
