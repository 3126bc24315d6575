/* SPDX-License-Identifier: MIT */
/* Shared test helpers: failure counting and the per-device loop. */
#include "test_common.h"

#include "required_devices.h"

#include <stdlib.h>
#include <string.h>

int test_failures = 0;

void test_count_warnings(posenc_log_level level, const char *message, void *user_data)
{
    (void)user_data;
    if (level < POSENC_LOG_WARNING)
        return;
    test_failures++;
    fprintf(stderr, "library %s: %s\n", level == POSENC_LOG_ERROR ? "error" : "warning",
            message);
}

uint32_t test_device_index(const posenc_device_info *info)
{
    uint32_t count = 0;
    if (posenc_device_count(&count) != POSENC_OK)
        return UINT32_MAX;
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info other;
        if (posenc_device_get(i, &other) == POSENC_OK && other.backend == info->backend &&
            other.backend_index == info->backend_index)
            return i;
    }
    return UINT32_MAX;
}

posenc_context *test_context_for_device(uint32_t index)
{
    posenc_device_info info;
    if (posenc_device_get(index, &info) != POSENC_OK) {
        fprintf(stderr, "device %u: %s\n", index, posenc_thread_last_error());
        return NULL;
    }
    char selector[16];
    snprintf(selector, sizeof selector, "%u", info.backend_index);
    posenc_context_desc desc = {
        .backend = info.backend,
        .device = selector,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV | POSENC_CONTEXT_VALIDATION,
        .log = test_count_warnings,
    };
    posenc_context *context = NULL;
    posenc_status status = posenc_context_create(&desc, &context);
    if (status != POSENC_OK) {
        fprintf(stderr, "device %u (%s): context creation failed: %s: %s\n", index, info.name,
                posenc_status_name(status), posenc_thread_last_error());
        return NULL;
    }
    return context;
}

/* POSENC_CPU_VARIANT names a CPU kernel variant this machine cannot run (the per-variant
 * registrations in CMakeLists.txt): there is nothing to test, so the test is skipped. */
static void skip_unsupported_cpu_variant(void)
{
    const char *variant = posenc__env_get("POSENC_CPU_VARIANT");
    if (!variant || !*variant)
        return;
    posenc_context_desc desc = {
        .backend = POSENC_BACKEND_CPU,
        .flags = POSENC_CONTEXT_NO_FALLBACK | POSENC_CONTEXT_IGNORE_ENV,
    };
    posenc_context *context = NULL;
    posenc_status status = posenc_context_create(&desc, &context);
    posenc_context_destroy(context);
    if (status == POSENC_UNSUPPORTED) {
        printf("skipped: %s\n", posenc_thread_last_error());
        exit(TEST_SKIP_CODE);
    }
}

unsigned test_for_each_device(test_device_fn fn)
{
    skip_unsupported_cpu_variant();
    uint32_t count = 0;
    if (posenc_device_count(&count) != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "posenc_device_count failed: %s\n", posenc_thread_last_error());
        return 0;
    }
    const char *only = posenc__env_get("POSENC_TEST_BACKEND");
    unsigned ran = 0;
    for (uint32_t i = 0; i < count; i++) {
        posenc_device_info info;
        if (posenc_device_get(i, &info) != POSENC_OK) {
            test_failures++;
            continue;
        }
        if (only && *only && strcmp(only, posenc_backend_name(info.backend)) != 0)
            continue;
        posenc_context *context = test_context_for_device(i);
        if (!context) {
            test_failures++;
            continue;
        }
        int before = test_failures;
        fn(context, &info);
        /* "  vulkan:1   NAME   ok": the selector tells two cards of one model apart, for the
         * device check's per-device counts (tools/device-bundle/summary.sh). */
        char selector[32];
        snprintf(selector, sizeof selector, "%s:%u", posenc_backend_name(info.backend),
                 (unsigned)info.backend_index);
        printf("  %-10s %-40s %s\n", selector, info.name,
               test_failures == before ? "ok" : "FAILED");
        posenc_context_destroy(context);
        ran++;
    }
    /* The run was limited to a backend that has no device here (no driver, or a cross build
     * under an emulator): nothing was tested, which is a skip, or a failure where required. */
    if (ran == 0 && only && *only)
        exit(test_device_absent("test", only, "none present, and POSENC_TEST_BACKEND limits the "
                                              "run to that backend"));
    return ran;
}

void test_check_message(const char *message, const char *fields, const char *file, int line)
{
    for (const char *p = fields; message && *p;) {
        const char *end = strchr(p, '|');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char field[64];
        if (n >= sizeof field)
            n = sizeof field - 1;
        memcpy(field, p, n);
        field[n] = '\0';
        if (strstr(message, field))
            return;
        p += n + (end ? 1 : 0);
    }
    test_failures++;
    fprintf(stderr, "%s:%d: message \"%s\" does not name %s\n", file, line,
            message ? message : "(null)", fields);
}

