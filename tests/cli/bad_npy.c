/* SPDX-License-Identifier: MIT */
/* Hand-made malformed .npy files: each case is a header text, a header length field, a format
 * version and a data size, chosen so that exactly one thing is wrong. */
#include "bad_npy.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct bad_npy_spec {
    bad_npy info;
    const char *magic;       /* 6 bytes; NULL: the right one */
    unsigned major;          /* format version */
    const char *header;      /* dict text (padded with spaces and '\n' to 64 bytes) */
    size_t header_bytes;     /* 0: the header's length; otherwise written as is */
    long header_length;      /* -1: the real length; otherwise the length field's value */
    size_t data_bytes;       /* bytes of (zero) data after the header */
    long total_bytes;        /* -1: everything; otherwise the file is cut to this length */
} bad_npy_spec;

#define F4(shape) "{'descr': '<f4', 'fortran_order': False, 'shape': " shape ", }"

static const bad_npy_spec specs[] = {
    {{"empty", "not a .npy file"}, NULL, 1, F4("(4,)"), 0, -1, 16, 0},
    {{"bad_magic", "bad magic"}, "\x93NUMPZ", 1, F4("(4,)"), 0, -1, 16, -1},
    {{"only_magic", "not a .npy file"}, NULL, 1, F4("(4,)"), 0, -1, 16, 6},
    {{"bad_version", "unsupported .npy format version 9.0"}, NULL, 9, F4("(4,)"), 0, -1, 16, -1},
    {{"truncated_header", "truncated header"}, NULL, 1, F4("(4,)"), 0, -1, 0, 40},
    {{"header_length_huge", "truncated header"}, NULL, 2, F4("(4,)"), 0, 0x7ffffff0L, 16, -1},
    {{"header_not_dict", "header is not a dict"}, NULL, 1, "[1, 2, 3]", 0, -1, 0, -1},
    {{"header_not_text", "header is not text"}, NULL, 1, "{'descr'\0: '<f4'}", 17, -1, 0, -1},
    {{"header_unterminated", "header"}, NULL, 1, "{'descr': '<f4", 0, -1, 0, -1},
    {{"header_missing_shape", "lacks the key 'shape'"}, NULL, 1,
     "{'descr': '<f4', 'fortran_order': False, }", 0, -1, 0, -1},
    {{"header_extra_key", "unexpected key 'dtype'"}, NULL, 1,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'dtype': 1, }", 0, -1, 16, -1},
    {{"unknown_descr", "unsupported dtype '<c8'"}, NULL, 1,
     "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 0, -1, 16, -1},
    {{"structured_descr", "structured dtypes are not supported"}, NULL, 1,
     "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 0, -1, 8, -1},
    {{"byte_order", "byte order '|' does not say little- or big-endian"}, NULL, 1,
     "{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 0, -1, 8, -1},
    {{"fortran_order", "fortran_order True is not supported"}, NULL, 1,
     "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 0, -1, 16, -1},
    {{"truncated_data", "data is truncated"}, NULL, 1, F4("(4, 4)"), 0, -1, 60, -1},
    {{"extra_data", "longer than its shape"}, NULL, 1, F4("(2,)"), 0, -1, 12, -1},
    {{"huge_shape", "too large"}, NULL, 1, F4("(4611686018427387904, 4611686018427387904)"), 0,
     -1, 16, -1},
    {{"huge_dimension", "too large"}, NULL, 1, F4("(99999999999999999999999,)"), 0, -1, 16, -1},
    {{"negative_dimension", "negative"}, NULL, 1, F4("(-4,)"), 0, -1, 16, -1},
    {{"five_dimensions", "more than 4 dimensions"}, NULL, 1, F4("(1, 1, 1, 1, 1)"), 0, -1, 4, -1},
    {{"shape_not_tuple", "'shape' is not a tuple"}, NULL, 1, F4("[4]"), 0, -1, 16, -1},
};

size_t bad_npy_count(void)
{
    return sizeof specs / sizeof specs[0];
}

bad_npy bad_npy_case(size_t index)
{
    return specs[index].info;
}

size_t bad_npy_bytes(size_t index, unsigned char *bytes, size_t capacity)
{
    const bad_npy_spec *s = &specs[index];
    size_t prefix = s->major == 1 ? 10 : 12;
    size_t text = s->header_bytes ? s->header_bytes : strlen(s->header);
    size_t header = (prefix + text + 1 + 63) / 64 * 64 - prefix;
    size_t total = prefix + header + s->data_bytes;
    if (total > capacity) {
        return 0;
    }
    memset(bytes, 0, total);
    memcpy(bytes, s->magic ? s->magic : "\x93NUMPY", 6);
    bytes[6] = (unsigned char)s->major;
    bytes[7] = 0;
    uint64_t length = s->header_length >= 0 ? (uint64_t)s->header_length : header;
    for (size_t i = 0; i < prefix - 8; i++) {
        bytes[8 + i] = (unsigned char)(length >> (8 * i));
    }
    memcpy(bytes + prefix, s->header, text);
    memset(bytes + prefix + text, ' ', header - text);
    bytes[prefix + header - 1] = '\n';
    if (s->total_bytes >= 0 && (size_t)s->total_bytes < total) {
        total = (size_t)s->total_bytes;
    }
    return total;
}

int bad_npy_write(size_t index, const char *path)
{
    unsigned char bytes[1024];
    size_t size = bad_npy_bytes(index, bytes, sizeof bytes);
    FILE *file = fopen(path, "wb");
    if (!file) {
        return -1;
    }
    int ok = fwrite(bytes, 1, size, file) == size;
    return fclose(file) == 0 && ok ? 0 : -1;
}
