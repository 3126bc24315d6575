/* SPDX-License-Identifier: MIT */
/* posenc's RoPE API: pairing styles, context-extension scalings, multimodal positions, and
 * posenc_rope with its descriptor. Part of the public C API that <posenc/posenc.h> includes;
 * include that header, not this one. */
#ifndef POSENC_POSENC_ROPE_H
#define POSENC_POSENC_ROPE_H

#ifndef POSENC_POSENC_H
#error "include <posenc/posenc.h>, which includes this header"
#endif

/* ---------------------------------------------------------------------------------------------
 * RoPE
 */
/* How dims pair up: NEOX, half split: dim i pairs with i + rotary_dim/2 (NeoX, Llama, HF);
 * GPTJ, interleaved: dim 2i pairs with 2i+1 (GPT-J, original RoFormer). */
#define POSENC_ROPE_STYLE_LIST(X)                                                                  \
    X(NEOX, 0, "neox")                                                                             \
    X(GPTJ, 1, "gptj")

typedef enum posenc_rope_style {
#define POSENC_ROPE_STYLE_ENUM_(name, value, text) POSENC_ROPE_##name = value,
    POSENC_ROPE_STYLE_LIST(POSENC_ROPE_STYLE_ENUM_)
#undef POSENC_ROPE_STYLE_ENUM_
} posenc_rope_style;

POSENC_API const char *posenc_rope_style_name(posenc_rope_style style); /* "neox", "gptj" */
POSENC_API posenc_status posenc_rope_style_from_name(const char *name, posenc_rope_style *out);

/* The scaling types:
 * - LINEAR: position interpolation, inv_freq / factor.
 * - NTK: static NTK-aware, base * factor^(d/(d-2)).
 * - DYNAMIC_NTK: the base recomputed from the sequence length.
 * - YARN, LLAMA3, LONGROPE: as HF transformers computes them.
 * - YARN_GGML: ggml's YaRN as ggml_rope_ext takes it (llama.cpp): with
 *   w_j = theta^(-2j / rotary_dim), low = max(0, floor(c(beta_fast))),
 *   high = min(rotary_dim - 1, ceil(c(beta_slow))),
 *   c(b) = rotary_dim ln(original_max_positions / (2 pi b)) / (2 ln theta),
 *   ramp_j = 1 - clamp((j - low) / max(0.001, high - low), 0, 1) and m_j = ext_factor ramp_j:
 *     inv_freq[j] = w_j (freq_scale (1 - m_j) + m_j),
 *     attention factor = attention_factor (ggml's attn_factor, default 1)
 *                        * (ext_factor != 0 ? 1 + 0.1 ln(1 / freq_scale) : 1).
 *   Unlike YARN, freq_scale may exceed 1, ext_factor blends by any share, and
 *   original_max_positions (n_ctx_orig) may be 0. docs/ggml.md maps every ggml argument. */
#define POSENC_ROPE_SCALING_TYPE_LIST(X)                                                           \
    X(NONE, 0, "none")                                                                             \
    X(LINEAR, 1, "linear")                                                                         \
    X(NTK, 2, "ntk")                                                                               \
    X(DYNAMIC_NTK, 3, "dynamic_ntk")                                                               \
    X(YARN, 4, "yarn")                                                                             \
    X(LLAMA3, 5, "llama3")                                                                         \
    X(LONGROPE, 6, "longrope")                                                                     \
    X(YARN_GGML, 7, "yarn_ggml")

typedef enum posenc_rope_scaling_type {
#define POSENC_ROPE_SCALING_TYPE_ENUM_(name, value, text) POSENC_ROPE_SCALING_##name = value,
    POSENC_ROPE_SCALING_TYPE_LIST(POSENC_ROPE_SCALING_TYPE_ENUM_)
#undef POSENC_ROPE_SCALING_TYPE_ENUM_
} posenc_rope_scaling_type;

/* "none", "linear", "ntk", "dynamic_ntk", "yarn", "llama3", "longrope", "yarn_ggml". */
POSENC_API const char *posenc_rope_scaling_type_name(posenc_rope_scaling_type type);
POSENC_API posenc_status posenc_rope_scaling_type_from_name(const char *name,
                                                            posenc_rope_scaling_type *out);

