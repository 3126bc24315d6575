/* SPDX-License-Identifier: MIT */
/* Checks a `posenc rope` result against the float64 reference of reference_check.c: f32 input
 * and output .npy of one shape, NEOX over the whole head, positions = token index, theta 10000
 * unless given. The files' dims are in the order --layout names (bthd, bhtd, thd, htd; default
 * bthd or thd). Exit 0 within the library's promise (8 * 2^-24 of the rotated pair's norm),
 * 1 beyond it, 2 on errors.
 * Usage: rope_reference IN.npy OUT.npy [--layout L] [--theta X] */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "npy.h"
#include "reference_check.h"

static int load(const char *path, cli_npy_array *array)
{
    char error[256];
    if (cli_npy_read(path, array, error, sizeof error) != 0) {
        fprintf(stderr, "rope_reference: %s: %s\n", path, error);
        return -1;
    }
    if (array->dtype != CLI_NPY_F32 || array->ndim < 3) {
        fprintf(stderr, "rope_reference: %s: expected f32 of 3 or 4 dims\n", path);
        cli_npy_free(array);
        return -1;
    }
    return 0;
}

/* `array` reordered into a packed [batch, tokens, heads, head_dim] copy. */
static float *tokens_first(const cli_npy_array *array, bool heads_first, int64_t dims[4])
{
    int64_t shape[4] = {1, 1, 1, 1};
    memcpy(shape + 4 - array->ndim, array->shape, array->ndim * sizeof *shape);
    int64_t batch = shape[0], outer = shape[1], inner = shape[2], width = shape[3];
    dims[0] = batch;
    dims[1] = heads_first ? inner : outer; /* tokens */
    dims[2] = heads_first ? outer : inner; /* heads */
    dims[3] = width;
    float *packed = malloc((size_t)array->count * sizeof *packed);
    if (!packed) {
        return NULL;
    }
    const float *data = array->data;
    for (int64_t b = 0; b < batch; b++) {
        for (int64_t o = 0; o < outer; o++) {
            for (int64_t i = 0; i < inner; i++) {
                int64_t t = heads_first ? i : o, h = heads_first ? o : i;
                memcpy(packed + ((b * dims[1] + t) * dims[2] + h) * width,
                       data + ((b * outer + o) * inner + i) * width,
                       (size_t)width * sizeof *packed);
            }
        }
    }
    return packed;
}

int main(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL}, *layout = NULL;
    int npaths = 0;
    double theta = 10000.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) {
            layout = argv[++i];
        } else if (strcmp(argv[i], "--theta") == 0 && i + 1 < argc) {
            theta = strtod(argv[++i], NULL);
        } else if (argv[i][0] != '-' && npaths < 2) {
            paths[npaths++] = argv[i];
        } else {
            npaths = -1;
            break;
        }
    }
    if (npaths != 2) {
        fprintf(stderr, "usage: rope_reference IN.npy OUT.npy [--layout L] [--theta X]\n");
        return 2;
    }
    bool heads_first = layout && (strcmp(layout, "bhtd") == 0 || strcmp(layout, "htd") == 0);

    cli_npy_array in, out;
    if (load(paths[0], &in) != 0) {
        return 2;
    }
    if (load(paths[1], &out) != 0) {
        cli_npy_free(&in);
        return 2;
    }
    int rc = 2;
    if (layout && strlen(layout) != in.ndim) {
        fprintf(stderr, "rope_reference: --layout %s for %u-D files\n", layout, in.ndim);
    } else if (in.ndim != out.ndim || memcmp(in.shape, out.shape, in.ndim * sizeof in.shape[0])) {
        fprintf(stderr, "rope_reference: %s and %s differ in shape\n", paths[0], paths[1]);
    } else {
        int64_t dims[4];
        float *x = tokens_first(&in, heads_first, dims);
        float *y = tokens_first(&out, heads_first, dims);
        uint32_t rotary_dim = (uint32_t)dims[3];
        double *inv_freq = malloc((rotary_dim / 2 + 1) * sizeof *inv_freq);
        if (x && y && inv_freq) {
            cli_rope_inv_freq(theta, rotary_dim, inv_freq);
            cli_rope_check check = {
                .in = x, .out = y,
                .batch = dims[0], .tokens = dims[1], .heads = dims[2], .head_dim = dims[3],
                .rotary_dim = rotary_dim, .style = POSENC_ROPE_NEOX, .inv_freq = inv_freq,
                .attention_factor = 1.0,
            };
            double error = cli_rope_max_error(&check);
            rc = error >= 0.0 && error <= CLI_PROMISE ? 0 : 1;
            printf("rope_reference: max error %.3g of the pair norm (promise %.3g): %s\n", error,
                   CLI_PROMISE, rc == 0 ? "within" : "BEYOND");
        }
        free(x);
        free(y);
        free(inv_freq);
    }
    cli_npy_free(&in);
    cli_npy_free(&out);
    return rc;
}
