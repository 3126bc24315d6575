/* SPDX-License-Identifier: MIT */
/* Host allocation failures: the Nth allocation of the library fails, for N = 1, 2, 3, ... until a
 * call makes no more, while devices are listed, contexts are created, posenc_prepare builds
 * ahead and buffers, RoPE and sinusoidal encodings run, on every device present. Each failed
 * call must give a clear status (OUT_OF_MEMORY) and a message, touch none of the caller's
 * outputs, leak nothing (the sanitize preset's LeakSanitizer), and the next call must work and
 * give the result of a run without failures, bit for bit.
 *
 * Failures are injected with the GNU linker's --wrap (tests/CMakeLists.txt, Linux only): the
 * library is linked statically, so every allocation function it calls itself goes through the
 * wrappers below (strdup and aligned_alloc too, which it does not call today). Allocations
 * inside the Vulkan loader, lavapipe, the OpenCL ICD loader and PoCL do not (those are shared
 * libraries), nor those of the C library itself (fopen, dlopen, pthread_create): the test
 * covers posenc's handling of its own allocations. The CPU context's worker threads are made
 * with allocations of posenc's (covered) and pthread_create, which is not an allocation and is
 * not failed here.
 *
 * State kept between calls hides allocations from a later call (a frequency table, kernels,
 * staging memory), so each operation is swept twice: as the first call of a fresh context, one
 * context per N, and as a later call of one context. A call may also absorb a failure and still
 * succeed (an optional cache left unwritten); its results must then be right all the same. */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, clock_gettime */

#include "test_common.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Injection. Counted from arm() on, in every thread (the CPU backend's workers, drivers'
 * callbacks into posenc); only the Nth allocation fails, the ones after it succeed. */

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *memory, size_t size);
int __real_posix_memalign(void **memory, size_t alignment, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *memory, size_t size);
int __wrap_posix_memalign(void **memory, size_t alignment, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
char *__wrap_strdup(const char *s);

static atomic_long fail_at;  /* 0: no injection */
static atomic_long seen;     /* allocations since arm() */
static atomic_bool injected; /* the Nth allocation was made to fail */

static bool fail_now(void)
{
    long at = atomic_load(&fail_at);
    if (at == 0 || atomic_fetch_add(&seen, 1) + 1 != at)
        return false;
    atomic_store(&injected, true);
    return true;
}

void *__wrap_malloc(size_t size) { return fail_now() ? NULL : __real_malloc(size); }
void *__wrap_calloc(size_t count, size_t size)
{
    return fail_now() ? NULL : __real_calloc(count, size);
}
void *__wrap_realloc(void *memory, size_t size)
{
    return fail_now() ? NULL : __real_realloc(memory, size);
}
int __wrap_posix_memalign(void **memory, size_t alignment, size_t size)
{
    return fail_now() ? ENOMEM : __real_posix_memalign(memory, alignment, size);
}
void *__wrap_aligned_alloc(size_t alignment, size_t size)
{
    return fail_now() ? NULL : __real_aligned_alloc(alignment, size);
}
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }

static void arm(long n)
{
    atomic_store(&seen, 0);
    atomic_store(&injected, false);
    atomic_store(&fail_at, n);
}

/* Ends the injection; true if a failure was injected since arm(). */
static bool disarm(void)
{
    atomic_store(&fail_at, 0);
    return atomic_load(&injected);
}

/* Calls that succeeded although one of their allocations failed (an optional cache not written,
 * a fallback taken): allowed when their results are right, and counted in the output. */
static long absorbed;

