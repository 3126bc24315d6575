/* SPDX-License-Identifier: MIT */
/* Devices and contexts: enumeration, backend status, device selection (descriptor, selector
 * strings, POSENC_DEVICE), posenc_device_choose against posenc_context_create, the log callback,
 * silence without one, and independent contexts on concurrent threads. */
#include "test_common.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TWO_PI 6.283185307179586476925287

static uint32_t device_count;
static posenc_device_info devices[64];
static uint32_t native_cpu_index = UINT32_MAX;

static int same_device(const posenc_device_info *a, const posenc_device_info *b)
{
    return a->backend == b->backend && a->backend_index == b->backend_index &&
           a->type == b->type && a->native_cpu == b->native_cpu && strcmp(a->name, b->name) == 0;
}

static int contains_ignoring_case(const char *haystack, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *h = haystack; *h; h++) {
        size_t i = 0;
        while (i < n && h[i] &&
               tolower((unsigned char)h[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return n == 0;
}

static int backend_rank(posenc_backend backend)
{
    switch (backend) {
    case POSENC_BACKEND_VULKAN: return 0;
    case POSENC_BACKEND_OPENCL: return 1;
    case POSENC_BACKEND_CPU: return 2;
    default: return 99;
    }
}

/* Creates a context for `desc` and returns its device in `info`. */
static posenc_status create_and_describe(const posenc_context_desc *desc, posenc_device_info *info)
{
    posenc_context *ctx = NULL;
    posenc_status status = posenc_context_create(desc, &ctx);
    if (status != POSENC_OK)
        return status;
    CHECK(ctx != NULL);
    CHECK_OK(posenc_context_device(ctx, info));
    posenc_context_destroy(ctx);
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* The registry is built on first use; several threads may make that first use at once. */

typedef struct enumeration_result {
    posenc_status status;
    uint32_t count;
    posenc_device_info info[8];
} enumeration_result;

static void enumerate_thread(void *arg)
{
    enumeration_result *r = arg;
    r->status = posenc_device_count(&r->count);
    for (uint32_t i = 0; r->status == POSENC_OK && i < r->count && i < 8; i++)
        if (posenc_device_get(i, &r->info[i]) != POSENC_OK)
            r->status = POSENC_INTERNAL;
}

static void test_first_use_from_threads(void)
{
    enumeration_result results[4];
    posenc__thread threads[4];
    memset(results, 0, sizeof results);
    for (int i = 0; i < 4; i++)
        CHECK(posenc__thread_start(&threads[i], enumerate_thread, &results[i]));
    for (int i = 0; i < 4; i++)
        posenc__thread_join(&threads[i]);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(results[i].status);
        CHECK(results[i].count == results[0].count);
        for (uint32_t d = 0; d < results[0].count && d < 8; d++)
            CHECK(memcmp(&results[i].info[d], &results[0].info[d], sizeof results[0].info[d]) == 0);
    }
}

/* ------------------------------------------------------------------------------------------ */

static void test_enumeration(void)
{
    CHECK_OK(posenc_device_count(&device_count));
    CHECK(device_count >= 1);
    uint32_t again = 0;
    CHECK_OK(posenc_device_count(&again));
    CHECK(again == device_count);
    if (device_count > sizeof devices / sizeof devices[0])
        device_count = sizeof devices / sizeof devices[0];

    uint32_t natives = 0;
    uint32_t next_index[4] = {0, 0, 0, 0};
    int previous_rank = -1;
    for (uint32_t i = 0; i < device_count; i++) {
        posenc_device_info *info = &devices[i];
        memset(info, 0x5e, sizeof *info);
        CHECK_OK(posenc_device_get(i, info));
        posenc_device_info twice;
        CHECK_OK(posenc_device_get(i, &twice));
        CHECK(memcmp(info, &twice, sizeof twice) == 0);

        CHECK(memchr(info->name, '\0', sizeof info->name) != NULL);
        CHECK(memchr(info->vendor, '\0', sizeof info->vendor) != NULL);
        CHECK(memchr(info->driver, '\0', sizeof info->driver) != NULL);
        CHECK(info->name[0] != '\0');
        CHECK(info->backend == POSENC_BACKEND_CPU || info->backend == POSENC_BACKEND_VULKAN ||
              info->backend == POSENC_BACKEND_OPENCL);
        CHECK((int)info->type >= POSENC_DEVICE_DISCRETE_GPU && info->type <= POSENC_DEVICE_OTHER);
        CHECK(info->max_workgroup_size >= 1);
        CHECK(info->max_buffer_bytes > 0);
        CHECK(info->max_binding_bytes > 0);

        /* Stable order: Vulkan, OpenCL, CPU; indices within a backend count up from 0. */
        int rank = backend_rank(info->backend);
        CHECK(rank >= previous_rank);
        previous_rank = rank;
        if (info->backend >= POSENC_BACKEND_CPU && info->backend <= POSENC_BACKEND_OPENCL) {
            CHECK(info->backend_index == next_index[info->backend]);
            next_index[info->backend] = info->backend_index + 1;
        }

        if (info->native_cpu) {
            natives++;
            native_cpu_index = i;
            CHECK(info->backend == POSENC_BACKEND_CPU);
            CHECK(info->type == POSENC_DEVICE_CPU);
            CHECK(info->memory_bytes > 0);
            CHECK(info->compute_units >= 1);
            CHECK(info->unified_memory);
            CHECK(info->max_workgroup_size == 1);
        }
        printf("  device %u: %s:%u %s (%s; %s; %s)\n", i, posenc_backend_name(info->backend),
               info->backend_index, info->name, posenc_device_type_name(info->type), info->vendor,
               info->driver);
    }
    CHECK(natives == 1);

    /* Out of range: a failure with a message, and the caller's struct untouched. */
    const uint32_t bad_index[] = {device_count, device_count + 1, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
        posenc_device_info info, before;
        memset(&info, 0x5e, sizeof info);
        before = info;
        posenc_status status = posenc_device_get(bad_index[i], &info);
        CHECK(status == POSENC_INVALID_ARGUMENT || status == POSENC_DEVICE_NOT_FOUND);
        CHECK_MESSAGE(posenc_thread_last_error(), "index");
        CHECK(memcmp(&info, &before, sizeof info) == 0);
    }
}

static void test_backend_status(void)
{
    const posenc_backend backends[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_VULKAN,
                                       POSENC_BACKEND_OPENCL};
    for (size_t b = 0; b < 3; b++) {
        const char *reason = NULL;
        posenc_status status = posenc_backend_status(backends[b], &reason);
        uint32_t listed = 0;
        for (uint32_t i = 0; i < device_count; i++)
            listed += devices[i].backend == backends[b];
        printf("  backend %-7s %s%s%s, %u devices\n", posenc_backend_name(backends[b]),
               posenc_status_name(status), reason ? ": " : "", reason ? reason : "", listed);
        if (backends[b] == POSENC_BACKEND_CPU) {
            CHECK_OK(status);
            CHECK(listed >= 1);
            continue;
        }
        CHECK(status == POSENC_OK || status == POSENC_BACKEND_UNAVAILABLE);
        if (status != POSENC_OK) {
            CHECK(reason != NULL && reason[0] != '\0');
            CHECK(listed == 0); /* a backend whose runtime is missing lists no devices */

            /* Asking for it by backend or by selector says so. */
            posenc_context *ctx = NULL;
            posenc_context_desc desc = {.backend = backends[b],
                                        .flags = POSENC_CONTEXT_IGNORE_ENV};
            status = posenc_context_create(&desc, &ctx);
            CHECK(status == POSENC_BACKEND_UNAVAILABLE || status == POSENC_DEVICE_NOT_FOUND);
            CHECK(ctx == NULL);
            CHECK(posenc_thread_last_error()[0] != '\0');
            desc = (posenc_context_desc){.device = posenc_backend_name(backends[b]),
                                         .flags = POSENC_CONTEXT_IGNORE_ENV};
            status = posenc_context_create(&desc, &ctx);
            CHECK(status == POSENC_BACKEND_UNAVAILABLE || status == POSENC_DEVICE_NOT_FOUND);
            CHECK(ctx == NULL);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Choosing devices. */

/* posenc_device_choose and posenc_context_create agree on `desc`; returns the status and the
 * chosen device. */
static posenc_status choose_and_create_(const posenc_context_desc *desc, posenc_device_info *chosen,
                                        int line)
{
    uint32_t index = UINT32_MAX;
    const char *reason = NULL;
    posenc_status choose_status = posenc_device_choose(desc, &index, &reason);
    char choose_message[512];
    snprintf(choose_message, sizeof choose_message, "%s", posenc_thread_last_error());
    posenc_device_info created;
    memset(&created, 0, sizeof created);
    posenc_status create_status = create_and_describe(desc, &created);
    if (choose_status != create_status) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_device_choose %s (%s) but posenc_context_create %s (%s)\n",
                __FILE__, line, posenc_status_name(choose_status), choose_message,
                posenc_status_name(create_status), posenc_thread_last_error());
        return create_status;
    }
    if (choose_status != POSENC_OK)
        return choose_status;
    if (!(reason && reason[0])) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_device_choose gave no reason\n", __FILE__, line);
    }
    if (index >= device_count) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_device_choose index %u of %u\n", __FILE__, line, index,
                device_count);
        return POSENC_INTERNAL;
    }
    if (!same_device(&devices[index], &created)) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_device_choose picked %s:%u %s, the context got %s:%u %s\n",
                __FILE__, line, posenc_backend_name(devices[index].backend),
                devices[index].backend_index, devices[index].name,
                posenc_backend_name(created.backend), created.backend_index, created.name);
    }
    if (chosen)
        *chosen = created;
    return POSENC_OK;
}
#define CHOOSE_AND_CREATE(desc, chosen) choose_and_create_((desc), (chosen), __LINE__)

