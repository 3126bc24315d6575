/* SPDX-License-Identifier: MIT */
/* A fully static program (linked with -static or -static-pie, tests/CMakeLists.txt): the GPU
 * backends, which dlopen their runtimes, report that dynamic loading is unavailable instead of
 * crashing in the C library's dlopen, and the CPU path works, against the float64 reference. */
#include "test_common.h"

#include "reference.h"

#include <string.h>

#define STATIC_REASON "dynamic loading is not available in a static binary"

#define TOKENS 5
#define HEADS 3
#define HEAD_DIM 64

static const posenc_backend gpu_backends[] = {POSENC_BACKEND_VULKAN, POSENC_BACKEND_OPENCL};

/* The reason a backend built into the library gives; "not compiled in" for one left out. */
static bool compiled_in(posenc_backend backend)
{
    const char *reason = "";
    posenc_backend_status(backend, &reason);
    return strcmp(reason, "not compiled in") != 0;
}

/* `desc` asks for a GPU backend: the call fails with BACKEND_UNAVAILABLE, says why, and leaves
 * the caller's pointer alone. */
static void expect_unavailable_(const posenc_context_desc *desc, const char *what, int line)
{
    posenc_context *const sentinel = (posenc_context *)&test_failures;
    posenc_context *ctx = sentinel;
    posenc_status status = posenc_context_create(desc, &ctx);
    const char *message = posenc_thread_last_error();
    printf("  %s: %s: %s\n", what, posenc_status_name(status), message);
    if (status != POSENC_BACKEND_UNAVAILABLE || !strstr(message, STATIC_REASON) ||
        ctx != sentinel) {
        test_failures++;
        fprintf(stderr, "%s:%d: %s: expected POSENC_BACKEND_UNAVAILABLE (\"%s\")\n", __FILE__,
                line, what, STATIC_REASON);
    }
    if (status == POSENC_OK && ctx != sentinel)
        posenc_context_destroy(ctx);
}
#define EXPECT_UNAVAILABLE(desc, what) expect_unavailable_((desc), (what), __LINE__)

static void test_gpu_backends(void)
{
    const char *reason = NULL;
    CHECK(!posenc__library_loading(&reason));
    CHECK(reason && strcmp(reason, STATIC_REASON) == 0);
    for (size_t b = 0; b < sizeof gpu_backends / sizeof gpu_backends[0]; b++) {
        posenc_backend backend = gpu_backends[b];
        const char *name = posenc_backend_name(backend);
        if (!compiled_in(backend)) {
            printf("  %s: not compiled in\n", name);
            continue;
        }
        reason = NULL;
        CHECK_STATUS(posenc_backend_status(backend, &reason), POSENC_BACKEND_UNAVAILABLE);
        CHECK(reason && strcmp(reason, STATIC_REASON) == 0);

        posenc_context_desc desc = {.backend = backend, .flags = POSENC_CONTEXT_IGNORE_ENV};
        EXPECT_UNAVAILABLE(&desc, name);
        char selector[16];
        snprintf(selector, sizeof selector, "%s:0", name);
        desc = (posenc_context_desc){.device = selector, .flags = POSENC_CONTEXT_IGNORE_ENV};
        EXPECT_UNAVAILABLE(&desc, selector);
        CHECK(support_env_set("POSENC_DEVICE", name));
        EXPECT_UNAVAILABLE(NULL, "POSENC_DEVICE");
        CHECK(support_env_unset("POSENC_DEVICE"));
    }
}

/* NeoX RoPE (the defaults) on the CPU path, against the float64 reference. */
static void run_rope(posenc_context *ctx)
{
    static float input[TOKENS * HEADS * HEAD_DIM], data[TOKENS * HEADS * HEAD_DIM];
    test_rng rng = {0x5eed5eedu};
    for (size_t i = 0; i < sizeof input / sizeof input[0]; i++)
        input[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    memcpy(data, input, sizeof data);
    posenc_rope_desc rope = {
        .q = posenc_tensor_of_host(data, POSENC_DTYPE_F32, 3,
                                   (const int64_t[]){TOKENS, HEADS, HEAD_DIM}),
        .position_offset = 1234,
    };
    CHECK_OK(posenc_rope(ctx, &rope));
    CHECK(ref_rope_rows_f32_ok(input, data, HEAD_DIM, TOKENS, HEADS, HEAD_DIM, 1234));
}

static void test_cpu(void)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU, .flags = POSENC_CONTEXT_IGNORE_ENV,
                                .log = test_count_warnings};
    posenc_context *ctx = NULL;
    CHECK_OK(posenc_context_create(&desc, &ctx));
    if (ctx) {
        run_rope(ctx);
        posenc_context_destroy(ctx);
    }

    /* AUTO, and POSENC_DEVICE=cpu, find the CPU path: the only device listed. */
    uint32_t count = 0;
    CHECK_OK(posenc_device_count(&count));
    CHECK(count == 1);
    posenc_device_info info;
    CHECK_OK(posenc_device_get(0, &info));
    CHECK(info.backend == POSENC_BACKEND_CPU && info.native_cpu);
    for (int with_env = 0; with_env < 2; with_env++) {
        if (with_env)
            CHECK(support_env_set("POSENC_DEVICE", "cpu"));
        ctx = NULL;
        desc = (posenc_context_desc){.log = test_count_warnings};
        CHECK_OK(posenc_context_create(&desc, &ctx));
        if (!ctx)
            continue;
        CHECK_OK(posenc_context_device(ctx, &info));
        CHECK(info.backend == POSENC_BACKEND_CPU);
        run_rope(ctx);
        posenc_context_destroy(ctx);
    }
    CHECK(support_env_unset("POSENC_DEVICE"));
}

int main(void)
{
    test_gpu_backends();
    test_cpu();
    return test_finish("test_static_binary");
}
