/* SPDX-License-Identifier: MIT */
/* Writes the seed corpora of the fuzz targets (corpus/npy, corpus/desc, corpus/cli), or checks
 * that the committed ones are what it writes. Usage: make_corpus [--check] CORPUS_DIRECTORY
 * (the npy, desc and cli directories must exist). Files it does not know, such as inputs the
 * fuzzers found, are left alone. */
#include <posenc/posenc.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_npy.h"
#include "desc_case.h"

static const char *corpus_directory;
static bool checking;
static int failures;
static int written;

/* ---- output ---- */

static void emit(const char *target, const char *name, const void *bytes, size_t size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/seed-%s", corpus_directory, target, name);
    written++;
    if (checking) {
        FILE *file = fopen(path, "rb");
        unsigned char *existing = malloc(size + 1);
        size_t got = file && existing ? fread(existing, 1, size + 1, file) : 0;
        if (!file || got != size || (size && memcmp(existing, bytes, size) != 0)) {
            fprintf(stderr, "make_corpus: %s is %s; regenerate the corpus (docs/fuzzing.md)\n",
                    path, file ? "out of date" : "missing");
            failures++;
        }
        free(existing);
        if (file)
            fclose(file);
        return;
    }
    FILE *file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
        fprintf(stderr, "make_corpus: cannot write %s\n", path);
        failures++;
    }
}

/* ---- .npy files ---- */

/* A .npy file: prefix, the dict padded with spaces and '\n' to a multiple of 64 bytes, and
 * `data_size` bytes of counting data. */