/* `desc` picks exactly device `index` (by both calls). */
static void expect_device_(const posenc_context_desc *desc, uint32_t index, int line)
{
    posenc_device_info chosen;
    posenc_status status = choose_and_create_(desc, &chosen, line);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s:%d: selecting device %u failed: %s: %s\n", __FILE__, line, index,
                posenc_status_name(status), posenc_thread_last_error());
    } else if (!same_device(&chosen, &devices[index])) {
        test_failures++;
        fprintf(stderr, "%s:%d: expected device %u (%s), got %s:%u %s\n", __FILE__, line, index,
                devices[index].name, posenc_backend_name(chosen.backend), chosen.backend_index,
                chosen.name);
    }
}
#define EXPECT_DEVICE(desc, index) expect_device_((desc), (index), __LINE__)

/* `desc` matches nothing: both calls fail with `want` (or `also`), name `field`, and leave
 * their out-parameters alone. */
static void expect_not_found_(const posenc_context_desc *desc, posenc_status want,
                              posenc_status also, const char *field, int line)
{
    posenc_context *const sentinel = (posenc_context *)(uintptr_t)0x5e5e5e50u;
    posenc_context *ctx = sentinel;
    posenc_status status = posenc_context_create(desc, &ctx);
    if (status != want && status != also) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_context_create returned %s, expected %s (%s)\n", __FILE__,
                line, posenc_status_name(status), posenc_status_name(want),
                posenc_thread_last_error());
    }
    if (status == POSENC_OK && ctx != sentinel)
        posenc_context_destroy(ctx);
    else if (ctx != sentinel) {
        test_failures++;
        fprintf(stderr, "%s:%d: failed posenc_context_create wrote its out-parameter\n", __FILE__,
                line);
    }
    test_check_message(posenc_thread_last_error(), field, __FILE__, line);

    uint32_t index = 0x5e5e5e5e;
    const char *reason = (const char *)sentinel;
    status = posenc_device_choose(desc, &index, &reason);
    if (status != want && status != also) {
        test_failures++;
        fprintf(stderr, "%s:%d: posenc_device_choose returned %s, expected %s (%s)\n", __FILE__,
                line, posenc_status_name(status), posenc_status_name(want),
                posenc_thread_last_error());
    }
    if (status != POSENC_OK && index != 0x5e5e5e5e) {
        test_failures++;
        fprintf(stderr, "%s:%d: failed posenc_device_choose wrote *index\n", __FILE__, line);
    }
    test_check_message(posenc_thread_last_error(), field, __FILE__, line);
}
#define EXPECT_NOT_FOUND(desc, field) \
    expect_not_found_((desc), POSENC_DEVICE_NOT_FOUND, POSENC_DEVICE_NOT_FOUND, (field), __LINE__)

