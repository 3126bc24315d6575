/* SPDX-License-Identifier: MIT */
/* What a Vulkan device reports decides posenc's use of it (VK_LAYER_POSENC_faults changes the
 * report, fault_layer.h):
 *   test_vulkan_limits storage_buffers   POSENC_FAULTS_STORAGE_BUFFERS=4 (Vulkan's minimum): the
 *       device is not usable, and the error says what it lacks;
 *   test_vulkan_limits shuffle           the QK norm of a Qwen3 layout runs in rope_blocks.comp's
 *       norm variant, where subgroups shuffle;
 *   test_vulkan_limits no_shuffle        POSENC_FAULTS_NO_SHUFFLE=1: the same call runs in
 *       rope.comp's norm variant instead;
 * both norm runs equal the CPU's results within the norm's bound. The kernel a call used is
 * read from the pipelines' debug names the layer saw. */
#include "fault_layer.h"
#include "required_devices.h"
#include "test_common.h"

#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME "test_vulkan_limits"
#define TOKENS 3
#define Q_HEADS 4
#define K_HEADS 2
#define HEAD_DIM 128

static posenc_faults_named_fn named;

static bool load_layer(void)
{
    const char *path = getenv("POSENC_FAULT_LAYER");
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : NULL;
    named = library ? (posenc_faults_named_fn)dlsym(library, POSENC_FAULTS_NAMED) : NULL;
    if (!named)
        fprintf(stderr, "%s: cannot open the fault layer (POSENC_FAULT_LAYER=%s)\n", NAME,
                path ? path : "(unset)");
    return named != NULL;
}

static posenc_context *context_of(posenc_backend backend)
{
    posenc_context_desc desc = {
        .backend = backend,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
    };
    posenc_context *ctx = NULL;
    return posenc_context_create(&desc, &ctx) == POSENC_OK ? ctx : NULL;
}

/* q and k normalized per head (Qwen3) and rotated in place on `ctx`. */
static void norm_call(posenc_context *ctx, float *q, float *k, const float *weights)
{
    int64_t q_shape[3] = {TOKENS, Q_HEADS, HEAD_DIM}, k_shape[3] = {TOKENS, K_HEADS, HEAD_DIM};
    int64_t w_shape[1] = {HEAD_DIM};
    posenc_rope_desc desc = {
        .q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, q_shape),
        .k = posenc_tensor_of_host(k, POSENC_DTYPE_F32, 3, k_shape),
        .q_norm_weight = posenc_tensor_of_host((void *)weights, POSENC_DTYPE_F32, 1, w_shape),
        .k_norm_weight =
            posenc_tensor_of_host((void *)(weights + HEAD_DIM), POSENC_DTYPE_F32, 1, w_shape),
        .theta = 1e6,
        .position_offset = 1000,
    };
    CHECK_OK(posenc_rope(ctx, &desc));
}

/* The largest |a[i] - b[i]|, NaN where one is NaN. (Written without fmax: GCC 12 for aarch64
 * failed to vectorize an fmax reduction here, with an internal compiler error.) */
static double largest_difference(const float *a, const float *b, size_t count)
{
    double largest = 0.0;
    for (size_t i = 0; i < count; i++) {
        double difference = fabs((double)a[i] - b[i]);
        if (!(difference <= largest))
            largest = difference;
    }
    return largest;
}

static void check_norm(bool shuffles)
{
    static float q[TOKENS * Q_HEADS * HEAD_DIM], k[TOKENS * K_HEADS * HEAD_DIM];
    static float q_cpu[sizeof q / sizeof q[0]], k_cpu[sizeof k / sizeof k[0]];
    static float weights[2 * HEAD_DIM];
    test_rng rng = {7};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        q[i] = q_cpu[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        k[i] = k_cpu[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    for (size_t i = 0; i < 2 * HEAD_DIM; i++)
        weights[i] = (float)test_rng_uniform(&rng, 0.5, 1.5);
    posenc_context *gpu = context_of(POSENC_BACKEND_VULKAN);
    posenc_context *cpu = context_of(POSENC_BACKEND_CPU);
    CHECK(gpu != NULL && cpu != NULL);
    if (gpu && cpu) {
        norm_call(gpu, q, k, weights);
        norm_call(cpu, q_cpu, k_cpu, weights);
        /* Each side within 13 units of 2^-24 of a normalized value (rotated: + 9), relative to
         * values of a few units: 64 units between them is wide enough, a wrong kernel not. */
        double worst = largest_difference(q, q_cpu, sizeof q / sizeof q[0]);
        double worst_k = largest_difference(k, k_cpu, sizeof k / sizeof k[0]);
        if (!(worst_k <= worst))
            worst = worst_k;
        printf("  %s: worst difference from the CPU %.3g\n",
               shuffles ? "with shuffles" : "without shuffles", worst);
        CHECK(worst < 64 * 0x1p-24 * 8.0);
    }
    /* The kernel the call took, by the pipelines' names. */
    CHECK(named("posenc rope f32 blocks norm") == shuffles);
    CHECK(named("posenc rope f32 norm") == !shuffles);
    posenc_context_destroy(gpu);
    posenc_context_destroy(cpu);
}

/* The device refused for its 4 storage buffers a stage: 0, or the exit code when there is no
 * Vulkan device to refuse (no loader or driver: test_device_absent's). */
static int check_too_few_storage_buffers(void)
{
    posenc_context *ctx = context_of(POSENC_BACKEND_VULKAN);
    const char *error = posenc_thread_last_error();
    if (!ctx && !strstr(error, "storage buffers"))
        return test_device_absent(NAME, "vulkan", error);
    CHECK(ctx == NULL);
    printf("  4 storage buffers a stage: %s\n", ctx ? "accepted" : error);
    CHECK(ctx == NULL && strstr(error, "8 storage buffers") != NULL);
    posenc_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    const char *point = argc > 1 ? argv[1] : "";
    if (strcmp(point, "storage_buffers") != 0) {
        posenc_context *probe = context_of(POSENC_BACKEND_VULKAN);
        if (!probe)
            return test_device_absent(NAME, "vulkan", posenc_thread_last_error());
        posenc_context_destroy(probe);
    }
    if (!load_layer()) {
        test_failures++;
        return test_finish(NAME);
    }
    printf("%s: %s\n", NAME, point);
    int absent = 0;
    if (strcmp(point, "storage_buffers") == 0)
        absent = check_too_few_storage_buffers();
    else if (strcmp(point, "shuffle") == 0 || strcmp(point, "no_shuffle") == 0)
        check_norm(strcmp(point, "shuffle") == 0);
    else {
        fprintf(stderr, "usage: %s storage_buffers|shuffle|no_shuffle\n", NAME);
        return 2;
    }
    return absent ? absent : test_finish(NAME);
}
