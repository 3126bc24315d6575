/* SPDX-License-Identifier: MIT */
/* Decoding and encoding of the descriptor fuzz target's inputs: integers and doubles take one
 * tag byte for small and notable values (so a mutation of one byte reaches the edges: INT64_MAX,
 * 2^61, NaN, infinity) and carry their bytes otherwise. */
#include "desc_case.h"

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

typedef struct desc_io {
    const uint8_t *in; /* decoding */
    size_t in_size;
    size_t at;
    uint8_t *out;      /* encoding, when not NULL */
    size_t capacity;
    size_t size;
    bool overflow;
} desc_io;

/* Integers at the edges of what the views, counts and sizes can hold. */
static const int64_t notable_integers[16] = {
    -1,
    -2,
    INT32_MAX,
    INT32_MIN,
    UINT32_MAX,
    INT64_C(1) << 32,
    INT64_C(1) << 40,
    INT64_C(1) << 60,
    INT64_C(1) << 61,
    (INT64_C(1) << 61) + 1,
    INT64_C(1) << 62,
    INT64_MAX,
    INT64_MIN,
    INT64_MAX / 2 + 1,
    65536,
    1024,
};
#define SMALL_INTEGERS 0xE0 /* tags below this are the value itself */

/* Slots 14, 15 and 16 are infinity, -infinity and NaN (see notable_double): not every compiler
 * takes those as constant initialisers. */
static const double notable_doubles[32] = {
    0.5,   0.25,   1.5,   -1.0,   -0.5,     10000.0,  500000.0, 1e6,
    1e30,  3.4e38, 3.5e38, 1e300, DBL_MAX,  -DBL_MAX, 0.0,      0.0,
    0.0,   DBL_MIN, 5e-324, -0.0, 1e-30,    6.283185307179586, 0.1, 1e-10,
    4294967296.0, 2147483648.0, 32.0, 4.0, 0.001,   8192.0,   1e-300, 2.0 / 3.0,
};

static double notable_double(int i)
{
    switch (i) {
    case 14: return INFINITY;
    case 15: return -INFINITY;
    case 16: return NAN;
    default: return notable_doubles[i];
    }
}
#define SMALL_DOUBLES 0x80  /* tags below this are the value itself */
#define NOTABLE_DOUBLES 0xA0 /* tags below this (and above SMALL_DOUBLES) are notable */

static void io_byte(desc_io *io, uint8_t *value)
{
    if (io->out) {
        if (io->size < io->capacity)
            io->out[io->size] = *value;
        else
            io->overflow = true;
        io->size++;
    } else {
        *value = io->at < io->in_size ? io->in[io->at] : 0;
        io->at++;
    }
}

static void io_bytes(desc_io *io, uint8_t *bytes, size_t count)
{
    for (size_t i = 0; i < count; i++)
        io_byte(io, &bytes[i]);
}

static void io_u8(desc_io *io, uint8_t *value) { io_byte(io, value); }

static uint64_t load_le(const uint8_t *bytes, size_t count)
{
    uint64_t v = 0;
    for (size_t i = 0; i < count; i++)
        v |= (uint64_t)bytes[i] << (8 * i);
    return v;
}

static void store_le(uint8_t *bytes, size_t count, uint64_t v)
{
    for (size_t i = 0; i < count; i++)
        bytes[i] = (uint8_t)(v >> (8 * i));
}

/* Tags: 0..0xDF the value; 0xE0..0xEF notable_integers; 0xF0 two bytes; 0xF1 four bytes
 * (sign-extended); 0xF2 and up eight bytes. */
static void io_i64(desc_io *io, int64_t *value)
{
    uint8_t tag = 0, bytes[8] = {0};
    if (io->out) {
        int64_t v = *value;
        int notable = -1;
        for (int i = 0; i < 16; i++)
            notable = notable < 0 && notable_integers[i] == v ? i : notable;
        if (v >= 0 && v < SMALL_INTEGERS) {
            tag = (uint8_t)v;
            io_byte(io, &tag);
        } else if (notable >= 0) {
            tag = (uint8_t)(0xE0 + notable);
            io_byte(io, &tag);
        } else if (v >= 0 && v <= 0xFFFF) {
            tag = 0xF0;
            store_le(bytes, 2, (uint64_t)v);
            io_byte(io, &tag);
            io_bytes(io, bytes, 2);
        } else if (v >= INT32_MIN && v <= INT32_MAX) {
            tag = 0xF1;
            store_le(bytes, 4, (uint64_t)v);
            io_byte(io, &tag);
            io_bytes(io, bytes, 4);
        } else {
            tag = 0xF2;
            store_le(bytes, 8, (uint64_t)v);
            io_byte(io, &tag);
            io_bytes(io, bytes, 8);
        }
        return;
    }
    io_byte(io, &tag);
    if (tag < SMALL_INTEGERS) {
        *value = tag;
    } else if (tag < 0xF0) {
        *value = notable_integers[tag - 0xE0];
    } else if (tag == 0xF0) {
        io_bytes(io, bytes, 2);
        *value = (int64_t)load_le(bytes, 2);
    } else if (tag == 0xF1) {
        io_bytes(io, bytes, 4);
        uint32_t u = (uint32_t)load_le(bytes, 4);
        int32_t s;
        memcpy(&s, &u, sizeof s);
        *value = s;
    } else {
        io_bytes(io, bytes, 8);
        uint64_t u = load_le(bytes, 8);
        memcpy(value, &u, sizeof *value);
    }
}