/* A substring of the native CPU device's name, with its letters' case flipped. */
static void cpu_name_fragment(char *fragment, size_t size, int flip_case)
{
    const char *name = devices[native_cpu_index].name;
    size_t len = strlen(name);
    size_t start = len / 4, n = len / 2;
    if (n < 3)
        start = 0, n = len;
    if (n >= size)
        n = size - 1;
    memcpy(fragment, name + start, n);
    fragment[n] = '\0';
    for (size_t i = 0; flip_case && i < n; i++) {
        unsigned char c = (unsigned char)fragment[i];
        fragment[i] = (char)(isupper(c) ? tolower(c) : toupper(c));
    }
}

/* AUTO's order of device types, lower first; 3 for the rest. */
static int type_rank(posenc_device_type type)
{
    switch (type) {
    case POSENC_DEVICE_DISCRETE_GPU: return 0;
    case POSENC_DEVICE_INTEGRATED_GPU: return 1;
    case POSENC_DEVICE_VIRTUAL_GPU: return 2;
    default: return 3;
    }
}

static posenc_status backend_available(posenc_backend backend)
{
    return posenc_backend_status(backend, NULL);
}

static void test_selection(void)
{
    if (native_cpu_index == UINT32_MAX)
        return;
    const uint32_t cpu = native_cpu_index;
    const uint32_t quiet = POSENC_CONTEXT_IGNORE_ENV;
    posenc_context_desc d;

    /* By backend. */
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .flags = quiet};
    EXPECT_DEVICE(&d, cpu);
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .device = "0", .flags = quiet};
    EXPECT_DEVICE(&d, cpu);
    const posenc_backend gpu_backends[] = {POSENC_BACKEND_VULKAN, POSENC_BACKEND_OPENCL};
    for (size_t b = 0; b < 2; b++) {
        if (backend_available(gpu_backends[b]) != POSENC_OK)
            continue;
        uint32_t first = UINT32_MAX;
        for (uint32_t i = 0; i < device_count && first == UINT32_MAX; i++)
            if (devices[i].backend == gpu_backends[b])
                first = i;
        d = (posenc_context_desc){.backend = gpu_backends[b], .flags = quiet};
        if (first == UINT32_MAX) {
            EXPECT_NOT_FOUND(&d, "device");
            continue;
        }
        /* Naming the backend is asking for it: software devices qualify. With no device
         * named, it is the backend's best one: the same type order as AUTO. */
        int best = 3;
        for (uint32_t i = 0; i < device_count; i++)
            if (devices[i].backend == gpu_backends[b] && type_rank(devices[i].type) < best)
                best = type_rank(devices[i].type);
        posenc_device_info chosen;
        if (CHOOSE_AND_CREATE(&d, &chosen) == POSENC_OK) {
            CHECK(chosen.backend == gpu_backends[b]);
            CHECK(type_rank(chosen.type) == best);
        } else {
            CHECK(0 && "a listed backend gives a context");
        }
    }

    /* Every device by full selector ("vulkan:1") and by backend + index ("1"). */
    for (uint32_t i = 0; i < device_count; i++) {
        char full[32], index_only[16];
        snprintf(full, sizeof full, "%s:%u", posenc_backend_name(devices[i].backend),
                 devices[i].backend_index);
        snprintf(index_only, sizeof index_only, "%u", devices[i].backend_index);
        d = (posenc_context_desc){.device = full, .flags = quiet};
        EXPECT_DEVICE(&d, i);
        d = (posenc_context_desc){.backend = devices[i].backend, .device = index_only,
                                  .flags = quiet | POSENC_CONTEXT_NO_FALLBACK};
        EXPECT_DEVICE(&d, i);
    }

    d = (posenc_context_desc){.device = "cpu", .flags = quiet};
    EXPECT_DEVICE(&d, cpu);

    /* By name substring, case-insensitive. With backend CPU it can only be the native device;
     * with AUTO it is the first device whose name contains it (a CPU seen through OpenCL may). */
    char fragment[64];
    for (int flip = 0; flip < 2; flip++) {
        cpu_name_fragment(fragment, sizeof fragment, flip);
        d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .device = fragment,
                                  .flags = quiet};
        EXPECT_DEVICE(&d, cpu);
        d = (posenc_context_desc){.device = fragment, .flags = quiet};
        posenc_device_info chosen;
        if (CHOOSE_AND_CREATE(&d, &chosen) == POSENC_OK) {
            CHECK(contains_ignoring_case(chosen.name, fragment));
            uint32_t first = UINT32_MAX;
            for (uint32_t i = 0; i < device_count && first == UINT32_MAX; i++)
                if (contains_ignoring_case(devices[i].name, fragment))
                    first = i;
            CHECK(first < device_count && same_device(&chosen, &devices[first]));
        } else {
            CHECK(0 && "a name substring of the CPU device selects a device");
        }
    }

    /* Selectors that match nothing fail, also when fallback is allowed. */
    const char *missing[] = {"cpu:5", "cpu:1", "nosuchdevice", "opencl:9999"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        for (int no_fallback = 0; no_fallback < 2; no_fallback++) {
            d = (posenc_context_desc){
                .device = missing[i],
                .flags = quiet | (no_fallback ? POSENC_CONTEXT_NO_FALLBACK : 0u)};
            if (strncmp(missing[i], "opencl", 6) == 0 &&
                backend_available(POSENC_BACKEND_OPENCL) != POSENC_OK)
                expect_not_found_(&d, POSENC_DEVICE_NOT_FOUND, POSENC_BACKEND_UNAVAILABLE,
                                  "device", __LINE__);
            else
                EXPECT_NOT_FOUND(&d, "device");
        }
    }
    d = (posenc_context_desc){.device = "vulkan:7", .flags = quiet};
    if (backend_available(POSENC_BACKEND_VULKAN) == POSENC_OK)
        EXPECT_NOT_FOUND(&d, "device");
    else
        expect_not_found_(&d, POSENC_DEVICE_NOT_FOUND, POSENC_BACKEND_UNAVAILABLE, "device",
                          __LINE__);
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .device = "5", .flags = quiet};
    EXPECT_NOT_FOUND(&d, "device");
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .device = "nosuchdevice",
                              .flags = quiet};
    EXPECT_NOT_FOUND(&d, "device");
    d = (posenc_context_desc){.device = "cpu:x", .flags = quiet};
    expect_not_found_(&d, POSENC_DEVICE_NOT_FOUND, POSENC_INVALID_ARGUMENT, "device", __LINE__);
    /* A selector naming another backend than the descriptor's contradicts it. */
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU, .device = "vulkan:0",
                              .flags = quiet};
    expect_not_found_(&d, POSENC_INVALID_ARGUMENT, POSENC_DEVICE_NOT_FOUND, "device", __LINE__);

    /* Whatever posenc_context_create refuses, posenc_device_choose refuses too. */
    static const int dummy = 0;
    d = (posenc_context_desc){.flags = quiet};
    d.backend = POSENC_BACKEND_CPU;
    d.vulkan.device = &dummy; /* handles of another backend than the one asked for */
    CHECK(CHOOSE_AND_CREATE(&d, NULL) == POSENC_INVALID_ARGUMENT);
    d = (posenc_context_desc){.backend = (posenc_backend)99, .flags = quiet};
    CHECK(CHOOSE_AND_CREATE(&d, NULL) == POSENC_INVALID_ARGUMENT);
}

