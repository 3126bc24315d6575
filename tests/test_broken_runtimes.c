/* SPDX-License-Identifier: MIT */
/* A broken GPU runtime takes down its own backend only. Run with an environment that breaks a
 * runtime (a truncated Vulkan driver manifest, a driver manifest or OpenCL vendors entry naming
 * a library that is not a driver: tests/CMakeLists.txt writes them), the backend must be listed
 * as unavailable with the runtime's reason, for good (a second look lists nothing again), while
 * the device list, the other backends and an automatic RoPE work as usual.
 *   test_broken_runtimes BACKEND:TEXT... (each broken backend, with a text its reason contains)
 */
#include "test_common.h"

#include "required_devices.h"
#include "runtime_names.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME "test_broken_runtimes"

static const char *const vulkan_runtime = TEST_VULKAN_RUNTIME;
static const char *const opencl_runtime = TEST_OPENCL_RUNTIME;

typedef struct broken {
    posenc_backend backend;
    const char *name;
    const char *reason_text;
} broken;

static const broken *find_broken(const broken *list, int count, posenc_backend backend)
{
    for (int i = 0; i < count; i++) {
        if (list[i].backend == backend)
            return &list[i];
    }
    return NULL;
}

/* An automatic context rotates a small q on some device of a backend that works; the result is
 * compared with float64 rotations within 1e-5, far above the f32 promise of 8 ulps (about 5e-7
 * here) and far below the error of any wrong angle. */
