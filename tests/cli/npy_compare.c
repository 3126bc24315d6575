/* SPDX-License-Identifier: MIT */
/* Compares two .npy files element by element (same shape and dtype, |a - b| <= atol), or checks
 * that one file is all within atol of zero. Exit 0 when they agree, 1 when not, 2 on errors. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "npy.h"

static int load(const char *path, cli_npy_array *array)
{
    char error[256];
    if (cli_npy_read(path, array, error, sizeof error) != 0) {
        fprintf(stderr, "npy_compare: %s: %s\n", path, error);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *paths[2] = {NULL, NULL};
    int npaths = 0;
    double atol = 0.0;
    bool zero = false, differ = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--atol") == 0 && i + 1 < argc) {
            atol = strtod(argv[++i], NULL);
        } else if (strcmp(argv[i], "--zero") == 0) {
            zero = true;
        } else if (strcmp(argv[i], "--differ") == 0) {
            differ = true;
        } else if (argv[i][0] != '-' && npaths < 2) {
            paths[npaths++] = argv[i];
        } else {
            npaths = -1;
            break;
        }
    }
    if (npaths != (zero ? 1 : 2)) {
        fprintf(stderr, "usage: npy_compare A.npy B.npy [--atol X] [--differ]\n"
                        "       npy_compare --zero A.npy [--atol X]\n");
        return 2;
    }

    cli_npy_array a, b;
    memset(&b, 0, sizeof b);
    if (load(paths[0], &a) != 0 || (!zero && load(paths[1], &b) != 0)) {
        cli_npy_free(&a);
        return 2;
    }
    int rc = 0;
    if (!zero && (a.dtype != b.dtype || a.ndim != b.ndim ||
                  memcmp(a.shape, b.shape, a.ndim * sizeof a.shape[0]) != 0)) {
        fprintf(stderr, "npy_compare: %s and %s differ in dtype or shape\n", paths[0], paths[1]);
        rc = 1;
    } else {
        double max_difference = 0.0;
        uint64_t worst = 0;
        for (uint64_t i = 0; i < a.count; i++) {
            double va = cli_npy_element(&a, i);
            double vb = zero ? 0.0 : cli_npy_element(&b, i);
            double difference = fabs(va - vb);
            if (isnan(difference) || difference > max_difference) {
                max_difference = isnan(difference) ? INFINITY : difference;
                worst = i;
            }
        }
        bool agree = max_difference <= atol;
        printf("npy_compare: %llu elements, max |difference| %.3g at element %llu (atol %.3g)\n",
               (unsigned long long)a.count, max_difference, (unsigned long long)worst, atol);
        if (differ ? agree : !agree) {
            fprintf(stderr, "npy_compare: %s\n",
                    differ ? "expected the files to differ" : "difference above atol");
            rc = 1;
        }
    }
    cli_npy_free(&a);
    cli_npy_free(&b);
    return rc;
}
