/* SPDX-License-Identifier: MIT */
/* Unit test of the command-line tool's .npy reader and writer: round trips of every dtype,
 * rank and format version, numpy's header variants, files of either byte order, every malformed
 * file of bad_npy.c (read from files and parsed from memory), and the f16/bf16 conversions.
 * Usage: test_npy [SCRATCH_DIRECTORY]. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bad_npy.h"
#include "convert.h"
#include "npy.h"

#include "support.h"

static int failures;
static const char *scratch = ".";

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);     \
        }                                                                                \
    } while (0)

static void scratch_path(char *path, size_t size, const char *name)
{
    snprintf(path, size, "%s/test_npy_%s.npy", scratch, name);
}

static void write_bytes(const char *path, const void *bytes, size_t size)
{
    FILE *file = support_file_open(path, "wb");
    CHECK(file != NULL);
    if (file) {
        CHECK(fwrite(bytes, 1, size, file) == size);
        CHECK(fclose(file) == 0);
    }
}

static void test_round_trips(void)
{
    static const cli_npy_dtype dtypes[] = {CLI_NPY_F32, CLI_NPY_F16, CLI_NPY_BF16,
                                           CLI_NPY_I32, CLI_NPY_I64, CLI_NPY_F64};
    static const int64_t shapes[][4] = {{0}, {7}, {3, 5}, {2, 3, 4}, {2, 1, 3, 2}};
    char path[1024], error[256];
    scratch_path(path, sizeof path, "round_trip");
    for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
        for (uint32_t ndim = 0; ndim <= 4; ndim++) {
            for (int version = 1; version <= 2; version++) {
                cli_npy_array out, in;
                CHECK(cli_npy_alloc(&out, dtypes[d], ndim, shapes[ndim]) == 0);
                unsigned char *bytes = out.data;
                for (uint64_t i = 0; i < out.count * cli_npy_dtype_size(dtypes[d]); i++) {
                    bytes[i] = (unsigned char)(i * 37 + d);
                }
                CHECK(cli_npy_write(path, &out, version, error, sizeof error) == 0);
                CHECK(cli_npy_read(path, &in, error, sizeof error) == 0);
                CHECK(in.dtype == out.dtype && in.ndim == ndim && in.count == out.count);
                CHECK(memcmp(in.shape, out.shape, sizeof in.shape) == 0);
                CHECK(memcmp(in.data, out.data, out.count * cli_npy_dtype_size(dtypes[d])) == 0);
                cli_npy_free(&in);
                cli_npy_free(&out);

                /* The data starts at a multiple of 64 bytes, as numpy writes it. */
                FILE *file = support_file_open(path, "rb");
                unsigned char prefix[12];
                CHECK(file && fread(prefix, 1, sizeof prefix, file) == sizeof prefix);
                if (file) {
                    fclose(file);
                }
                size_t header = version == 1 ? (size_t)(prefix[8] | prefix[9] << 8) + 10
                                             : (size_t)(prefix[8] | prefix[9] << 8) + 12;
                CHECK(prefix[6] == version && header % 64 == 0);
            }
        }
    }
    /* A zero-size dimension is a valid, empty array. */
    const int64_t empty_shape[2] = {3, 0};
    cli_npy_array empty, back;
    CHECK(cli_npy_alloc(&empty, CLI_NPY_F32, 2, empty_shape) == 0 && empty.count == 0);
    CHECK(cli_npy_write(path, &empty, 1, error, sizeof error) == 0);
    CHECK(cli_npy_read(path, &back, error, sizeof error) == 0 && back.count == 0 &&
          back.ndim == 2 && back.shape[0] == 3 && back.shape[1] == 0);
    cli_npy_free(&back);
}

/* Headers as other writers produce them: double quotes, any key order, no trailing comma,
 * Python 2 long suffixes, format 3.0. */