static void npy_seed(const char *name, int version, const char *dict, size_t data_size)
{
    unsigned char bytes[2048];
    size_t prefix = version == 1 ? 10 : 12;
    size_t text = strlen(dict);
    size_t header = (prefix + text + 1 + 63) / 64 * 64 - prefix;
    size_t total = prefix + header + data_size;
    if (total > sizeof bytes) {
        fprintf(stderr, "make_corpus: npy seed %s is too large\n", name);
        failures++;
        return;
    }
    memcpy(bytes, "\x93NUMPY", 6);
    bytes[6] = (unsigned char)version;
    bytes[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        bytes[8 + i] = (unsigned char)(header >> (8 * i));
    memcpy(bytes + prefix, dict, text);
    memset(bytes + prefix + text, ' ', header - text);
    bytes[prefix + header - 1] = '\n';
    for (size_t i = 0; i < data_size; i++)
        bytes[prefix + header + i] = (unsigned char)(i * 7 + 1);
    char file[160];
    snprintf(file, sizeof file, "%.120s.npy", name);
    emit("npy", file, bytes, total);
}

static void npy_seeds(void)
{
    static const struct {
        const char *name, *descr;
        size_t size;
    } dtypes[] = {{"f32", "<f4", 4}, {"f16", "<f2", 2}, {"bf16", "<u2", 2},
                  {"i32", "<i4", 4}, {"i64", "<i8", 8}, {"f64", "<f8", 8}};
    char dict[512], name[128];
    /* Every dtype in C order, format 1.0, two of them in 2.0 and 3.0 as well; two in
     * Fortran order, which is refused. */
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (int version = 1; version <= (d == 0 || d == 2 ? 3 : 1); version++) {
            snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
                     "'shape': (2, 3), }", dtypes[d].descr);
            snprintf(name, sizeof name, "%s_2x3_v%d", dtypes[d].name, version);
            npy_seed(name, version, dict, 6 * dtypes[d].size);
        }
        if (d == 0 || d == 4) {
            snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': True, "
                     "'shape': (3, 2), }", dtypes[d].descr);
            snprintf(name, sizeof name, "%s_3x2_fortran", dtypes[d].name);
            npy_seed(name, 1, dict, 6 * dtypes[d].size);
        }
    }
    /* Ranks 0 to 4, empty arrays, and the header variants numpy and others write. */
    static const struct {
        const char *name, *dict;
        size_t data;
    } shapes[] = {
        {"scalar", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4},
        {"vector", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", 20},
        {"rank3", "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3, 4), }", 48},
        {"rank4", "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 2, 8), }", 64},
        {"empty", "{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", 0},
        {"empty_huge_dims", "{'descr': '<f8', 'fortran_order': False, "
                            "'shape': (0, 9223372036854775807, 4611686018427387904), }", 0},
        {"python2_long", "{'descr': '<i4', 'fortran_order': False, 'shape': (3L, 1L), }", 12},
        {"double_quotes", "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,)}", 8},
        {"key_order", "{'shape': (2,), 'fortran_order': False, 'descr': '<i8'}", 16},
        {"no_spaces", "{'descr':'<f4','fortran_order':False,'shape':(1,2)}", 8},
        {"tabs_newlines", "{\t'descr' :\n'<f4' ,'fortran_order':False,'shape':( 2 , ) , }", 8},
        {"positions_mrope", "{'descr': '<i8', 'fortran_order': False, 'shape': (4, 3), }", 96},
        {"big_endian_f32", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 24},
        {"big_endian_i64", "{'descr': '>i8', 'fortran_order': False, 'shape': (4, 3), }", 96},
        {"native_order", "{'descr': '=f4', 'fortran_order': False, 'shape': (2,), }", 8},
        {"repeated_key", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                         "'shape': (1,), }", 4},
        {"text_after_dict", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4},
        {"escaped_quote", "{'descr': '<f\\'4', 'fortran_order': False, 'shape': (1,), }", 4},
        {"control_character_key", "{'des\ncr': '<f4', 'fortran_order': False, "
                                  "'shape': (1,), }", 4},
        {"control_character_descr", "{'descr': '<c\n8', 'fortran_order': False, "
                                    "'shape': (1,), }", 4},
        {"fortran_not_bool", "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", 4},
        {"shape_one_too_many", "{'descr': '<f4', 'fortran_order': False, "
                               "'shape': (1, 1, 1, 1, 1), }", 4},
        {"shape_overflow_product", "{'descr': '<f4', 'fortran_order': False, "
                                   "'shape': (4294967296, 4294967296), }", 4},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        npy_seed(shapes[s].name, 1, shapes[s].dict, shapes[s].data);
    /* The malformed files of the command-line tests. */
    for (size_t i = 0; i < bad_npy_count(); i++) {
        unsigned char bytes[1024];
        size_t size = bad_npy_bytes(i, bytes, sizeof bytes);
        snprintf(name, sizeof name, "bad_%s.npy", bad_npy_case(i).name);
        emit("npy", name, bytes, size);
    }
}

/* ---- descriptors ---- */

static void desc_seed(const char *name, const desc_case *c)
{
    uint8_t bytes[1024];
    size_t size = desc_encode(c, bytes, sizeof bytes);
    desc_case back;
    desc_decode(bytes, size, &back);
    if (size == 0 || desc_encode(&back, bytes + 512, 512) != size ||
        memcmp(bytes, bytes + 512, size) != 0) {
        fprintf(stderr, "make_corpus: desc seed %s does not round-trip\n", name);
        failures++;
        return;
    }
    emit("desc", name, bytes, size);
}

/* A packed view (strides 0) of `ndim` dims. */
static desc_view view(desc_memory memory, int block, int64_t offset, posenc_dtype dtype,
                      int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    desc_view v = {.memory = (uint8_t)memory, .block = (uint8_t)block, .dtype = (uint8_t)dtype,
                   .ndim = (uint8_t)ndim, .offset = offset};
    int64_t dims[4] = {d0, d1, d2, d3};
    for (int k = 0; k < 4; k++)
        v.shape[k] = dims[k];
    return v;
}

static desc_view strided(desc_view v, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    v.strides[0] = s0;
    v.strides[1] = s1;
    v.strides[2] = s2;
    v.strides[3] = s3;
    return v;
}

/* Blocks filled with random bytes (data) and counting int32 words (positions). */
static desc_case rope_case(posenc_dtype dtype)
{
    desc_case c;
    memset(&c, 0, sizeof c);
    c.op = 0;
    c.blocks[0].fill = 0x11;
    c.blocks[1].fill = 0x22;
    c.blocks[2].fill = 0x81;
    /* q [2, 5, 4, 16] in block 0, k [2, 5, 2, 16] after it; q_out and k_out likewise in
     * block 1; positions in block 2 */
    size_t e = posenc_dtype_size(dtype);
    c.views[0] = view(DESC_HOST, 0, 0, dtype, 4, 2, 5, 4, 16);
    c.views[1] = view(DESC_HOST, 1, 0, dtype, 4, 2, 5, 4, 16);
    c.views[2] = view(DESC_HOST, 0, (int64_t)(640 * e), dtype, 4, 2, 5, 2, 16);
    c.views[3] = view(DESC_HOST, 1, (int64_t)(640 * e), dtype, 4, 2, 5, 2, 16);
    c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 1, 5, 0, 0, 0);
    return c;
}

