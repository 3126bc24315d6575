/* SPDX-License-Identifier: MIT */
/* Reading and writing NumPy .npy files: the header dict parser, size checks against the file's
 * length, and the writer. The format: numpy.org/doc/stable/reference/generated/numpy.lib.format */
#include "npy.h"
#include "support.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Real headers are a few hundred bytes; anything far larger is not a .npy file we can use. */
#define NPY_MAX_HEADER_BYTES (1u << 20)

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

static const struct {
    const char *name;
    const char *descr;
    size_t size;
} npy_dtypes[] = {
    [CLI_NPY_F32] = {"f32", "<f4", 4}, [CLI_NPY_F16] = {"f16", "<f2", 2},
    [CLI_NPY_BF16] = {"bf16", "<u2", 2}, [CLI_NPY_I32] = {"i32", "<i4", 4},
    [CLI_NPY_I64] = {"i64", "<i8", 8}, [CLI_NPY_F64] = {"f64", "<f8", 8},
};
#define NPY_DTYPE_COUNT (sizeof npy_dtypes / sizeof npy_dtypes[0])

const char *cli_npy_dtype_name(cli_npy_dtype dtype)
{
    return (unsigned)dtype < NPY_DTYPE_COUNT ? npy_dtypes[dtype].name : "?";
}

const char *cli_npy_descr(cli_npy_dtype dtype)
{
    return (unsigned)dtype < NPY_DTYPE_COUNT ? npy_dtypes[dtype].descr : "?";
}

size_t cli_npy_dtype_size(cli_npy_dtype dtype)
{
    return (unsigned)dtype < NPY_DTYPE_COUNT ? npy_dtypes[dtype].size : 0;
}

/* .npy data is in the byte order its descr declares; arrays in memory are in the host's. */
static bool npy_host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Reverses the bytes of each of `count` elements of `element_size` bytes. */
static void npy_swap_bytes(void *data, uint64_t count, size_t element_size)
{
    unsigned char *p = data;
    for (uint64_t i = 0; i < count; i++, p += element_size) {
        for (size_t lo = 0, hi = element_size - 1; lo < hi; lo++, hi--) {
            unsigned char byte = p[lo];
            p[lo] = p[hi];
            p[hi] = byte;
        }
    }
}

static void npy_error(char *error, size_t error_size, const char *format, ...)
{
    if (!error || error_size == 0) {
        return;
    }
    va_list args;
    va_start(args, format);
    vsnprintf(error, error_size, format, args);
    va_end(args);
}

int64_t cli_npy_count(uint32_t ndim, const int64_t *shape, size_t element_size)
{
    if (ndim > CLI_NPY_MAX_DIMS || element_size == 0) {
        return -1;
    }
    uint64_t limit = (uint64_t)INT64_MAX / element_size;
    if ((uint64_t)(SIZE_MAX / element_size) < limit) {
        limit = (uint64_t)(SIZE_MAX / element_size);
    }
    uint64_t count = 1;
    for (uint32_t i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            return -1;
        }
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && count > limit / d) {
            return -1;
        }
        count *= d;
    }
    return (int64_t)count;
}

void cli_npy_format_shape(uint32_t ndim, const int64_t *shape, char *text, size_t text_size)
{
    size_t used = 0;
    if (text_size == 0) {
        return;
    }
    text[0] = '\0';
    used += (size_t)snprintf(text, text_size, "[");
    for (uint32_t i = 0; i < ndim && i < CLI_NPY_MAX_DIMS && used < text_size; i++) {
        used += (size_t)snprintf(text + used, text_size - used, "%s%lld", i ? ", " : "",
                                 (long long)shape[i]);
    }
    if (used < text_size) {
        snprintf(text + used, text_size - used, "]");
    }
}