int test_finish(const char *test_name)
{
    if (test_failures) {
        printf("%s: %d checks failed\n", test_name, test_failures);
        return EXIT_FAILURE;
    }
    printf("%s: all passed\n", test_name);
    return EXIT_SUCCESS;
}

double test_rng_uniform(test_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * (double)(test_rng_u32(rng) >> 8) / (double)(1u << 24);
}

uint32_t test_rng_u32(test_rng *rng)
{
    uint64_t x = rng->state ? rng->state : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng->state = x;
    return (uint32_t)(x >> 32);
}

const char *test_memory_kind_name(test_memory_kind kind)
{
    switch (kind) {
    case TEST_MEMORY_BUFFER:
        return "buffer";
    case TEST_MEMORY_WRAPPED:
        return "wrapped";
    default:
        return "host";
    }
}

bool test_memory_create(test_memory *memory, posenc_context *context, test_memory_kind kind,
                        size_t size)
{
    memset(memory, 0, sizeof *memory);
    memory->kind = kind;
    memory->size = size;
    memory->bytes = calloc(size ? size : 1, 1);
    if (!memory->bytes) {
        test_failures++;
        fprintf(stderr, "out of memory allocating %zu test bytes\n", size);
        return false;
    }
    if (kind == TEST_MEMORY_HOST)
        return true;
    posenc_buffer_desc desc = {.size = size};
    if (kind == TEST_MEMORY_WRAPPED)
        desc.host_memory = memory->bytes;
    posenc_status status = posenc_buffer_create(context, &desc, &memory->buffer);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "posenc_buffer_create(%zu bytes, %s) failed: %s: %s\n", size,
                test_memory_kind_name(kind), posenc_status_name(status),
                posenc_context_last_error(context));
        free(memory->bytes);
        memory->bytes = NULL;
        return false;
    }
    return true;
}

bool test_memory_upload(test_memory *memory)
{
    if (memory->kind != TEST_MEMORY_BUFFER)
        return true;
    posenc_status status = posenc_buffer_upload(memory->buffer, 0, memory->bytes, memory->size);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "posenc_buffer_upload failed: %s\n", posenc_status_name(status));
        return false;
    }
    return true;
}

bool test_memory_download(test_memory *memory)
{
    if (memory->kind != TEST_MEMORY_BUFFER)
        return true;
    posenc_status status = posenc_buffer_download(memory->buffer, 0, memory->bytes, memory->size);
    if (status != POSENC_OK) {
        test_failures++;
        fprintf(stderr, "posenc_buffer_download failed: %s\n", posenc_status_name(status));
        return false;
    }
    return true;
}

void test_memory_destroy(test_memory *memory)
{
    posenc_buffer_destroy(memory->buffer);
    free(memory->bytes);
    memset(memory, 0, sizeof *memory);
}

posenc_tensor test_memory_tensor(const test_memory *memory, posenc_dtype dtype, uint64_t offset,
                                 uint32_t ndim, const int64_t *shape, const int64_t *strides)
{
    posenc_tensor tensor = {0};
    if (memory->kind == TEST_MEMORY_HOST)
        tensor.host = memory->bytes;
    else
        tensor.buffer = memory->buffer;
    tensor.offset = offset;
    tensor.dtype = dtype;
    tensor.ndim = ndim;
    for (uint32_t i = 0; i < ndim && i < POSENC_MAX_DIMS; i++) {
        tensor.shape[i] = shape[i];
        tensor.strides[i] = strides ? strides[i] : 0;
    }
    return tensor;
}

/* AddressSanitizer defaults for the test programs (ASAN_OPTIONS in the environment adds to and
 * overrides them; without the sanitizer nothing calls this). GCC 12's runtime can misread a
 * dynamic TLS block that a driver's LLVM allocates while it compiles a kernel (PoCL, on a cold
 * kernel cache) and LeakSanitizer then crashes at exit, depending on heap layout. Not
 * intercepting __tls_get_addr leaves dynamic TLS out of the leak scan instead. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "intercept_tls_get_addr=0";
}

posenc_status test_rope_call(posenc_context *context, const posenc_rope_desc *desc, bool submit)
{
    if (!submit)
        return posenc_rope(context, desc);
    posenc_event *event = NULL;
    posenc_status status = posenc_rope_submit(context, desc, &event);
    if (status == POSENC_OK)
        status = posenc_event_wait(event, UINT64_MAX);
    posenc_event_destroy(event);
    return status;
}