/* Which position each frequency uses. The multimodal kinds read several position components
 * per token (the innermost dim of `positions`) and give each frequency one of them, with the
 * semantics of HF transformers (Qwen2-VL, Qwen3-VL, Pixtral). n = rotary_dim / 2 frequencies.
 * The rules are per frequency j, so they hold in both styles and for partial rotary dims (the
 * HF models use NEOX, and the vision towers rotate the whole head).
 * - POSITIONS_1D ("none"): one position per token.
 * - MROPE: Qwen2-VL / Qwen2.5-VL M-RoPE: 3 components (temporal, height, width); frequency j
 *   uses t for j < s0, h for s0 <= j < s0 + s1, w after (s = mrope_section, summing to n).
 * - MROPE_INTERLEAVED: Qwen3-VL interleaved M-RoPE: 3 components; frequency j uses h when
 *   j % 3 == 1 and j < 3 s1, w when j % 3 == 2 and j < 3 s2, t otherwise.
 * - VISION_2D: Qwen2-VL vision tower: 2 components (h, w); frequency j < n/2 uses h, the others
 *   w, both at inv_freq theta^(-4 (j mod n/2) / rotary_dim). rotary_dim % 4 == 0.
 * - VISION_2D_PIXTRAL ("pixtral"): Pixtral: 2 components (h, w); with
 *   f_i = theta^(-2i / rotary_dim), frequency j < n/2 uses h at f_2j, frequency j >= n/2 uses w
 *   at f_(2(j - n/2) + 1). rotary_dim % 4 == 0.
 * - POSITIONS_MAP: any assignment: `components` components (1 to 4); frequency j uses
 *   component component_map[j], at inv_freq[j] of theta, the scaling or the caller's table.
 *   Writes out the section rules of engines that have their own (ggml's M-RoPE with its fourth
 *   component and wrapping sections, Qwen3-VL as llama.cpp runs it): docs/ggml.md.
 * - VISION_GGML: ggml's vision mode (GGML_ROPE_TYPE_VISION, ggml_rope_multi; Qwen2-VL's vision
 *   tower as llama.cpp runs it): 4 components (t, h, w, e) and s = mrope_section, ggml's
 *   sections[4]. Frequency j is in sector r = j % (s0 + s1 + s2 + s3) (sections that cover
 *   fewer than n frequencies wrap), which uses t for r < s0, h for r < s0 + s1, w for
 *   r < s0 + s1 + s2, e after, at inv_freq theta^(-2 (r - start) / n), start being the first
 *   sector of r's section: the exponent restarts in each section, over ggml's n_dims = n.
 *   The scaling is NONE or YARN_GGML, whose ramp (over n, not rotary_dim) is at j itself.
 *   The sections sum to 1 to rotary_dim and s0 + s1 + s2 > 0, as ggml asserts.
 * posenc_rope_multimodal_from_name also takes "1d" for POSITIONS_1D and "vision_2d_pixtral" for
 * VISION_2D_PIXTRAL. */
#define POSENC_ROPE_MULTIMODAL_LIST(X)                                                             \
    X(POSITIONS_1D, 0, "none")                                                                     \
    X(MROPE, 1, "mrope")                                                                           \
    X(MROPE_INTERLEAVED, 2, "mrope_interleaved")                                                   \
    X(VISION_2D, 3, "vision_2d")                                                                   \
    X(VISION_2D_PIXTRAL, 4, "pixtral")                                                             \
    X(POSITIONS_MAP, 5, "positions_map")                                                           \
    X(VISION_GGML, 6, "vision_ggml")

typedef enum posenc_rope_multimodal {
#define POSENC_ROPE_MULTIMODAL_ENUM_(name, value, text) POSENC_ROPE_##name = value,
    POSENC_ROPE_MULTIMODAL_LIST(POSENC_ROPE_MULTIMODAL_ENUM_)
#undef POSENC_ROPE_MULTIMODAL_ENUM_
} posenc_rope_multimodal;

/* "none", "mrope", "mrope_interleaved", "vision_2d", "pixtral", "positions_map",
 * "vision_ggml". */
POSENC_API const char *posenc_rope_multimodal_name(posenc_rope_multimodal multimodal);
POSENC_API posenc_status posenc_rope_multimodal_from_name(const char *name,
                                                          posenc_rope_multimodal *out);

/* Context-extension scaling, applied on the host in float64 to produce inv_freq and an attention
 * factor. Defaults are the published ones. Fields a type does not use must stay zero. */