int cli_npy_alloc(cli_npy_array *array, cli_npy_dtype dtype, uint32_t ndim, const int64_t *shape)
{
    memset(array, 0, sizeof *array);
    int64_t count = cli_npy_count(ndim, shape, cli_npy_dtype_size(dtype));
    if (count < 0) {
        return -1;
    }
    array->dtype = dtype;
    array->ndim = ndim;
    for (uint32_t i = 0; i < ndim; i++) {
        array->shape[i] = shape[i];
    }
    array->count = (uint64_t)count;
    if (count > 0) {
        array->data = calloc((size_t)count, cli_npy_dtype_size(dtype));
        if (!array->data) {
            memset(array, 0, sizeof *array);
            return -1;
        }
    }
    return 0;
}

void cli_npy_free(cli_npy_array *array)
{
    if (array) {
        free(array->data);
        memset(array, 0, sizeof *array);
    }
}

/* ---- header dict parser: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */

typedef struct npy_parser {
    const char *p;
    const char *end;
    char *error;
    size_t error_size;
    bool big_endian; /* the descr's byte order: '>' */
} npy_parser;

static void npy_skip_space(npy_parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
                               *ps->p == '\r')) {
        ps->p++;
    }
}

static bool npy_accept(npy_parser *ps, char c)
{
    npy_skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return true;
    }
    return false;
}

/* A quoted string literal without escapes (numpy never writes any in these headers) or control
 * characters: the text is quoted in error messages, which are one line. */
static bool npy_parse_string(npy_parser *ps, char *out, size_t out_size)
{
    npy_skip_space(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) {
        return false;
    }
    char quote = *ps->p++;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != quote) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '\\' || c < 0x20 || c == 0x7f || n + 1 >= out_size) {
            return false;
        }
        out[n++] = *ps->p++;
    }
    if (ps->p >= ps->end) {
        return false;
    }
    ps->p++;
    out[n] = '\0';
    return true;
}

static bool npy_parse_word(npy_parser *ps, const char *word)
{
    npy_skip_space(ps);
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

/* A non-negative decimal integer (a trailing 'L' from Python 2 is accepted). 0 on success,
 * -1 on syntax errors, -2 when it does not fit in int64. */
static int npy_parse_dim(npy_parser *ps, int64_t *value)
{
    npy_skip_space(ps);
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') {
        return -1;
    }
    uint64_t v = 0;
    bool overflow = false;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned digit = (unsigned)(*ps->p - '0');
        if (v > ((uint64_t)INT64_MAX - digit) / 10) {
            overflow = true;
        } else {
            v = v * 10 + digit;
        }
        ps->p++;
    }
    if (ps->p < ps->end && *ps->p == 'L') {
        ps->p++;
    }
    if (overflow) {
        return -2;
    }
    *value = (int64_t)v;
    return 0;
}

static int npy_parse_shape(npy_parser *ps, cli_npy_array *array)
{
    if (!npy_accept(ps, '(')) {
        npy_error(ps->error, ps->error_size, "header: 'shape' is not a tuple");
        return -1;
    }
    uint32_t ndim = 0;
    int64_t shape[CLI_NPY_MAX_DIMS] = {0};
    while (!npy_accept(ps, ')')) {
        int64_t d = 0;
        npy_skip_space(ps);
        if (ps->p < ps->end && *ps->p == '-') {
            npy_error(ps->error, ps->error_size, "header: 'shape' has a negative dimension");
            return -1;
        }
        int rc = npy_parse_dim(ps, &d);
        if (rc == -2) {
            npy_error(ps->error, ps->error_size, "header: a dimension of 'shape' is too large");
            return -1;
        }
        if (rc != 0) {
            npy_error(ps->error, ps->error_size, "header: 'shape' is not a tuple of integers");
            return -1;
        }
        if (ndim == CLI_NPY_MAX_DIMS) {
            npy_error(ps->error, ps->error_size,
                      "arrays of more than %d dimensions are not supported", CLI_NPY_MAX_DIMS);
            return -1;
        }
        shape[ndim++] = d;
        if (!npy_accept(ps, ',')) {
            if (!npy_accept(ps, ')')) {
                npy_error(ps->error, ps->error_size, "header: 'shape' is not a tuple of integers");
                return -1;
            }
            break;
        }
    }
    array->ndim = ndim;
    memcpy(array->shape, shape, sizeof shape);
    return 0;
}