/* AUTO prefers a discrete GPU, an integrated GPU, a virtual GPU, then the native CPU device;
 * software devices only when allowed. */
static void test_auto_preference(void)
{
    const posenc_device_type order[] = {POSENC_DEVICE_DISCRETE_GPU,
                                        POSENC_DEVICE_INTEGRATED_GPU,
                                        POSENC_DEVICE_VIRTUAL_GPU};
    int best = -1;
    for (int t = 0; t < 3 && best < 0; t++)
        for (uint32_t i = 0; i < device_count; i++)
            if (devices[i].type == order[t])
                best = t;

    posenc_context_desc d = {.flags = POSENC_CONTEXT_IGNORE_ENV};
    posenc_device_info chosen;
    if (CHOOSE_AND_CREATE(&d, &chosen) == POSENC_OK) {
        printf("  AUTO picks %s:%u %s\n", posenc_backend_name(chosen.backend),
               chosen.backend_index, chosen.name);
        if (best >= 0)
            CHECK(chosen.type == order[best]);
        else
            CHECK(chosen.native_cpu);
        CHECK(chosen.type != POSENC_DEVICE_SOFTWARE);
    } else {
        CHECK(0 && "AUTO always finds a device");
    }
    CHECK(CHOOSE_AND_CREATE(NULL, NULL) == POSENC_OK); /* POSENC_DEVICE is empty: unset */

    d.flags |= POSENC_CONTEXT_ALLOW_SOFTWARE;
    if (CHOOSE_AND_CREATE(&d, &chosen) == POSENC_OK) {
        printf("  AUTO with software devices picks %s:%u %s\n",
               posenc_backend_name(chosen.backend), chosen.backend_index, chosen.name);
        int software = 0;
        for (uint32_t i = 0; i < device_count; i++)
            software |= devices[i].type == POSENC_DEVICE_SOFTWARE;
        if (best >= 0)
            CHECK(chosen.type == order[best]);
        else if (software) /* allowed, and better than the CPU path */
            CHECK(chosen.type == POSENC_DEVICE_SOFTWARE || chosen.type == POSENC_DEVICE_OTHER);
    } else {
        CHECK(0 && "AUTO with ALLOW_SOFTWARE finds a device");
    }
    d.flags |= POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_VALIDATION;
    CHECK(CHOOSE_AND_CREATE(&d, NULL) == POSENC_OK);
}

