# SPDX-License-Identifier: MIT
# multimodal="positions_map" (any assignment of position components to frequencies) against
# the float64 reference, in both styles, with partial rotary dims and ggml's YaRN, and its bad
# input; and ggml's vision mode (multimodal="vision_ggml") against ggml's formula.
import numpy as np
import pytest

import posenc
from _reference import check, inv_freq, rope as ref_rope, sincos


def _data(rng, shape, dt):
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


@pytest.mark.parametrize("components", [1, 2, 3, 4])
@pytest.mark.parametrize("style", ["neox", "gptj"])
def test_map_against_reference(rng, dtype, components, style):
    name, dt = dtype
    tokens, dim, rotary_dim = 6, 32, 24
    q = _data(rng, (2, tokens, 3, dim), dt)
    q0 = q.copy()
    positions = rng.integers(0, 50000, size=(2, tokens, components)).astype(np.int32)
    component_map = rng.integers(0, components, size=rotary_dim // 2).astype(np.uint8)
    # one component is plain positions, [batch, tokens] with no component axis (posenc.h)
    given = positions[..., 0] if components == 1 else positions
    posenc.rope(q, positions=given, multimodal="positions_map", components=components,
                component_map=component_map, rotary_dim=rotary_dim, style=style)
    # frequency j turns by positions[b, t, component_map[j]]
    per_frequency = positions[..., component_map].astype(np.float64)
    exact, scale = ref_rope(q0.astype(np.float64), per_frequency, rotary_dim=rotary_dim,
                            style=style)
    check(q, exact, scale, name)
    np.testing.assert_array_equal(q[..., rotary_dim:], q0[..., rotary_dim:])


def test_map_of_one_batch_tokens_by_components(rng):
    # [tokens, C] positions (batch 1), a list for the map, k with its own heads
    q = _data(rng, (1, 5, 2, 16), np.float32)
    k = _data(rng, (1, 5, 1, 16), np.float32)
    q0, k0 = q.copy(), k.copy()
    positions = np.array([[1, 40, 900], [2, 50, 800], [3, 60, 700], [4, 70, 600],
                          [5, 80, 500]], np.int32)
    component_map = [2, 0, 1, 1, 0, 2, 2, 1]
    posenc.rope(q, k, positions=positions, multimodal="positions_map", components=3,
                component_map=component_map)
    per_frequency = positions[None][..., component_map].astype(np.float64)
    for got, before in ((q, q0), (k, k0)):
        exact, scale = ref_rope(before.astype(np.float64), per_frequency)
        check(got, exact, scale, "float32")


def test_map_equals_mrope_sections(rng):
    # M-RoPE with sections (2, 3, 3) is the map t t h h h w w w: the same bits
    q = _data(rng, (1, 4, 2, 16), np.float32)
    positions = rng.integers(0, 1000, size=(4, 3)).astype(np.int32)
    a, b = q.copy(), q.copy()
    posenc.rope(a, positions=positions, multimodal="mrope", mrope_section=(2, 3, 3))
    posenc.rope(b, positions=positions, multimodal="positions_map", components=3,
                component_map=[0, 0, 1, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(a, b)


def test_map_with_ggml_yarn(rng):
    # ggml's M-RoPE runs with ggml's YaRN: both together, as ggml_rope_multi passes them
    scaling = {"type": "yarn_ggml", "freq_scale": 0.25, "ext_factor": 1.0,
               "original_max_positions": 4096}
    q = _data(rng, (1, 4, 2, 32), np.float32)
    q0 = q.copy()
    positions = rng.integers(0, 30000, size=(4, 4)).astype(np.int32)
    component_map = np.repeat(np.arange(4), 4)
    posenc.rope(q, positions=positions, multimodal="positions_map", components=4,
                component_map=component_map, scaling=scaling, theta=1e6)
    factor = 1.0 + 0.1 * np.log(1.0 / 0.25)
    per_frequency = positions[None][..., component_map].astype(np.float64)
    exact, scale = ref_rope(q0.astype(np.float64), per_frequency, theta=1e6, scaling=scaling,
                            attention_factor=factor)
    assert not np.allclose(inv_freq(32, 1e6, scaling), inv_freq(32, 1e6))  # YaRN changes them
    check(q, exact, scale, "float32")


def _ggml_vision_frequencies(sections, pairs, theta, freq_scale, ext_factor, n_ctx_orig):
    # ggml's vision mode (docs/ggml.md): the exponent restarts in each section, over ggml's
    # n_dims = pairs; the YaRN ramp runs over the pairs themselves
    bounds = np.cumsum(sections)
    sector = np.arange(pairs) % bounds[-1]
    component = np.minimum(np.searchsorted(bounds[:3], sector, side="right"), 3)
    start = np.concatenate(([0], bounds[:3]))[component]
    w = theta ** (-2.0 * (sector - start) / pairs)

    def corr(b):
        return pairs * np.log(n_ctx_orig / (2 * np.pi * b)) / (2 * np.log(theta))
    low, high = max(0.0, np.floor(corr(32.0))), min(pairs - 1.0, np.ceil(corr(1.0)))
    ramp = 1.0 - np.clip((np.arange(pairs) - low) / max(0.001, high - low), 0.0, 1.0)
    mix = ramp * ext_factor
    return w * (freq_scale * (1.0 - mix) + mix), component


def test_vision_ggml_against_ggml_formula(rng):
    # ggml_rope_multi's vision mode with ggml's arguments as they are: four sections that wrap,
    # ggml's YaRN, positions [batch, tokens, 4], against ggml's formula in float64
    sections, theta, fs, ef = (4, 4, 2, 2), 10000.0, 0.5, 1.0
    q = _data(rng, (2, 5, 2, 64), np.float32)
    q0 = q.astype(np.float64)
    positions = rng.integers(0, 30000, size=(2, 5, 4)).astype(np.int32)
    posenc.rope(q, positions=positions, multimodal="vision_ggml", mrope_section=sections,
                theta=theta, scaling={"type": "yarn_ggml", "freq_scale": fs, "ext_factor": ef,
                                      "original_max_positions": 512})
    w, component = _ggml_vision_frequencies(sections, 32, theta, fs, ef, 512)
    mscale = 1.0 + 0.1 * np.log(1.0 / fs)
    s, c = sincos(positions[..., component], w)  # [batch, tokens, pairs]
    s, c = mscale * s[:, :, None, :], mscale * c[:, :, None, :]
    a, b = q0[..., :32], q0[..., 32:]
    exact = np.concatenate((a * c - b * s, a * s + b * c), axis=-1)
    pair = np.hypot(a, b) * mscale
    check(q, exact, np.concatenate((pair, pair), axis=-1), "float32")


@pytest.mark.parametrize("kw, words", [
    (dict(mrope_section=(4, 4, 2, 2, 1)), "mrope_section"),
    (dict(mrope_section=(40, 40, 0, 0)), "mrope_section"),
    (dict(scaling={"type": "linear", "factor": 2.0}), "scaling.type"),
])
def test_vision_ggml_refusals(rng, kw, words):
    q = _data(rng, (1, 3, 1, 64), np.float32)
    before = q.copy()
    options = dict(positions=np.zeros((3, 4), np.int32), multimodal="vision_ggml",
                   mrope_section=(16, 16, 0, 0))
    options.update(kw)
    with pytest.raises(posenc.InvalidArgument, match=words):
        posenc.rope(q, **options)
    np.testing.assert_array_equal(q, before)


@pytest.mark.parametrize("case, error, words", [
    ("no components", posenc.InvalidArgument, "components: multimodal POSITIONS_MAP"),
    ("five components", posenc.InvalidArgument, "components"),
    ("no map", posenc.InvalidArgument, "component_map: is required"),
    ("short map", posenc.InvalidShape, "component_map: 3 entries, but rotary_dim/2 = 4"),
    ("map entry", posenc.InvalidArgument, r"component_map\[2\]"),
    ("negative entry", posenc.InvalidArgument, r"component_map\[0\]"),
    ("map without kind", posenc.InvalidArgument, "component_map: is used only"),
    ("components without kind", posenc.InvalidArgument, "components: is used only"),
    ("positions components", posenc.InvalidShape, "positions"),
])
def test_bad_input_names_the_field(rng, case, error, words):
    q = _data(rng, (1, 3, 2, 8), np.float32)
    before = q.copy()
    kw = dict(positions=np.zeros((3, 2), np.int32), multimodal="positions_map", components=2,
              component_map=[0, 1, 1, 0])
    if case == "no components":
        del kw["components"]
    elif case == "five components":
        kw["components"], kw["positions"] = 5, np.zeros((3, 5), np.int32)
    elif case == "no map":
        del kw["component_map"]
    elif case == "short map":
        kw["component_map"] = [0, 1, 1]
    elif case == "map entry":
        kw["component_map"] = [0, 1, 2, 0]
    elif case == "negative entry":
        kw["component_map"] = [-1, 1, 1, 0]
    elif case == "map without kind":
        kw = dict(component_map=[0, 0, 0, 0])
    elif case == "components without kind":
        kw = dict(components=2)
    elif case == "positions components":
        kw["positions"] = np.zeros((3, 3), np.int32)
    with pytest.raises(error, match=words):
        posenc.rope(q, **kw)
    np.testing.assert_array_equal(q, before)


def test_map_length_counts_from_rotary_offset(rng):
    # with rotary_offset 4 of head_dim 8, rotary_dim defaults to 4: two frequencies
    q = _data(rng, (1, 3, 2, 8), np.float32)
    q0 = q.copy()
    positions = np.array([[1, 100], [2, 200], [3, 300]], np.int32)
    kw = dict(positions=positions, multimodal="positions_map", components=2, rotary_offset=4,
              context=posenc.Context("cpu"))
    with pytest.raises(posenc.InvalidShape, match="component_map: 4 entries, but rotary_dim/2 = 2"):
        posenc.rope(q, component_map=[0, 1, 1, 0], **kw)
    np.testing.assert_array_equal(q, q0)
    posenc.rope(q, component_map=[1, 0], **kw)
    exact, scale = ref_rope(q0[..., 4:].astype(np.float64),
                            positions[None][..., [1, 0]].astype(np.float64))
    check(q[..., 4:], exact, scale, "float32")
    np.testing.assert_array_equal(q[..., :4], q0[..., :4])
