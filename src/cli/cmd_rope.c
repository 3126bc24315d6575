/* SPDX-License-Identifier: MIT */
/* `posenc rope`: rotary position embedding of q (and k) from .npy files or generated data,
 * with every posenc_rope_desc option as a flag; results written as .npy. Files laid out heads
 * first (HF transformers' [batch, heads, tokens, head_dim]) are read in place through strided
 * tensor views. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "data.h"
#include "device.h"
#include "outputs.h"

static const char rope_help[] =
    "usage: posenc rope (--q FILE | --generate B,T,HQ,HK,D) [FLAGS]\n"
    "\n"
    "Rotates q [batch, tokens, q_heads, head_dim] and optionally k [batch, tokens, k_heads,\n"
    "head_dim] by position: (a, b) -> (a cos t - b sin t, a sin t + b cos t), t = position *\n"
    "inv_freq[j], inv_freq[j] = theta^(-2j / rotary_dim). Fewer dims are read right-aligned\n"
    "([tokens, head_dim] is batch 1, one head). Files with heads before tokens need --layout.\n"
    "\n"
    "Names (--style, --multimodal, --scaling, --dtype) are written with underscores; hyphens\n"
    "(dynamic-ntk) and any case are accepted too.\n"
    "\n"
    "data (.npy, little-endian, C order; f32 '<f4', f16 '<f2', or bf16 stored as '<u2' raw\n"
    "bf16 words since numpy has no bf16: x.view(np.uint16) for an ml_dtypes/torch array):\n"
    "  --q FILE                q input\n"
    "  --k FILE                k input (optional; same dtype as q)\n"
    "  --generate B,T,HQ,HK,D  random q [B,T,HQ,D] and k [B,T,HK,D] in [-1, 1) instead of\n"
    "                          files; HK 0 means no k\n"
    "  --seed N                random seed for --generate (default 1)\n"
    "  --dtype f32|f16|bf16    dtype of generated data (default f32); with --q it must match\n"
    "  --save-q FILE           write the generated q input\n"
    "  --save-k FILE           write the generated k input\n"
    "  --positions FILE        positions, i32 '<i4' (or i64 '<i8', narrowed) or f32 '<f4',\n"
    "                          [tokens] or [batch, tokens] (default: token index); with\n"
    "                          --multimodal, [tokens, C] or [batch, tokens, C]\n"
    "  --position-offset N     without --positions: position = N + token index (default 0)\n"
    "  --q-out FILE            write the rotated q (same dtype, shape and layout as q)\n"
    "  --k-out FILE            write the rotated k\n"
    "  --layout bthd|bhtd      order of q's dims (default bthd): bthd [batch, tokens, heads,\n"
    "                          head_dim]; bhtd [batch, heads, tokens, head_dim], HF\n"
    "                          transformers' layout after .transpose(1, 2); 3-D files take\n"
    "                          thd (default) or htd, the same without batch; 1-D and 2-D files\n"
    "                          have no heads dim and take none. Applies to --generate, --save-q\n"
    "                          and --q-out too; bhtd is read in place through strides\n"
    "  --k-layout L            order of k's dims, as --layout (default: q's order)\n"
    "\n"
    "rotation:\n"
    "  --style neox|gptj       neox: dim i pairs with i + rotary_dim/2 (Llama, HF; default);\n"
    "                          gptj: dim 2i pairs with 2i+1\n"
    "  --rotary-dim N          even, <= head_dim; dims past it pass through (default head_dim)\n"
    "  --theta X               frequency base (default 10000)\n"
    "  --attention-factor X    scales cos and sin (default 1, or the scaling's own)\n"
    "  --inverse               rotate by -t: undoes a forward rotation\n"
    "  --inv-freq FILE         rotary_dim/2 frequencies, f64 '<f8' or f32 '<f4', radians per\n"
    "                          position; replaces --theta and --scaling, so neither may be\n"
    "                          given with it (--freq-factors still divides them)\n"
    "\n"
    "multimodal positions (HF transformers semantics, ggml's for vision_ggml; each frequency\n"
    "uses one of C position components per token):\n"
    "  --multimodal none|mrope|mrope_interleaved|vision_2d|pixtral|positions_map|vision_ggml\n"
    "                          (default none) mrope: Qwen2-VL / Qwen2.5-VL, C = 3 (t, h, w),\n"
    "                          contiguous sections; mrope_interleaved: Qwen3-VL, C = 3;\n"
    "                          vision_2d: the Qwen2-VL vision tower, C = 2 (h, w); pixtral:\n"
    "                          Pixtral, C = 2. These two need rotary_dim % 4 == 0 and take\n"
    "                          no scaling. positions_map: C = --components, frequency j\n"
    "                          uses component --component-map[j]. vision_ggml: ggml's\n"
    "                          vision mode, C = 4, its four sections in --mrope-section,\n"
    "                          scaling none or yarn_ggml\n"
    "  --mrope-section T,H,W[,E]  mrope kinds: frequencies per component, summing to\n"
    "                          rotary_dim/2 (Qwen2-VL 16,24,24; Qwen3-VL 24,20,20);\n"
    "                          vision_ggml: ggml's sections, summing to 1 to rotary_dim\n"
    "  --components N          positions_map: position components per token, 1 to 4\n"
    "  --component-map A,B,..  positions_map: rotary_dim/2 component indices, each < N\n"
    "\n"
    "context-extension scaling (float64, on the host; zero/absent flags take the published\n"
    "defaults):\n"
    "  --scaling none|linear|ntk|dynamic_ntk|yarn|llama3|longrope|yarn_ggml\n"
    "                              (default none)\n"
    "  --factor X                  >= 1 (default 1)\n"
    "  --original-max-positions N  pre-training context (dynamic_ntk, yarn, llama3, longrope;\n"
    "                              yarn_ggml: ggml's n_ctx_orig)\n"
    "  --sequence-length N         current length (dynamic_ntk, longrope; default: from\n"
    "                              the positions)\n"
    "  --beta-fast X               yarn, yarn_ggml (default 32)\n"
    "  --beta-slow X               yarn, yarn_ggml (default 1)\n"
    "  --mscale X                  yarn (default: not given)\n"
    "  --mscale-all-dim X          yarn (default: not given); with both, the attention factor\n"
    "                              is m(mscale) / m(mscale_all_dim), m(x) = 0.1 x ln(factor) + 1;\n"
    "                              otherwise 0.1 ln(factor) + 1\n"
    "  --no-truncate               yarn: keep fractional correction bounds (gpt-oss)\n"
    "  --low-freq-factor X         llama3 (default 1)\n"
    "  --high-freq-factor X        llama3 (default 4)\n"
    "  --short-factor FILE         longrope: rotary_dim/2 factors, f64 or f32 .npy\n"
    "  --long-factor FILE          longrope: rotary_dim/2 factors, f64 or f32 .npy\n"
    "  --freq-factors FILE         any scaling: divide inv_freq[j] by these, f64 or f32 .npy\n"
    "  --freq-scale X              yarn_ggml: ggml's freq_scale, > 0 (default 1)\n"
    "  --ext-factor X              yarn_ggml: ggml's ext_factor (default 0)\n"
    "\n"
    "other:\n"
    "  --device SEL            cpu, vulkan, vulkan:1, opencl:0 or a name substring (default:\n"
    "                          automatic, or POSENC_DEVICE)\n"
    "  --quiet                 print nothing on success\n"
    "  --help                  this text\n"
    "\n"
    "example: posenc rope --generate 1,16,8,2,64 --theta 500000 --save-q q.npy --q-out q_rot.npy\n"
    "         posenc rope --q q_rot.npy --inverse --q-out q_back.npy   (q_back == q)\n"
    "         posenc rope --q q.npy --positions thw.npy --multimodal mrope --mrope-section\n"
    "             16,24,24 --theta 1000000 --q-out q_rot.npy   (thw.npy: [tokens, 3])\n";

/* Most entries --component-map takes: rotary_dim up to 8192. */
#define CLI_ROPE_MAX_PAIRS 4096