typedef struct posenc_rope_scaling {
    posenc_rope_scaling_type type;    /* default NONE */
    double factor;                    /* >= 1; default 1. HF configs that give no factor
                                       * but both max_position_embeddings and rope_scaling's
                                       * original_max_position_embeddings (LongRoPE of Phi-3)
                                       * take their ratio (docs/python-hf.md) */
    uint32_t original_max_positions;  /* DYNAMIC_NTK, YARN, LLAMA3, LONGROPE: pre-training
                                       * context */
    uint32_t sequence_length;         /* DYNAMIC_NTK, LONGROPE: current length; 0 = from
                                       * positions */
    double beta_fast;                 /* YARN; default 32 */
    double beta_slow;                 /* YARN; default 1 */
    double mscale;                    /* YARN; default 0: not given */
    double mscale_all_dim;            /* YARN; default 0: not given. With both given (> 0) the
                                       * attention factor is m(mscale) / m(mscale_all_dim),
                                       * m(x) = 0.1 x ln(factor) + 1 (DeepSeek); with either
                                       * missing it is 0.1 ln(factor) + 1, as HF transformers */
    bool no_truncate;                 /* YARN: keep fractional correction bounds (gpt-oss) */
    double low_freq_factor;           /* LLAMA3; default 1 */
    double high_freq_factor;          /* LLAMA3; default 4 */
    const double *short_factor;       /* LONGROPE: factors below the original max positions */
    const double *long_factor;        /* LONGROPE: factors above it */
    const double *freq_factors;       /* any type: divide inv_freq[j] by freq_factors[j] */
    uint32_t factor_count;            /* entries in each array above: rotary_dim/2 */
    double freq_scale;                /* YARN_GGML: ggml's freq_scale, finite > 0; default 1 */
    double ext_factor;                /* YARN_GGML: ggml's ext_factor, finite; default 0 */
} posenc_rope_scaling;

/* q and, optionally, k of one attention layer, rotated in one call:
 *   (x_a, x_b) -> attention_factor * (x_a cos t - x_b sin t, x_a sin t + x_b cos t),
 *   t = position * inv_freq[j], inv_freq[j] = theta^(-2j / rotary_dim), j < rotary_dim / 2
 *   (multimodal kinds: the position component and inv_freq of posenc_rope_multimodal).
 * q is [batch, tokens, q_heads, head_dim], k is [batch, tokens, k_heads, head_dim] (k_heads may
 * differ: grouped-query attention). Dims from rotary_dim to head_dim pass through unchanged
 * (with rotary_offset, the rotated dims start there instead of at 0). */