static desc_case sinusoidal_case(posenc_dtype dtype)
{
    desc_case c;
    memset(&c, 0, sizeof c);
    c.op = 1;
    c.blocks[0].fill = 0x33;
    c.blocks[1].fill = 0x44;
    c.blocks[2].fill = 0x83;
    c.views[0] = view(DESC_HOST, 0, 0, dtype, 2, 7, 12, 0, 0);
    return c;
}

static void rope_seeds(void)
{
    static const struct {
        const char *name;
        posenc_dtype dtype;
    } dtypes[] = {{"f32", POSENC_DTYPE_F32}, {"f16", POSENC_DTYPE_F16},
                  {"bf16", POSENC_DTYPE_BF16}};
    char name[128];
    for (int d = 0; d < 3; d++) {
        for (uint32_t style = 0; style < 2; style++) {
            desc_case c = rope_case(dtypes[d].dtype);
            c.style = style;
            snprintf(name, sizeof name, "rope_%s_%s", dtypes[d].name, style ? "gptj" : "neox");
            desc_seed(name, &c);
        }
        desc_case c = rope_case(dtypes[d].dtype);
        c.views[1] = c.views[3] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
        c.views[4] = c.views[1];
        snprintf(name, sizeof name, "rope_%s_in_place_no_positions", dtypes[d].name);
        desc_seed(name, &c);
    }
    desc_case c = rope_case(POSENC_DTYPE_F32);
    c.rotary_dim = 8;
    c.theta = 500000.0;
    c.attention_factor = 0.5;
    c.inverse = 1;
    desc_seed("rope_partial_inverse", &c);

    c = rope_case(POSENC_DTYPE_F32);
    c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_F32, 2, 2, 5, 0, 0);
    desc_seed("rope_f32_positions_per_batch", &c);

    c = rope_case(POSENC_DTYPE_F32);
    c.views[4] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    c.position_offset = 1000;
    desc_seed("rope_position_offset", &c);
    c.position_offset = INT32_MAX - 2;
    desc_seed("rope_position_offset_overflow", &c);

    /* Fewer dims: [tokens, head_dim] and [heads, head_dim] read right-aligned. */
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 2, 5, 16, 0, 0);
    c.views[1] = view(DESC_HOST, 1, 0, POSENC_DTYPE_F32, 2, 5, 16, 0, 0);
    c.views[2] = c.views[3] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 1, 5, 0, 0, 0);
    desc_seed("rope_2d", &c);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 3, 5, 3, 16, 0);
    c.views[1] = view(DESC_HOST, 1, 0, POSENC_DTYPE_F32, 3, 5, 3, 16, 0);
    desc_seed("rope_3d", &c);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 1, 16, 0, 0, 0);
    c.views[1] = view(DESC_HOST, 1, 0, POSENC_DTYPE_F32, 1, 16, 0, 0, 0);
    c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 1, 1, 0, 0, 0);
    desc_seed("rope_1d", &c);

    /* Layouts by strides: q [batch, heads, tokens, dim] passed with swapped strides, and q and
     * k as slices of one fused qkv row [tokens, (4 + 2 + 2) heads, 16]. */
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = strided(c.views[0], 1280, 64, 320, 4);
    c.views[1] = strided(c.views[1], 1280, 64, 320, 4);
    desc_seed("rope_bhtd_strides", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = strided(view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 3, 5, 4, 16, 0), 512, 64, 4, 0);
    c.views[2] = strided(view(DESC_HOST, 0, 256, POSENC_DTYPE_F32, 3, 5, 2, 16, 0), 512, 64, 4,
                         0);
    c.views[1] = c.views[3] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    desc_seed("rope_fused_qkv_in_place", &c);
    c.views[3] = strided(view(DESC_HOST, 0, 192, POSENC_DTYPE_F32, 3, 5, 2, 16, 0), 512, 64, 4,
                         0);
    desc_seed("rope_fused_qkv_k_out_overlaps_q", &c);

    /* Scalings, each with the fields it reads. */
    static const struct {
        const char *name;
        uint32_t type;
        double factor;
        uint32_t original;
    } scalings[] = {{"linear", 1, 4.0, 0}, {"ntk", 2, 2.0, 0}, {"dynamic_ntk", 3, 2.0, 4},
                    {"yarn", 4, 4.0, 16},  {"llama3", 5, 8.0, 16}, {"longrope", 6, 4.0, 4}};
    for (size_t s = 0; s < sizeof scalings / sizeof scalings[0]; s++) {
        c = rope_case(POSENC_DTYPE_F32);
        c.scaling_type = scalings[s].type;
        c.factor = scalings[s].factor;
        c.original_max_positions = scalings[s].original;
        if (scalings[s].type == 4) {
            c.beta_fast = 32.0;
            c.beta_slow = 1.0;
            c.mscale = 0.707;
            c.mscale_all_dim = 1.0;
        }
        if (scalings[s].type == 5) {
            c.low_freq_factor = 1.0;
            c.high_freq_factor = 4.0;
        }
        if (scalings[s].type == 6) {
            c.factor_count = 8;
            c.arrays[2] = (desc_array){1, 1.0, 0.25};
            c.arrays[3] = (desc_array){1, 2.0, 0.5};
        }
        snprintf(name, sizeof name, "rope_scaling_%s", scalings[s].name);
        desc_seed(name, &c);
    }
    c = rope_case(POSENC_DTYPE_BF16);
    c.scaling_type = 4;
    c.factor = 40.0;
    c.original_max_positions = 4096;
    c.no_truncate = 1;
    desc_seed("rope_scaling_yarn_no_truncate", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.scaling_type = 3;
    c.factor = 2.0;
    c.original_max_positions = 2;
    c.sequence_length = 0;
    c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_F32, 1, 5, 0, 0, 0);
    desc_seed("rope_scaling_dynamic_ntk_float_positions", &c);

    /* Caller tables. */
    c = rope_case(POSENC_DTYPE_F32);
    c.inv_freq_count = 8;
    c.arrays[0] = (desc_array){1, 1.0, -0.1};
    desc_seed("rope_inv_freq", &c);
    c.inv_freq_count = 7;
    desc_seed("rope_inv_freq_count_wrong", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.scaling_type = 1;
    c.factor = 2.0;
    c.factor_count = 8;
    c.arrays[1] = (desc_array){1, 1.0, 1.0};
    desc_seed("rope_freq_factors", &c);
    c.arrays[1] = (desc_array){1, 0.0, 0.0};
    desc_seed("rope_freq_factors_zero", &c);

    /* Multimodal kinds with positions [batch, tokens, C] / [tokens, C]. */
    static const struct {
        const char *name;
        uint32_t kind, components, section[3];
    } kinds[] = {{"mrope", 1, 3, {2, 3, 3}},
                 {"mrope_interleaved", 2, 3, {4, 2, 2}},
                 {"vision_2d", 3, 2, {0, 0, 0}},
                 {"pixtral", 4, 2, {0, 0, 0}},
                 {"vision_ggml", 6, 4, {2, 2, 2}}}; /* ggml's sections, wrapping */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        c = rope_case(POSENC_DTYPE_F32);
        c.multimodal = kinds[k].kind;
        memcpy(c.mrope_section, kinds[k].section, sizeof c.mrope_section);
        c.views[4] = view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 3, 2, 5, kinds[k].components, 0);
        snprintf(name, sizeof name, "rope_multimodal_%s", kinds[k].name);
        desc_seed(name, &c);
    }
    /* HF's [C, batch, tokens] position_ids passed with permuted strides. */
    c = rope_case(POSENC_DTYPE_F16);
    c.multimodal = 1;
    c.mrope_section[0] = 4;
    c.mrope_section[1] = 2;
    c.mrope_section[2] = 2;
    c.views[4] = strided(view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 3, 2, 5, 3, 0), 20, 4, 40, 0);
    desc_seed("rope_multimodal_mrope_cbt_strides", &c);
    c.mrope_section[2] = 3;
    desc_seed("rope_multimodal_mrope_section_sum_wrong", &c);

    /* posenc_buffer views, and the submit calls. */
    c = rope_case(POSENC_DTYPE_F32);
    c.blocks[0].size = 4 * (640 + 320);
    c.blocks[1].size = 4 * (640 + 320);
    c.blocks[2].size = 4 * 5;
    for (int v = 0; v < 5; v++)
        c.views[v].memory = DESC_BUFFER;
    desc_seed("rope_buffers", &c);
    c.call = 3;
    desc_seed("rope_submit_event", &c);
    c.call = 1;
    desc_seed("rope_submit_no_event", &c);
    c.views[4].memory = DESC_HOST;
    desc_seed("rope_submit_host_positions", &c);
    c.call = 0;
    c.views[4].memory = DESC_BUFFER;
    c.blocks[0].size = 4 * 640;
    desc_seed("rope_buffer_too_small_for_k", &c);
    c.blocks[0].size = 4 * (640 + 320);
    c.views[2].memory = DESC_FOREIGN_BUFFER;
    desc_seed("rope_foreign_buffer", &c);
    c.views[2].memory = DESC_BOTH;
    desc_seed("rope_buffer_and_host", &c);

    /* Views the library must refuse before touching memory. */
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 4, INT64_MAX, INT64_MAX, 4, 16);
    desc_seed("rope_q_shape_overflows", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = strided(view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 2, 3, 16, 0, 0),
                         INT64_C(1) << 62, 0, 0, 0);
    desc_seed("rope_q_stride_overflows", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, -16, POSENC_DTYPE_F32, 4, 2, 5, 4, 16);
    desc_seed("rope_q_offset_wraps", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.blocks[0].size = 64;
    c.views[0] = view(DESC_BUFFER, 0, 0, POSENC_DTYPE_F32, 4, 1, 65536, 4, 16);
    desc_seed("rope_q_huge_in_small_buffer", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0].offset = 2;
    desc_seed("rope_q_offset_misaligned", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[1] = strided(c.views[1], 0, 0, 0, 6);
    desc_seed("rope_q_out_stride_misaligned", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[1] = strided(c.views[1], 0, 0, -64, 0);
    desc_seed("rope_q_out_stride_negative", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[1] = strided(c.views[1], 0, 0, 32, 0);
    desc_seed("rope_q_out_elements_overlap", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[3].offset = 64;
    desc_seed("rope_k_out_overlaps_q_out", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[1].block = 2;
    desc_seed("rope_q_out_overlaps_positions", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0].memory = DESC_ABSENT;
    desc_seed("rope_q_no_memory", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0].ndim = 5;
    desc_seed("rope_q_ndim_5", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0].dtype = 9;
    desc_seed("rope_q_dtype_unknown", &c);
    c = rope_case(POSENC_DTYPE_I32);
    desc_seed("rope_q_dtype_i32", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[2].dtype = POSENC_DTYPE_F16;
    desc_seed("rope_k_dtype_differs", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[0].shape[3] = 15;
    c.views[1] = c.views[2] = c.views[3] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    desc_seed("rope_head_dim_odd", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.style = 7;
    desc_seed("rope_style_unknown", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.multimodal = 9;
    desc_seed("rope_multimodal_unknown", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.scaling_type = 12;
    desc_seed("rope_scaling_unknown", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.theta = NAN;
    desc_seed("rope_theta_nan", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.theta = 1e-300;
    desc_seed("rope_theta_tiny", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.scaling_type = 4;
    c.factor = 4.0;
    c.original_max_positions = 16;
    c.beta_fast = 1.0;
    c.beta_slow = 32.0;
    desc_seed("rope_scaling_yarn_betas_swapped", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.scaling_type = 1;
    c.factor = 0.5;
    c.mscale = 1.0;
    desc_seed("rope_scaling_linear_bad_fields", &c);

    /* A partial rotation from a later dim. */
    c = rope_case(POSENC_DTYPE_F32);
    c.rotary_dim = 8;
    c.rotary_offset = 4;
    desc_seed("rope_rotary_offset", &c);
    c.rotary_offset = 10;
    desc_seed("rope_rotary_offset_past_head", &c);

    /* The caller's cos and sin: rows picked by position (0 to 4) from tables of 8 rows, half
     * width (rotary_dim/2 = 8), after the positions in block 2; and gathered per token. */
    c = rope_case(POSENC_DTYPE_F32);
    c.blocks[2].fill = 0x81;
    c.views[5] = view(DESC_HOST, 2, 64, POSENC_DTYPE_F32, 2, 8, 8, 0, 0);
    c.views[6] = view(DESC_HOST, 2, 64 + 256, POSENC_DTYPE_F32, 2, 8, 8, 0, 0);
    desc_seed("rope_tables_by_position", &c);
    c.views[5] = view(DESC_HOST, 2, 64, POSENC_DTYPE_BF16, 3, 2, 5, 8, 0);
    c.views[6] = view(DESC_HOST, 2, 64 + 160, POSENC_DTYPE_BF16, 3, 2, 5, 8, 0);
    c.views[4] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    desc_seed("rope_tables_by_token", &c);
    c.theta = 10000.0;
    desc_seed("rope_tables_and_theta", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[5] = view(DESC_HOST, 2, 64, POSENC_DTYPE_F32, 2, 8, 8, 0, 0);
    desc_seed("rope_cos_without_sin", &c);

    /* The QK norm: weights per head (head_dim 16) for q and k, Gemma's offset. */
    c = rope_case(POSENC_DTYPE_F32);
    c.views[7] = view(DESC_HOST, 2, 64, POSENC_DTYPE_F32, 1, 16, 0, 0, 0);
    c.views[8] = view(DESC_HOST, 2, 128, POSENC_DTYPE_BF16, 1, 16, 0, 0, 0);
    c.norm_eps = 1e-6;
    c.norm_weight_offset = 1.0;
    desc_seed("rope_qk_norm", &c);
    c.views[7] = view(DESC_HOST, 2, 64, POSENC_DTYPE_F32, 1, 64, 0, 0, 0);
    c.views[8] = view(DESC_ABSENT, 0, 0, 0, 0, 0, 0, 0, 0);
    desc_seed("rope_q_norm_per_token", &c);
    c.norm_eps = -1.0;
    desc_seed("rope_norm_eps_negative", &c);
    c = rope_case(POSENC_DTYPE_F32);
    c.views[7] = view(DESC_HOST, 1, 0, POSENC_DTYPE_F32, 1, 16, 0, 0, 0);
    desc_seed("rope_q_norm_overlaps_q_out", &c);
}

static void sinusoidal_seeds(void)
{
    static const struct {
        const char *name;
        posenc_dtype dtype;
    } dtypes[] = {{"f32", POSENC_DTYPE_F32}, {"f16", POSENC_DTYPE_F16},
                  {"bf16", POSENC_DTYPE_BF16}};
    char name[128];
    /* Every layout in f32, one in each 16-bit dtype. */
    for (int d = 0; d < 3; d++) {
        for (uint32_t layout = d == 0 ? 0 : (uint32_t)d; layout < (d == 0 ? 3u : d + 1u);
             layout++) {
            desc_case c = sinusoidal_case(dtypes[d].dtype);
            c.layout = layout;
            snprintf(name, sizeof name, "sinusoidal_%s_layout%u", dtypes[d].name, layout);
            desc_seed(name, &c);
        }
        desc_case c = sinusoidal_case(dtypes[d].dtype);
        c.views[1] = view(DESC_HOST, 1, 0, dtypes[d].dtype, 2, 7, 12, 0, 0);
        c.input_scale = 4.0;
        c.output_scale = 0.5;
        snprintf(name, sizeof name, "sinusoidal_%s_add", dtypes[d].name);
        desc_seed(name, &c);
    }
    desc_case c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[1] = c.views[0];
    desc_seed("sinusoidal_add_in_place", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 3, 2, 7, 13, 0);
    c.views[2] = view(DESC_HOST, 2, 0, POSENC_DTYPE_I32, 2, 2, 7, 0, 0);
    desc_seed("sinusoidal_batch_positions_odd_d_model", &c);
    c = sinusoidal_case(POSENC_DTYPE_F16);
    c.views[2] = view(DESC_HOST, 2, 0, POSENC_DTYPE_F32, 1, 7, 0, 0, 0);
    c.base = 10000.0;
    c.freq_shift = 1.0;
    c.position_scale = 1000.0;
    c.layout = 2;
    desc_seed("sinusoidal_diffusion_timesteps", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 1, 64, 0, 0, 0);
    c.position_offset = 12345;
    desc_seed("sinusoidal_1d_position_offset", &c);
    c = sinusoidal_case(POSENC_DTYPE_BF16);
    c.views[0] = strided(view(DESC_HOST, 0, 0, POSENC_DTYPE_BF16, 2, 7, 12, 0, 0), 64, 2, 0, 0);
    desc_seed("sinusoidal_padded_rows", &c);

    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.blocks[0].size = 4 * 84;
    c.blocks[1].size = 4 * 84;
    c.blocks[2].size = 4 * 7;
    c.views[0].memory = DESC_BUFFER;
    c.views[1] = view(DESC_BUFFER, 1, 0, POSENC_DTYPE_F32, 2, 7, 12, 0, 0);
    c.views[2] = view(DESC_BUFFER, 2, 0, POSENC_DTYPE_I32, 1, 7, 0, 0, 0);
    desc_seed("sinusoidal_buffers", &c);
    c.call = 3;
    desc_seed("sinusoidal_submit_event", &c);
    c.views[1].memory = DESC_HOST;
    desc_seed("sinusoidal_submit_host_x", &c);

    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.layout = 5;
    desc_seed("sinusoidal_layout_unknown", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.freq_shift = 6.0;
    desc_seed("sinusoidal_freq_shift_too_large", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.base = -1.0;
    desc_seed("sinusoidal_base_negative", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.output_scale = INFINITY;
    desc_seed("sinusoidal_output_scale_infinite", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.position_scale = 1e300;
    desc_seed("sinusoidal_position_scale_huge", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[1] = view(DESC_HOST, 1, 0, POSENC_DTYPE_F16, 2, 7, 12, 0, 0);
    desc_seed("sinusoidal_x_dtype_differs", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[2] = view(DESC_HOST, 0, 8, POSENC_DTYPE_I32, 1, 7, 0, 0, 0);
    desc_seed("sinusoidal_positions_inside_out", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[0] = view(DESC_HOST, 0, 0, POSENC_DTYPE_F32, 3, INT64_C(1) << 40,
                      INT64_C(1) << 40, 12, 0);
    desc_seed("sinusoidal_out_shape_overflows", &c);
    c = sinusoidal_case(POSENC_DTYPE_F32);
    c.views[0].ndim = 4;
    c.views[0].shape[2] = 1;
    c.views[0].shape[3] = 1;
    desc_seed("sinusoidal_out_ndim_4", &c);
}

/* ---- command lines ---- */

static void cli_seeds(void)
{
    static const struct {
        const char *name, *args;
    } seeds[] = {
        {"devices", "devices"},
        {"devices_json", "devices\n--json"},
        {"devices_json_value", "devices\n--json=yes"},
        {"devices_help", "devices\n-h"},
        {"rope_generate", "rope\n--generate\n1,16,8,2,64\n--theta\n500000\n--save-q\nq.npy\n"
                          "--q-out\nq_rot.npy"},
        {"rope_files", "rope\n--q\nq.npy\n--k\nk.npy\n--positions\np.npy\n--q-out=o.npy\n"
                       "--k-out=ko.npy\n--device\ncpu\n--quiet"},
        {"rope_every_flag", "rope\n--generate=2,3,4,0,32\n--seed\n7\n--dtype\nbf16\n"
                            "--style\ngptj\n--rotary-dim\n16\n--theta=1e6\n"
                            "--attention-factor\n0.5\n--inverse\n--position-offset\n-3\n"
                            "--scaling\nyarn\n--factor\n4\n--original-max-positions\n4096\n"
                            "--sequence-length\n8192\n--beta-fast\n32\n--beta-slow\n1\n"
                            "--mscale\n0.707\n--mscale-all-dim\n0\n--no-truncate"},
        {"rope_llama3", "rope\n--generate\n1,4,2,2,64\n--scaling=llama3\n--factor=8\n"
                        "--original-max-positions=8192\n--low-freq-factor=1\n"
                        "--high-freq-factor=4"},
        {"rope_longrope", "rope\n--q\nq.npy\n--scaling\nlongrope\n--short-factor\ns.npy\n"
                          "--long-factor\nl.npy\n--freq-factors\nf.npy\n--inv-freq\ni.npy"},
        {"rope_mrope", "rope\n--q\nq.npy\n--positions\nthw.npy\n--multimodal\nmrope\n"
                       "--mrope-section\n16,24,24"},
        {"rope_yarn_ggml", "rope\n--generate\n1,4,2,2,64\n--scaling\nyarn-ggml\n"
                           "--freq-scale\n0.25\n--ext-factor=1\n--original-max-positions\n0"},
        {"rope_positions_map", "rope\n--q\nq.npy\n--positions\np.npy\n--multimodal\n"
                               "positions_map\n--components\n2\n--component-map\n0,1,0,1"},
        {"rope_component_map_bad", "rope\n--generate\n1,1,1,1,4\n--component-map\n0,256"},
        {"rope_layouts", "rope\n--q\nq.npy\n--k\nk.npy\n--layout\nbhtd\n--k-layout=bthd\n"
                         "--q-out\nq_rot.npy\n--k-out\nk_rot.npy"},
        {"rope_layout_3d", "rope\n--generate\n1,4,2,0,8\n--layout\nhtd"},
        {"rope_layout_unknown", "rope\n--q\nq.npy\n--layout\nbtdh"},
        {"rope_same_output_twice", "rope\n--q\nq.npy\n--k\nk.npy\n--q-out\no.npy\n"
                                   "--k-out\no.npy"},
        {"rope_help", "rope\n--help"},
        {"rope_missing_input", "rope\n--theta\n10000"},
        {"rope_both_inputs", "rope\n--q\nq.npy\n--generate\n1,1,1,1,2"},
        {"rope_generate_bad", "rope\n--generate\n1,16,8,2"},
        {"rope_generate_huge", "rope\n--generate\n99999999999999999999,1,1,1,2"},
        {"rope_rotary_dim_odd", "rope\n--generate\n1,1,1,1,2\n--rotary-dim\n3"},
        {"rope_theta_negative", "rope\n--generate\n1,1,1,1,2\n--theta\n-1"},
        {"rope_theta_inf", "rope\n--generate\n1,1,1,1,2\n--theta\ninf"},
        {"rope_dtype_unknown", "rope\n--generate\n1,1,1,1,2\n--dtype\nf64"},
        {"rope_position_offset_with_positions", "rope\n--q\nq\n--positions\np\n"
                                                "--position-offset\n1"},
        {"rope_k_out_without_k", "rope\n--q\nq.npy\n--k-out\nk.npy"},
        {"rope_missing_value", "rope\n--q"},
        {"rope_empty_value", "rope\n--q="},
        {"rope_positional", "rope\nq.npy"},
        {"rope_unknown_flag", "rope\n--frobnicate"},
        {"rope_long_flag", "rope\n--aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                           "aaaaaaaaaaaaaaaaaaaaaaaa=1"},
        {"rope_dash_dash", "rope\n--"},
        {"rope_section_overflow", "rope\n--q\nq\n--mrope-section\n4294967296,0,0"},
        {"sinusoidal_rows", "sinusoidal\n--rows\n2048\n--d-model\n512\n--out\npe.npy"},
        {"sinusoidal_every_flag", "sinusoidal\n--positions\nt.npy\n--d-model\n320\n--layout\n"
                                  "cos-sin\n--base=10000\n--freq-shift\n-1\n"
                                  "--position-scale\n1000\n--input-scale\n2\n"
                                  "--output-scale\n0.5\n--dtype\nf16\n--device\ncpu\n--quiet"},
        {"sinusoidal_x", "sinusoidal\n--x\nx.npy\n--out\no.npy\n--position-offset\n5"},
        {"sinusoidal_help", "sinusoidal\n--help"},
        {"sinusoidal_no_d_model", "sinusoidal\n--rows\n4"},
        {"sinusoidal_rows_and_x", "sinusoidal\n--rows\n4\n--x\nx.npy"},
        {"sinusoidal_zero_scale", "sinusoidal\n--rows\n4\n--d-model\n4\n--output-scale\n0"},
        {"sinusoidal_rows_negative", "sinusoidal\n--rows\n-4\n--d-model\n4"},
        {"demo", "demo\n--device\ncpu\n--theta\n500000\n--runs\n5"},
        {"demo_runs_zero", "demo\n--runs\n0"},
        {"demo_help", "demo\n--help"},
        {"bench", "bench\n--quick\n--json\n--threads\n2\n--runs\n5\n--device\ncpu\n--device\n"
                  "vulkan"},
        {"bench_runs_too_many", "bench\n--runs\n1001"},
        {"bench_too_many_devices", "bench\n--device\na\n--device\nb\n--device\nc\n--device\nd\n"
                                   "--device\ne\n--device\nf\n--device\ng\n--device\nh\n"
                                   "--device\ni\n--device\nj\n--device\nk\n--device\nl\n"
                                   "--device\nm\n--device\nn\n--device\no\n--device\np\n"
                                   "--device\nq"},
        {"bench_help", "bench\n-h"},
        {"unknown_command", "frobnicate\n--help"},
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        emit("cli", seeds[i].name, seeds[i].args, strlen(seeds[i].args));
}

int main(int argc, char **argv)
{
    int at = 1;
    if (at < argc && strcmp(argv[at], "--check") == 0) {
        checking = true;
        at++;
    }
    if (at + 1 != argc) {
        fprintf(stderr, "usage: make_corpus [--check] CORPUS_DIRECTORY\n");
        return 2;
    }
    corpus_directory = argv[at];
    npy_seeds();
    rope_seeds();
    sinusoidal_seeds();
    cli_seeds();
    if (failures) {
        fprintf(stderr, "make_corpus: %d problem(s)\n", failures);
        return 1;
    }
    printf("make_corpus: %d seed files %s\n", written, checking ? "up to date" : "written");
    return 0;
}
