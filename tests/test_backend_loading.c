/* SPDX-License-Identifier: MIT */
/* Which runtimes a context loads: a context for one backend (by descriptor, selector or
 * POSENC_DEVICE) lists that backend's devices alone, so a CPU context loads neither the Vulkan
 * nor the OpenCL runtime and is quick to make; the full list comes later with the same devices;
 * first uses from several threads at once; and a failed CPU context lists the other backends
 * only to fall back to them. One process per part (the argument), so each starts with nothing
 * listed. */
#include "test_common.h"

#include "core/internal.h" /* posenc__registry_listed */
#include "required_devices.h"
#include "runtime_names.h"

#include <stdlib.h>
#include <string.h>

static const char *const vulkan_runtime = TEST_VULKAN_RUNTIME;
static const char *const opencl_runtime = TEST_OPENCL_RUNTIME;

/* A CPU context is made in well under 5 ms on an idle machine; the bound is for a loaded one
 * under the sanitizers, far below the 50-500 ms that starting the GPU drivers takes. */
#define CPU_CONTEXT_BOUND_MS 50.0
#define REPEATS 15

static void expect_listed_(bool cpu, bool vulkan, bool opencl, int line)
{
    bool now[3] = {posenc__registry_listed(POSENC_BACKEND_CPU),
                   posenc__registry_listed(POSENC_BACKEND_VULKAN),
                   posenc__registry_listed(POSENC_BACKEND_OPENCL)};
    bool want[3] = {cpu, vulkan, opencl};
    const char *names[3] = {"cpu", "vulkan", "opencl"};
    for (int i = 0; i < 3; i++) {
        if (now[i] != want[i]) {
            test_failures++;
            fprintf(stderr, "%s:%d: %s devices %s listed\n", __FILE__, line, names[i],
                    now[i] ? "were" : "were not");
        }
    }
    /* Listing a backend is what loads its runtime. */
    if (!vulkan && support_library_loaded(vulkan_runtime)) {
        test_failures++;
        fprintf(stderr, "%s:%d: %s is loaded\n", __FILE__, line, vulkan_runtime);
    }
    if (!opencl && support_library_loaded(opencl_runtime)) {
        test_failures++;
        fprintf(stderr, "%s:%d: %s is loaded\n", __FILE__, line, opencl_runtime);
    }
}
#define EXPECT_LISTED(cpu, vulkan, opencl) expect_listed_((cpu), (vulkan), (opencl), __LINE__)

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Makes and destroys REPEATS contexts for `desc`, each on the CPU path; returns the median
 * creation time in milliseconds and the first one in `*first_ms`. */
static double time_cpu_contexts(const posenc_context_desc *desc, double *first_ms)
{
    double ms[REPEATS];
    for (int i = 0; i < REPEATS; i++) {
        posenc_context *ctx = NULL;
        double start = posenc__seconds_now();
        posenc_status status = posenc_context_create(desc, &ctx);
        ms[i] = (posenc__seconds_now() - start) * 1e3;
        CHECK_OK(status);
        if (!ctx)
            return 0.0;
        posenc_device_info info;
        CHECK_OK(posenc_context_device(ctx, &info));
        CHECK(info.backend == POSENC_BACKEND_CPU && info.native_cpu);
        posenc_context_destroy(ctx);
    }
    *first_ms = ms[0];
    qsort(ms, REPEATS, sizeof ms[0], compare_doubles);
    return ms[REPEATS / 2];
}

/* The device a context for `desc` gets, or false (no context) with the status in `*status`. */
static bool context_device(const posenc_context_desc *desc, posenc_device_info *info,
                           posenc_status *status)
{
    posenc_context *ctx = NULL;
    *status = posenc_context_create(desc, &ctx);
    if (*status != POSENC_OK)
        return false;
    CHECK_OK(posenc_context_device(ctx, info));
    posenc_context_destroy(ctx);
    return true;
}

/* `info` (from a context made before the full list) is device `backend_index` of its backend in
 * the full list, field for field. */
static void expect_in_full_list(const posenc_device_info *info)
{
    uint32_t count = 0;
    CHECK_OK(posenc_device_count(&count));
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info listed;
        CHECK_OK(posenc_device_get(i, &listed));
        if (listed.backend == info->backend && listed.backend_index == info->backend_index) {
            CHECK(memcmp(&listed, info, sizeof listed) == 0);
            return;
        }
    }
    test_failures++;
    fprintf(stderr, "%s:%u (%s) is not in the full list\n", posenc_backend_name(info->backend),
            info->backend_index, info->name);
}