/* POSENC_DEVICE overrides AUTO (backend AUTO and no device), unless IGNORE_ENV. */
static void test_environment(void)
{
    if (native_cpu_index == UINT32_MAX)
        return;
    const uint32_t cpu = native_cpu_index;
    const char *previous = posenc__env_get("POSENC_DEVICE");
    char *saved = previous ? posenc__strdup(previous) : NULL;

    support_env_unset("POSENC_DEVICE");
    posenc_context_desc plain = {0};
    posenc_device_info unset_pick;
    CHECK(CHOOSE_AND_CREATE(&plain, &unset_pick) == POSENC_OK);

    support_env_set("POSENC_DEVICE", ""); /* empty means unset */
    posenc_device_info empty_pick;
    if (CHOOSE_AND_CREATE(&plain, &empty_pick) == POSENC_OK)
        CHECK(same_device(&empty_pick, &unset_pick));
    else
        CHECK(0 && "an empty POSENC_DEVICE is ignored");

    support_env_set("POSENC_DEVICE", "cpu");
    EXPECT_DEVICE(&plain, cpu);
    EXPECT_DEVICE(NULL, cpu);
    support_env_set("POSENC_DEVICE", "cpu:0");
    EXPECT_DEVICE(&plain, cpu);
    char fragment[64];
    cpu_name_fragment(fragment, sizeof fragment, 1);
    support_env_set("POSENC_DEVICE", fragment);
    posenc_device_info chosen;
    if (CHOOSE_AND_CREATE(&plain, &chosen) == POSENC_OK)
        CHECK(contains_ignoring_case(chosen.name, fragment));
    else
        CHECK(0 && "POSENC_DEVICE with a name substring selects a device");
    for (uint32_t i = 0; i < device_count; i++) {
        char full[32];
        snprintf(full, sizeof full, "%s:%u", posenc_backend_name(devices[i].backend),
                 devices[i].backend_index);
        support_env_set("POSENC_DEVICE", full);
        EXPECT_DEVICE(&plain, i);
    }

    /* A variable that matches nothing is an error, not a silent fallback, and says where the
     * selector came from. */
    support_env_set("POSENC_DEVICE", "nosuchdevice");
    EXPECT_NOT_FOUND(&plain, "POSENC_DEVICE");
    EXPECT_NOT_FOUND(NULL, "POSENC_DEVICE");
    support_env_set("POSENC_DEVICE", "cpu:5");
    EXPECT_NOT_FOUND(&plain, "POSENC_DEVICE");
    support_env_set("POSENC_DEVICE", "vulkan:7");
    expect_not_found_(&plain, POSENC_DEVICE_NOT_FOUND,
                      backend_available(POSENC_BACKEND_VULKAN) == POSENC_OK
                          ? POSENC_DEVICE_NOT_FOUND
                          : POSENC_BACKEND_UNAVAILABLE,
                      "POSENC_DEVICE", __LINE__);

    /* ...but it is ignored with IGNORE_ENV, an explicit backend or an explicit device. */
    support_env_set("POSENC_DEVICE", "nosuchdevice");
    posenc_context_desc d = {.flags = POSENC_CONTEXT_IGNORE_ENV};
    if (CHOOSE_AND_CREATE(&d, &chosen) == POSENC_OK)
        CHECK(same_device(&chosen, &unset_pick));
    else
        CHECK(0 && "IGNORE_ENV ignores POSENC_DEVICE");
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU};
    EXPECT_DEVICE(&d, cpu);
    d = (posenc_context_desc){.device = "cpu"};
    EXPECT_DEVICE(&d, cpu);

    if (saved) {
        support_env_set("POSENC_DEVICE", saved);
        free(saved);
    } else {
        support_env_unset("POSENC_DEVICE");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Logging. */

typedef struct log_record {
    int calls;
    int bad;
    uint64_t thread;
} log_record;

static void record_log(posenc_log_level level, const char *message, void *user_data)
{
    log_record *r = user_data;
    r->calls++;
    if ((int)level < POSENC_LOG_DEBUG || level > POSENC_LOG_ERROR)
        r->bad++;
    if (!message || !message[0])
        r->bad++;
    if (support_thread_id() != r->thread)
        r->bad++;
}

static void test_log(void)
{
    /* Context creation on every device tells the log something (at least at DEBUG/INFO). */
    for (uint32_t i = 0; i < device_count; i++) {
        log_record record = {.thread = support_thread_id()};
        char full[32];
        snprintf(full, sizeof full, "%s:%u", posenc_backend_name(devices[i].backend),
                 devices[i].backend_index);
        posenc_context_desc d = {.device = full,
                                 .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_NO_FALLBACK,
                                 .log = record_log,
                                 .log_user_data = &record};
        posenc_context *ctx = NULL;
        CHECK_OK(posenc_context_create(&d, &ctx));
        CHECK(record.calls > 0);
        CHECK(record.bad == 0);

        /* Work on another context without a log never reaches this one's callback. */
        int calls = record.calls;
        posenc_context *silent = NULL;
        d.log = NULL;
        d.log_user_data = NULL;
        CHECK_OK(posenc_context_create(&d, &silent));
        if (silent) {
            float q[2 * 8] = {0};
            posenc_rope_desc rope = {0};
            rope.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 2, (const int64_t[]){2, 8});
            CHECK_OK(posenc_rope(silent, &rope));
            rope.rotary_dim = 3;
            CHECK_STATUS(posenc_rope(silent, &rope), POSENC_INVALID_SHAPE);
            posenc_context_destroy(silent);
        }
        CHECK(record.calls == calls);
        posenc_context_destroy(ctx);
        CHECK(record.bad == 0);
    }
}

