# SPDX-License-Identifier: MIT
# posenc.hf: HF transformers rope_scaling / rope_parameters / configs of real models mapped to
# posenc's arguments, and (with numpy) the frequencies both sides imply, compared in float64.
import copy
import math
import types

import pytest

from posenc import hf  # the package under test, installed or in the tree

NS = types.SimpleNamespace


def _phi3_factors(n):
    # Synthetic, but shaped like Phi-3's: rotary_dim/2 entries, 1 for the fast dims growing
    # towards the slow ones.
    short = [1.0 + 0.05 * max(0, j - n // 2) for j in range(n)]
    long = [1.0 + 2.0 * j / (n - 1) + 0.5 * (j / (n - 1)) ** 2 * 40 for j in range(n)]
    return short, long


_SHORT, _LONG = _phi3_factors(48)

# Settings as the models' config.json files on the Hub have them (rope fields and head size).
MODELS = {
    "llama2-7b": dict(hidden_size=4096, num_attention_heads=32, max_position_embeddings=4096,
                      rope_theta=10000.0, rope_scaling=None),
    "llama2-linear": dict(hidden_size=4096, num_attention_heads=32, max_position_embeddings=16384,
                          rope_theta=10000.0, rope_scaling={"type": "linear", "factor": 4.0}),
    "llama2-dynamic": dict(hidden_size=4096, num_attention_heads=32, max_position_embeddings=4096,
                           rope_theta=10000.0, rope_scaling={"type": "dynamic", "factor": 2.0}),
    "llama3.1-8b": dict(hidden_size=4096, num_attention_heads=32, max_position_embeddings=131072,
                        rope_theta=500000.0,
                        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 8192,
                                      "rope_type": "llama3"}),
    "qwen2.5-7b-yarn": dict(hidden_size=3584, num_attention_heads=28,
                            max_position_embeddings=32768, rope_theta=1000000.0,
                            rope_scaling={"factor": 4.0, "original_max_position_embeddings": 32768,
                                          "type": "yarn"}),
    "deepseek-v3": dict(hidden_size=7168, num_attention_heads=128, qk_rope_head_dim=64,
                        qk_nope_head_dim=128, max_position_embeddings=163840, rope_theta=10000,
                        rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40,
                                      "mscale": 1.0, "mscale_all_dim": 1.0,
                                      "original_max_position_embeddings": 4096, "type": "yarn"}),
    "gpt-oss-20b": dict(hidden_size=2880, num_attention_heads=64, head_dim=64,
                        max_position_embeddings=131072, rope_theta=150000,
                        rope_scaling={"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                      "original_max_position_embeddings": 4096,
                                      "rope_type": "yarn", "truncate": False}),
    "phi3-mini-128k": dict(hidden_size=3072, num_attention_heads=32,
                           max_position_embeddings=131072, original_max_position_embeddings=4096,
                           rope_theta=10000.0,
                           rope_scaling={"long_factor": _LONG, "short_factor": _SHORT,
                                         "type": "longrope"}),
    "qwen2-vl-7b": dict(hidden_size=3584, num_attention_heads=28, max_position_embeddings=32768,
                        rope_theta=1000000.0,
                        rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}),
    "qwen3-vl-8b": dict(model_type="qwen3_vl",
                        text_config=dict(head_dim=128, hidden_size=4096, num_attention_heads=32,
                                         max_position_embeddings=262144, rope_theta=5000000,
                                         rope_scaling={"mrope_interleaved": True,
                                                       "mrope_section": [24, 20, 20],
                                                       "rope_type": "default"})),
}