static void test_header_variants(void)
{
    static const struct {
        unsigned major;
        const char *header;
        cli_npy_dtype dtype;
        uint32_t ndim;
        int64_t shape0, shape1;
    } variants[] = {
        {1, "{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"<f8\"}", CLI_NPY_F64, 2,
         2, 3},
        {1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }", CLI_NPY_I32, 2, 2, 3},
        {3, "{'descr':'<f2','fortran_order':False,'shape':(6,)}", CLI_NPY_F16, 1, 6, 0},
        {2, "{'descr': '<u2', 'fortran_order': False, 'shape': (1,2,3), }", CLI_NPY_BF16, 3, 1, 2},
    };
    char path[1024], error[256];
    scratch_path(path, sizeof path, "variant");
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        unsigned char bytes[512] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
        size_t prefix = variants[v].major == 1 ? 10 : 12;
        size_t text = strlen(variants[v].header);
        bytes[6] = (unsigned char)variants[v].major;
        bytes[8] = (unsigned char)(text + 1);
        memcpy(bytes + prefix, variants[v].header, text);
        bytes[prefix + text] = '\n';
        size_t data = 6 * cli_npy_dtype_size(variants[v].dtype);
        write_bytes(path, bytes, prefix + text + 1 + data);
        cli_npy_array array;
        int rc = cli_npy_read(path, &array, error, sizeof error);
        if (rc != 0) {
            fprintf(stderr, "variant %zu: %s\n", v, error);
        }
        CHECK(rc == 0);
        CHECK(array.dtype == variants[v].dtype && array.ndim == variants[v].ndim &&
              array.shape[0] == variants[v].shape0 && array.count == 6);
        if (array.ndim > 1) {
            CHECK(array.shape[1] == variants[v].shape1);
        }
        /* The same bytes in memory: the same array. */
        cli_npy_array parsed;
        CHECK(cli_npy_parse(bytes, prefix + text + 1 + data, &parsed, error, sizeof error) == 0);
        CHECK(parsed.dtype == array.dtype && parsed.ndim == array.ndim &&
              parsed.count == array.count &&
              memcmp(parsed.shape, array.shape, sizeof parsed.shape) == 0 &&
              memcmp(parsed.data, array.data, data) == 0);
        cli_npy_free(&parsed);
        cli_npy_free(&array);
    }
}

/* A .npy file made by hand, format 1.0, of `count` elements of `size` bytes from `bits`, each
 * stored most significant byte first when `big_endian`, else least significant first: a file
 * as a machine of that byte order writes it, whatever this host's order. */
static size_t npy_by_hand(unsigned char *bytes, const char *descr, const uint64_t *bits,
                          size_t count, size_t size, bool big_endian)
{
    char dict[128];
    int text = snprintf(dict, sizeof dict,
                        "{'descr': '%s', 'fortran_order': False, 'shape': (%zu,), }", descr,
                        count);
    size_t header = (10 + (size_t)text + 1 + 63) / 64 * 64 - 10;
    memcpy(bytes, "\x93NUMPY\x01\x00", 8);
    bytes[8] = (unsigned char)(header & 0xff);
    bytes[9] = (unsigned char)(header >> 8);
    memcpy(bytes + 10, dict, (size_t)text);
    memset(bytes + 10 + text, ' ', header - (size_t)text);
    bytes[10 + header - 1] = '\n';
    unsigned char *data = bytes + 10 + header;
    for (size_t i = 0; i < count; i++) {
        for (size_t b = 0; b < size; b++) {
            size_t shift = 8 * (big_endian ? size - 1 - b : b);
            data[i * size + b] = (unsigned char)(bits[i] >> shift);
        }
    }
    return 10 + header + count * size;
}

/* Element `i` of `array` as an unsigned integer of its size, in this host's order. */
static uint64_t element_bits(const cli_npy_array *array, size_t i)
{
    const unsigned char *p = (const unsigned char *)array->data;
    switch (cli_npy_dtype_size(array->dtype)) {
    case 2: {
        uint16_t v;
        memcpy(&v, p + i * 2, 2);
        return v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p + i * 4, 4);
        return v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p + i * 8, 8);
        return v;
    }
    }
}

/* Files are read in the byte order their descr declares, '<' or '>', from a file and from
 * memory, for every dtype; they are written as '<' with the least significant byte first. */