typedef struct posenc_rope_desc {
    posenc_tensor q;          /* required */
    posenc_tensor q_out;      /* absent: q is rotated in place; otherwise same shape and dtype */
    posenc_tensor k;          /* optional */
    posenc_tensor k_out;      /* absent: k in place */
    posenc_tensor positions;  /* i32 (or f32) [tokens] or [batch, tokens]; absent: token index.
                               * Multimodal kinds: [tokens, C] or [batch, tokens, C], C = 3
                               * (M-RoPE), 2 (vision), 4 (VISION_GGML) or `components`
                               * (POSITIONS_MAP; with one component the plain [tokens] or
                               * [batch, tokens])
                               * components innermost; any strides, so
                               * HF's [C, batch, tokens] position_ids pass as they are, with
                               * permuted strides */
    int32_t position_offset;  /* absent positions: position = position_offset + token index (every
                               * component); must be 0 when positions are given */
    uint32_t rotary_dim;      /* even, <= head_dim - rotary_offset; default all dims from
                               * rotary_offset on */
    uint32_t rotary_offset;   /* the first rotated dim: dims [rotary_offset, rotary_offset +
                               * rotary_dim) are rotated (pairs counted from it), the dims before
                               * and after pass through; even; default 0 (ggml_rope_set_offset:
                               * the rotary part at the end of a head, as DeepSeek's MLA) */
    posenc_rope_style style;  /* default NEOX */
    double theta;             /* frequency base; default 10000; 0 with inv_freq */
    double attention_factor;  /* scales cos and sin; default 1, or the scaling's own */
    bool inverse;             /* rotate by -t: the backward pass, or undoing a forward */
    const double *inv_freq;   /* optional: caller frequencies (radians per position, >= 0);
                               * replace theta and the scaling, which must then stay 0 (a
                               * scaling is folded into inv_freq by the caller); freq_factors
                               * and attention_factor still apply */
    uint32_t inv_freq_count;  /* entries in inv_freq: rotary_dim/2 */
    posenc_rope_scaling scaling; /* with derived sequence lengths and several components:
                                  * from the largest position of any component */
    posenc_rope_multimodal multimodal; /* default POSITIONS_1D. VISION_2D and PIXTRAL take no
                                        * scaling type, VISION_GGML only YARN_GGML; caller
                                        * inv_freq (frequency j's, the kind only picks its
                                        * component) and freq_factors apply */
    uint32_t mrope_section[4];  /* M-RoPE kinds: frequencies per component (t, h, w), summing
                                 * to rotary_dim/2, e.g. {16, 24, 24, 0} (the fourth 0);
                                 * VISION_GGML: ggml's four sections, e.g. {16, 16, 16, 16};
                                 * 0 for the other kinds */
    const uint8_t *component_map; /* POSITIONS_MAP: rotary_dim/2 entries, each < components */
    uint32_t components;          /* POSITIONS_MAP: position components per token, 1 to 4 */

    /* Paged KV cache (vLLM's slot_mapping): the rotated k of token (b, t) is written straight
     * into row slot_mapping[b, t] of k_cache, and v, when given, is copied into the same row of
     * v_cache, in the same call: no second pass over k. A slot that is negative (vLLM's
     * padding, -1) or not below the cache's slot count writes nothing for that token; the call
     * never writes outside the caches. Each slot must appear once per call: a row that several
     * tokens name holds unspecified values. With k_cache, k itself is only
     * read unless k_out is given (k_out may be k itself: rotated in place as well). */
    posenc_tensor k_cache;      /* optional: [num_slots, k_heads, head_dim] or
                                 * [num_blocks, block_size, k_heads, head_dim] (slot s is row
                                 * s % block_size of block s / block_size), q's dtype, any
                                 * strides: vLLM's NHD layout as it is, HND with the block and
                                 * head strides swapped */
    posenc_tensor slot_mapping; /* i32 [tokens] (batch 1) or [batch, tokens]: required with
                                 * k_cache */
    posenc_tensor v;            /* optional, needs v_cache: k's shape and dtype, any strides */
    posenc_tensor v_cache;      /* with v: k_cache's shape and dtype, any strides */

    /* Caller cos/sin tables (HF, ONNX, vLLM, flash-attn: docs/engines.md): pair j is rotated by
     * the values given, as they are: (x_a c - x_b s, x_a s + x_b c), -s when inverse. Both or
     * neither; theta, inv_freq, scaling, attention_factor, multimodal then stay 0. f32, f16 or
     * bf16, any strides, one shape: [rows, width], row = the token's i32 position (or
     * position_offset + token), one outside [0, rows) refused (work left running, a submit or
     * recorded commands on a GPU, writes nothing for that token instead); or rows gathered per
     * token, [batch or 1, tokens, width] (or HF's [batch or 1, 1, tokens, width]). width:
     * rotary_dim/2 (pair j at column j), or rotary_dim (at the column of pair j's first dim:
     * HF's duplicated halves). */
    posenc_tensor cos, sin;

    /* QK RMSNorm fused into the rotation (Qwen3 and Gemma 3 per head, OLMo 2 per token): q and
     * k are normalized on read, x (w + norm_weight_offset) / sqrt(mean(x^2) + norm_eps), the
     * mean over what the weights span, then rotated, in the same pass; k_cache takes the
     * normalized k, v is copied as it is. Each optional; f32, f16 or bf16, any stride:
     * [head_dim] for a norm over each head, or [heads * head_dim] (q_heads or k_heads) for one
     * over the token's whole q or k. The squares are summed in f32: pairwise in vector lanes on
     * the CPU (a normalized value within 12.5 units of 2^-24 for head_dim 128;
     * tests/test_rope_norm.c derives the bound for any head_dim), compensated (Kahan) on the GPU
     * backends (within 10 units), where a norm over the token needs its heads in one binding. */
    posenc_tensor q_norm_weight, k_norm_weight;
    double norm_eps;           /* finite, > 0; default 1e-6 */
    double norm_weight_offset; /* added to every weight, finite: 1 gives Gemma's x (1 + w) */
} posenc_rope_desc;

POSENC_API posenc_status posenc_rope(posenc_context *context, const posenc_rope_desc *desc);

#endif /* POSENC_POSENC_ROPE_H */