static int npy_parse_descr(npy_parser *ps, cli_npy_array *array)
{
    char descr[64];
    npy_skip_space(ps);
    if (ps->p < ps->end && *ps->p == '[') {
        npy_error(ps->error, ps->error_size, "structured dtypes are not supported");
        return -1;
    }
    if (!npy_parse_string(ps, descr, sizeof descr)) {
        npy_error(ps->error, ps->error_size, "header: 'descr' is not a dtype string");
        return -1;
    }
    /* The table's descrs are little-endian; '>' is the same type in big-endian order. numpy
     * writes '|' only for 1-byte types and never '=', which would not say which order the file
     * holds, so neither is accepted for these types. */
    for (unsigned i = 0; i < NPY_DTYPE_COUNT; i++) {
        if (descr[0] == '\0' || strcmp(descr + 1, npy_dtypes[i].descr + 1) != 0) {
            continue;
        }
        if (descr[0] == '<' || descr[0] == '>') {
            array->dtype = (cli_npy_dtype)i;
            ps->big_endian = descr[0] == '>';
            return 0;
        }
        if (descr[0] == '|' || descr[0] == '=') {
            npy_error(ps->error, ps->error_size,
                      "dtype '%s': byte order '%c' does not say little- or big-endian "
                      "(expected '<%s' or '>%s')",
                      descr, descr[0], descr + 1, descr + 1);
            return -1;
        }
    }
    npy_error(ps->error, ps->error_size,
              "unsupported dtype '%s' (expected '<f4', '<f2', '<u2' (bf16 words), '<i4', "
              "'<i8' or '<f8', or the same with '>')",
              descr);
    return -1;
}

static int npy_parse_header(npy_parser *ps, cli_npy_array *array)
{
    enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };
    unsigned seen = 0;
    if (!npy_accept(ps, '{')) {
        npy_error(ps->error, ps->error_size, "header is not a dict");
        return -1;
    }
    while (!npy_accept(ps, '}')) {
        char key[32];
        if (!npy_parse_string(ps, key, sizeof key) || !npy_accept(ps, ':')) {
            npy_error(ps->error, ps->error_size, "header is not a dict of 'key': value");
            return -1;
        }
        unsigned bit = strcmp(key, "descr") == 0           ? KEY_DESCR
                       : strcmp(key, "fortran_order") == 0 ? KEY_FORTRAN
                       : strcmp(key, "shape") == 0         ? KEY_SHAPE
                                                           : 0;
        if (bit == 0) {
            npy_error(ps->error, ps->error_size, "header has an unexpected key '%s'", key);
            return -1;
        }
        if (seen & bit) {
            npy_error(ps->error, ps->error_size, "header repeats the key '%s'", key);
            return -1;
        }
        seen |= bit;
        if (bit == KEY_DESCR) {
            if (npy_parse_descr(ps, array) != 0) {
                return -1;
            }
        } else if (bit == KEY_SHAPE) {
            if (npy_parse_shape(ps, array) != 0) {
                return -1;
            }
        } else if (npy_parse_word(ps, "True")) {
            npy_error(ps->error, ps->error_size,
                      "fortran_order True is not supported: save a C-order array "
                      "(np.ascontiguousarray)");
            return -1;
        } else if (!npy_parse_word(ps, "False")) {
            npy_error(ps->error, ps->error_size, "header: 'fortran_order' is not True or False");
            return -1;
        }
        if (!npy_accept(ps, ',')) {
            if (!npy_accept(ps, '}')) {
                npy_error(ps->error, ps->error_size, "header is not a dict (missing ',' or '}')");
                return -1;
            }
            break;
        }
    }
    npy_skip_space(ps);
    if (ps->p != ps->end) {
        npy_error(ps->error, ps->error_size, "header has text after the dict");
        return -1;
    }
    if (seen != (KEY_DESCR | KEY_FORTRAN | KEY_SHAPE)) {
        npy_error(ps->error, ps->error_size, "header lacks the key '%s'",
                  !(seen & KEY_DESCR) ? "descr" : !(seen & KEY_SHAPE) ? "shape" : "fortran_order");
        return -1;
    }
    return 0;
}

