/* SPDX-License-Identifier: MIT */
/* Uses an installed posenc: a sinusoidal table on host memory, checked against libm. */
#include <posenc/posenc.h>

#include <math.h>
#include <stdio.h>

int main(void)
{
    posenc_context *context = NULL;
    posenc_status status = posenc_context_create(NULL, &context);
    if (status != POSENC_OK) {
        fprintf(stderr, "posenc_context_create: %s: %s\n", posenc_status_name(status),
                posenc_thread_last_error());
        return 1;
    }

    enum { ROWS = 4, D_MODEL = 8 };
    float table[ROWS][D_MODEL];
    const int64_t shape[2] = {ROWS, D_MODEL};
    posenc_sinusoidal_desc desc = {
        .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, shape),
    };
    status = posenc_sinusoidal(context, &desc);
    if (status != POSENC_OK) {
        fprintf(stderr, "posenc_sinusoidal: %s: %s\n", posenc_status_name(status),
                posenc_context_last_error(context));
        posenc_context_destroy(context);
        return 1;
    }
    posenc_context_destroy(context);

    /* Row 3, frequency 0 (1 radian per position): sin 3 and cos 3, interleaved. */
    double error = fmax(fabs(table[3][0] - sin(3.0)), fabs(table[3][1] - cos(3.0)));
    printf("sin(3) = %.7f, cos(3) = %.7f, error %.1e\n", table[3][0], table[3][1], error);
    return error < 1e-6 ? 0 : 1;
}