# What each model maps to: (scaling, theta, rotary_dim, multimodal, mrope_section). Written out
# from the models' published settings and posenc.h, not from the module.
EXPECTED = {
    "llama2-7b": (None, 10000.0, 128, None, None),
    "llama2-linear": ({"type": "linear", "factor": 4.0}, 10000.0, 128, None, None),
    "llama2-dynamic": ({"type": "dynamic_ntk", "factor": 2.0, "original_max_positions": 4096},
                       10000.0, 128, None, None),
    "llama3.1-8b": ({"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_positions": 8192},
                    500000.0, 128, None, None),
    "qwen2.5-7b-yarn": ({"type": "yarn", "factor": 4.0, "original_max_positions": 32768},
                        1000000.0, 128, None, None),
    "deepseek-v3": ({"type": "yarn", "factor": 40.0, "original_max_positions": 4096,
                     "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
                    10000.0, 64, None, None),
    "gpt-oss-20b": ({"type": "yarn", "factor": 32.0, "original_max_positions": 4096,
                     "beta_fast": 32.0, "beta_slow": 1.0, "no_truncate": True},
                    150000.0, 64, None, None),
    "phi3-mini-128k": ({"type": "longrope", "factor": 32.0, "original_max_positions": 4096,
                        "short_factor": _SHORT, "long_factor": _LONG}, 10000.0, 96, None, None),
    "qwen2-vl-7b": (None, 1000000.0, 128, "mrope", [16, 24, 24]),
    "qwen3-vl-8b": (None, 5000000.0, 128, "mrope_interleaved", [24, 20, 20]),
}


def legacy(name):
    """The model's config as transformers < 5 holds it (rope_scaling beside rope_theta)."""
    return copy.deepcopy(MODELS[name])


def v5(name):
    """The same config as transformers >= 5 holds it: rope_parameters with rope_type and
    rope_theta inside, and the pre-training length moved in for llama3 / yarn / longrope
    (standardize_rope_params)."""
    cfg = legacy(name)
    inner = cfg["text_config"] if "text_config" in cfg else cfg
    rope = dict(inner.pop("rope_scaling") or {})
    kind = rope.pop("type", None)
    rope.setdefault("rope_type", "default" if kind in (None, "mrope") else kind)
    rope["rope_theta"] = inner.pop("rope_theta")
    if rope["rope_type"] in ("llama3", "yarn", "longrope"):
        rope.setdefault("original_max_position_embeddings",
                        inner.pop("original_max_position_embeddings",
                                  inner["max_position_embeddings"]))
    inner["rope_parameters"] = rope
    return cfg


def as_object(cfg):
    return NS(**{k: as_object(v) if k == "text_config" else v for k, v in cfg.items()})


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("style", ["legacy", "v5"])
@pytest.mark.parametrize("shape", ["dict", "object"])
def test_real_configs(name, style, shape):
    cfg = legacy(name) if style == "legacy" else v5(name)
    got = hf.scaling_from_hf(as_object(cfg) if shape == "object" else cfg)
    scaling, theta, rotary_dim, multimodal, section = EXPECTED[name]
    assert got["scaling"] == scaling
    assert got["theta"] == theta and isinstance(got["theta"], float)
    assert got["rotary_dim"] == rotary_dim
    assert got["multimodal"] == multimodal
    assert got["mrope_section"] == section
    assert got["attention_factor"] is None
    assert got["scaling"] is None or hf.is_posenc_form(got["scaling"])


def test_bare_rope_dicts_need_what_the_config_held():
    llama = MODELS["llama3.1-8b"]["rope_scaling"]
    got = hf.scaling_from_hf(llama)
    assert got["scaling"] == EXPECTED["llama3.1-8b"][0]
    assert got["theta"] is None and got["rotary_dim"] is None
    assert hf.scaling_from_hf(llama, head_dim=128)["rotary_dim"] == 128
    assert hf.scaling_from_hf(llama, head_dim=128, rotary_dim=64)["rotary_dim"] == 64
    # Dynamic NTK grows from max_position_embeddings, which a bare dict lacks.
    with pytest.raises(ValueError, match="max_position_embeddings"):
        hf.scaling_from_hf({"type": "dynamic", "factor": 2.0})
    got = hf.scaling_from_hf({"type": "dynamic", "factor": 2.0}, max_position_embeddings=2048)
    assert got["scaling"]["original_max_positions"] == 2048
    # YaRN without original_max_position_embeddings: the model's length is the original one.
    got = hf.scaling_from_hf({"rope_type": "yarn", "factor": 2.0}, max_position_embeddings=8192)
    assert got["scaling"]["original_max_positions"] == 8192
    assert hf.scaling_from_hf(None)["scaling"] is None
    assert hf.scaling_from_hf({})["scaling"] is None


def test_factor_rules():
    # Explicit factor wins over max / original (HF since its PR #40320; Qwen2.5's 32768 / 32768
    # would switch YaRN off).
    cfg = legacy("qwen2.5-7b-yarn")
    assert hf.scaling_from_hf(cfg)["scaling"]["factor"] == 4.0
    # Without factor, the ratio (DeepSeek-V3's 163840 / 4096).
    cfg = legacy("deepseek-v3")
    del cfg["rope_scaling"]["factor"]
    assert hf.scaling_from_hf(cfg)["scaling"]["factor"] == 40.0
    # LongRoPE: an explicit factor, and an explicit attention_factor, are kept.
    cfg = legacy("phi3-mini-128k")
    cfg["rope_scaling"].update(factor=8.0, attention_factor=1.25)
    got = hf.scaling_from_hf(cfg)
    assert got["scaling"]["factor"] == 8.0 and got["attention_factor"] == 1.25
    # The legacy Phi-3 name.
    cfg = legacy("phi3-mini-128k")
    cfg["rope_scaling"]["type"] = "su"
    assert hf.scaling_from_hf(cfg)["scaling"]["type"] == "longrope"
    # partial_rotary_factor, at config level or (transformers >= 5) inside rope_parameters.
    got = hf.scaling_from_hf(NS(hidden_size=2560, num_attention_heads=32, rope_theta=10000.0,
                                partial_rotary_factor=0.4, rope_scaling=None))
    assert got["rotary_dim"] == 32
    got = hf.scaling_from_hf({"head_dim": 80, "rope_parameters": {
        "rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}})
    assert got["rotary_dim"] == 40
    # rope_type wins over the legacy type; a falsy truncate means no truncation.
    got = hf.scaling_from_hf({"type": "linear", "rope_type": "yarn", "factor": 2.0,
                              "original_max_position_embeddings": 4096, "truncate": None})
    assert got["scaling"]["type"] == "yarn" and got["scaling"]["no_truncate"] is True
    # Per-layer-type rope_parameters (Gemma 3).
    gemma = {"head_dim": 256, "max_position_embeddings": 131072, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    assert hf.scaling_from_hf(gemma, layer_type="full_attention")["scaling"]["factor"] == 8.0
    assert hf.scaling_from_hf(gemma, layer_type="sliding_attention")["theta"] == 1e4


@pytest.mark.parametrize("obj, kwargs, key", [
    ({"rope_type": "ntk_by_parts", "factor": 2.0}, {}, "rope_type"),
    ({"type": "dynamic_ntk", "factor": 2.0}, {}, "rope_type"),
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "foo": 1}, {},
     "foo"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192}, {}, "high_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
      "original_max_position_embeddings": 8192}, {}, "low_freq_factor"),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
     {}, "original_max_position_embeddings"),
    ({"type": "linear"}, {}, "factor"),
    ({"type": "linear", "factor": 0.5}, {}, "factor"),
    ({"type": "linear", "factor": "2"}, {}, "factor"),
    ({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 1,
      "beta_slow": 2}, {}, "beta_slow"),
    ({"type": "longrope", "short_factor": [1.0] * 47, "long_factor": [1.0] * 48,
      "original_max_position_embeddings": 4096, "factor": 2.0}, {"head_dim": 96},
     "short_factor"),
    ({"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.0] * 48,
      "short_mscale": 1.2, "long_mscale": 1.2, "original_max_position_embeddings": 4096}, {},
     "short_mscale"),
    ({"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.0] * 48,
      "original_max_position_embeddings": 4096}, {}, "max_position_embeddings"),
    ({"type": "mrope", "mrope_section": [16, 24, 16]}, {"head_dim": 128}, "mrope_section"),
    ({"type": "mrope"}, {}, "mrope_section"),
    ({"rope_type": "default", "mrope_interleaved": True}, {}, "mrope_section"),
    ({"rope_type": "default", "attention_factor": 2.0}, {}, "attention_factor"),
    ({"factor": 2.0}, {}, "rope_type"),
    ({"type": "yarn", "factor": 4.0, "original_max_positions": 4096}, {},
     "original_max_positions.*posenc form"),
    ({"hidden_size": 64, "num_attention_heads": 2, "rope_scaling": "linear"}, {},
     "rope_scaling"),
    ({"head_dim": 64, "partial_rotary_factor": 0.25 + 1 / 64, "rope_theta": 1e4}, {},
     "partial_rotary_factor"),
    ({"head_dim": 64, "rope_parameters": {"full_attention": {"rope_type": "default"}}}, {},
     "layer_type"),
    ({"head_dim": 64, "rope_parameters": {"full_attention": {"rope_type": "default"},
                                          "nope": None}}, {"layer_type": "nope"}, "layer_type"),
])
def test_bad_input_names_the_key(obj, kwargs, key):
    with pytest.raises(ValueError, match=key):
        hf.scaling_from_hf(obj, **kwargs)