/* ---- reading: the same checks for a file and for bytes in memory ---- */

/* The fixed prefix: magic, format version and header length. `prefix` holds the first
 * min(total_size, 12) bytes of the `total_size` bytes of the file. */
static int npy_parse_prefix(const unsigned char *prefix, uint64_t total_size, size_t *prefix_size,
                            uint64_t *header_size, char *error, size_t error_size)
{
    if (total_size < 10) {
        npy_error(error, error_size, "not a .npy file (only %llu bytes)",
                  (unsigned long long)total_size);
        return -1;
    }
    if (memcmp(prefix, npy_magic, sizeof npy_magic) != 0) {
        npy_error(error, error_size, "not a .npy file (bad magic)");
        return -1;
    }
    unsigned major = prefix[6], minor = prefix[7];
    if (major == 1) {
        *prefix_size = 10;
        *header_size = (uint64_t)prefix[8] | (uint64_t)prefix[9] << 8;
    } else if (major == 2 || major == 3) {
        *prefix_size = 12;
        if (total_size < 12) {
            npy_error(error, error_size, "truncated header");
            return -1;
        }
        *header_size = (uint64_t)prefix[8] | (uint64_t)prefix[9] << 8 |
                       (uint64_t)prefix[10] << 16 | (uint64_t)prefix[11] << 24;
    } else {
        npy_error(error, error_size, "unsupported .npy format version %u.%u", major, minor);
        return -1;
    }
    if (*header_size > total_size - *prefix_size) {
        npy_error(error, error_size, "truncated header (it says %llu bytes, %llu follow)",
                  (unsigned long long)*header_size,
                  (unsigned long long)(total_size - *prefix_size));
        return -1;
    }
    if (*header_size > NPY_MAX_HEADER_BYTES) {
        npy_error(error, error_size, "header too long (%llu bytes)",
                  (unsigned long long)*header_size);
        return -1;
    }
    return 0;
}

/* The header dict, then the shape checked against the `available` bytes that follow it: they
 * must be exactly the data. Sets everything in `array` but the data, and `swap` when the data's
 * byte order is not the host's. */
static int npy_parse_layout(const char *header, uint64_t header_size, uint64_t available,
                            cli_npy_array *array, bool *swap, char *error, size_t error_size)
{
    if (memchr(header, '\0', (size_t)header_size)) {
        npy_error(error, error_size, "header is not text");
        return -1;
    }
    npy_parser ps = {header, header + header_size, error, error_size, false};
    if (npy_parse_header(&ps, array) != 0) {
        return -1;
    }
    *swap = ps.big_endian == npy_host_is_little_endian();

    size_t element_size = cli_npy_dtype_size(array->dtype);
    int64_t count = cli_npy_count(array->ndim, array->shape, element_size);
    char shape_text[96];
    cli_npy_format_shape(array->ndim, array->shape, shape_text, sizeof shape_text);
    if (count < 0) {
        npy_error(error, error_size, "shape %s is too large", shape_text);
        return -1;
    }
    uint64_t data_size = (uint64_t)count * element_size;
    if (available < data_size) {
        npy_error(error, error_size,
                  "data is truncated: shape %s of %s needs %llu bytes, the file has %llu",
                  shape_text, cli_npy_dtype_name(array->dtype), (unsigned long long)data_size,
                  (unsigned long long)available);
        return -1;
    }
    if (available > data_size) {
        npy_error(error, error_size,
                  "file is longer than its shape: %s of %s needs %llu bytes, the file has %llu",
                  shape_text, cli_npy_dtype_name(array->dtype), (unsigned long long)data_size,
                  (unsigned long long)available);
        return -1;
    }
    array->count = (uint64_t)count;
    return 0;
}

