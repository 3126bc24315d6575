/* SPDX-License-Identifier: MIT */
/* Shared test helpers: checks that count failures, and a loop over every device present. The
 * tests reach the operating system (threads, environment, files, processes) through the
 * library's platform layer, core/platform.h, as the library does. */
#ifndef POSENC_TEST_COMMON_H
#define POSENC_TEST_COMMON_H

#include <posenc/posenc.h>

#include "core/platform.h"
#include "support.h"

#include <stdbool.h>
#include <stdio.h>

#define TEST_SKIP_CODE 77

extern int test_failures;

/* Records a failure with its location; never aborts, so one run reports every failure. */
#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                                    \
    } while (0)

#define CHECK_STATUS(expr, expected)                                                         \
    do {                                                                                     \
        posenc_status check_status_ = (expr);                                                \
        if (check_status_ != (expected)) {                                                   \
            test_failures++;                                                                 \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__,      \
                    #expr, posenc_status_name(check_status_), posenc_status_name(expected)); \
        }                                                                                    \
    } while (0)

#define CHECK_OK(expr) CHECK_STATUS(expr, POSENC_OK)

/* Records a failure unless `message` (an error message; NULL fails) names one of the
 * '|'-separated fields in `fields` ("q.shape|q.strides"). */
#define CHECK_MESSAGE(message, fields) test_check_message((message), (fields), __FILE__, __LINE__)
void test_check_message(const char *message, const char *fields, const char *file, int line);

/* The log callback of every context the tests make: a message of level WARNING or above (a
 * Vulkan validation message, say) is printed and counted as a failure. */
void test_count_warnings(posenc_log_level level, const char *message, void *user_data);

/* A context on device `index` of posenc_device_get, with fallback and POSENC_DEVICE disabled so
 * that a test really runs where it says, API validation on, and test_count_warnings as its log.
 * NULL (and a message) on failure. */
posenc_context *test_context_for_device(uint32_t index);

/* The index in posenc_device_get's numbering of the device `info` describes (the same backend
 * and backend_index); UINT32_MAX when it is not listed. */
uint32_t test_device_index(const posenc_device_info *info);

/* Calls `fn` once per device present (software devices included), with a fresh context, and
 * prints which device each result belongs to. Returns the number of devices run. The
 * environment variable POSENC_TEST_BACKEND=vulkan (a backend name) limits the loop to that
 * backend's devices. When POSENC_CPU_VARIANT names a CPU kernel variant this machine cannot
 * run, the test exits with TEST_SKIP_CODE. */
typedef void (*test_device_fn)(posenc_context *context, const posenc_device_info *info);
unsigned test_for_each_device(test_device_fn fn);

/* Prints "N checks failed" or "all passed" and returns the process exit code. */
int test_finish(const char *test_name);

/* Deterministic pseudo-random numbers for test data (xorshift). */
typedef struct test_rng {
    uint64_t state;
} test_rng;
double test_rng_uniform(test_rng *rng, double lo, double hi);
uint32_t test_rng_u32(test_rng *rng);


/* Test memory: host bytes the test fills and inspects, handed to the library in one of three
 * ways, so each op is exercised on host tensors, device buffers and wrapped host memory. */
typedef enum test_memory_kind {
    TEST_MEMORY_HOST = 0,    /* posenc_tensor.host points at the bytes */
    TEST_MEMORY_BUFFER = 1,  /* a posenc buffer, filled by upload and read back by download */
    TEST_MEMORY_WRAPPED = 2, /* a posenc buffer wrapping the bytes (buffer_desc.host_memory) */
} test_memory_kind;

typedef struct test_memory {
    test_memory_kind kind;
    unsigned char *bytes;
    size_t size;
    posenc_buffer *buffer; /* NULL for TEST_MEMORY_HOST */
} test_memory;

const char *test_memory_kind_name(test_memory_kind kind);
/* Allocates `size` zeroed bytes (and the buffer). Returns false, counting a failure, if it could
 * not. */
bool test_memory_create(test_memory *memory, posenc_context *context, test_memory_kind kind,
                        size_t size);
/* Copies `bytes` to the device (a no-op unless TEST_MEMORY_BUFFER). Call after filling. */
bool test_memory_upload(test_memory *memory);
/* Copies the device contents back into `bytes` (a no-op unless TEST_MEMORY_BUFFER). */
bool test_memory_download(test_memory *memory);
void test_memory_destroy(test_memory *memory);
/* A view of the memory; strides NULL means packed. */
posenc_tensor test_memory_tensor(const test_memory *memory, posenc_dtype dtype, uint64_t offset,
                                 uint32_t ndim, const int64_t *shape, const int64_t *strides);

/* posenc_rope, or with `submit` the same work left running (posenc_rope_submit), waited for. */
posenc_status test_rope_call(posenc_context *context, const posenc_rope_desc *desc, bool submit);

#endif