/* A GPU backend's context, made after only the CPU was listed: lists that backend alone. */
static bool gpu_context(posenc_backend backend, posenc_device_info *info)
{
    posenc_context_desc desc = {.backend = backend,
                                .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK};
    posenc_status status;
    if (context_device(&desc, info, &status)) {
        CHECK(info->backend == backend);
        return true;
    }
    const char *name = posenc_backend_name(backend);
    printf("  %s: %s: %s\n", name, posenc_status_name(status), posenc_thread_last_error());
    CHECK(status == POSENC_BACKEND_UNAVAILABLE);
    if (test_device_required(name)) {
        test_failures++;
        fprintf(stderr, "no %s device, which this build requires\n", name);
    }
    return false;
}

static void test_one_backend(void)
{
    EXPECT_LISTED(false, false, false);

    /* By descriptor, by selector and by POSENC_DEVICE: the CPU alone. */
    posenc_context_desc by_backend = {.backend = POSENC_BACKEND_CPU,
                                      .flags = POSENC_CONTEXT_IGNORE_ENV};
    double first_ms = 0.0;
    double median_ms = time_cpu_contexts(&by_backend, &first_ms);
    printf("  CPU context (backend = CPU): first %.2f ms, median of %d %.2f ms\n", first_ms,
           REPEATS, median_ms);
    CHECK(first_ms < CPU_CONTEXT_BOUND_MS);
    CHECK(median_ms < CPU_CONTEXT_BOUND_MS);
    EXPECT_LISTED(true, false, false);

    posenc_context_desc by_selector = {.device = "cpu:0", .flags = POSENC_CONTEXT_IGNORE_ENV};
    median_ms = time_cpu_contexts(&by_selector, &first_ms);
    printf("  CPU context (device = \"cpu:0\"): median %.2f ms\n", median_ms);
    CHECK(support_env_set("POSENC_DEVICE", "cpu"));
    posenc_context_desc by_environment = {0};
    median_ms = time_cpu_contexts(&by_environment, &first_ms);
    printf("  CPU context (POSENC_DEVICE=cpu): median %.2f ms\n", median_ms);
    CHECK(support_env_unset("POSENC_DEVICE"));
    const char *reason = NULL;
    CHECK_OK(posenc_backend_status(POSENC_BACKEND_CPU, &reason));
    posenc_device_info cpu;
    posenc_status status;
    CHECK(context_device(&by_backend, &cpu, &status));
    EXPECT_LISTED(true, false, false);

    /* Vulkan, then OpenCL: each loads its own runtime only. */
    posenc_device_info vulkan, opencl;
    bool have_vulkan = gpu_context(POSENC_BACKEND_VULKAN, &vulkan);
    EXPECT_LISTED(true, true, false);
    bool have_opencl = gpu_context(POSENC_BACKEND_OPENCL, &opencl);
    EXPECT_LISTED(true, true, true);

    /* The full list holds the same devices, and the index posenc_device_choose gives is the
     * CPU device's there. */
    expect_in_full_list(&cpu);
    if (have_vulkan)
        expect_in_full_list(&vulkan);
    if (have_opencl)
        expect_in_full_list(&opencl);
    uint32_t index = UINT32_MAX;
    CHECK_OK(posenc_device_choose(&by_backend, &index, &reason));
    posenc_device_info chosen;
    CHECK_OK(posenc_device_get(index, &chosen));
    CHECK(memcmp(&chosen, &cpu, sizeof cpu) == 0);
}

/* ------------------------------------------------------------------------------------------ */
/* First uses from several threads at once: one backend each, and AUTO. */

#define THREADS 4

typedef struct first_use {
    posenc_context_desc desc;
    posenc_status status;
    posenc_device_info info;
} first_use;

static void first_use_main(void *arg)
{
    first_use *use = arg;
    posenc_context *ctx = NULL;
    use->status = posenc_context_create(&use->desc, &ctx);
    if (use->status == POSENC_OK) {
        use->status = posenc_context_device(ctx, &use->info);
        posenc_context_destroy(ctx);
    }
}