/* Allocates the data of an array whose layout was parsed. */
static int npy_alloc_data(cli_npy_array *array, char *error, size_t error_size)
{
    size_t data_size = (size_t)array->count * cli_npy_dtype_size(array->dtype);
    if (data_size > 0) {
        array->data = malloc(data_size);
        if (!array->data) {
            npy_error(error, error_size, "out of memory (%llu bytes)",
                      (unsigned long long)data_size);
            return -1;
        }
    }
    return 0;
}

static int npy_read_file(FILE *file, cli_npy_array *array, char *error, size_t error_size)
{
    if (fseek(file, 0, SEEK_END) != 0) {
        npy_error(error, error_size, "cannot seek (not a regular file?)");
        return -1;
    }
    long file_end = ftell(file);
    if (file_end < 0 || fseek(file, 0, SEEK_SET) != 0) {
        npy_error(error, error_size, "cannot seek (not a regular file?)");
        return -1;
    }
    uint64_t file_size = (uint64_t)file_end;

    unsigned char prefix[12];
    size_t have = file_size < sizeof prefix ? (size_t)file_size : sizeof prefix;
    if (fread(prefix, 1, have, file) != have) {
        npy_error(error, error_size, "read error");
        return -1;
    }
    size_t prefix_size;
    uint64_t header_size;
    if (npy_parse_prefix(prefix, file_size, &prefix_size, &header_size, error, error_size) != 0) {
        return -1;
    }
    char *header = malloc((size_t)header_size + 1);
    if (!header) {
        npy_error(error, error_size, "out of memory");
        return -1;
    }
    if (fseek(file, (long)prefix_size, SEEK_SET) != 0 ||
        fread(header, 1, (size_t)header_size, file) != header_size) {
        free(header);
        npy_error(error, error_size, "truncated header");
        return -1;
    }
    bool swap = false;
    int rc = npy_parse_layout(header, header_size, file_size - prefix_size - header_size, array,
                              &swap, error, error_size);
    free(header);
    if (rc != 0 || npy_alloc_data(array, error, error_size) != 0) {
        return -1;
    }
    size_t data_size = (size_t)array->count * cli_npy_dtype_size(array->dtype);
    if (data_size > 0 && fread(array->data, 1, data_size, file) != data_size) {
        npy_error(error, error_size, "read error");
        return -1;
    }
    if (swap) {
        npy_swap_bytes(array->data, array->count, cli_npy_dtype_size(array->dtype));
    }
    return 0;
}

int cli_npy_read(const char *path, cli_npy_array *array, char *error, size_t error_size)
{
    memset(array, 0, sizeof *array);
    /* Checked first: some systems open a directory as a file of absurd length, others refuse
     * it with a reason that does not say why. */
    if (support_is_directory(path)) {
        npy_error(error, error_size, "is a directory");
        return -1;
    }
    FILE *file = support_file_open(path, "rb");
    if (!file) {
        npy_error(error, error_size, "cannot open: %s", strerror(errno));
        return -1;
    }
    int rc = npy_read_file(file, array, error, error_size);
    fclose(file);
    if (rc != 0) {
        cli_npy_free(array);
    }
    return rc;
}

int cli_npy_parse(const void *bytes, size_t size, cli_npy_array *array, char *error,
                  size_t error_size)
{
    const unsigned char *file = bytes;
    size_t prefix_size;
    uint64_t header_size;
    bool swap = false;
    memset(array, 0, sizeof *array);
    if (npy_parse_prefix(file, size, &prefix_size, &header_size, error, error_size) != 0 ||
        npy_parse_layout((const char *)file + prefix_size, header_size,
                         size - prefix_size - header_size, array, &swap, error,
                         error_size) != 0 ||
        npy_alloc_data(array, error, error_size) != 0) {
        cli_npy_free(array);
        return -1;
    }
    if (array->data) {
        memcpy(array->data, file + prefix_size + header_size,
               (size_t)array->count * cli_npy_dtype_size(array->dtype));
        if (swap) {
            npy_swap_bytes(array->data, array->count, cli_npy_dtype_size(array->dtype));
        }
    }
    return 0;
}