typedef struct rope_options {
    const char *q_path, *k_path, *positions_path, *q_out_path, *k_out_path;
    const char *save_q_path, *save_k_path;
    const char *inv_freq_path, *short_factor_path, *long_factor_path, *freq_factors_path;
    const char *device;
    bool generate_set;
    int64_t generate[5]; /* B, T, HQ, HK, D */
    uint64_t seed;
    posenc_dtype dtype;  /* DEFAULT when --dtype was not given */
    int q_layout, k_layout; /* an index into rope_layouts; -1 when not given */
    bool quiet;
    posenc_rope_desc desc; /* the scalar fields, straight from the flags */
    uint32_t component_map_count; /* entries of --component-map; 0 when not given */
    uint8_t component_map[CLI_ROPE_MAX_PAIRS];
} rope_options;

/* The orders of a file's dims that --layout names: heads after tokens (the library's own
 * order) or before them, for 4-D and 3-D files. */
static const char *const rope_layouts[] = {"bthd", "bhtd", "thd", "htd", NULL};
static const uint32_t rope_layout_dims[] = {4, 4, 3, 3};
static const bool rope_layout_heads_first[] = {false, true, false, true};

/* The flags of the scaling descriptor; returns -1 if `args` holds none of them. */
static int rope_scaling_flag(cli_args *args, posenc_rope_scaling *s, rope_options *o)
{
    if (cli_is(args, "--scaling")) {
        return cli_value_rope_scaling_type(args, &s->type);
    }
    if (cli_is(args, "--factor")) {
        return cli_value_double(args, &s->factor, 1.0, false, "a number >= 1");
    }
    if (cli_is(args, "--original-max-positions")) {
        return cli_value_u32(args, &s->original_max_positions, 1, "a positive integer");
    }
    if (cli_is(args, "--sequence-length")) {
        return cli_value_u32(args, &s->sequence_length, 1, "a positive integer");
    }
    if (cli_is(args, "--beta-fast")) {
        return cli_value_double(args, &s->beta_fast, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--beta-slow")) {
        return cli_value_double(args, &s->beta_slow, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--mscale")) {
        return cli_value_double(args, &s->mscale, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--mscale-all-dim")) {
        return cli_value_double(args, &s->mscale_all_dim, 0.0, false, "a number >= 0");
    }
    if (cli_is(args, "--no-truncate")) {
        s->no_truncate = true;
        return cli_no_value(args);
    }
    if (cli_is(args, "--low-freq-factor")) {
        return cli_value_double(args, &s->low_freq_factor, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--high-freq-factor")) {
        return cli_value_double(args, &s->high_freq_factor, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--short-factor")) {
        return cli_value(args, &o->short_factor_path);
    }
    if (cli_is(args, "--long-factor")) {
        return cli_value(args, &o->long_factor_path);
    }
    if (cli_is(args, "--freq-factors")) {
        return cli_value(args, &o->freq_factors_path);
    }
    if (cli_is(args, "--freq-scale")) {
        return cli_value_double(args, &s->freq_scale, 0.0, true, "a positive number");
    }
    if (cli_is(args, "--ext-factor")) {
        return cli_value_double(args, &s->ext_factor, -DBL_MAX, false, "a number");
    }
    return -1;
}

/* --component-map: comma-separated integers from 0 to 255, at most CLI_ROPE_MAX_PAIRS. */
static bool rope_parse_component_map(const char *text, rope_options *o)
{
    uint32_t count = 0;
    const char *p = text;
    for (;;) {
        unsigned value = 0;
        if (*p < '0' || *p > '9' || count == CLI_ROPE_MAX_PAIRS) {
            return false;
        }
        for (; *p >= '0' && *p <= '9'; p++) {
            value = value * 10 + (unsigned)(*p - '0');
            if (value > 255) {
                return false;
            }
        }
        o->component_map[count++] = (uint8_t)value;
        if (*p == '\0') {
            break;
        }
        if (*p++ != ',') {
            return false;
        }
    }
    o->component_map_count = count;
    return true;
}

/* --mrope-section: three counts (the M-RoPE kinds, the fourth left 0) or four (ggml's
 * sections), each within uint32. */
static bool rope_parse_section(const char *text, uint32_t section[4])
{
    int64_t values[4] = {0};
    if (!cli_parse_list(text, values, 4) && !cli_parse_list(text, values, 3)) {
        return false;
    }
    for (int i = 0; i < 4; i++) {
        if (values[i] > UINT32_MAX) {
            return false;
        }
    }
    for (int i = 0; i < 4; i++) {
        section[i] = (uint32_t)values[i];
    }
    return true;
}

/* Returns 0, CLI_EXIT_USAGE on an error, or -1 after --help was printed. */
static int rope_parse(int argc, char **argv, rope_options *o)
{
    cli_args args;
    const char *text = NULL;
    int rc;
    cli_args_init(&args, "rope", argc, argv);
    o->seed = 1;
    o->q_layout = -1;
    o->k_layout = -1;
    while ((rc = cli_next_flag(&args)) > 0) {
        posenc_rope_desc *d = &o->desc;
        int scaling_rc = rope_scaling_flag(&args, &d->scaling, o);
        if (scaling_rc >= 0) {
            rc = scaling_rc;
        } else if (cli_is(&args, "--help")) {
            fputs(rope_help, stdout);
            return -1;
        } else if (cli_is(&args, "--q")) {
            rc = cli_value(&args, &o->q_path);
        } else if (cli_is(&args, "--k")) {
            rc = cli_value(&args, &o->k_path);
        } else if (cli_is(&args, "--positions")) {
            rc = cli_value(&args, &o->positions_path);
        } else if (cli_is(&args, "--q-out")) {
            rc = cli_value(&args, &o->q_out_path);
        } else if (cli_is(&args, "--k-out")) {
            rc = cli_value(&args, &o->k_out_path);
        } else if (cli_is(&args, "--layout")) {
            rc = cli_value_choice(&args, rope_layouts, &o->q_layout);
        } else if (cli_is(&args, "--k-layout")) {
            rc = cli_value_choice(&args, rope_layouts, &o->k_layout);
        } else if (cli_is(&args, "--save-q")) {
            rc = cli_value(&args, &o->save_q_path);
        } else if (cli_is(&args, "--save-k")) {
            rc = cli_value(&args, &o->save_k_path);
        } else if (cli_is(&args, "--inv-freq")) {
            rc = cli_value(&args, &o->inv_freq_path);
        } else if (cli_is(&args, "--device")) {
            rc = cli_value(&args, &o->device);
        } else if (cli_is(&args, "--generate")) {
            rc = cli_value(&args, &text);
            if (rc == 0) {
                int64_t *g = o->generate;
                if (!cli_parse_list(text, g, 5) || g[0] < 1 || g[1] < 1 || g[2] < 1 || g[4] < 1) {
                    return cli_bad_value(&args, text,
                                         "B,T,HQ,HK,D: five integers, all >= 1 but HK >= 0");
                }
                o->generate_set = true;
            }
        } else if (cli_is(&args, "--seed")) {
            rc = cli_value(&args, &text);
            if (rc == 0 && !cli_parse_u64(text, &o->seed)) {
                return cli_bad_value(&args, text, "a non-negative integer");
            }
        } else if (cli_is(&args, "--dtype")) {
            rc = cli_value_data_dtype(&args, &o->dtype);
        } else if (cli_is(&args, "--quiet")) {
            o->quiet = true;
            rc = cli_no_value(&args);
        } else if (cli_is(&args, "--style")) {
            rc = cli_value_rope_style(&args, &d->style);
        } else if (cli_is(&args, "--rotary-dim")) {
            rc = cli_value(&args, &text);
            if (rc == 0 && (!cli_parse_u32(text, &d->rotary_dim) || d->rotary_dim == 0 ||
                            d->rotary_dim % 2 != 0)) {
                return cli_bad_value(&args, text, "a positive even integer");
            }
        } else if (cli_is(&args, "--theta")) {
            rc = cli_value_double(&args, &d->theta, 0.0, true, "a positive number");
        } else if (cli_is(&args, "--attention-factor")) {
            rc = cli_value_double(&args, &d->attention_factor, 0.0, true, "a positive number");
        } else if (cli_is(&args, "--inverse")) {
            d->inverse = true;
            rc = cli_no_value(&args);
        } else if (cli_is(&args, "--position-offset")) {
            rc = cli_value_i32(&args, &d->position_offset);
        } else if (cli_is(&args, "--multimodal")) {
            rc = cli_value_rope_multimodal(&args, &d->multimodal);
        } else if (cli_is(&args, "--components")) {
            rc = cli_value_u32(&args, &d->components, 1, "a positive integer");
        } else if (cli_is(&args, "--component-map")) {
            rc = cli_value(&args, &text);
            if (rc == 0 && !rope_parse_component_map(text, o)) {
                return cli_bad_value(&args, text,
                                     "comma-separated component indices from 0 to 255");
            }
        } else if (cli_is(&args, "--mrope-section")) {
            rc = cli_value(&args, &text);
            if (rc == 0 && !rope_parse_section(text, d->mrope_section)) {
                return cli_bad_value(&args, text,
                                     "T,H,W or T,H,W,E: three or four non-negative integers");
            }
        } else {
            return cli_unknown_flag(&args);
        }
        if (rc) {
            return CLI_EXIT_USAGE;
        }
    }
    if (rc < 0) {
        return CLI_EXIT_USAGE;
    }

    if (!o->q_path == !o->generate_set) {
        return cli_fail("rope", CLI_EXIT_USAGE,
                        o->q_path ? "--q and --generate exclude each other"
                                  : "one of --q FILE or --generate B,T,HQ,HK,D is required");
    }
    if (o->generate_set && o->k_path) {
        return cli_fail("rope", CLI_EXIT_USAGE, "--k and --generate exclude each other");
    }
    if (!o->generate_set && (o->save_q_path || o->save_k_path)) {
        return cli_fail("rope", CLI_EXIT_USAGE, "%s needs --generate",
                        o->save_q_path ? "--save-q" : "--save-k");
    }
    bool has_k = o->k_path || (o->generate_set && o->generate[3] > 0);
    if (!has_k && (o->k_out_path || o->save_k_path)) {
        return cli_fail("rope", CLI_EXIT_USAGE, "%s needs a k input (--k, or HK > 0)",
                        o->k_out_path ? "--k-out" : "--save-k");
    }
    if (o->positions_path && o->desc.position_offset != 0) {
        return cli_fail("rope", CLI_EXIT_USAGE,
                        "--position-offset applies only without --positions");
    }
    if (!has_k && o->k_layout >= 0) {
        return cli_fail("rope", CLI_EXIT_USAGE, "--k-layout needs a k input (--k, or HK > 0)");
    }
    for (int i = 0; i < 2 && o->generate_set; i++) {
        int layout = i == 0 ? o->q_layout : o->k_layout;
        if (layout >= 0 && rope_layout_dims[layout] != 4) {
            return cli_fail("rope", CLI_EXIT_USAGE,
                            "%s %s: --generate makes 4-D data, laid out bthd or bhtd",
                            i == 0 ? "--layout" : "--k-layout", rope_layouts[layout]);
        }
    }
    return 0;
}

typedef struct rope_data {
    cli_npy_array q, k, q_out, k_out, positions;
    bool q_heads_first, k_heads_first; /* the files' order: [.., heads, tokens, head_dim] */
    double *inv_freq, *short_factor, *long_factor, *freq_factors;
    uint32_t pairs; /* entries in each table: rotary_dim / 2 */
} rope_data;

static void rope_data_free(rope_data *data)
{
    cli_npy_free(&data->q);
    cli_npy_free(&data->k);
    cli_npy_free(&data->q_out);
    cli_npy_free(&data->k_out);
    cli_npy_free(&data->positions);
    free(data->inv_freq);
    free(data->short_factor);
    free(data->long_factor);
    free(data->freq_factors);
}

static int rope_generate(const rope_options *o, rope_data *data)
{
    posenc_dtype dtype = o->dtype ? o->dtype : POSENC_DTYPE_F32;
    const int64_t *g = o->generate;
    /* Laid out as --layout says, so that --save-q writes what a bhtd user reads back. */
    int64_t q_shape[4] = {g[0], g[1], g[2], g[4]};
    int64_t k_shape[4] = {g[0], g[1], g[3], g[4]};
    if (data->q_heads_first) {
        q_shape[1] = g[2];
        q_shape[2] = g[1];
    }
    if (data->k_heads_first) {
        k_shape[1] = g[3];
        k_shape[2] = g[1];
    }
    if (cli_npy_alloc(&data->q, cli_npy_dtype_of(dtype), 4, q_shape) != 0 ||
        (g[3] > 0 && cli_npy_alloc(&data->k, cli_npy_dtype_of(dtype), 4, k_shape) != 0)) {
        return cli_fail("rope", CLI_EXIT_FAILURE,
                        "--generate: cannot allocate q and k of this size");
    }
    cli_fill_random(&data->q, o->seed);
    if (g[3] > 0) {
        cli_fill_random(&data->k, o->seed + 0x5bd1e995u);
    }
    return 0;
}

/* Whether `array` (given by `flag`) is laid out heads first, from the layout its --layout flag
 * names (-1: not given; then `inherited`, q's order for k). Returns 0, or CLI_EXIT_USAGE when
 * the layout does not fit the file's dims. */
static int rope_layout_of(const char *layout_flag, int layout, bool inherited, const char *flag,
                          const char *path, const cli_npy_array *array, bool *heads_first)
{
    *heads_first = false;
    if (layout < 0) {
        *heads_first = inherited && array->ndim >= 3;
        return 0;
    }
    if (array->ndim != rope_layout_dims[layout]) {
        if (array->ndim < 3) {
            return cli_fail("rope", CLI_EXIT_USAGE,
                            "%s %s: %s %s is %u-D, without a heads dim: no layout applies",
                            layout_flag, rope_layouts[layout], flag, path, array->ndim);
        }
        return cli_fail("rope", CLI_EXIT_USAGE, "%s %s is for %u-D files; %s %s is %u-D: use %s",
                        layout_flag, rope_layouts[layout], rope_layout_dims[layout], flag, path,
                        array->ndim, array->ndim == 4 ? "bthd or bhtd" : "thd or htd");
    }
    *heads_first = rope_layout_heads_first[layout];
    return 0;
}

/* A view of `array` in the library's order [.., tokens, heads, head_dim]: for a heads-first
 * file, the tokens and heads dims swapped with their byte strides, the data left in place. */
static posenc_tensor rope_view(cli_npy_array *array, bool heads_first)
{
    posenc_tensor view = cli_tensor_of(array);
    if (!heads_first || array->ndim < 3) {
        return view;
    }
    uint32_t n = array->ndim;
    int64_t strides[CLI_NPY_MAX_DIMS];
    strides[n - 1] = (int64_t)cli_npy_dtype_size(array->dtype);
    for (uint32_t i = n - 1; i > 0; i--) {
        strides[i - 1] = strides[i] * array->shape[i];
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t from = i == n - 3 ? n - 2 : i == n - 2 ? n - 3 : i;
        view.shape[i] = array->shape[from];
        view.strides[i] = strides[from];
    }
    return view;
}

static int rope_load(const rope_options *o, rope_data *data)
{
    int rc = 0;
    if (o->generate_set) {
        data->q_heads_first = o->q_layout >= 0 && rope_layout_heads_first[o->q_layout];
        int k_layout = o->k_layout >= 0 ? o->k_layout : o->q_layout;
        data->k_heads_first = k_layout >= 0 && rope_layout_heads_first[k_layout];
        rc = rope_generate(o, data);
    } else {
        rc = cli_load_data("rope", "--q", o->q_path, &data->q);
        if (rc == 0 && o->dtype && cli_posenc_dtype(data->q.dtype) != o->dtype) {
            rc = cli_fail("rope", CLI_EXIT_USAGE,
                          "--dtype %s does not match --q %s, which is %s (--dtype is for "
                          "generated data)",
                          posenc_dtype_name(o->dtype), o->q_path,
                          cli_npy_dtype_name(data->q.dtype));
        }
        if (rc == 0) {
            rc = rope_layout_of("--layout", o->q_layout, false, "--q", o->q_path, &data->q,
                                &data->q_heads_first);
        }
        if (rc == 0 && o->k_path) {
            rc = cli_load_data("rope", "--k", o->k_path, &data->k);
        }
        if (rc == 0 && o->k_path) {
            rc = rope_layout_of("--k-layout", o->k_layout, data->q_heads_first, "--k",
                                o->k_path, &data->k, &data->k_heads_first);
        }
    }
    if (rc == 0 && o->positions_path) {
        rc = cli_load_positions("rope", "--positions", o->positions_path, &data->positions);
    }
    if (rc) {
        return rc;
    }

    /* Caller tables must hold rotary_dim/2 entries: check here, with the file named. */
    uint32_t rotary_dim = o->desc.rotary_dim ? o->desc.rotary_dim
                                             : (uint32_t)data->q.shape[data->q.ndim - 1];
    uint64_t half = rotary_dim / 2;
    data->pairs = (uint32_t)half;
    if (o->component_map_count && o->component_map_count != half) {
        return cli_fail("rope", CLI_EXIT_USAGE,
                        "--component-map: %u entries; rotary_dim/2 = %llu are needed",
                        o->component_map_count, (unsigned long long)half);
    }
    struct {
        const char *flag;
        const char *path;
        double **values;
    } tables[] = {
        {"--inv-freq", o->inv_freq_path, &data->inv_freq},
        {"--short-factor", o->short_factor_path, &data->short_factor},
        {"--long-factor", o->long_factor_path, &data->long_factor},
        {"--freq-factors", o->freq_factors_path, &data->freq_factors},
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        if (tables[i].path) {
            rc = cli_load_table("rope", tables[i].flag, tables[i].path, half, tables[i].values);
            if (rc) {
                return rc;
            }
        }
    }

    if (cli_npy_alloc(&data->q_out, data->q.dtype, data->q.ndim, data->q.shape) != 0 ||
        (data->k.data &&
         cli_npy_alloc(&data->k_out, data->k.dtype, data->k.ndim, data->k.shape) != 0)) {
        return cli_fail("rope", CLI_EXIT_FAILURE, "out of memory for the outputs");
    }
    return 0;
}

/* " bhtd" or " htd" after a heads-first file's shape; nothing for the library's own order. */
static const char *rope_layout_note(const cli_npy_array *array, bool heads_first)
{
    return !heads_first ? "" : array->ndim == 4 ? " bhtd" : " htd";
}

static int rope_run(const rope_options *o, rope_data *data)
{
    cli_outputs outputs;
    cli_outputs_init(&outputs, "rope");
    cli_outputs_add(&outputs, "--save-q", o->save_q_path, &data->q);
    cli_outputs_add(&outputs, "--save-k", o->save_k_path, &data->k);
    cli_outputs_add(&outputs, "--q-out", o->q_out_path, &data->q_out);
    cli_outputs_add(&outputs, "--k-out", o->k_out_path, &data->k_out);
    int rc = cli_outputs_check(&outputs);
    if (rc) {
        return rc;
    }
    rc = rope_load(o, data);
    if (rc) {
        return rc;
    }

    posenc_rope_desc desc = o->desc;
    desc.q = rope_view(&data->q, data->q_heads_first);
    desc.q_out = rope_view(&data->q_out, data->q_heads_first);
    if (data->k.data) {
        desc.k = rope_view(&data->k, data->k_heads_first);
        desc.k_out = rope_view(&data->k_out, data->k_heads_first);
    }
    if (data->positions.data) {
        desc.positions = cli_tensor_of(&data->positions);
    }
    desc.inv_freq = data->inv_freq;
    desc.component_map = o->component_map_count ? o->component_map : NULL;
    desc.scaling.short_factor = data->short_factor;
    desc.scaling.long_factor = data->long_factor;
    desc.scaling.freq_factors = data->freq_factors;
    desc.inv_freq_count = data->inv_freq ? data->pairs : 0;
    desc.scaling.factor_count =
        data->short_factor || data->long_factor || data->freq_factors ? data->pairs : 0;

    posenc_context *context = NULL;
    posenc_device_info info;
    rc = cli_open_context("rope", o->device, &context, &info);
    if (rc) {
        return rc;
    }
    posenc_status status = posenc_rope(context, &desc);
    if (status != POSENC_OK) {
        rc = cli_library_error("rope", context, status, "posenc_rope");
        posenc_context_destroy(context);
        return rc;
    }
    posenc_context_destroy(context);

    rc = cli_outputs_write(&outputs);
    if (rc) {
        return rc;
    }

    if (!o->quiet) {
        char selector[64], q_shape[96], k_shape[96];
        cli_device_selector(&info, selector, sizeof selector);
        cli_npy_format_shape(data->q.ndim, data->q.shape, q_shape, sizeof q_shape);
        printf("rope: q %s%s %s", q_shape, rope_layout_note(&data->q, data->q_heads_first),
               cli_npy_dtype_name(data->q.dtype));
        if (data->k.data) {
            cli_npy_format_shape(data->k.ndim, data->k.shape, k_shape, sizeof k_shape);
            printf(", k %s%s", k_shape, rope_layout_note(&data->k, data->k_heads_first));
        }
        printf("%s on %s (%s)", desc.inverse ? ", inverse" : "", selector, info.name);
        if (o->q_out_path || o->k_out_path) {
            printf(": wrote ");
            cli_put_escaped(stdout, o->q_out_path ? o->q_out_path : "");
            printf("%s", o->q_out_path && o->k_out_path ? ", " : "");
            cli_put_escaped(stdout, o->k_out_path ? o->k_out_path : "");
            printf("\n");
        } else {
            printf("; nothing written without --q-out or --k-out\n");
        }
    }
    return CLI_EXIT_OK;
}

int cli_rope_main(int argc, char **argv)
{
    rope_options options;
    memset(&options, 0, sizeof options);
    int rc = rope_parse(argc, argv, &options);
    if (rc != 0) {
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    rope_data data;
    memset(&data, 0, sizeof data);
    rc = rope_run(&options, &data);
    rope_data_free(&data);
    return rc;
}

int cli_rope_parse_only(int argc, char **argv)
{
    rope_options options;
    memset(&options, 0, sizeof options);
    int rc = rope_parse(argc, argv, &options);
    return rc < 0 ? CLI_EXIT_OK : rc;
}