static void io_u32(desc_io *io, uint32_t *value)
{
    int64_t v = *value;
    io_i64(io, &v);
    *value = (uint32_t)(uint64_t)v;
}

static void io_i32(desc_io *io, int32_t *value)
{
    int64_t v = *value;
    io_i64(io, &v);
    uint32_t u = (uint32_t)(uint64_t)v;
    memcpy(value, &u, sizeof u);
}

/* Tags: 0..0x7F the integer value; 0x80..0x9F notable_doubles; 0xA0 and up eight bytes. */
static void io_f64(desc_io *io, double *value)
{
    uint8_t tag = 0, bytes[8] = {0};
    uint64_t bits;
    if (io->out) {
        double v = *value;
        memcpy(&bits, &v, sizeof bits);
        int notable = -1;
        for (int i = 0; i < 32 && notable < 0; i++) {
            double d = notable_double(i);
            uint64_t n;
            memcpy(&n, &d, sizeof n);
            if (n == bits)
                notable = i;
        }
        if (v >= 0.0 && v < SMALL_DOUBLES && v == floor(v) && !signbit(v)) {
            tag = (uint8_t)v;
            io_byte(io, &tag);
        } else if (notable >= 0) {
            tag = (uint8_t)(SMALL_DOUBLES + notable);
            io_byte(io, &tag);
        } else {
            tag = 0xFF;
            store_le(bytes, 8, bits);
            io_byte(io, &tag);
            io_bytes(io, bytes, 8);
        }
        return;
    }
    io_byte(io, &tag);
    if (tag < SMALL_DOUBLES) {
        *value = tag;
    } else if (tag < NOTABLE_DOUBLES) {
        *value = notable_double(tag - SMALL_DOUBLES);
    } else {
        io_bytes(io, bytes, 8);
        bits = load_le(bytes, 8);
        memcpy(value, &bits, sizeof *value);
    }
}

static void walk_view(desc_io *io, desc_view *v)
{
    io_u8(io, &v->memory);
    if (!io->out)
        v->memory = (uint8_t)(v->memory % DESC_MEMORY_KINDS);
    io_u8(io, &v->block);
    if (!io->out)
        v->block = (uint8_t)(v->block % DESC_BLOCKS);
    io_u8(io, &v->dtype);
    io_u8(io, &v->ndim);
    io_i64(io, &v->offset);
    /* Only the dims the view has (up to 4) are in the input. */
    uint32_t dims = v->ndim < 4 ? v->ndim : 4;
    for (uint32_t k = 0; k < dims; k++) {
        io_i64(io, &v->shape[k]);
        io_i64(io, &v->strides[k]);
    }
}

static void walk(desc_io *io, desc_case *c)
{
    io_u8(io, &c->op);
    io_u8(io, &c->call);
    for (int b = 0; b < DESC_BLOCKS; b++) {
        io_i64(io, &c->blocks[b].size);
        io_u8(io, &c->blocks[b].fill);
    }
    /* The views of before the tables and the norm first (see desc_case.h). */
    int views = c->op % 2 == 0 ? 5 : DESC_SINUSOIDAL_VIEWS;
    for (int v = 0; v < views; v++)
        walk_view(io, &c->views[v]);
    io_i32(io, &c->position_offset);
    if (c->op % 2 == 0) {
        io_u32(io, &c->rotary_dim);
        io_u32(io, &c->style);
        io_u8(io, &c->inverse);
        io_f64(io, &c->theta);
        io_f64(io, &c->attention_factor);
        io_u32(io, &c->multimodal);
        for (int i = 0; i < 3; i++)
            io_u32(io, &c->mrope_section[i]);
        io_u32(io, &c->scaling_type);
        io_f64(io, &c->factor);
        io_u32(io, &c->original_max_positions);
        io_u32(io, &c->sequence_length);
        io_f64(io, &c->beta_fast);
        io_f64(io, &c->beta_slow);
        io_f64(io, &c->mscale);
        io_f64(io, &c->mscale_all_dim);
        io_u8(io, &c->no_truncate);
        io_f64(io, &c->low_freq_factor);
        io_f64(io, &c->high_freq_factor);
        io_u32(io, &c->inv_freq_count);
        io_u32(io, &c->factor_count);
        for (int a = 0; a < DESC_ARRAYS; a++) {
            io_u8(io, &c->arrays[a].present);
            if (c->arrays[a].present) {
                io_f64(io, &c->arrays[a].first);
                io_f64(io, &c->arrays[a].step);
            }
        }
        io_u32(io, &c->rotary_offset);
        for (int v = 5; v < DESC_ROPE_VIEWS; v++)
            walk_view(io, &c->views[v]);
        io_f64(io, &c->norm_eps);
        io_f64(io, &c->norm_weight_offset);
    } else {
        io_u32(io, &c->layout);
        io_f64(io, &c->base);
        io_f64(io, &c->freq_shift);
        io_f64(io, &c->position_scale);
        io_f64(io, &c->input_scale);
        io_f64(io, &c->output_scale);
    }
}

void desc_decode(const uint8_t *data, size_t size, desc_case *c)
{
    desc_io io = {.in = data, .in_size = size};
    memset(c, 0, sizeof *c);
    walk(&io, c);
}

size_t desc_encode(const desc_case *c, uint8_t *out, size_t capacity)
{
    desc_io io = {.out = out, .capacity = capacity};
    desc_case copy = *c;
    walk(&io, &copy);
    return io.overflow ? 0 : io.size;
}