/* Without a log callback the library prints nothing, even on errors. */
static void test_silence(void)
{
    if (native_cpu_index == UINT32_MAX)
        return;
    FILE *capture = tmpfile();
    CHECK(capture != NULL);
    if (!capture)
        return;
    int saved_out = support_stream_redirect(stdout, capture);
    int saved_err = support_stream_redirect(stderr, capture);
    CHECK(saved_out >= 0 && saved_err >= 0);

    posenc_status statuses[6];
    posenc_context *ctx = NULL;
    posenc_context_desc d = {.device = "nosuchdevice", .flags = POSENC_CONTEXT_IGNORE_ENV};
    statuses[0] = posenc_context_create(&d, &ctx);
    d = (posenc_context_desc){.backend = POSENC_BACKEND_CPU,
                              .flags = POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_VALIDATION};
    statuses[1] = posenc_context_create(&d, &ctx);
    float q[4 * 8] = {0};
    posenc_rope_desc rope = {0};
    rope.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 2, (const int64_t[]){4, 8});
    rope.theta = -1;
    statuses[2] = statuses[1] == POSENC_OK ? posenc_rope(ctx, &rope) : POSENC_INTERNAL;
    rope.theta = 0;
    statuses[3] = statuses[1] == POSENC_OK ? posenc_rope(ctx, &rope) : POSENC_INTERNAL;
    posenc_buffer *buffer = NULL;
    posenc_buffer_desc bd = {.size = 16};
    statuses[4] = statuses[1] == POSENC_OK ? posenc_buffer_create(ctx, &bd, &buffer)
                                           : POSENC_INTERNAL;
    statuses[5] = buffer ? posenc_buffer_download(buffer, 8, q, 16) : POSENC_INTERNAL;
    posenc_context_destroy(ctx);

    support_stream_restore(stdout, saved_out);
    support_stream_restore(stderr, saved_err);

    CHECK_STATUS(statuses[0], POSENC_DEVICE_NOT_FOUND);
    CHECK_OK(statuses[1]);
    CHECK_STATUS(statuses[2], POSENC_INVALID_ARGUMENT);
    CHECK_OK(statuses[3]);
    CHECK_OK(statuses[4]);
    CHECK_STATUS(statuses[5], POSENC_OUT_OF_BOUNDS);
    long printed = ftell(capture);
    fseek(capture, 0, SEEK_END);
    printed = ftell(capture);
    if (printed != 0) {
        char text[256] = {0};
        fseek(capture, 0, SEEK_SET);
        size_t n = fread(text, 1, sizeof text - 1, capture);
        text[n] = '\0';
        fprintf(stderr, "library printed %ld bytes: %s\n", printed, text);
    }
    CHECK(printed == 0);
    fclose(capture);
}

