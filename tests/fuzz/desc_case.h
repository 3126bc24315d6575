/* SPDX-License-Identifier: MIT */
/* The byte format of the descriptor fuzz target's inputs: one walk over the fields of a
 * desc_case decodes fuzz inputs and encodes the seed corpus, so the two cannot disagree. */
#ifndef POSENC_TESTS_FUZZ_DESC_CASE_H
#define POSENC_TESTS_FUZZ_DESC_CASE_H

#include <stddef.h>
#include <stdint.h>

/* rope: q, q_out, k, k_out, positions, cos, sin, q_norm_weight, k_norm_weight; sinusoidal:
 * out, x, positions, and the rest unused. */
#define DESC_VIEWS 9
#define DESC_ROPE_VIEWS 9
#define DESC_SINUSOIDAL_VIEWS 3
/* Memory blocks the views live in: views may share one, to meet the overlap rules. */
#define DESC_BLOCKS 3
/* inv_freq, scaling.freq_factors, scaling.short_factor, scaling.long_factor */
#define DESC_ARRAYS 4

/* How a view refers to memory (the byte is taken modulo DESC_MEMORY_KINDS). */
typedef enum desc_memory {
    DESC_ABSENT = 0,         /* neither buffer nor host; ndim as given (0: an absent view) */
    DESC_HOST = 1,           /* host = the block + offset */
    DESC_BUFFER = 2,         /* a posenc_buffer wrapping the block, + offset */
    DESC_BOTH = 3,           /* buffer and host both set: invalid */
    DESC_FOREIGN_BUFFER = 4, /* a buffer of another context: invalid */
    DESC_MEMORY_KINDS = 5,
} desc_memory;

typedef struct desc_view {
    uint8_t memory;     /* desc_memory */
    uint8_t block;      /* modulo DESC_BLOCKS */
    uint8_t dtype;      /* posenc_dtype, unknown values included */
    uint8_t ndim;       /* as given, out-of-range values included */
    int64_t offset;     /* bytes (taken as uint64) */
    int64_t shape[4];
    int64_t strides[4]; /* bytes; 0 = packed */
} desc_view;

typedef struct desc_block {
    int64_t size; /* bytes at least (more when host views need them); buffers are this size */
    uint8_t fill; /* seed of the block's bytes; 0: all zero */
} desc_block;

/* A caller array of as many doubles as the descriptor's count says: first + step * j. */
typedef struct desc_array {
    uint8_t present;
    double first;
    double step;
} desc_array;

typedef struct desc_case {
    uint8_t op;     /* even: posenc_rope, odd: posenc_sinusoidal */
    uint8_t call;   /* bit 0: the _submit call; bit 1: with an event */
    desc_block blocks[DESC_BLOCKS];
    desc_view views[DESC_VIEWS];
    int32_t position_offset;
    /* rope */
    uint32_t rotary_dim, style, multimodal, mrope_section[3], inv_freq_count;
    uint8_t inverse;
    double theta, attention_factor;
    uint32_t scaling_type, original_max_positions, sequence_length, factor_count;
    double factor, beta_fast, beta_slow, mscale, mscale_all_dim, low_freq_factor,
        high_freq_factor;
    uint8_t no_truncate;
    desc_array arrays[DESC_ARRAYS];
    /* rope, after the fields above in the input (an input from before they existed decodes
     * to the case it was, without them) */
    uint32_t rotary_offset;
    double norm_eps, norm_weight_offset;
    /* sinusoidal */
    uint32_t layout;
    double base, freq_shift, position_scale, input_scale, output_scale;
} desc_case;

/* Fills `c` from fuzz input; missing bytes read as zero, so every input is some case. */
void desc_decode(const uint8_t *data, size_t size, desc_case *c);

/* Writes the bytes that decode to `c` (the fields the op reads); returns their number, or 0 if
 * `capacity` is too small. */
size_t desc_encode(const desc_case *c, uint8_t *out, size_t capacity);

#endif
