/* SPDX-License-Identifier: MIT */
/* Writes the .npy inputs of the command-line tests into a directory: every malformed case of
 * bad_npy.c as bad_<name>.npy, and small valid files (positions, tables, wrong dtypes, and
 * big-endian copies of some, as a big-endian machine's numpy writes them). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bad_npy.h"
#include "convert.h"
#include "npy.h"

static const char *directory;
static int failures;

static void write_array(const char *name, cli_npy_dtype dtype, uint32_t ndim,
                        const int64_t *shape, const void *data, int major_version)
{
    char path[1024], error[256];
    snprintf(path, sizeof path, "%s/%s.npy", directory, name);
    cli_npy_array array = {.dtype = dtype, .ndim = ndim, .data = (void *)data};
    memcpy(array.shape, shape, ndim * sizeof *shape);
    array.count = (uint64_t)cli_npy_count(ndim, shape, cli_npy_dtype_size(dtype));
    if (cli_npy_write(path, &array, major_version, error, sizeof error) != 0) {
        fprintf(stderr, "make_test_npy: %s: %s\n", path, error);
        failures++;
    }
}

/* Rewrites `name`.npy, as written above ('<'), as the same array in big-endian order ('>'):
 * its descr's byte order flipped and every element's bytes reversed. */
static void make_big_endian(const char *name, size_t element_size)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", directory, name);
    static unsigned char bytes[1 << 16];
    FILE *file = fopen(path, "rb");
    size_t size = file ? fread(bytes, 1, sizeof bytes, file) : 0;
    if (file) {
        fclose(file);
    }
    if (size < 10 || size == sizeof bytes || bytes[6] != 1) {
        fprintf(stderr, "make_test_npy: %s: not a small format 1.0 file\n", path);
        failures++;
        return;
    }
    size_t data = 10 + ((size_t)bytes[8] | (size_t)bytes[9] << 8);
    char *order = memchr(bytes + 10, '<', data - 10);
    if (!order || (size - data) % element_size != 0) {
        fprintf(stderr, "make_test_npy: %s: no '<' in its descr\n", path);
        failures++;
        return;
    }
    *order = '>';
    for (size_t at = data; at < size; at += element_size) {
        for (size_t lo = at, hi = at + element_size - 1; lo < hi; lo++, hi--) {
            unsigned char byte = bytes[lo];
            bytes[lo] = bytes[hi];
            bytes[hi] = byte;
        }
    }
    file = fopen(path, "wb");
    if (!file || fwrite(bytes, 1, size, file) != size || fclose(file) != 0) {
        fprintf(stderr, "make_test_npy: cannot write %s\n", path);
        failures++;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_test_npy DIRECTORY\n");
        return 2;
    }
    directory = argv[1];

    for (size_t i = 0; i < bad_npy_count(); i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/bad_%s.npy", directory, bad_npy_case(i).name);
        if (bad_npy_write(i, path) != 0) {
            fprintf(stderr, "make_test_npy: cannot write %s\n", path);
            failures++;
        }
    }

    /* Positions 0..15 in every accepted integer dtype, and near the int32 limit. */
    int32_t positions[16], far[16];
    int64_t positions64[16];
    double positions_f64[16];
    for (int i = 0; i < 16; i++) {
        positions[i] = i;
        positions64[i] = i;
        positions_f64[i] = i;
        far[i] = INT32_MAX - 16 + i;
    }
    const int64_t tokens[1] = {16};
    write_array("positions_i32", CLI_NPY_I32, 1, tokens, positions, 1);
    write_array("positions_i64", CLI_NPY_I64, 1, tokens, positions64, 1);
    write_array("positions_f64", CLI_NPY_F64, 1, tokens, positions_f64, 1);
    write_array("positions_far", CLI_NPY_I32, 1, tokens, far, 1);
    int64_t too_big[2] = {0, (int64_t)INT32_MAX + 1};
    const int64_t two[1] = {2};
    write_array("positions_i64_too_big", CLI_NPY_I64, 1, two, too_big, 1);
    write_array("positions_i32_be", CLI_NPY_I32, 1, tokens, positions, 1);
    make_big_endian("positions_i32_be", 4);
    write_array("positions_i64_be", CLI_NPY_I64, 1, tokens, positions64, 1);
    make_big_endian("positions_i64_be", 8);

    /* Diffusion-style float timesteps, and a [batch 2, rows 8] position grid. */
    const float timesteps[4] = {0.0f, 250.5f, 999.0f, 1000.0f};
    const int64_t four[1] = {4};
    write_array("timesteps_f32", CLI_NPY_F32, 1, four, timesteps, 1);
    write_array("timesteps_f32_be", CLI_NPY_F32, 1, four, timesteps, 1);
    make_big_endian("timesteps_f32_be", 4);
    const int64_t grid_shape[2] = {2, 8};
    write_array("positions_grid", CLI_NPY_I32, 2, grid_shape, positions, 1);

    /* Multimodal positions [16 tokens, 3] (t, h, w): text tokens only (every component the
     * token index, which must give plain RoPE), and text then a 3 x 4 image then text, as
     * Qwen2-VL's get_rope_index lays them out (the image at t = 2, h and w from 2). */
    int32_t text_thw[16][3], image_thw[16][3];
    for (int i = 0; i < 16; i++) {
        text_thw[i][0] = text_thw[i][1] = text_thw[i][2] = i;
        bool image = i >= 2 && i < 14;
        int patch = i - 2;
        image_thw[i][0] = image ? 2 : i < 2 ? i : i - 14 + 6;
        image_thw[i][1] = image ? 2 + patch / 4 : image_thw[i][0];
        image_thw[i][2] = image ? 2 + patch % 4 : image_thw[i][0];
    }
    const int64_t thw_shape[2] = {16, 3};
    write_array("positions_mrope_text", CLI_NPY_I32, 2, thw_shape, text_thw, 1);
    write_array("positions_mrope_image", CLI_NPY_I32, 2, thw_shape, image_thw, 1);

    /* inv_freq of theta 10000 for rotary_dim 64, and one entry short. */
    double inv_freq[32];
    for (int j = 0; j < 32; j++) {
        inv_freq[j] = pow(10000.0, -(double)(2 * j) / 64.0);
    }
    const int64_t half[1] = {32}, short_half[1] = {31};
    write_array("inv_freq_d64", CLI_NPY_F64, 1, half, inv_freq, 1);
    write_array("inv_freq_short", CLI_NPY_F64, 1, short_half, inv_freq, 1);

    /* A q tensor [1, 8, 2, 16] written as format 2.0, and the same shape as i32 (wrong dtype). */
    float q[256];
    int32_t q_int[256];
    for (int i = 0; i < 256; i++) {
        q[i] = (float)sin(i * 0.37);
        q_int[i] = i;
    }
    const int64_t q_shape[4] = {1, 8, 2, 16};
    write_array("q_v2", CLI_NPY_F32, 4, q_shape, q, 2);
    write_array("q_i32", CLI_NPY_I32, 4, q_shape, q_int, 1);
    /* q in f32 and f16, each also big-endian. */
    uint16_t q_f16[256];
    for (int i = 0; i < 256; i++) {
        q_f16[i] = cli_f32_to_f16(q[i]);
    }
    write_array("q_f32_le", CLI_NPY_F32, 4, q_shape, q, 1);
    write_array("q_f32_be", CLI_NPY_F32, 4, q_shape, q, 1);
    make_big_endian("q_f32_be", 4);
    write_array("q_f16_le", CLI_NPY_F16, 4, q_shape, q_f16, 1);
    write_array("q_f16_be", CLI_NPY_F16, 4, q_shape, q_f16, 1);
    make_big_endian("q_f16_be", 2);

    /* Heads-first files (HF transformers' [batch, heads, tokens, head_dim]): q with 2 batches,
     * 3 heads, 5 tokens, k with 2 heads, and the same k tokens-first; q also as 3-D
     * [heads, tokens, head_dim]. Heads and tokens differ in number, so that reading one as the
     * other shows. */
    enum { B = 2, HQ = 3, HK = 2, T = 5, D = 16 };
    static float q_bhtd[B][HQ][T][D], k_bhtd[B][HK][T][D], k_bthd[B][T][HK][D];
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            for (int d = 0; d < D; d++) {
                for (int h = 0; h < HQ; h++) {
                    q_bhtd[b][h][t][d] = (float)sin(((b * HQ + h) * T + t) * D * 0.11 + d);
                }
                for (int h = 0; h < HK; h++) {
                    k_bhtd[b][h][t][d] = (float)cos(((b * HK + h) * T + t) * D * 0.07 + d);
                    k_bthd[b][t][h][d] = k_bhtd[b][h][t][d];
                }
            }
        }
    }
    const int64_t q_bhtd_shape[4] = {B, HQ, T, D}, k_bhtd_shape[4] = {B, HK, T, D},
                  k_bthd_shape[4] = {B, T, HK, D}, q_htd_shape[3] = {HQ, T, D};
    write_array("q_bhtd", CLI_NPY_F32, 4, q_bhtd_shape, q_bhtd, 1);
    write_array("k_bhtd", CLI_NPY_F32, 4, k_bhtd_shape, k_bhtd, 1);
    write_array("k_bthd", CLI_NPY_F32, 4, k_bthd_shape, k_bthd, 1);
    write_array("q_htd", CLI_NPY_F32, 3, q_htd_shape, q_bhtd[1], 1);

    return failures ? 1 : 0;
}