/* ------------------------------------------------------------------------------------------ */
/* Contexts from several threads at once. */

enum { T_TOKENS = 8, T_HEADS = 4, T_HEAD_DIM = 32, T_ELEMS = T_TOKENS * T_HEADS * T_HEAD_DIM };

typedef struct worker {
    posenc_context *ctx;
    int id;
    int iterations;
    double theta;
    int failures;
    char first_failure[256];
} worker;

static void worker_fail(worker *w, const char *what)
{
    if (!w->failures++)
        snprintf(w->first_failure, sizeof w->first_failure, "%s", what);
}

static void worker_main(void *arg)
{
    worker *w = arg;
    test_rng rng = {(uint64_t)w->id * 7919 + 17};
    static POSENC__THREAD_LOCAL float q[T_ELEMS], q_in[T_ELEMS];
    for (int it = 0; it < w->iterations; it++) {
        for (int i = 0; i < T_ELEMS; i++)
            q[i] = q_in[i] = (float)test_rng_uniform(&rng, -1.0, 1.0);
        int32_t offset = (int32_t)(test_rng_u32(&rng) % 100000);
        posenc_rope_desc d = {0};
        d.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3,
                                    (const int64_t[]){T_TOKENS, T_HEADS, T_HEAD_DIM});
        d.theta = w->theta;
        d.position_offset = offset;
        if (posenc_rope(w->ctx, &d) != POSENC_OK) {
            worker_fail(w, posenc_context_last_error(w->ctx));
            continue;
        }
        /* NeoX reference; same tolerance argument as in test_errors.c. */
        for (int t = 0; t < T_TOKENS; t++) {
            for (int h = 0; h < T_HEADS; h++) {
                const float *x = q_in + (t * T_HEADS + h) * T_HEAD_DIM;
                const float *y = q + (t * T_HEADS + h) * T_HEAD_DIM;
                for (int j = 0; j < T_HEAD_DIM / 2; j++) {
                    double angle = fmod((double)(offset + t) *
                                            pow(w->theta, -2.0 * j / T_HEAD_DIM),
                                        TWO_PI);
                    double a = x[j], b = x[j + T_HEAD_DIM / 2];
                    double ya = a * cos(angle) - b * sin(angle);
                    double yb = a * sin(angle) + b * cos(angle);
                    if (!(fabs(y[j] - ya) <= 1e-5 && fabs(y[j + T_HEAD_DIM / 2] - yb) <= 1e-5)) {
                        worker_fail(w, "wrong rope result");
                        t = T_TOKENS, h = T_HEADS;
                        break;
                    }
                }
            }
        }
        /* Each thread's errors stay its own: a context's message, and the thread's. */
        if (it % 8 == 0) {
            d.rotary_dim = w->id == 0 ? 3 : 2 * T_HEAD_DIM;
            if (posenc_rope(w->ctx, &d) != POSENC_INVALID_SHAPE ||
                !strstr(posenc_context_last_error(w->ctx), "rotary_dim"))
                worker_fail(w, "rotary_dim error not reported");
            char selector[64];
            snprintf(selector, sizeof selector, "nosuchdevice-%d-%d", w->id, it);
            posenc_context_desc cd = {.device = selector, .flags = POSENC_CONTEXT_IGNORE_ENV};
            posenc_context *none = NULL;
            if (posenc_context_create(&cd, &none) != POSENC_DEVICE_NOT_FOUND || none)
                worker_fail(w, "bad selector not reported");
            if (!strstr(posenc_thread_last_error(), selector))
                worker_fail(w, posenc_thread_last_error());
            uint32_t count = 0;
            if (posenc_device_count(&count) != POSENC_OK || count != device_count)
                worker_fail(w, "device count changed");
        }
    }
}