static void test_byte_order(void)
{
    static const struct {
        const char *type; /* the descr without its byte order */
        cli_npy_dtype dtype;
        size_t size;
        uint64_t bits[3];
        double values[3];
    } cases[] = {
        {"f4", CLI_NPY_F32, 4, {0x3fc00000u, 0xc0000000u, 0x4b3c614eu}, {1.5, -2.0, 12345678.0}},
        {"f2", CLI_NPY_F16, 2, {0x3c00u, 0xc000u, 0x0001u}, {1.0, -2.0, 0x1p-24}},
        {"u2", CLI_NPY_BF16, 2, {0x3f80u, 0xbf80u, 0x4120u}, {1.0, -1.0, 10.0}},
        {"i4", CLI_NPY_I32, 4, {1u, 0xfffffffeu, 0x12345678u}, {1.0, -2.0, 305419896.0}},
        {"i8", CLI_NPY_I64, 8, {1u, UINT64_C(0xfffffffffffffffe), UINT64_C(0x123456789abc)},
         {1.0, -2.0, 20015998343868.0}},
        {"f8", CLI_NPY_F64, 8,
         {UINT64_C(0x3ff8000000000000), UINT64_C(0xc00c000000000000), UINT64_C(0x4059000000000000)},
         {1.5, -3.5, 100.0}},
    };
    char path[1024], error[256];
    scratch_path(path, sizeof path, "byte_order");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int big = 0; big <= 1; big++) {
            char descr[8];
            snprintf(descr, sizeof descr, "%c%s", big ? '>' : '<', cases[c].type);
            unsigned char bytes[256];
            size_t size = npy_by_hand(bytes, descr, cases[c].bits, 3, cases[c].size, big);
            write_bytes(path, bytes, size);
            cli_npy_array from_file, from_memory;
            CHECK(cli_npy_read(path, &from_file, error, sizeof error) == 0);
            CHECK(cli_npy_parse(bytes, size, &from_memory, error, sizeof error) == 0);
            const cli_npy_array *arrays[2] = {&from_file, &from_memory};
            for (int a = 0; a < 2; a++) {
                const cli_npy_array *array = arrays[a];
                CHECK(array->dtype == cases[c].dtype && array->count == 3);
                for (size_t i = 0; i < 3 && array->count == 3; i++) {
                    if (element_bits(array, i) != cases[c].bits[i] ||
                        cli_npy_element(array, i) != cases[c].values[i]) {
                        failures++;
                        fprintf(stderr, "'%s' element %zu (from %s): %g, expected %g\n", descr, i,
                                a ? "memory" : "a file", cli_npy_element(array, i),
                                cases[c].values[i]);
                    }
                }
            }
            /* Written back: '<', least significant byte first, whatever it was read as. */
            if (from_file.count == 3) {
                CHECK(cli_npy_write(path, &from_file, 1, error, sizeof error) == 0);
                unsigned char little[256], written[256];
                size_t expected_size = npy_by_hand(little, "", cases[c].bits, 3, cases[c].size,
                                                   false);
                FILE *file = fopen(path, "rb");
                size_t got = file ? fread(written, 1, sizeof written, file) : 0;
                if (file) {
                    fclose(file);
                }
                size_t data_size = 3 * cases[c].size;
                char want_descr[32];
                snprintf(want_descr, sizeof want_descr, "'descr': '<%s'", cases[c].type);
                CHECK(got >= data_size + 10 && got <= sizeof written);
                CHECK(got >= data_size && memcmp(written + got - data_size,
                                                 little + expected_size - data_size,
                                                 data_size) == 0);
                written[got < sizeof written ? got : sizeof written - 1] = '\0';
                CHECK(strstr((const char *)written + 10, want_descr) != NULL);
            }
            cli_npy_free(&from_file);
            cli_npy_free(&from_memory);
        }
    }
}

