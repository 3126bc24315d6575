/* SPDX-License-Identifier: MIT */
/* Fuzz target: the command-line tool's .npy reader (cli_npy_parse, the code cli_npy_read runs
 * on a file). A refused input leaves the array empty with a one-line reason; an accepted one is
 * consistent with itself and with the bytes it came from. */
#include <stdbool.h>
#include <string.h>

#include "convert.h"
#include "fuzz_common.h"
#include "npy.h"

/* Whether `array` holds `bytes` with each element's bytes reversed: a file whose byte order
 * (its descr's '<' or '>') is not the host's. */
static bool is_swapped(const cli_npy_array *array, const uint8_t *bytes, size_t element)
{
    const uint8_t *held = array->data;
    for (uint64_t i = 0; i < array->count; i++) {
        for (size_t b = 0; b < element; b++) {
            if (held[i * element + b] != bytes[i * element + element - 1 - b])
                return false;
        }
    }
    return true;
}

/* The last `data_size` bytes of the input are the data, copied as they are or, for a file of
 * the other byte order, with each element's bytes reversed. */
static void check_accepted(const uint8_t *data, size_t size, const cli_npy_array *array)
{
    size_t element = cli_npy_dtype_size(array->dtype);
    FUZZ_CHECK(element != 0, "accepted dtype %d, which has no size", (int)array->dtype);
    FUZZ_CHECK(array->ndim <= CLI_NPY_MAX_DIMS, "accepted %u dims", array->ndim);
    uint64_t count = 1;
    for (uint32_t i = 0; i < array->ndim; i++) {
        FUZZ_CHECK(array->shape[i] >= 0, "accepted shape[%u] = %lld", i,
                   (long long)array->shape[i]);
        count *= (uint64_t)array->shape[i]; /* cannot wrap: the data below is that long */
    }
    for (uint32_t i = array->ndim; i < CLI_NPY_MAX_DIMS; i++)
        FUZZ_CHECK(array->shape[i] == 0, "shape[%u] = %lld past ndim %u", i,
                   (long long)array->shape[i], array->ndim);
    FUZZ_CHECK(cli_npy_count(array->ndim, array->shape, element) == (int64_t)array->count,
               "count %llu is not the product of the shape", (unsigned long long)array->count);
    FUZZ_CHECK(count == array->count, "count %llu, the shape's product %llu",
               (unsigned long long)array->count, (unsigned long long)count);
    FUZZ_CHECK((array->count == 0) == (array->data == NULL),
               "count %llu with data %s", (unsigned long long)array->count,
               array->data ? "set" : "NULL");
    FUZZ_CHECK(array->count <= size / element, "count %llu of %zu-byte elements from %zu bytes",
               (unsigned long long)array->count, element, size);
    size_t data_size = (size_t)array->count * element;
    /* The header: 10 or 12 bytes of prefix, then the dict of at least "{}" */
    FUZZ_CHECK(size >= data_size + 12, "%zu bytes of data in a file of %zu bytes", data_size,
               size);
    FUZZ_CHECK(data_size == 0 ||
                   memcmp(array->data, data + size - data_size, data_size) == 0 ||
                   is_swapped(array, data + size - data_size, element),
               "the data is not the file's last %zu bytes, as they are or byte-swapped",
               data_size);
    /* Every element reads as a number of its dtype (ASan watches the reads). */
    volatile double sink = 0.0;
    for (uint64_t i = 0; i < array->count; i++)
        sink = cli_npy_element(array, i);
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cli_npy_array array;
    char error[256];
    memset(&array, 0xA5, sizeof array); /* the parser must set every field */
    memset(error, 0, sizeof error);
    if (cli_npy_parse(data, size, &array, error, sizeof error) == 0) {
        check_accepted(data, size, &array);
        cli_npy_free(&array);
        return 0;
    }
    cli_npy_array empty;
    memset(&empty, 0, sizeof empty);
    FUZZ_CHECK(memcmp(&array, &empty, sizeof array) == 0, "a refused file left the array set");
    FUZZ_CHECK(error[0] != '\0', "refused without a reason");
    FUZZ_CHECK(memchr(error, '\0', sizeof error) != NULL, "the reason is not terminated");
    FUZZ_CHECK(strchr(error, '\n') == NULL, "the reason '%s' is more than one line", error);
    return 0;
}
