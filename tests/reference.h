/* SPDX-License-Identifier: MIT */
/* The float64 reference every test compares the library with: RoPE and sinusoidal encodings with
 * exactly reduced angles, f16/bf16 conversions, and the tolerances of the accuracy promise. */
#ifndef POSENC_TEST_REFERENCE_H
#define POSENC_TEST_REFERENCE_H

#include <posenc/posenc.h>

#include <stdbool.h>
#include <stdint.h>

/* 2^-24: half an f32 ulp at 1, the unit in which the accuracy promise is stated. */
#define REF_UNIT (1.0 / 16777216.0)
/* The promise of posenc.h: 8 * 2^-24, relative to the rotated pair (RoPE) or absolute, times
 * |output_scale| (sinusoidal). */
#define REF_PROMISE (8.0 * REF_UNIT)

/* ---------------------------------------------------------------------------------------------
 * Element types. Conversions round to nearest, ties to even, as the library does when it
 * stores a result.
 */
uint16_t ref_f16_from_float(float value);
float ref_f16_to_float(uint16_t bits);
uint16_t ref_bf16_from_float(float value);
float ref_bf16_to_float(uint16_t bits);

/* `value` rounded to the nearest value of `dtype` (F32, F16 or BF16; DEFAULT means F32). */
float ref_round_to(posenc_dtype dtype, float value);
/* Reads or writes one element of `dtype` (F32, F16, BF16, I32; DEFAULT means F32) at `at`. */
double ref_load(posenc_dtype dtype, const void *at);
void ref_store(posenc_dtype dtype, void *at, double value);
/* One unit in the last place of `dtype` at magnitude |value| (subnormal spacing below the
 * smallest normal). */
double ref_ulp(posenc_dtype dtype, double value);

/* ---------------------------------------------------------------------------------------------
 * Angles. sin and cos of position * frequency, both doubles, with the product kept exactly as a
 * double-double and reduced modulo 2*pi with 2*pi split into three doubles, so the result is
 * within about 1e-15 of the exact value for any |position| <= 2^31 and frequency <= 2^10.
 */
void ref_sincos_product(double position, double frequency, double *sin_out, double *cos_out);

/* ---------------------------------------------------------------------------------------------
 * RoPE
 */

/* inv_freq[j], j < rotary_dim/2, derived from `desc` by the same float64 expressions the library
 * uses (theta, caller inv_freq, LINEAR, NTK and DYNAMIC_NTK scaling (with sequence_length
 * given), freq_factors). Returns the attention
 * factor (desc->attention_factor, default 1). */
double ref_rope_frequencies(const posenc_rope_desc *desc, uint32_t rotary_dim, double *inv_freq);

/* Index of the two dims that pair j rotates together. */
void ref_rope_pair(posenc_rope_style style, uint32_t rotary_dim, uint32_t j, uint32_t *first,
                   uint32_t *second);

/* One head: out[i] = x[i] rotated at `position` (an exact int32 or float value); dims from
 * rotary_dim on are copied. `out` must not alias `x`. */
void ref_rope_head(const double *x, double *out, uint32_t head_dim, uint32_t rotary_dim,
                   posenc_rope_style style, const double *inv_freq, double position,
                   double attention_factor, bool inverse);

/* Multimodal kinds (Qwen2-VL, Qwen3-VL, Pixtral), transcribed from HF transformers: the number
 * of position components of `kind` (1 for POSITIONS_1D). */
uint32_t ref_rope_components(posenc_rope_multimodal kind);

/* Which position component each frequency j < rotary_dim/2 uses under `desc->multimodal` and
 * `desc->mrope_section`, into `component`; for the vision kinds also their inv_freq (theta
 * only), overwriting what ref_rope_frequencies wrote there. */
void ref_rope_multimodal(const posenc_rope_desc *desc, uint32_t rotary_dim, double *inv_freq,
                         uint32_t *component);

/* ref_rope_head with a position per pair: pair j is rotated at pair_positions[j]. */
void ref_rope_head_pairs(const double *x, double *out, uint32_t head_dim, uint32_t rotary_dim,
                         posenc_rope_style style, const double *inv_freq,
                         const double *pair_positions, double attention_factor, bool inverse);

/* Whether `out` is NeoX RoPE (theta 10000, every dim rotated) of the packed f32 rows of `in`
 * ([tokens, heads, head_dim], head_dim even and at most 512), row r at position offset + r / heads,
 * each value within ref_check's f32 tolerance; rows of `out` lie `out_stride` floats apart. On
 * failure prints how many values were outside. */
bool ref_rope_rows_f32_ok(const float *in, const float *out, int64_t out_stride, uint32_t tokens,
                          uint32_t heads, uint32_t head_dim, int32_t offset);
/* The same for the frequencies, scaling and style of `desc` (every dim rotated). */
bool ref_rope_desc_rows_f32_ok(const posenc_rope_desc *desc, const float *in, const float *out,
                               int64_t out_stride, uint32_t tokens, uint32_t heads,
                               uint32_t head_dim, int32_t offset);

/* ---------------------------------------------------------------------------------------------
 * Sinusoidal
 */

/* f[i], i < d_model/2: base^(-i / (d_model/2 - freq_shift)) * position_scale. */
void ref_sinusoidal_frequencies(const posenc_sinusoidal_desc *desc, uint32_t d_model,
                                double *freq);

/* PE(position) of d_model values (output_scale not applied); an odd d_model ends in 0. */
void ref_sinusoidal_row(const double *freq, uint32_t d_model, posenc_sinusoidal_layout layout,
                        double position, double *pe);

/* ---------------------------------------------------------------------------------------------
 * Checking against the promise
 */

/* Worst errors seen by ref_check. `max_units` is |out - ref| in units of 2^-24 * scale (the
 * promise allows 8) over f32 outputs; `max_ratio` is |out - ref| / tolerance over all outputs
 * (the check fails above 1). */
typedef struct ref_stats {
    double max_units;
    double max_ratio;
    unsigned long long values;
    unsigned long long failures;
} ref_stats;

/* The tolerance for an output of `dtype` whose exact value is `ref`: the promise
 * REF_PROMISE * scale (scale: the reference pair norm for RoPE, |output_scale| for sinusoidal),
 * plus `extra` (absolute, for arithmetic the promise does not cover, such as the sum of add mode),
 * plus, for f16 and bf16, one ulp of the output type at |ref|. The kernel computes in f32 and
 * rounds to the output type once, to nearest: that adds at most half an ulp at the f32 result,
 * which is at most one ulp at |ref| even when the f32 result crosses into the next binade. */
double ref_tolerance(posenc_dtype dtype, double ref, double scale, double extra);

/* Checks |out - ref| <= ref_tolerance(...) (NaN fails) and records the error in `stats`. */
bool ref_check(ref_stats *stats, posenc_dtype dtype, double out, double ref, double scale,
               double extra);

/* Merges `from` into `into`. */
void ref_stats_merge(ref_stats *into, const ref_stats *from);

#endif