static void test_threads(void)
{
    EXPECT_LISTED(false, false, false);
    const uint32_t quiet = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK;
    first_use uses[THREADS] = {
        {.desc = {.backend = POSENC_BACKEND_CPU, .flags = quiet}},
        {.desc = {.backend = POSENC_BACKEND_VULKAN, .flags = quiet}},
        {.desc = {.backend = POSENC_BACKEND_OPENCL, .flags = quiet}},
        {.desc = {.flags = POSENC_CONTEXT_IGNORE_ENV}},
    };
    posenc__thread threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(posenc__thread_start(&threads[i], first_use_main, &uses[i]));
    for (int i = 0; i < THREADS; i++)
        posenc__thread_join(&threads[i]);
    EXPECT_LISTED(true, true, true);
    for (int i = 0; i < THREADS; i++) {
        posenc_backend backend = uses[i].desc.backend;
        printf("  %s: %s\n", posenc_backend_name(backend), posenc_status_name(uses[i].status));
        if (uses[i].status != POSENC_OK) {
            CHECK(uses[i].status == POSENC_BACKEND_UNAVAILABLE &&
                  backend != POSENC_BACKEND_CPU && backend != POSENC_BACKEND_AUTO);
            CHECK(!test_device_required(posenc_backend_name(backend)));
            CHECK(posenc_backend_status(backend, NULL) == POSENC_BACKEND_UNAVAILABLE);
            continue;
        }
        if (backend != POSENC_BACKEND_AUTO)
            CHECK(uses[i].info.backend == backend);
        expect_in_full_list(&uses[i].info);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* A CPU context that cannot be made (POSENC_CPU_VARIANT names a variant this machine cannot
 * run): without fallback nothing else is listed; with it, the other backends are listed then,
 * and the device AUTO would choose (a software GPU too, allowed by the flag) takes over where
 * there is one. */

static bool cpu_fails(void)
{
    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU,
                                .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK};
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(&desc, &ctx);
    if (status == POSENC_OK) {
        posenc_context_destroy(ctx);
        return false;
    }
    CHECK_STATUS(status, POSENC_UNSUPPORTED);
    CHECK_MESSAGE(posenc_thread_last_error(), "POSENC_CPU_VARIANT");
    return true;
}

static void test_fallback(void)
{
    EXPECT_LISTED(false, false, false);
    /* A variant of the other architecture: on every machine one of them cannot run. */
    CHECK(support_env_set("POSENC_CPU_VARIANT", "neon"));
    bool failing = cpu_fails();
    if (!failing) {
        CHECK(support_env_set("POSENC_CPU_VARIANT", "avx2"));
        failing = cpu_fails();
    }
    if (!failing) {
        printf("  this machine runs both neon and avx2: nothing to fall back from\n");
        CHECK(support_env_unset("POSENC_CPU_VARIANT"));
        return;
    }
    EXPECT_LISTED(true, false, false);

    posenc_context_desc desc = {.backend = POSENC_BACKEND_CPU,
                                .flags = POSENC_CONTEXT_IGNORE_ENV |
                                         POSENC_CONTEXT_ALLOW_SOFTWARE};
    posenc_device_info info;
    posenc_status status;
    bool made = context_device(&desc, &info, &status);
    EXPECT_LISTED(true, true, true);
    /* The fallbacks are AUTO's order without the CPU path: a device to fall back to exists
     * exactly when AUTO (with the same flag) puts another device first. */
    posenc_context_desc automatic = {.flags = desc.flags};
    uint32_t index = 0;
    posenc_device_info first;
    CHECK_OK(posenc_device_choose(&automatic, &index, NULL));
    CHECK_OK(posenc_device_get(index, &first));
    bool gpus = !first.native_cpu;
    printf("  CPU context with fallback: %s%s%s\n", posenc_status_name(status),
           made ? " on " : "", made ? info.name : "");
    CHECK(made == gpus);
    if (made)
        CHECK(info.backend != POSENC_BACKEND_CPU);
    CHECK(support_env_unset("POSENC_CPU_VARIANT"));
}

int main(int argc, char **argv)
{
    const char *part = argc > 1 ? argv[1] : "one-backend";
    if (strcmp(part, "one-backend") == 0)
        test_one_backend();
    else if (strcmp(part, "threads") == 0)
        test_threads();
    else if (strcmp(part, "fallback") == 0)
        test_fallback();
    else {
        fprintf(stderr, "unknown part '%s' (one-backend, threads, fallback)\n", part);
        return EXIT_FAILURE;
    }
    return test_finish("test_backend_loading");
}