static void test_malformed(void)
{
    char path[1024], error[256];
    scratch_path(path, sizeof path, "bad");
    for (size_t i = 0; i < bad_npy_count(); i++) {
        bad_npy bad = bad_npy_case(i);
        CHECK(bad_npy_write(i, path) == 0);
        cli_npy_array array;
        memset(&array, 0xff, sizeof array);
        error[0] = '\0';
        int rc = cli_npy_read(path, &array, error, sizeof error);
        bool ok = rc == -1 && strstr(error, bad.expect) != NULL && array.data == NULL &&
                  array.count == 0 && strchr(error, '\n') == NULL;
        if (!ok) {
            failures++;
            fprintf(stderr, "bad_%s: rc %d, error '%s', expected '%s'\n", bad.name, rc, error,
                    bad.expect);
        }
        cli_npy_free(&array);
        /* The same bytes in memory: the same reason. */
        unsigned char bytes[1024];
        char memory_error[256] = "";
        size_t size = bad_npy_bytes(i, bytes, sizeof bytes);
        CHECK(cli_npy_parse(bytes, size, &array, memory_error, sizeof memory_error) == -1);
        CHECK(array.data == NULL && strcmp(memory_error, error) == 0);
    }
    cli_npy_array array;
    CHECK(cli_npy_read("/nonexistent/dir/file.npy", &array, error, sizeof error) == -1);
    CHECK(strstr(error, "cannot open") != NULL);
    /* A directory is not a file, and says so (not "only 9223372036854775807 bytes"). */
    CHECK(cli_npy_read(scratch, &array, error, sizeof error) == -1);
    CHECK(strcmp(error, "is a directory") == 0);
    /* Writing where it cannot. */
    const int64_t shape[1] = {1};
    cli_npy_array one;
    CHECK(cli_npy_alloc(&one, CLI_NPY_F32, 1, shape) == 0);
    CHECK(cli_npy_write("/nonexistent/dir/file.npy", &one, 1, error, sizeof error) == -1);
    CHECK(strstr(error, "cannot create") != NULL);
    CHECK(cli_npy_write(scratch, &one, 1, error, sizeof error) == -1);
    CHECK(strcmp(error, "is a directory") == 0);
    CHECK(cli_npy_write(path, &one, 7, error, sizeof error) == -1);
    cli_npy_free(&one);
}

static void test_sizes(void)
{
    const int64_t huge[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
    const int64_t negative[2] = {2, -1};
    const int64_t fine[3] = {2, 3, 4};
    CHECK(cli_npy_count(2, huge, 4) == -1);
    CHECK(cli_npy_count(2, negative, 4) == -1);
    CHECK(cli_npy_count(3, fine, 8) == 24);
    CHECK(cli_npy_count(0, fine, 8) == 1);
    CHECK(cli_npy_count(5, fine, 8) == -1);
    cli_npy_array array;
    CHECK(cli_npy_alloc(&array, CLI_NPY_F32, 2, huge) == -1 && array.data == NULL);
    char text[64];
    cli_npy_format_shape(3, fine, text, sizeof text);
    CHECK(strcmp(text, "[2, 3, 4]") == 0);
    cli_npy_format_shape(0, fine, text, sizeof text);
    CHECK(strcmp(text, "[]") == 0);
}

static void test_conversions(void)
{
    CHECK(cli_f32_to_f16(1.0f) == 0x3c00);
    CHECK(cli_f32_to_f16(-2.0f) == 0xc000);
    CHECK(cli_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(cli_f32_to_f16(65520.0f) == 0x7c00);   /* rounds up to infinity */
    CHECK(cli_f32_to_f16(0x1p-24f) == 0x0001);   /* smallest subnormal */
    CHECK(cli_f32_to_f16(0x1p-25f) == 0x0000);   /* a tie: to even, zero */
    CHECK(cli_f32_to_f16(0x1.8p-24f) == 0x0002); /* a tie: to even, 2 */
    CHECK(cli_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00); /* a tie: to even */
    CHECK(cli_f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02);
    CHECK((cli_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (cli_f32_to_f16(NAN) & 0x3ff) != 0);
    CHECK(cli_f16_to_f32(0x3c00) == 1.0f);
    CHECK(cli_f16_to_f32(0x0001) == 0x1p-24f);
    CHECK(cli_f16_to_f32(0xfc00) == -INFINITY);
    CHECK(isnan(cli_f16_to_f32(0x7e00)));
    for (uint32_t h = 0; h < 0x7c00; h++) { /* every finite positive f16 round trips */
        if (cli_f32_to_f16(cli_f16_to_f32((uint16_t)h)) != h) {
            failures++;
            fprintf(stderr, "f16 0x%04x does not round trip\n", h);
            break;
        }
    }
    CHECK(cli_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(cli_f32_to_bf16(0.1f) == 0x3dcd);
    CHECK(cli_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80); /* a tie: to even */
    CHECK(cli_bf16_to_f32(0xbf80) == -1.0f);
    CHECK(isnan(cli_bf16_to_f32(cli_f32_to_bf16(NAN))));
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        scratch = argv[1];
    }
    test_round_trips();
    test_header_variants();
    test_byte_order();
    test_malformed();
    test_sizes();
    test_conversions();
    if (failures) {
        printf("test_npy: %d checks failed\n", failures);
        return 1;
    }
    printf("test_npy: all passed (%zu malformed files rejected)\n", bad_npy_count());
    return 0;
}
