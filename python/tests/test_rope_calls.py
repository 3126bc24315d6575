# SPDX-License-Identifier: MIT
# The calls model code makes: HF configs in every transformers v4 and v5 form against HF's
# own frequencies in float64, posenc.Rope beside posenc.rope, HF's position_ids, and misuse
# refused (integers that would wrap, wrong scaling= types, fractional offsets, unknown names)
# with nothing written.
import json
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

import posenc
from _reference import PROMISE, sincos
from test_hf import MODELS, as_object, hf_reference, legacy, v5

TOKENS_POSITIONS = np.array([0, 7, 1000, 4000], np.int64)  # below every model's original length


def _rotate(x, positions, inv_freq, attention, rotary_dim):
    """float64 NeoX rotation of x [batch, tokens, heads, dim] by given frequencies (HF's
    rotate_half form): (exact, pair norms) for the tolerance."""
    x = np.asarray(x, np.float64)
    half = rotary_dim // 2
    s, c = sincos(np.asarray(positions, np.float64)[..., None], inv_freq)
    s, c = s[:, :, None, :] * attention, c[:, :, None, :] * attention
    a, b = x[..., :half], x[..., half:rotary_dim]
    out = x.copy()
    out[..., :half] = a * c - b * s
    out[..., half:rotary_dim] = a * s + b * c
    norm = np.abs(x)
    pair = np.hypot(a, b) * attention
    norm[..., :half] = pair
    norm[..., half:rotary_dim] = pair
    return out, norm


def _head_dim(cfg):
    inner = cfg.get("text_config", cfg)
    return inner.get("qk_rope_head_dim") or inner.get("head_dim") or \
        inner["hidden_size"] // inner["num_attention_heads"]


def _forms(name, tmp_path):
    """(form name, how to call) for every way a model's settings reach posenc: each yields
    (Rope arguments, rope keyword arguments)."""
    old, new = legacy(name), v5(name)
    inner_old = old.get("text_config", old)
    inner_new = new.get("text_config", new)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(new))
    forms = {
        "v4 config dict": old,
        "v5 config dict": new,
        "v4 config object": as_object(old),
        "v5 config object": as_object(new),
        "config.json path": str(folder / "config.json"),
        "model folder": folder,
        # a bare v5 rope_parameters carries rope_theta: the form posenc used to misread
        "v5 rope dict": inner_new["rope_parameters"],
    }
    if inner_old.get("rope_scaling"):
        forms["v4 rope dict, theta given"] = inner_old["rope_scaling"]
    return forms, inner_old


def _needs_context_length(rope):
    kind = rope.get("rope_type", rope.get("type"))
    return kind in ("dynamic", "longrope") or (kind == "yarn" and rope.get("factor") is None)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_hf_form_matches_hf(name, tmp_path, rng):
    forms, inner_old = _forms(name, tmp_path)
    cfg = v5(name)
    inv, attention = hf_reference(np, cfg, int(TOKENS_POSITIONS.max()) + 1)
    head_dim = _head_dim(cfg)
    rotary_dim = 2 * len(inv)
    multimodal = "mrope_section" in (cfg.get("text_config", cfg)["rope_parameters"])
    q = rng.standard_normal((1, len(TOKENS_POSITIONS), 4, head_dim)).astype(np.float32)
    exact, norm = _rotate(q, TOKENS_POSITIONS[None], inv, attention, rotary_dim)
    # M-RoPE with equal t, h, w positions is the plain rotation: HF's [3, batch, tokens] ids
    ids = np.broadcast_to(TOKENS_POSITIONS, (3, 1, len(TOKENS_POSITIONS))).copy() \
        if multimodal else TOKENS_POSITIONS[None]
    for form, source in forms.items():
        extra = {}
        if form.startswith("v4 rope dict"):
            extra["theta"] = inner_old["rope_theta"]
        bare = form.endswith("rope dict") or form.startswith("v4 rope dict")
        rope_extra = dict(extra)
        if bare and _needs_context_length(source):
            rope_extra["max_position_embeddings"] = inner_old["max_position_embeddings"]
            if form.startswith("v4") and name == "phi3-mini-128k":
                continue  # Phi-3 keeps its original length beside the dict, not in it
        rope = posenc.Rope(source, head_dim=head_dim if bare else None, **rope_extra)
        got = rope(q.copy(), position_ids=ids)
        assert np.all(np.abs(got - exact) <= PROMISE * norm), form
        if not bare or not _needs_context_length(source):
            # posenc.rope with the same settings as keywords: the same bits
            again = posenc.rope(q.copy(), position_ids=ids, scaling=source, **extra)
            np.testing.assert_array_equal(again, got, err_msg=form)