/* A sweep that never ends is a library that allocates without bound. */
#define MAX_SWEEP 100000

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The status of a call whose Nth allocation failed: OUT_OF_MEMORY with a message. */
static void check_failed(const char *what, long n, posenc_status status, const char *message)
{
    if (status != POSENC_OUT_OF_MEMORY) {
        test_failures++;
        fprintf(stderr, "%s, allocation %ld failed: %s (%s), expected POSENC_OUT_OF_MEMORY\n",
                what, n, posenc_status_name(status), message);
    }
    if (!message[0]) {
        test_failures++;
        fprintf(stderr, "%s, allocation %ld failed: %s without a message\n", what, n,
                posenc_status_name(status));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The device list. It is built on first use and kept once complete, so this part runs before
 * anything else lists devices. */

#define MAX_DEVICES 16
static const posenc_backend backend_kinds[] = {POSENC_BACKEND_CPU, POSENC_BACKEND_VULKAN,
                                               POSENC_BACKEND_OPENCL};
#define BACKEND_KINDS (sizeof backend_kinds / sizeof backend_kinds[0])

typedef struct listing {
    posenc_status status;
    uint32_t count;
    posenc_device_info devices[MAX_DEVICES];
    posenc_status backend_status[BACKEND_KINDS];
    char backend_reason[BACKEND_KINDS][256];
} listing;

static void read_listing(listing *out)
{
    memset(out, 0, sizeof *out);
    out->status = posenc_device_count(&out->count);
    for (uint32_t i = 0; out->status == POSENC_OK && i < out->count && i < MAX_DEVICES; i++)
        out->status = posenc_device_get(i, &out->devices[i]);
    for (size_t b = 0; b < BACKEND_KINDS; b++) {
        const char *reason = "";
        out->backend_status[b] = posenc_backend_status(backend_kinds[b], &reason);
        snprintf(out->backend_reason[b], sizeof out->backend_reason[b], "%s", reason);
    }
}

/* The list as a process sees it without failures: read in a child process, so that this one's
 * first listing is still to come. */
static bool reference_listing(listing *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return false;
    fflush(NULL);
    pid_t child = fork();
    if (child < 0)
        return false;
    if (child == 0) {
        close(fds[0]);
        read_listing(out);
        ssize_t written = write(fds[1], out, sizeof *out);
        close(fds[1]);
        _exit(written == (ssize_t)sizeof *out ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t n = read(fds[0], (char *)out + got, sizeof *out - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fds[0]);
    int wstatus = 0;
    waitpid(child, &wstatus, 0);
    return got == sizeof *out && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

/* One call of each public entry that lists devices, in turn (posenc_backend_status asks about
 * `backend`); true when a failure was injected. */
static bool listing_call(unsigned entry, long n, posenc_backend backend)
{
    char what[64];
    const char *names[] = {"posenc_device_count", "posenc_device_get", "posenc_backend_status",
                           "posenc_device_choose", "posenc_context_create"};
    snprintf(what, sizeof what, "%s (first listing)", names[entry]);
    posenc_status status = POSENC_OK;
    const char *message = "";
    bool failed = false;
    switch (entry) {
    case 0: {
        uint32_t count = 12345;
        arm(n);
        status = posenc_device_count(&count);
        failed = disarm();
        message = posenc_thread_last_error();
        if (failed && status != POSENC_OK)
            CHECK(count == 12345);
        break;
    }
    case 1: {
        posenc_device_info info, untouched;
        memset(&info, 0xa5, sizeof info);
        memcpy(&untouched, &info, sizeof info);
        arm(n);
        status = posenc_device_get(0, &info);
        failed = disarm();
        message = posenc_thread_last_error();
        if (failed && status != POSENC_OK)
            CHECK(memcmp(&info, &untouched, sizeof info) == 0);
        break;
    }
    case 2: {
        const char *reason = NULL;
        arm(n);
        status = posenc_backend_status(backend, &reason);
        failed = disarm();
        /* The reason is this entry's message; posenc_thread_last_error has it too. */
        message = reason ? reason : "";
        if (failed && status != POSENC_OK)
            CHECK(posenc_thread_last_error()[0] != '\0');
        break;
    }
    case 3: {
        uint32_t index = 12345;
        const char *reason = "untouched";
        posenc_context_desc desc = {.flags = POSENC_CONTEXT_IGNORE_ENV};
        arm(n);
        status = posenc_device_choose(&desc, &index, &reason);
        failed = disarm();
        message = posenc_thread_last_error();
        if (failed && status != POSENC_OK)
            CHECK(index == 12345 && strcmp(reason, "untouched") == 0);
        break;
    }
    default: {
        posenc_context *untouched = (posenc_context *)&status, *context = untouched;
        posenc_context_desc desc = {.flags = POSENC_CONTEXT_IGNORE_ENV, .num_threads = 3};
        arm(n);
        status = posenc_context_create(&desc, &context);
        failed = disarm();
        message = posenc_thread_last_error();
        if (status == POSENC_OK)
            posenc_context_destroy(context);
        else
            CHECK(context == untouched);
        break;
    }
    }
    if (!failed) {
        if (status != POSENC_OK) {
            test_failures++;
            fprintf(stderr, "%s without failures: %s: %s\n", what, posenc_status_name(status),
                    message);
        }
        return false;
    }
    if (status != POSENC_OK)
        check_failed(what, n, status, message);
    else if (entry < 4) {
        /* Listing has nothing optional to leave out: a device would be described from part of
         * what the driver tells (its extensions, say), or left out. */
        test_failures++;
        fprintf(stderr, "%s: allocation %ld failed, yet the call succeeded\n", what, n);
    } else
        absorbed++;
    return true;
}

/* posenc_backend_status lists one backend alone, and keeps it: swept in a child process of its
 * own for each backend, which starts with nothing listed, then compared with `expected`. */
static void sweep_one_backend(size_t b, const listing *expected)
{
    if (expected->backend_status[b] != POSENC_OK) { /* absent here: no listing to sweep */
        printf("%s devices alone: the backend is unavailable here (%s), nothing to sweep\n",
               posenc_backend_name(backend_kinds[b]), expected->backend_reason[b]);
        return;
    }
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        test_failures++;
        fprintf(stderr, "fork failed\n");
        return;
    }
    if (child == 0) {
        long n = 1;
        while (n < MAX_SWEEP && listing_call(2, n, backend_kinds[b]))
            n++;
        const char *reason = "";
        posenc_status status = posenc_backend_status(backend_kinds[b], &reason);
        if (status != expected->backend_status[b] ||
            strcmp(reason, expected->backend_reason[b]) != 0) {
            test_failures++;
            fprintf(stderr, "backend %s after failed listings: %s (%s), expected %s (%s)\n",
                    posenc_backend_name(backend_kinds[b]), posenc_status_name(status), reason,
                    posenc_status_name(expected->backend_status[b]),
                    expected->backend_reason[b]);
        }
        printf("%s devices alone: %ld allocations failed one by one\n",
               posenc_backend_name(backend_kinds[b]), n - 1);
        fflush(NULL);
        _exit(test_failures ? 1 : 0);
    }
    int wstatus = 0;
    waitpid(child, &wstatus, 0);
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        test_failures++;
        fprintf(stderr, "the sweep of %s devices alone failed\n",
                posenc_backend_name(backend_kinds[b]));
    }
}

static void sweep_listing(void)
{
    listing expected;
    if (!reference_listing(&expected)) {
        test_failures++;
        fprintf(stderr, "the reference listing (in a child process) failed\n");
        return;
    }
    for (size_t b = 0; b < BACKEND_KINDS; b++)
        sweep_one_backend(b, &expected);
    double start = seconds_now();
    long n = 1, absorbed_before = absorbed;
    /* Each N goes to the next entry that lists every backend, so that every entry meets
     * failures; a failed listing is not kept, so each call starts it again and fails its Nth
     * allocation. (posenc_backend_status, which lists one backend and keeps it, is swept
     * above.) */
    static const unsigned every_backend[] = {0, 1, 3, 4};
    while (n < MAX_SWEEP && listing_call(every_backend[n % 4], n, POSENC_BACKEND_CPU))
        n++;
    printf("device listing: %ld allocations failed one by one, %ld absorbed (%.1f s)\n", n - 1,
           absorbed - absorbed_before, seconds_now() - start);
    CHECK(n > 1); /* the wrappers work: listing devices allocates */

    listing now;
    read_listing(&now);
    CHECK_OK(now.status);
    CHECK(now.count == expected.count);
    for (uint32_t i = 0; i < now.count && i < expected.count && i < MAX_DEVICES; i++) {
        if (memcmp(&now.devices[i], &expected.devices[i], sizeof now.devices[i]) != 0) {
            test_failures++;
            fprintf(stderr, "device %u differs after failed listings: %s, expected %s\n", i,
                    now.devices[i].name, expected.devices[i].name);
        }
    }
    for (size_t b = 0; b < BACKEND_KINDS; b++) {
        if (now.backend_status[b] != expected.backend_status[b] ||
            strcmp(now.backend_reason[b], expected.backend_reason[b]) != 0) {
            test_failures++;
            fprintf(stderr, "backend %s after failed listings: %s (%s), expected %s (%s)\n",
                    posenc_backend_name(backend_kinds[b]),
                    posenc_status_name(now.backend_status[b]), now.backend_reason[b],
                    posenc_status_name(expected.backend_status[b]),
                    expected.backend_reason[b]);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Contexts */

static char cache_dir[512];
static char pipeline_cache_path[600];

/* Warnings count as failures (test_count_warnings), except those that follow an injected
 * failure in the same call: "device failed to initialise", say. */
static void log_unless_injected(posenc_log_level level, const char *message, void *user_data)
{
    if (!atomic_load(&fail_at) || !atomic_load(&injected))
        test_count_warnings(level, message, user_data);
}

static posenc_context_desc device_desc(const posenc_device_info *info, char *selector,
                                       size_t size)
{
    snprintf(selector, size, "%u", info->backend_index);
    posenc_context_desc desc = {
        .backend = info->backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
        .num_threads = 3, /* two workers on the CPU path, whatever the machine */
        .log = log_unless_injected,
        .cache_dir = cache_dir,
        .pipeline_cache_path = pipeline_cache_path,
    };
    return desc;
}

static posenc_context *make_context(const posenc_device_info *info)
{
    char selector[16];
    posenc_context_desc desc = device_desc(info, selector, sizeof selector);
    posenc_context *context = NULL;
    posenc_status status = posenc_context_create(&desc, &context);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s: context creation without failures: %s: %s\n", info->name,
                posenc_status_name(status), posenc_thread_last_error());
        return NULL;
    }
    return context;
}

/* Context creation with API validation asked for: a creation that absorbs a failure must not
 * quietly leave validation off (the library says so at INFO level). */
static atomic_bool validation_left_off;

static void log_validation(posenc_log_level level, const char *message, void *user_data)
{
    if (strstr(message, "validation requested but"))
        atomic_store(&validation_left_off, true);
    log_unless_injected(level, message, user_data);
}

static void sweep_context_create(const posenc_device_info *info)
{
    char selector[16];
    posenc_context_desc desc = device_desc(info, selector, sizeof selector);
    desc.flags |= POSENC_CONTEXT_VALIDATION;
    desc.log = log_validation;
    char what[400];
    snprintf(what, sizeof what, "%s: posenc_context_create", info->name);
    double start = seconds_now();

    posenc_context *context = NULL;
    atomic_store(&validation_left_off, false);
    if (posenc_context_create(&desc, &context) != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s without failures: %s\n", what, posenc_thread_last_error());
        return;
    }
    posenc_context_destroy(context);
    bool validation_absent = atomic_load(&validation_left_off); /* the layer is not installed */

    long n = 1, absorbed_before = absorbed;
    for (; n < MAX_SWEEP; n++) {
        posenc_context *untouched = (posenc_context *)&desc;
        context = untouched;
        atomic_store(&validation_left_off, false);
        arm(n);
        posenc_status status = posenc_context_create(&desc, &context);
        bool failed = disarm();
        if (status == POSENC_OK) {
            absorbed += failed;
            if (atomic_load(&validation_left_off) && !validation_absent) {
                test_failures++;
                fprintf(stderr, "%s, allocation %ld failed: validation was left off\n", what,
                        n);
            }
            posenc_context_destroy(context);
        } else {
            CHECK(context == untouched);
            if (failed)
                check_failed(what, n, status, posenc_thread_last_error());
        }
        if (!failed) {
            if (status != POSENC_OK) {
                test_failures++;
                fprintf(stderr, "%s without failures: %s: %s\n", what,
                        posenc_status_name(status), posenc_thread_last_error());
            }
            break;
        }
    }
    printf("  context creation: %ld allocations, %ld absorbed (%.1f s)\n", n - 1,
           absorbed - absorbed_before, seconds_now() - start);
}

/* Destroying returns nothing: a failure there must be absorbed without a leak or a crash. */
static void sweep_context_destroy(const posenc_device_info *info)
{
    double start = seconds_now();
    long n = 1;
    for (; n < MAX_SWEEP; n++) {
        posenc_context *context = make_context(info);
        if (!context)
            return;
        arm(n);
        posenc_context_destroy(context);
        if (!disarm())
            break;
    }
    printf("  context destruction: %ld allocations (%.1f s)\n", n - 1, seconds_now() - start);
}

/* posenc_prepare as the first call of a fresh context, one context per N: a failure is
 * OUT_OF_MEMORY with a message; what it built before the failure stays in the context, freed
 * with it (LeakSanitizer); and a second prepare completes the work, so that the operations
 * then build no kernel. */
static void sweep_prepare(const posenc_device_info *info)
{
    enum { TOKENS = 4, HEADS = 2, DIM = 16, ROWS = 4 };
    char what[400];
    snprintf(what, sizeof what, "%s: posenc_prepare", info->name);
    double start = seconds_now();
    float table[ROWS * DIM];
    const int64_t q_shape[3] = {TOKENS, HEADS, DIM}, table_shape[2] = {ROWS, DIM};
    long n = 1, absorbed_before = absorbed;
    for (; n < MAX_SWEEP; n++) {
        posenc_context *context = make_context(info);
        posenc_buffer *buffer = NULL;
        posenc_buffer_desc buffer_desc = {.size = TOKENS * HEADS * DIM * 4};
        if (!context || posenc_buffer_create(context, &buffer_desc, &buffer) != POSENC_OK) {
            CHECK(!"a context and a buffer without failures");
            posenc_context_destroy(context);
            return;
        }
        posenc_rope_desc rope = {
            .q = posenc_tensor_of_buffer(buffer, POSENC_DTYPE_F32, 3, q_shape)};
        posenc_sinusoidal_desc sinusoidal = {
            .out = posenc_tensor_of_host(table, POSENC_DTYPE_F32, 2, table_shape)};
        posenc_prepare_desc desc = {
            .rope = &rope, .rope_count = 1, .sinusoidal = &sinusoidal, .sinusoidal_count = 1};
        arm(n);
        posenc_status status = posenc_prepare(context, &desc);
        bool failed = disarm();
        if (status == POSENC_OK) {
            absorbed += failed;
        } else if (failed) {
            check_failed(what, n, status, posenc_context_last_error(context));
        } else {
            test_failures++;
            fprintf(stderr, "%s without failures: %s: %s\n", what, posenc_status_name(status),
                    posenc_context_last_error(context));
        }
        CHECK_OK(posenc_prepare(context, &desc));
        posenc_stats before, after;
        CHECK_OK(posenc_context_stats(context, &before));
        CHECK_OK(posenc_rope(context, &rope));
        CHECK_OK(posenc_sinusoidal(context, &sinusoidal));
        CHECK_OK(posenc_context_stats(context, &after));
        CHECK(after.kernels_built == before.kernels_built);
        CHECK(after.kernels_loaded == before.kernels_loaded);
        posenc_buffer_destroy(buffer);
        posenc_context_destroy(context);
        if (!failed)
            break;
    }
    printf("  posenc_prepare: %ld allocations, %ld absorbed (%.1f s)\n", n - 1,
           absorbed - absorbed_before, seconds_now() - start);
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers */

static void sweep_buffer_create(const posenc_device_info *info, test_memory_kind kind)
{
    posenc_context *context = make_context(info);
    if (!context)
        return;
    char what[400];
    snprintf(what, sizeof what, "%s: posenc_buffer_create (%s)", info->name,
             test_memory_kind_name(kind));
    unsigned char data[256], memory[256];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    memset(memory, 0x5a, sizeof memory);
    posenc_buffer_desc desc = {.size = sizeof data, .initial_data = data};
    if (kind == TEST_MEMORY_WRAPPED)
        desc.host_memory = memory;
    long n = 1, absorbed_before = absorbed;
    for (; n < MAX_SWEEP; n++) {
        posenc_buffer *untouched = (posenc_buffer *)&desc, *buffer = untouched;
        memset(memory, 0x5a, sizeof memory);
        arm(n);
        posenc_status status = posenc_buffer_create(context, &desc, &buffer);
        bool failed = disarm();
        if (status == POSENC_OK) {
            absorbed += failed;
            unsigned char back[sizeof data];
            CHECK_OK(posenc_buffer_download(buffer, 0, back, sizeof back));
            CHECK(memcmp(back, data, sizeof data) == 0);
            posenc_buffer_destroy(buffer);
        } else {
            CHECK(buffer == untouched);
            if (failed)
                check_failed(what, n, status, posenc_context_last_error(context));
            if (kind == TEST_MEMORY_WRAPPED) {
                unsigned char fill[sizeof memory];
                memset(fill, 0x5a, sizeof fill);
                CHECK(memcmp(memory, fill, sizeof memory) == 0);
            }
        }
        if (!failed) {
            if (status != POSENC_OK) {
                test_failures++;
                fprintf(stderr, "%s without failures: %s: %s\n", what,
                        posenc_status_name(status), posenc_context_last_error(context));
            }
            break;
        }
    }
    printf("  buffer creation (%s): %ld allocations, %ld absorbed\n",
           test_memory_kind_name(kind), n - 1, absorbed - absorbed_before);
    posenc_context_destroy(context);
}

/* ------------------------------------------------------------------------------------------ */
/* Operations. Each case's tensors: inputs filled with data, outputs with a sentinel byte, so
 * that a failed call shows if it wrote anything. */

enum { BATCH = 1, TOKENS = 3, Q_HEADS = 2, K_HEADS = 1, HEAD_DIM = 8, D_MODEL = 10 };
#define ROWS TOKENS /* the positions serve both */
#define SENTINEL 0xa5

typedef enum op_kind { OP_ROPE, OP_SINUSOIDAL } op_kind;

typedef struct op_case {
    const char *name;
    op_kind kind;
    posenc_dtype dtype;
    bool in_place;          /* RoPE: q and k rotated in place; sinusoidal: x is out */
    bool add;               /* sinusoidal: add to x (else the table) */
    test_memory_kind memory; /* of every tensor, positions included */
    bool dynamic;           /* RoPE: dynamic NTK scaling, which reads the largest position */
    bool submit;            /* posenc_*_submit and an event instead of the synchronous call */
} op_case;

#define F32 POSENC_DTYPE_F32
#define F16 POSENC_DTYPE_F16
#define BF16 POSENC_DTYPE_BF16
static const op_case op_cases[] = {
    {"rope, host, out of place", OP_ROPE, F32, false, false, TEST_MEMORY_HOST, false, false},
    {"rope, host, in place", OP_ROPE, F16, true, false, TEST_MEMORY_HOST, false, false},
    {"rope, buffers, in place", OP_ROPE, F32, true, false, TEST_MEMORY_BUFFER, true, false},
    {"rope, wrapped, out of place", OP_ROPE, BF16, false, false, TEST_MEMORY_WRAPPED, true,
     false},
    {"rope, buffers, submitted", OP_ROPE, F32, false, false, TEST_MEMORY_BUFFER, false, true},
    {"sinusoidal, host, table", OP_SINUSOIDAL, F32, false, false, TEST_MEMORY_HOST, false,
     false},
    {"sinusoidal, host, add in place", OP_SINUSOIDAL, F32, true, true, TEST_MEMORY_HOST, false,
     false},
    {"sinusoidal, buffers, add", OP_SINUSOIDAL, F16, false, true, TEST_MEMORY_BUFFER, false,
     false},
    {"sinusoidal, buffers, submitted", OP_SINUSOIDAL, F32, true, true, TEST_MEMORY_BUFFER,
     false, true},
};
#define OP_CASES (sizeof op_cases / sizeof op_cases[0])

/* The tensors of one case: inputs first, then outputs (none in place), then the positions. */
enum { MAX_TENSORS = 5 };
typedef struct op_run {
    const op_case *c;
    posenc_context *context;
    uint32_t inputs, outputs;
    test_memory memory[MAX_TENSORS];
} op_run;

static uint32_t tensor_count(const op_run *run) { return run->inputs + run->outputs + 1; }
static test_memory *positions_of(op_run *run) { return &run->memory[run->inputs + run->outputs]; }

static size_t element_count(const op_case *c, uint32_t tensor)
{
    if (c->kind == OP_SINUSOIDAL)
        return (size_t)BATCH * ROWS * D_MODEL;
    /* RoPE: q, k, then q_out, k_out */
    uint32_t heads = (tensor % 2 == 0) ? Q_HEADS : K_HEADS;
    return (size_t)BATCH * TOKENS * heads * HEAD_DIM;
}

/* Input bytes: small numbers, exact in every dtype's pattern of bits. */
static void fill_input(const op_case *c, uint32_t tensor, unsigned char *bytes, size_t size)
{
    (void)c;
    size_t element = posenc_dtype_size(c->dtype);
    for (size_t i = 0; i + element <= size; i += element) {
        if (element == 4) {
            float v = (float)((int)(i / element % 17) - 8) * 0.125f + (float)tensor;
            memcpy(bytes + i, &v, 4);
        } else {
            /* f16 and bf16 both: small values from the high byte's range */
            uint16_t v = (uint16_t)(c->dtype == POSENC_DTYPE_F16 ? 0x3800 + (i % 64) * 8
                                                                 : 0x3f00 + (i % 64));
            memcpy(bytes + i, &v, 2);
        }
    }
}

static bool run_create(op_run *run, const op_case *c, posenc_context *context)
{
    memset(run, 0, sizeof *run);
    run->c = c;
    run->context = context;
    if (c->kind == OP_ROPE) {
        run->inputs = 2;
        run->outputs = c->in_place ? 0 : 2;
    } else {
        run->inputs = c->add && !c->in_place ? 1 : 0;
        run->outputs = 1; /* in place, x is the output */
    }
    for (uint32_t t = 0; t < tensor_count(run); t++) {
        size_t size = t < run->inputs + run->outputs
                          ? element_count(c, t) * posenc_dtype_size(c->dtype)
                          : TOKENS * sizeof(int32_t);
        if (!test_memory_create(&run->memory[t], context, c->memory, size))
            return false;
    }
    return true;
}

static void run_destroy(op_run *run)
{
    for (uint32_t t = 0; t < MAX_TENSORS; t++) {
        if (run->memory[t].bytes)
            test_memory_destroy(&run->memory[t]);
    }
}

/* The bytes each tensor holds before a call. */
static void initial_bytes(const op_run *run, uint32_t t, unsigned char *bytes)
{
    const op_case *c = run->c;
    size_t size = run->memory[t].size;
    bool output = t >= run->inputs;
    if (t == run->inputs + run->outputs) {
        for (int32_t i = 0; i < TOKENS; i++) {
            int32_t position = 3 * i + 1;
            memcpy(bytes + i * sizeof position, &position, sizeof position);
        }
    } else if (output && !(c->kind == OP_SINUSOIDAL && c->in_place))
        memset(bytes, SENTINEL, size);
    else
        fill_input(c, t, bytes, size);
}

static bool run_reset(op_run *run)
{
    for (uint32_t t = 0; t < tensor_count(run); t++) {
        initial_bytes(run, t, run->memory[t].bytes);
        if (!test_memory_upload(&run->memory[t]))
            return false;
    }
    return true;
}

/* The event of a submitted call: waited for and destroyed; on failure, untouched. */
static posenc_status finish_submit(posenc_status status, posenc_event *event,
                                   posenc_event *untouched)
{
    if (status != POSENC_OK) {
        CHECK(event == untouched);
        return status;
    }
    status = posenc_event_wait(event, UINT64_MAX);
    posenc_event_destroy(event);
    return status;
}

static posenc_status run_op(op_run *run)
{
    const op_case *c = run->c;
    posenc_event *untouched = (posenc_event *)run, *event = untouched;
    if (c->kind == OP_ROPE) {
        int64_t q_shape[4] = {BATCH, TOKENS, Q_HEADS, HEAD_DIM};
        int64_t k_shape[4] = {BATCH, TOKENS, K_HEADS, HEAD_DIM};
        int64_t p_shape[1] = {TOKENS};
        posenc_rope_desc desc = {
            .q = test_memory_tensor(&run->memory[0], c->dtype, 0, 4, q_shape, NULL),
            .k = test_memory_tensor(&run->memory[1], c->dtype, 0, 4, k_shape, NULL),
            .positions = test_memory_tensor(positions_of(run), POSENC_DTYPE_I32, 0, 1, p_shape,
                                            NULL),
            .rotary_dim = 6,
            .theta = 500000.0,
        };
        if (!c->in_place) {
            desc.q_out = test_memory_tensor(&run->memory[2], c->dtype, 0, 4, q_shape, NULL);
            desc.k_out = test_memory_tensor(&run->memory[3], c->dtype, 0, 4, k_shape, NULL);
        }
        if (c->dynamic) {
            /* positions reach 7, above the original 4: the base grows with them */
            desc.scaling.type = POSENC_ROPE_SCALING_DYNAMIC_NTK;
            desc.scaling.factor = 2.0;
            desc.scaling.original_max_positions = 4;
        }
        if (!c->submit)
            return posenc_rope(run->context, &desc);
        posenc_status status = posenc_rope_submit(run->context, &desc, &event);
        return finish_submit(status, event, untouched);
    }
    int64_t shape[3] = {BATCH, ROWS, D_MODEL};
    int64_t p_shape[1] = {ROWS};
    test_memory *out = &run->memory[run->inputs];
    posenc_sinusoidal_desc desc = {
        .out = test_memory_tensor(out, c->dtype, 0, 3, shape, NULL),
        .positions = test_memory_tensor(positions_of(run), POSENC_DTYPE_I32, 0, 1, p_shape,
                                        NULL),
        .layout = POSENC_SINUSOIDAL_SIN_COS,
    };
    if (c->add) {
        desc.x = c->in_place ? desc.out
                             : test_memory_tensor(&run->memory[0], c->dtype, 0, 3, shape, NULL);
        desc.input_scale = 2.0;
    }
    if (!c->submit)
        return posenc_sinusoidal(run->context, &desc);
    posenc_status status = posenc_sinusoidal_submit(run->context, &desc, &event);
    return finish_submit(status, event, untouched);
}

/* Every tensor's bytes after a call, downloaded, one after another. */
static bool run_result(op_run *run, unsigned char *out, size_t capacity, size_t *size)
{
    *size = 0;
    for (uint32_t t = 0; t < tensor_count(run); t++) {
        if (!test_memory_download(&run->memory[t]) || *size + run->memory[t].size > capacity)
            return false;
        memcpy(out + *size, run->memory[t].bytes, run->memory[t].size);
        *size += run->memory[t].size;
    }
    return true;
}

enum { RESULT_BYTES = 4096 };

typedef struct op_sweep {
    const posenc_device_info *info;
    const op_case *c;
    unsigned char expected[RESULT_BYTES]; /* after a call without failures */
    size_t expected_size;
    unsigned char before[RESULT_BYTES]; /* before any call */
    size_t before_size;
    char what[400];
} op_sweep;

/* After a call whose Nth allocation failed: the status, and every tensor as it was. */
static void check_untouched(op_sweep *sweep, op_run *run, long n, posenc_status status)
{
    check_failed(sweep->what, n, status, posenc_context_last_error(run->context));
    unsigned char now[RESULT_BYTES];
    size_t size = 0;
    CHECK(run_result(run, now, sizeof now, &size));
    if (size != sweep->before_size || memcmp(now, sweep->before, size) != 0) {
        test_failures++;
        fprintf(stderr, "%s, allocation %ld failed: the call wrote into its tensors\n",
                sweep->what, n);
    }
}

/* The call again, without failures: it works and gives the expected bytes. */
static void check_recovers(op_sweep *sweep, op_run *run, long n)
{
    posenc_status status = run_op(run);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s, the call after allocation %ld failed: %s: %s\n", sweep->what, n,
                posenc_status_name(status), posenc_context_last_error(run->context));
        return;
    }
    unsigned char now[RESULT_BYTES];
    size_t size = 0;
    CHECK(run_result(run, now, sizeof now, &size));
    if (size != sweep->expected_size || memcmp(now, sweep->expected, size) != 0) {
        test_failures++;
        fprintf(stderr, "%s, the call after allocation %ld failed gives other results\n",
                sweep->what, n);
    }
}

/* One call with its Nth allocation failing and the checks after it; false when nothing failed
 * (the sweep is over). */
static bool op_attempt(op_sweep *sweep, op_run *run, long n)
{
    if (!run_reset(run))
        return false;
    arm(n);
    posenc_status status = run_op(run);
    bool failed = disarm();
    if (status != POSENC_OK) {
        if (!failed) {
            test_failures++;
            fprintf(stderr, "%s without failures: %s: %s\n", sweep->what,
                    posenc_status_name(status), posenc_context_last_error(run->context));
            return false;
        }
        check_untouched(sweep, run, n, status);
        check_recovers(sweep, run, n);
        return true;
    }
    /* It succeeded: with the failure absorbed (an optional cache), it must still be right. */
    absorbed += failed;
    unsigned char now[RESULT_BYTES];
    size_t size = 0;
    CHECK(run_result(run, now, sizeof now, &size));
    if (size != sweep->expected_size || memcmp(now, sweep->expected, size) != 0) {
        test_failures++;
        fprintf(stderr, "%s%s: wrong results\n", sweep->what,
                failed ? " with an absorbed allocation failure" : "");
    }
    return failed;
}

static void sweep_op(const posenc_device_info *info, const op_case *c)
{
    op_sweep sweep = {.info = info, .c = c};
    double start = seconds_now();
    long absorbed_before = absorbed;

    /* The expected result, on a context of its own. */
    posenc_context *context = make_context(info);
    if (!context)
        return;
    op_run run;
    bool ready = run_create(&run, c, context) && run_reset(&run);
    if (ready)
        ready = run_result(&run, sweep.before, sizeof sweep.before, &sweep.before_size);
    posenc_status status = ready ? run_op(&run) : POSENC_INTERNAL;
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "%s: %s without failures: %s: %s\n", info->name, c->name,
                posenc_status_name(status), posenc_context_last_error(context));
    }
    if (status == POSENC_OK)
        ready = run_result(&run, sweep.expected, sizeof sweep.expected, &sweep.expected_size);
    run_destroy(&run);
    posenc_context_destroy(context);
    if (status != POSENC_OK || !ready)
        return;

    /* The first call on a context (frequency tables, kernels, staging made on first use): a
     * fresh context for each N. */
    snprintf(sweep.what, sizeof sweep.what, "%s: %s, first call", info->name, c->name);
    long first = 1;
    for (; first < MAX_SWEEP; first++) {
        context = make_context(info);
        if (!context)
            return;
        bool more = run_create(&run, c, context) && op_attempt(&sweep, &run, first);
        run_destroy(&run);
        posenc_context_destroy(context);
        if (!more)
            break;
    }

    /* A later call, on a context that already made one. */
    snprintf(sweep.what, sizeof sweep.what, "%s: %s, later call", info->name, c->name);
    long later = 1;
    context = make_context(info);
    if (!context)
        return;
    if (run_create(&run, c, context) && run_reset(&run) && run_op(&run) == POSENC_OK) {
        while (later < MAX_SWEEP && op_attempt(&sweep, &run, later))
            later++;
    } else {
        test_failures++;
        fprintf(stderr, "%s: %s: the first call failed\n", info->name, c->name);
    }
    run_destroy(&run);
    posenc_context_destroy(context);
    printf("  %-32s first call %ld, later call %ld allocations, %ld absorbed (%.1f s)\n",
           c->name, first - 1, later - 1, absorbed - absorbed_before, seconds_now() - start);
}

/* ------------------------------------------------------------------------------------------ */

int main(void)
{
    /* lavapipe stays loaded for the whole run. The Vulkan loader unloads its driver with each
     * instance, and this test makes hundreds; LeakSanitizer then finds the few bytes lavapipe
     * keeps at each load in a module that is gone, and no longer matches them to lsan.supp's
     * libvulkan_lvp.so rule. Held open here, its frames keep their name. Absent: nothing. */
    void *lavapipe = dlopen("libvulkan_lvp.so", RTLD_NOW | RTLD_LOCAL);
    (void)lavapipe; /* never closed: the process ends with it */
    /* Caches of this test's own, so that a cold cache (a kernel build, a file written) is met
     * first and a warm one (files read) after. */
    const char *base = getenv("XDG_CACHE_HOME");
    base = base && *base ? base : ".";
    snprintf(cache_dir, sizeof cache_dir, "%s/alloc_failures", base);
    snprintf(pipeline_cache_path, sizeof pipeline_cache_path, "%s/pipelines.bin", cache_dir);
    mkdir(base, 0755);
    mkdir(cache_dir, 0755);
    /* POSENC_TEST_BACKEND=vulkan (a backend name): that backend's devices only. */
    const char *only = getenv("POSENC_TEST_BACKEND");

    sweep_listing();

    uint32_t count = 0;
    if (posenc_device_count(&count) != POSENC_OK)
        return test_finish("test_alloc_failures");
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        CHECK_OK(posenc_device_get(i, &info));
        if (only && *only && strcmp(only, posenc_backend_name(info.backend)) != 0)
            continue;
        printf("%s device %u: %s\n", posenc_backend_name(info.backend), info.backend_index,
               info.name);
        int failures = test_failures;
        sweep_context_create(&info);
        sweep_context_destroy(&info);
        sweep_prepare(&info);
        sweep_buffer_create(&info, TEST_MEMORY_BUFFER);
        sweep_buffer_create(&info, TEST_MEMORY_WRAPPED);
        for (size_t c = 0; c < OP_CASES; c++)
            sweep_op(&info, &op_cases[c]);
        printf("  %s\n", test_failures == failures ? "ok" : "FAILED");
    }
    return test_finish("test_alloc_failures");
}