static uint32_t device_index_of(const posenc_device_info *info)
{
    for (uint32_t i = 0; i < device_count; i++)
        if (same_device(&devices[i], info))
            return i;
    return UINT32_MAX;
}

static void test_two_threads(posenc_context *ctx, const posenc_device_info *info)
{
    uint32_t index = device_index_of(info);
    CHECK(index < device_count);
    posenc_device_info from_ctx;
    CHECK_OK(posenc_context_device(ctx, &from_ctx));
    CHECK(same_device(&from_ctx, info));
    if (index >= device_count)
        return;
    posenc_context *second = test_context_for_device(index);
    CHECK(second != NULL);
    if (!second)
        return;
    int iterations = info->native_cpu ? 200 : 40;
    worker workers[2] = {
        {.ctx = ctx, .id = 0, .iterations = iterations, .theta = 10000},
        {.ctx = second, .id = 1, .iterations = iterations, .theta = 500000},
    };
    posenc__thread threads[2];
    for (int i = 0; i < 2; i++)
        CHECK(posenc__thread_start(&threads[i], worker_main, &workers[i]));
    for (int i = 0; i < 2; i++)
        posenc__thread_join(&threads[i]);
    for (int i = 0; i < 2; i++) {
        if (workers[i].failures) {
            test_failures++;
            fprintf(stderr, "thread %d: %d failures, first: %s\n", i, workers[i].failures,
                    workers[i].first_failure);
        }
    }
    posenc_context_destroy(second);
}

/* Context options that must not change results: CPU worker threads. */
static void test_num_threads(void)
{
    enum { N = 64 * 4 * 64 };
    static float input[N], first[N], q[N];
    test_rng rng = {42};
    for (int i = 0; i < N; i++)
        input[i] = (float)test_rng_uniform(&rng, -2.0, 2.0);
    const uint32_t thread_counts[] = {1, 2, 3, 64, UINT32_MAX};
    for (size_t c = 0; c < sizeof thread_counts / sizeof thread_counts[0]; c++) {
        posenc_context_desc d = {.backend = POSENC_BACKEND_CPU,
                                 .flags = POSENC_CONTEXT_IGNORE_ENV,
                                 .num_threads = thread_counts[c]};
        posenc_context *ctx = NULL;
        posenc_status status = posenc_context_create(&d, &ctx);
        /* More threads than anyone has: capped to something sensible, or refused. */
        if (thread_counts[c] == UINT32_MAX && status == POSENC_INVALID_ARGUMENT) {
            CHECK_MESSAGE(posenc_thread_last_error(), "num_threads");
            continue;
        }
        CHECK_OK(status);
        if (!ctx)
            continue;
        memcpy(q, input, sizeof q);
        posenc_rope_desc rope = {0};
        rope.q = posenc_tensor_of_host(q, POSENC_DTYPE_F32, 3, (const int64_t[]){64, 4, 64});
        rope.position_offset = 1000;
        CHECK_OK(posenc_rope(ctx, &rope));
        if (c == 0)
            memcpy(first, q, sizeof q);
        else
            CHECK(memcmp(first, q, sizeof q) == 0);
        posenc_context_destroy(ctx);
    }
}

int main(void)
{
    test_first_use_from_threads();
    test_enumeration();
    test_backend_status();
    test_selection();
    test_auto_preference();
    test_environment();
    test_log();
    test_silence();
    test_num_threads();
    posenc_context_destroy(NULL);
    test_for_each_device(test_two_threads);
    return test_finish("test_devices");
}