def test_yarn_dict_with_theta_is_not_a_config(rng):
    # The example: a v5 YaRN dict used to lose its scaling (2.96 off HF's).
    d = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
         "rope_theta": 1e6}
    q = rng.standard_normal((1, 3, 2, 128)).astype(np.float32)
    got = posenc.rope(q.copy(), positions=np.array([5, 70000, 131000], np.int32), scaling=d)
    plain = posenc.rope(q.copy(), positions=np.array([5, 70000, 131000], np.int32), theta=1e6)
    want = posenc.rope(q.copy(), positions=np.array([5, 70000, 131000], np.int32), theta=1e6,
                       scaling={"type": "yarn", "factor": 4.0, "original_max_positions": 32768})
    np.testing.assert_array_equal(got, want)
    assert np.abs(got - plain).max() > 0.1
    for kind, extra in (("llama3", {"low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192}),
                        ("linear", {})):
        d = {"rope_type": kind, "factor": 8.0, "rope_theta": 5e5, **extra}
        assert posenc.hf.scaling_from_hf(d)["scaling"]["type"] == kind


@pytest.mark.parametrize("keyword", ["rotary_dim", "rotary_offset", "components"])
def test_integers_never_wrap(keyword, rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    q0 = q.copy()
    for value in (2**40 + 32, 2**32, -2):
        with pytest.raises(posenc.InvalidArgument, match=keyword):
            posenc.rope(q, **{keyword: value})
        with pytest.raises(posenc.InvalidArgument, match=keyword):
            posenc.Rope(**{keyword: value})
    with pytest.raises(TypeError, match=keyword):
        posenc.rope(q, **{keyword: 32.0})
    np.testing.assert_array_equal(q, q0)
    # numpy integers are integers
    posenc.rope(q, **{keyword: np.int64(0)})


@pytest.mark.parametrize("scaling", ["yarn", [1, 2, 3], 4.0, (1.0,), b"yarn"])
def test_wrong_scaling_types_are_type_errors(scaling, rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    q0 = q.copy()
    with pytest.raises(TypeError, match="scaling.*dict.*HF config object.*path"):
        posenc.rope(q, scaling=scaling)
    with pytest.raises(TypeError, match="scaling"):
        posenc.Rope(scaling=scaling)
    np.testing.assert_array_equal(q, q0)


def test_offsets_are_integers(rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    q0 = q.copy()
    for offset in (1.5, 1.0, "1", None):
        with pytest.raises(TypeError, match="offset"):
            posenc.rope(q, offset=offset)
        with pytest.raises(TypeError, match="offset"):
            posenc.rope(q, offset=offset, theta=500.0)
        with pytest.raises(TypeError, match="offset"):
            posenc.Rope()(q, offset=offset)
    np.testing.assert_array_equal(q, q0)
    want = posenc.rope(q0.copy(), offset=3)
    for offset in (np.int64(3), np.int32(3), np.uint8(3)):
        np.testing.assert_array_equal(posenc.rope(q0.copy(), offset=offset), want)
        np.testing.assert_array_equal(posenc.Rope()(q0.copy(), offset=offset), want)


def test_missing_theta_warns(rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    v4 = {"rope_type": "linear", "factor": 2.0}
    with pytest.warns(posenc.HFWarning, match="rope_theta"):
        posenc.Rope(v4)
    with pytest.warns(posenc.HFWarning, match="theta"):
        posenc.rope(q.copy(), scaling={"rope_type": "linear", "factor": 3.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        posenc.Rope(v4, theta=5e5)
        posenc.Rope({**v4, "rope_theta": 5e5})
        posenc.Rope({"rope_scaling": v4, "rope_theta": 5e5, "head_dim": 64})
        posenc.rope(q.copy(), scaling=v4, theta=10000.0)
        posenc.rope(q.copy(), scaling={"type": "linear", "factor": 2.0})  # posenc's own form


def test_position_ids_as_hf_passes_them(rng):
    q = rng.standard_normal((2, 4, 5, 64)).astype(np.float32)  # HF's [batch, heads, seq, dim]
    k = rng.standard_normal((2, 2, 5, 64)).astype(np.float32)
    ids = np.array([[3, 4, 5, 6, 7], [0, 1, 2, 9, 10]], np.int64)
    want_q, want_k = posenc.rope(q.copy(), k.copy(), positions=ids.astype(np.int32),
                                 layout="bhtd")
    rope = posenc.Rope(layout="bhtd")
    for call in (lambda a, b: rope(a, b, position_ids=ids),
                 lambda a, b: posenc.rope(a, b, position_ids=ids, layout="bhtd"),
                 lambda a, b: posenc.rope(a, b, positions=ids, layout="bhtd"),
                 lambda a, b: posenc.rope(a, b, position_ids=ids.tolist(), layout="bhtd")):
        got_q, got_k = call(q.copy(), k.copy())
        np.testing.assert_array_equal(got_q, want_q)
        np.testing.assert_array_equal(got_k, want_k)
    # [1, seq] ids serve the whole batch
    shared = posenc.rope(q.copy(), position_ids=ids[:1], layout="bhtd")
    np.testing.assert_array_equal(
        shared, posenc.rope(q.copy(), positions=ids[0].astype(np.int32), layout="bhtd"))
    # M-RoPE: [3, batch, seq] ids are posenc's [batch, seq, 3]
    three = np.stack([ids, ids + 1, ids * 2]).astype(np.int64)
    mrope = dict(multimodal="mrope", mrope_section=(8, 12, 12), layout="bhtd")
    want = posenc.rope(q.copy(), positions=np.moveaxis(three, 0, -1).astype(np.int32), **mrope)
    np.testing.assert_array_equal(posenc.rope(q.copy(), position_ids=three, **mrope), want)
    np.testing.assert_array_equal(posenc.Rope(**mrope)(q.copy(), position_ids=three), want)
    np.testing.assert_array_equal(
        posenc.Rope(**mrope)(q.copy(), position_ids=three.tolist()), want)


def test_bad_position_ids_write_nothing(rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    q0 = q.copy()
    big = np.array([[1, 2**31]], np.int64)
    for call in (lambda: posenc.rope(q, position_ids=big),
                 lambda: posenc.Rope()(q, position_ids=big),
                 lambda: posenc.rope(q, positions=big, theta=5.0)):
        with pytest.raises(posenc.InvalidArgument, match="position.*outside int32"):
            call()
    with pytest.raises(posenc.InvalidArgument, match="position_ids.*positions"):
        posenc.rope(q, positions=np.zeros(2, np.int32), position_ids=np.zeros((1, 2)))
    with pytest.raises(posenc.InvalidArgument, match="position_ids: .*outside int32"):
        posenc.Rope()(q, position_ids=np.zeros((1, 2), np.uint64) + 2**63)
    with pytest.raises(posenc.InvalidDtype, match="position_ids"):
        posenc.Rope()(q, position_ids=np.zeros((1, 2), np.complex64))
    np.testing.assert_array_equal(q, q0)


def test_int64_slot_mapping(rng):
    k = rng.standard_normal((1, 3, 2, 16)).astype(np.float32)
    q = rng.standard_normal((1, 3, 4, 16)).astype(np.float32)
    slots = np.array([5, 0, 2], np.int64)  # vLLM's dtype
    caches = [np.zeros((8, 2, 16), np.float32) for _ in range(2)]
    posenc.rope(q.copy(), k, k_cache=caches[0], slot_mapping=slots.astype(np.int32))
    posenc.Rope()(q.copy(), k, k_cache=caches[1], slot_mapping=slots)
    np.testing.assert_array_equal(caches[0], caches[1])
    assert np.any(caches[1][5])


def test_unknown_names_suggest_the_known_one(rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    q0 = q.copy()
    with pytest.raises(TypeError, match="did you mean 'positions'"):
        posenc.rope(q, postions=[0, 1])
    with pytest.raises(TypeError, match="did you mean 'position_ids'"):
        posenc.Rope()(q, postion_ids=[0, 1])
    with pytest.raises(TypeError, match="did you mean 'rotary_dim'"):
        posenc.Rope(rotary_dims=32)
    with pytest.raises(posenc.InvalidArgument, match="did you mean 'factor'"):
        posenc.rope(q, scaling={"rope_type": "linear", "factr": 2.0, "rope_theta": 1e4})
    with pytest.raises(posenc.InvalidArgument, match="did you mean 'yarn'"):
        posenc.rope(q, scaling={"rope_type": "yarm", "factor": 2.0, "rope_theta": 1e4})
    np.testing.assert_array_equal(q, q0)


def test_rope_gives_posenc_rope_bits(rng, dtype):
    name, dt = dtype
    q = rng.standard_normal((2, 3, 4, 64)).astype(np.float32).astype(dt)
    k = rng.standard_normal((2, 3, 2, 64)).astype(np.float32).astype(dt)
    options = dict(theta=5e5, style="gptj", rotary_dim=48, scaling={"type": "linear",
                                                                     "factor": 2.0})
    positions = np.array([[1, 2, 3], [9, 400, 70000]], np.int32)
    want_q, want_k = posenc.rope(q.copy(), k.copy(), positions=positions, **options)
    rope = posenc.Rope(**options)
    got_q, got_k = rope(q.copy(), k.copy(), positions=positions)
    assert got_q.dtype == dt
    np.testing.assert_array_equal(got_q.view(np.uint8), want_q.view(np.uint8))
    np.testing.assert_array_equal(got_k.view(np.uint8), want_k.view(np.uint8))
    settings = rope.settings
    assert settings["theta"] == 5e5 and settings["rotary_dim"] == 48 and settings["style"] == 1
    assert "Rope(" in repr(rope) and rope.context is None
    # out=: q itself untouched
    out = np.empty_like(q)
    q_copy = q.copy()
    assert rope(q_copy, positions=positions, out=out) is out
    np.testing.assert_array_equal(q_copy.view(np.uint8), q.view(np.uint8))
    np.testing.assert_array_equal(out.view(np.uint8), want_q.view(np.uint8))


def test_rope_on_its_own_context(rng):
    q = rng.standard_normal((1, 2, 2, 64)).astype(np.float32)
    with posenc.Context("cpu") as context:
        rope = posenc.Rope(theta=100.0, context=context)
        assert rope.context is context
        got = rope(q.copy(), offset=5)
    np.testing.assert_array_equal(got, posenc.rope(q.copy(), offset=5, theta=100.0))
    with pytest.raises(posenc.InvalidArgument, match="closed"):
        rope(q, offset=5)


def test_cache_is_by_value(rng):
    # A config changed between calls gives the new result: the cache keys on content.
    q = rng.standard_normal((1, 3, 2, 64)).astype(np.float32)
    positions = np.array([1, 50, 900], np.int32)
    cfg = {"head_dim": 64, "rope_theta": 1e4, "max_position_embeddings": 4096,
           "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    first = posenc.rope(q.copy(), positions=positions, scaling=cfg)
    cfg["rope_scaling"]["factor"] = 4.0
    second = posenc.rope(q.copy(), positions=positions, scaling=cfg)
    want = posenc.rope(q.copy(), positions=positions, scaling={"type": "linear", "factor": 4.0})
    np.testing.assert_array_equal(second, want)
    assert not np.array_equal(first, second)
    obj = types.SimpleNamespace(head_dim=64, rope_theta=1e4, rope_scaling=None)
    plain = posenc.rope(q.copy(), positions=positions, scaling=obj)
    obj.rope_theta = 500.0
    np.testing.assert_array_equal(posenc.rope(q.copy(), positions=positions, scaling=obj),
                                  posenc.rope(q.copy(), positions=positions, theta=500.0))
    assert not np.array_equal(plain, posenc.rope(q.copy(), positions=positions, scaling=obj))
    # the same value given as 2 and 2.0 still resolves each as its own type
    with pytest.raises(TypeError):
        posenc.rope(q.copy(), rotary_dim=32.0)
    posenc.rope(q.copy(), rotary_dim=32)


def test_load_config(tmp_path):
    cfg = legacy("llama3.1-8b")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert posenc.hf.load_config(tmp_path) == cfg
    assert posenc.hf.load_config(tmp_path / "config.json") == cfg
    with pytest.raises(FileNotFoundError):
        posenc.hf.load_config(tmp_path / "missing")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        posenc.hf.load_config(tmp_path / "bad.json")


def test_module_help_lists_commands():
    done = subprocess.run([sys.executable, "-m", "posenc", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "bench" in done.stdout and "plots" in done.stdout
    done = subprocess.run([sys.executable, "-m", "posenc", "nonsense"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "bench" in done.stderr


DEVICES = [d["selector"] for d in posenc.devices()]


LONG_POSITIONS = np.array([5, 131071, 3_000_000, 2**31 - 1], np.int64)


@pytest.mark.parametrize("selector", DEVICES)
@pytest.mark.parametrize("name", ["llama3.1-8b", "qwen2.5-7b-yarn", "phi3-mini-128k",
                                  "qwen2-vl-7b"])
@pytest.mark.parametrize("positions", [TOKENS_POSITIONS, LONG_POSITIONS], ids=["short", "long"])
def test_rope_on_every_device_matches_hf(selector, name, positions, dtype, rng):
    # A Rope from a v5 config, on each device (lavapipe and PoCL on CI), in each dtype, against
    # HF's float64 frequencies: posenc.h's promise, plus one unit in the last place of 16-bit
    # outputs (HF's formulas and posenc's agree to a few float64 ulps, far below it).
    from _reference import check
    dtype_name, dt = dtype
    cfg = v5(name)
    inv, attention = hf_reference(np, cfg, int(positions.max()) + 1)
    head_dim = _head_dim(cfg)
    q = rng.standard_normal((2, 4, len(positions), head_dim)).astype(np.float32)
    q = q.astype(dt)  # HF's [batch, heads, tokens, head_dim]
    exact, norm = _rotate(np.asarray(q, np.float64).transpose(0, 2, 1, 3),
                          np.broadcast_to(positions, (2, len(positions))), inv,
                          attention, 2 * len(inv))
    multimodal = "mrope_section" in cfg.get("text_config", cfg)["rope_parameters"]
    ids = np.broadcast_to(positions, (3, 1, len(positions))).copy() \
        if multimodal else positions[None]
    with posenc.Context(selector, allow_software=True) as context:
        rope = posenc.Rope(cfg, layout="bhtd", context=context)
        got = rope(q.copy(), position_ids=ids)
    got = np.asarray(got, np.float64).transpose(0, 2, 1, 3)
    check(got, exact, norm, dtype_name)