static void automatic_rope(const broken *list, int count, bool cpu_expected)
{
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(NULL, &ctx));
    if (!ctx) {
        fprintf(stderr, "%s: no automatic context: %s\n", NAME, posenc_thread_last_error());
        return;
    }
    posenc_device_info info;
    CHECK_OK(posenc_context_device(ctx, &info));
    printf("%s: automatic RoPE on %s:%u (%s)\n", NAME, posenc_backend_name(info.backend),
           info.backend_index, info.name);
    CHECK(!find_broken(list, count, info.backend));
    if (cpu_expected)
        CHECK(info.backend == POSENC_BACKEND_CPU);

    enum { TOKENS = 5, HEADS = 2, DIM = 16 };
    static float q[TOKENS][HEADS][DIM], input[TOKENS][HEADS][DIM];
    for (int t = 0; t < TOKENS; t++)
        for (int h = 0; h < HEADS; h++)
            for (int d = 0; d < DIM; d++)
                q[t][h][d] = input[t][h][d] = (float)(0.25 + 0.125 * ((t * 7 + h * 3 + d) % 9));
    const int64_t shape[3] = {TOKENS, HEADS, DIM};
    posenc_rope_desc rope = {.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, shape)};
    posenc_status status = posenc_rope(ctx, &rope);
    CHECK_OK(status);
    if (status != POSENC_OK)
        fprintf(stderr, "%s: %s\n", NAME, posenc_context_last_error(ctx));
    double worst = 0.0;
    for (int t = 0; t < TOKENS; t++) {
        for (int h = 0; h < HEADS; h++) {
            for (int j = 0; j < DIM / 2; j++) { /* NeoX: j pairs with j + DIM/2, theta 10000 */
                double angle = t * pow(10000.0, -2.0 * j / DIM);
                double x = input[t][h][j], y = input[t][h][j + DIM / 2];
                double want_x = x * cos(angle) - y * sin(angle);
                double want_y = y * cos(angle) + x * sin(angle);
                worst = fmax(worst, fabs(q[t][h][j] - want_x));
                worst = fmax(worst, fabs(q[t][h][j + DIM / 2] - want_y));
            }
        }
    }
    if (worst > 1e-5) {
        test_failures++;
        fprintf(stderr, "%s: automatic RoPE is off by %g\n", NAME, worst);
    }
    posenc_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    broken list[2];
    int count = 0;
    for (int i = 1; i < argc && count < 2; i++) {
        const char *colon = strchr(argv[i], ':');
        size_t length = colon ? (size_t)(colon - argv[i]) : strlen(argv[i]);
        broken *b = &list[count++];
        b->reason_text = colon ? colon + 1 : "";
        if (length == 6 && strncmp(argv[i], "vulkan", 6) == 0) {
            b->backend = POSENC_BACKEND_VULKAN;
            b->name = "vulkan";
        } else if (length == 6 && strncmp(argv[i], "opencl", 6) == 0) {
            b->backend = POSENC_BACKEND_OPENCL;
            b->name = "opencl";
        } else {
            fprintf(stderr, "usage: %s vulkan:TEXT|opencl:TEXT...\n", NAME);
            return 2;
        }
    }
    if (count == 0) {
        fprintf(stderr, "usage: %s vulkan:TEXT|opencl:TEXT...\n", NAME);
        return 2;
    }

    /* The whole list first, as `posenc devices` makes it: every backend listed at once. */
    uint32_t device_count = 0;
    posenc_status status = posenc_device_count(&device_count);
    CHECK_OK(status);
    if (status != POSENC_OK) {
        fprintf(stderr, "%s: posenc_device_count: %s\n", NAME, posenc_thread_last_error());
        return test_finish(NAME);
    }
    bool cpu_listed = false;
    for (uint32_t i = 0; i < device_count; i++) {
        posenc_device_info info;
        CHECK_OK(posenc_device_get(i, &info));
        CHECK(!find_broken(list, count, info.backend));
        cpu_listed = cpu_listed || info.backend == POSENC_BACKEND_CPU;
    }
    CHECK(cpu_listed);

    for (int i = 0; i < count; i++) {
        const char *reason = NULL;
        status = posenc_backend_status(list[i].backend, &reason);
        const char *runtime =
            list[i].backend == POSENC_BACKEND_VULKAN ? vulkan_runtime : opencl_runtime;
        if (status == POSENC_BACKEND_UNAVAILABLE && !support_library_loaded(runtime)) {
            /* No runtime to break: the set-up was never tried. */
            return test_failures ? test_finish(NAME)
                                 : test_device_absent(NAME, list[i].name, reason);
        }
        CHECK_STATUS(status, POSENC_BACKEND_UNAVAILABLE);
        printf("%s: %s unavailable: %s\n", NAME, list[i].name, reason ? reason : "(null)");
        if (!reason || !strstr(reason, list[i].reason_text)) {
            test_failures++;
            fprintf(stderr, "%s: %s's reason '%s' does not name '%s'\n", NAME, list[i].name,
                    reason ? reason : "(null)", list[i].reason_text);
        }
        /* The runtime's failure is kept: asking again lists nothing again. */
        const char *again = NULL;
        CHECK_STATUS(posenc_backend_status(list[i].backend, &again), POSENC_BACKEND_UNAVAILABLE);
        CHECK(again == reason);

        /* A context asked for on that backend says why it cannot be had. */
        posenc_context_desc desc = {.backend = list[i].backend};
        posenc_context *ctx = NULL;
        CHECK_STATUS(posenc_context_create(&desc, &ctx), POSENC_BACKEND_UNAVAILABLE);
        CHECK(ctx == NULL);
        const char *message = posenc_thread_last_error();
        if (reason && (!message || !strstr(message, reason))) {
            test_failures++;
            fprintf(stderr, "%s: the context's message '%s' does not give the reason '%s'\n",
                    NAME, message ? message : "(null)", reason);
        }
    }

    /* The backends not broken list as usual: their devices are there where the run requires
     * them. */
    static const posenc_backend gpu_backends[2] = {POSENC_BACKEND_VULKAN, POSENC_BACKEND_OPENCL};
    static const char *const gpu_names[2] = {"vulkan", "opencl"};
    bool gpu_working = false;
    for (int g = 0; g < 2; g++) {
        if (find_broken(list, count, gpu_backends[g]))
            continue;
        const char *reason = NULL;
        status = posenc_backend_status(gpu_backends[g], &reason);
        gpu_working = gpu_working || status == POSENC_OK;
        if (status != POSENC_OK && test_device_required(gpu_names[g])) {
            test_failures++;
            fprintf(stderr, "%s: %s is unavailable beside the broken runtime: %s\n", NAME,
                    gpu_names[g], reason ? reason : "(null)");
        }
    }
    CHECK_OK(posenc_backend_status(POSENC_BACKEND_CPU, NULL));

    automatic_rope(list, count, !gpu_working);
    uint32_t count_again = 0;
    CHECK_OK(posenc_device_count(&count_again));
    CHECK(count_again == device_count);
    return test_finish(NAME);
}