/* ---- writing ---- */

/* Writes `count` elements in little-endian order, as the header's descr ('<') declares: as they
 * are on a little-endian host, byte-swapped through a small buffer on a big-endian one. */
static bool npy_write_data(FILE *file, const void *data, uint64_t count, size_t element_size)
{
    if (npy_host_is_little_endian()) {
        return fwrite(data, element_size, (size_t)count, file) == (size_t)count;
    }
    unsigned char buffer[4096];
    size_t per_chunk = sizeof buffer / element_size;
    const unsigned char *p = data;
    while (count > 0) {
        size_t n = count < per_chunk ? (size_t)count : per_chunk;
        memcpy(buffer, p, n * element_size);
        npy_swap_bytes(buffer, n, element_size);
        if (fwrite(buffer, element_size, n, file) != n) {
            return false;
        }
        p += n * element_size;
        count -= n;
    }
    return true;
}

int cli_npy_write_stream(FILE *file, const cli_npy_array *array, int major_version,
                         char *error, size_t error_size)
{
    size_t element_size = cli_npy_dtype_size(array->dtype);
    if (element_size == 0 || array->ndim > CLI_NPY_MAX_DIMS ||
        (major_version != 1 && major_version != 2)) {
        npy_error(error, error_size, "cannot write this array");
        return -1;
    }
    int64_t count = cli_npy_count(array->ndim, array->shape, element_size);
    if (count < 0 || (uint64_t)count != array->count || (count > 0 && !array->data)) {
        npy_error(error, error_size, "cannot write this array (shape and data disagree)");
        return -1;
    }

    /* The dict, padded with spaces and a final newline so that the data starts at a multiple of
     * 64 bytes, as numpy writes it. */
    char header[256];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     cli_npy_descr(array->dtype));
    for (uint32_t i = 0; i < array->ndim; i++) {
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s",
                      (long long)array->shape[i], i + 1 < array->ndim ? " " : "");
    }
    if (array->ndim > 1) {
        n--; /* numpy writes (2, 3) but (3,) */
    }
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    size_t prefix_size = major_version == 1 ? 10 : 12;
    size_t total = prefix_size + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    size_t header_size = padded - prefix_size;
    if (header_size > sizeof header) {
        npy_error(error, error_size, "header too long");
        return -1;
    }
    memset(header + n, ' ', header_size - (size_t)n);
    header[header_size - 1] = '\n';

    unsigned char prefix[12];
    memcpy(prefix, npy_magic, sizeof npy_magic);
    prefix[6] = (unsigned char)major_version;
    prefix[7] = 0;
    for (size_t i = 0; i < prefix_size - 8; i++) {
        prefix[8 + i] = (unsigned char)(header_size >> (8 * i));
    }

    bool ok = fwrite(prefix, 1, prefix_size, file) == prefix_size &&
              fwrite(header, 1, header_size, file) == header_size &&
              (count == 0 || npy_write_data(file, array->data, (uint64_t)count, element_size));
    if (!ok) {
        npy_error(error, error_size, "write error: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int cli_npy_write(const char *path, const cli_npy_array *array, int major_version, char *error,
                  size_t error_size)
{
    if (support_is_directory(path)) {
        npy_error(error, error_size, "is a directory");
        return -1;
    }
    char temp_path[4096];
    FILE *file = support_temp_file_create(path, temp_path, sizeof temp_path);
    if (!file) {
        npy_error(error, error_size, "cannot create: %s", strerror(errno));
        return -1;
    }
    if (cli_npy_write_stream(file, array, major_version, error, error_size) != 0) {
        fclose(file);
        support_file_remove(temp_path);
        return -1;
    }
    if (!support_file_commit(file)) {
        npy_error(error, error_size, "write error: %s", strerror(errno));
        support_file_remove(temp_path);
        return -1;
    }
    if (!support_file_replace(temp_path, path)) {
        npy_error(error, error_size, "cannot replace: %s", strerror(errno));
        support_file_remove(temp_path);
        return -1;
    }
    return 0;
}