def test_is_posenc_form():
    assert hf.is_posenc_form({"type": "linear", "factor": 2.0})
    assert hf.is_posenc_form({"type": "none"})
    assert hf.is_posenc_form({"type": "yarn", "factor": 4.0, "original_max_positions": 4096})
    assert not hf.is_posenc_form({"type": "yarn", "factor": 4.0})  # HF's, reads the config
    assert not hf.is_posenc_form({"type": "dynamic", "factor": 2.0})
    assert not hf.is_posenc_form({"rope_type": "linear", "factor": 2.0})
    assert not hf.is_posenc_form(MODELS["llama3.1-8b"]["rope_scaling"])
    assert not hf.is_posenc_form(None) and not hf.is_posenc_form("linear")


# ---------------------------------------------------------------------------------------------
# Frequencies: HF's formulas (from modeling_rope_utils, on the HF config) against posenc's (from
# posenc.h / scaling.c, on the mapped fields), both in float64, so a field landing in the wrong
# place (YaRN's original length, a beta, Llama 3's factors) shows as a different table.

def hf_reference(np, cfg, seq_len):
    """(inv_freq, attention factor) as transformers >= 5 computes them from rope_parameters."""
    inner = cfg.get("text_config", cfg)
    rope = inner["rope_parameters"]
    kind, base = rope["rope_type"], float(rope["rope_theta"])
    head = inner.get("qk_rope_head_dim") or inner.get("head_dim") or \
        inner["hidden_size"] // inner["num_attention_heads"]
    dim = int(head * rope.get("partial_rotary_factor", 1.0))
    mpe = inner["max_position_embeddings"]
    exps = np.arange(0, dim, 2) / dim
    inv = base ** -exps
    if kind == "linear":
        return inv / rope["factor"], 1.0
    if kind == "dynamic":
        length = max(seq_len, mpe)
        f = rope["factor"]
        return (base * (f * length / mpe - (f - 1)) ** (dim / (dim - 2))) ** -exps, 1.0
    if kind == "yarn":
        f, orig = rope.get("factor"), rope["original_max_position_embeddings"]
        f = f if f is not None else mpe / orig
        ms, msa = rope.get("mscale"), rope.get("mscale_all_dim")

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0
        att = get_mscale(f, ms) / get_mscale(f, msa) if ms and msa else get_mscale(f)

        def corr(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = corr(rope.get("beta_fast") or 32), corr(rope.get("beta_slow") or 1)
        if rope.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        high = high + 0.001 if low == high else high
        extrap = 1 - np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
        return inv / f * (1 - extrap) + inv * extrap, att
    if kind == "longrope":
        orig = rope["original_max_position_embeddings"]
        f = rope.get("factor") or mpe / orig
        att = 1.0 if f <= 1 else math.sqrt(1 + math.log(f) / math.log(orig))
        ext = rope["long_factor"] if seq_len > orig else rope["short_factor"]
        return inv / np.asarray(ext, dtype=np.float64), att
    if kind == "llama3":
        f, lo, hi = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
        old = rope["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        out = np.where(wavelen > old / lo, inv / f, inv)
        smooth = (old / wavelen - lo) / (hi - lo)
        mid = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(mid, (1 - smooth) * out / f + smooth * out, out), 1.0
    return inv, 1.0


def posenc_reference(np, mapped, seq_len):
    """(inv_freq, attention factor) from the posenc arguments, as posenc.h and scaling.c
    define them (float64, the defaults of posenc__scaling_resolve)."""
    s = mapped["scaling"] or {"type": "none"}
    dim, theta = mapped["rotary_dim"], mapped["theta"] or 10000.0
    kind, f = s["type"], s.get("factor", 1.0)
    orig = s.get("original_max_positions")
    exponent = dim / (dim - 2)
    base = theta
    if kind == "ntk":
        base = theta * f ** exponent
    elif kind == "dynamic_ntk":
        length = max(s.get("sequence_length") or seq_len, orig)
        base = theta * (f * length / orig - (f - 1)) ** exponent
    j = np.arange(dim // 2)
    w = base ** (-2.0 * j / dim)
    att = 1.0
    if kind == "linear":
        w = w / f
    elif kind == "yarn":
        def corr(rot):
            return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))
        low, high = corr(s.get("beta_fast", 32.0)), corr(s.get("beta_slow", 1.0))
        if not s.get("no_truncate"):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0.0), min(high, dim - 1.0)
        high = high + 0.001 if low == high else high
        keep = 1.0 - np.clip((j - low) / (high - low), 0.0, 1.0)
        w = w / f * (1.0 - keep) + w * keep

        def m(x):
            return 1.0 if f <= 1 else 0.1 * x * math.log(f) + 1.0
        ms, msa = s.get("mscale", 0.0), s.get("mscale_all_dim", 0.0)
        att = m(ms) / m(msa) if ms and msa else m(1.0)
    elif kind == "llama3":
        lo, hi = s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
        wavelen = 2 * math.pi / w
        smooth = (orig / wavelen - lo) / (hi - lo)
        w = np.where(wavelen > orig / lo, w / f,
                     np.where(wavelen < orig / hi, w, (1 - smooth) * w / f + smooth * w))
    elif kind == "longrope":
        ext = s["long_factor"] if seq_len > orig else s["short_factor"]
        w = w / np.asarray(ext, dtype=np.float64)
        if f > 1.0:
            att = math.sqrt(1.0 + math.log(f) / math.log(orig))
    if mapped["attention_factor"] is not None:
        att = mapped["attention_factor"]
    return w, att


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("seq_len", [1000, 70000, 300000])
def test_frequencies_match_hf(name, seq_len):
    np = pytest.importorskip("numpy")
    cfg = v5(name)
    want, want_att = hf_reference(np, cfg, seq_len)
    for style in (cfg, legacy(name)):
        got, got_att = posenc_reference(np, hf.scaling_from_hf(style), seq_len)
        # Both sides are the same float64 operations in a different order: a few ulps.
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)
        assert got_att == pytest.approx(want_att, rel=1e-14)


def test_frequencies_tell_the_fields_apart():
    # The comparison above fails when a field is misplaced: DeepSeek-V3's table with the
    # original length and the context length swapped differs from HF's.
    np = pytest.importorskip("numpy")
    mapped = hf.scaling_from_hf(legacy("deepseek-v3"))
    want, _ = hf_reference(np, v5("deepseek-v3"), 1000)
    wrong = copy.deepcopy(mapped)
    wrong["scaling"]["original_max_positions"] = 163840
    assert not np.allclose(posenc_reference(np, wrong, 1000)[0], want, rtol=1e-6)
    wrong = copy.deepcopy(mapped)
    wrong["scaling"]["beta_fast"] = 16.0  # only the ramp moves
    assert not np.allclose(posenc_reference(np, wrong, 1000)[0], want, rtol=1e-6)
    wrong = copy.deepcopy(mapped)
    del wrong["scaling"]["mscale_all_dim"]  # DeepSeek's attention factor 1 becomes 1.37
    assert posenc_reference(np, wrong, 1000)[1] != pytest.approx(1.0)
