/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's sinusoidal rows (cpu_simd.h): from an anchor and steps by angle
 * addition, or from given values, in every layout and dtype, with or without an input added. */
#ifndef POSENC_CPU_SIMD_SINUSOIDAL_H
#define POSENC_CPU_SIMD_SINUSOIDAL_H

#include "cpu/cpu_simd_access.h"

/* ---- sinusoidal rows ---- */

/* output_scale * pe (+ input_scale * x at element `at`), for n lanes (n == LANES: full);
 * `finite`: the caller knows the values are not NaN. */
CPU_INLINE void emit(posenc_dtype dt, bool add, bool scaled, bool finite, uint8_t *out,
                     const uint8_t *x, size_t at, vf pe, vf os, vf is, size_t n)
{
    const size_t es = dt_size(dt);
    vf v = scaled ? f_mul(pe, os) : pe;
    (void)finite;
    if (n == LANES) {
        if (add)
            v = f_fma(load_dt(dt, x + at * es), is, v);
#if defined(HAVE_H_FIX_NANS)
        /* `finite`: no NaN to rewrite (stepped rows without x: finite sin/cos times a finite
         * scale; rows at given positions may be NaN). */
        if (dt == DT_F16 && finite) {
            h_store_raw(out + at * es, v);
            return;
        }
#endif
        store_dt(dt, out + at * es, v);
    } else {
        if (add)
            v = f_fma(load_dt_part(dt, x + at * es, n), is, v);
        store_dt_part(dt, out + at * es, v, n);
    }
}

/* Angle addition at frequencies i .. i + n (n lanes) for step k shares two rounded products
 * between the rows a + k and a - k: with p = sin_a cos_k and q = cos_a cos_k,
 *   sin/cos(a + k) = p + cos_a sin_k, q - sin_a sin_k;  sin/cos(a - k) = p - cos_a sin_k,
 *   q + sin_a sin_k,
 * each one fused multiply-add, so both rows cost six operations where two rotations cost
 * eight. A row is computed the same way whether its mirror is written or not, so its values do
 * not depend on how the rows were grouped or split over threads. */
CPU_INLINE void step_values(vf sa, vf ca, const float *step_cos, const float *step_sin, size_t n,
                            vf *sb, vf *p, vf *q)
{
    vf cb = n == LANES ? f_load(step_cos) : f_load_part(step_cos, n);
    *sb = n == LANES ? f_load(step_sin) : f_load_part(step_sin, n);
    *p = f_mul(sa, cb);
    *q = f_mul(ca, cb);
}

/* A stepped value limited to [-1, 1]: rounding may take a value of magnitude 1 (cos 0, for a
 * row one step from its anchor) just past 1, by at most the error bound (8 * 2^-24), which
 * the limit only brings closer. A table written as f16 or bf16 without scale or input needs
 * no limit: such a value rounds to +-1 in either type (half an ulp above 1 is 2^-11 for f16),
 * the same bits as the limited value. */
CPU_INLINE vf limit1(posenc_dtype dt, bool add, bool scaled, vf v)
{
    return dt == DT_F32 || add || scaled ? f_clamp1(v) : v;
}

/* Writes frequencies i .. i + n of one row from its values, placed by the layout. */
CPU_INLINE void place_values(posenc_dtype dt, bool add, bool scaled, bool finite, bool interleaved,
                             bool sin_first, uint32_t half, uint8_t *out, const uint8_t *x,
                             uint32_t i, size_t n, vf s, vf c, vf os, vf is)
{
    if (interleaved) {
#if defined(HAVE_H_STORE_ZIP)
        if (dt == DT_F16 && finite && !add && n == LANES) { /* finite: see emit */
            if (scaled) { /* the same products as emit's, taken before the zip */
                s = f_mul(s, os);
                c = f_mul(c, os);
            }
            h_store_zip_raw(out + 4 * (size_t)i, s, c);
            return;
        }
#endif
        vf lo, hi;
        f_zip(s, c, &lo, &hi);
        size_t values = 2 * n;
        emit(dt, add, scaled, finite, out, x, 2 * (size_t)i, lo, os, is,
             values < LANES ? values : LANES);
        if (values > LANES)
            emit(dt, add, scaled, finite, out, x, 2 * (size_t)i + LANES, hi, os, is,
                 values - LANES);
    } else {
        emit(dt, add, scaled, finite, out, x, i, sin_first ? s : c, os, is, n);
        emit(dt, add, scaled, finite, out, x, (size_t)half + i, sin_first ? c : s, os, is, n);
    }
}

/* What a call writes: one row from its own values, or for each step the row after the anchor,
 * the row before it, or both. A constant in each instance of the loops below. */
#define ROWS_DIRECT 0
#define ROWS_AFTER 1
#define ROWS_BEFORE 2
#define ROWS_BOTH 3

/* Frequencies i .. i + n of every row (n == LANES: a full vector, a constant after inlining, so
 * the full-vector loop tests no lane count): the anchor's own values (ROWS_DIRECT), or for each
 * step its row after the anchor (at out) and/or its row before (at back_out). */
CPU_INLINE void sinusoidal_column(posenc_dtype dt, bool add, bool scaled, int mode,
                                  bool interleaved, bool sin_first, uint32_t half, uint32_t rows,
                                  const float *sin_a, const float *cos_a, const float *steps,
                                  size_t step_stride, size_t step_sin_offset, uint8_t *out,
                                  uint8_t *back_out, int64_t out_stride, const uint8_t *x,
                                  const uint8_t *back_x, int64_t x_stride, uint32_t i, size_t n,
                                  vf os, vf is)
{
    vf sa, ca;
    if (n == LANES) {
        sa = f_load(sin_a + i);
        ca = f_load(cos_a + i);
    } else {
        sa = f_load_part(sin_a + i, n);
        ca = f_load_part(cos_a + i, n);
    }
    if (mode == ROWS_DIRECT) {
        place_values(dt, add, scaled, false, interleaved, sin_first, half, out, x, i, n, sa, ca,
                     os, is);
        return;
    }
    for (uint32_t r = 0; r < rows; r++) {
        const float *step_cos = steps + r * step_stride + i;
        vf sb, p, q;
        step_values(sa, ca, step_cos, step_cos + step_sin_offset, n, &sb, &p, &q);
        if (mode & ROWS_AFTER)
            place_values(dt, add, scaled, !add, interleaved, sin_first, half, out + r * out_stride,
                         add ? x + r * x_stride : NULL, i, n,
                         limit1(dt, add, scaled, f_fma(ca, sb, p)),
                         limit1(dt, add, scaled, f_fnma(sa, sb, q)), os, is);
        if (mode & ROWS_BEFORE)
            place_values(dt, add, scaled, !add, interleaved, sin_first, half,
                         back_out - r * out_stride, add ? back_x - r * x_stride : NULL, i, n,
                         limit1(dt, add, scaled, f_fnma(ca, sb, p)),
                         limit1(dt, add, scaled, f_fma(sa, sb, q)), os, is);
    }
}

/* One step k at frequencies i .. i + LANES: the rows a + k at `out` and a - k at `back` (x and
 * back_x: their inputs, when adding). */
CPU_INLINE void step_both(posenc_dtype dt, bool add, bool scaled, bool interleaved,
                          bool sin_first, uint32_t half, vf sa, vf ca, const float *step_cos,
                          const float *step_sin, uint8_t *out, uint8_t *back, const uint8_t *x,
                          const uint8_t *back_x, vf os, vf is)
{
    vf sb, p, q;
    step_values(sa, ca, step_cos, step_sin, LANES, &sb, &p, &q);
    place_values(dt, add, scaled, !add, interleaved, sin_first, half, out, x, 0, LANES,
                 limit1(dt, add, scaled, f_fma(ca, sb, p)),
                 limit1(dt, add, scaled, f_fnma(sa, sb, q)), os, is);
    place_values(dt, add, scaled, !add, interleaved, sin_first, half, back, back_x, 0, LANES,
                 limit1(dt, add, scaled, f_fnma(ca, sb, p)),
                 limit1(dt, add, scaled, f_fma(sa, sb, q)), os, is);
}

/* Steps written after and before the anchor, two at a time: every group of a table's block but
 * those at its edges (cpu_sinusoidal.c). For each pair of steps, a loop over the frequencies
 * with the layout a constant and ten pointers, where sinusoidal_column loops over the steps
 * inside the loop over frequencies with the layout tested in it, and runs out of general
 * registers for its pointers (spilled to vector registers and the stack, reloaded in the
 * loop). Two steps make four rows written side by side: in L3 the stores of four rows at once
 * keep more lines in flight than two (one core, 4096 x 1024 f32: 0.75 of the copy's speed
 * with four, 0.63 with two), and the anchor's values are loaded once for both. Returns the
 * frequencies done (the full vectors); the values are those of sinusoidal_column. */
CPU_INLINE uint32_t sinusoidal_steps_both(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt,
                                          bool add, bool scaled, bool interleaved, vf os, vf is)
{
    const uint32_t half = a->half, rows = a->rows, full = half - half % LANES;
    const size_t es = dt_size(dt);
    const bool sin_first = a->layout == POSENC_SINUSOIDAL_SIN_COS;
    const float *const sin_a = a->sin, *const cos_a = a->cos;
    const size_t step_stride = a->step_stride, step_sin_offset = a->step_sin_offset;
    const float *const steps = a->steps + a->first_step * step_stride;
    const int64_t out_stride = a->out_row_stride, x_stride = a->x_row_stride;
    uint32_t r = 0;
    for (; r + 2 <= rows; r += 2) {
        const float *const c0 = steps + r * step_stride, *const s0 = c0 + step_sin_offset;
        const float *const c1 = c0 + step_stride, *const s1 = s0 + step_stride;
        uint8_t *const o0 = a->out + r * out_stride, *const o1 = o0 + out_stride;
        uint8_t *const b0 = a->back_out - r * out_stride, *const b1 = b0 - out_stride;
        const uint8_t *const x0 = add ? a->x + r * x_stride : NULL;
        const uint8_t *const x1 = add ? x0 + x_stride : NULL;
        const uint8_t *const bx0 = add ? a->back_x - r * x_stride : NULL;
        const uint8_t *const bx1 = add ? bx0 - x_stride : NULL;
        for (size_t i = 0; i < full; i += LANES) {
            const vf sa = f_load(sin_a + i), ca = f_load(cos_a + i);
            const size_t at = (interleaved ? 2 : 1) * i * es; /* bytes */
            step_both(dt, add, scaled, interleaved, sin_first, half, sa, ca, c0 + i, s0 + i,
                      o0 + at, b0 + at, add ? x0 + at : NULL, add ? bx0 + at : NULL, os, is);
            step_both(dt, add, scaled, interleaved, sin_first, half, sa, ca, c1 + i, s1 + i,
                      o1 + at, b1 + at, add ? x1 + at : NULL, add ? bx1 + at : NULL, os, is);
        }
    }
    if (r < rows) {
        const float *const c = steps + r * step_stride, *const s = c + step_sin_offset;
        uint8_t *const o = a->out + r * out_stride, *const b = a->back_out - r * out_stride;
        const uint8_t *const x = add ? a->x + r * x_stride : NULL;
        const uint8_t *const bx = add ? a->back_x - r * x_stride : NULL;
        for (size_t i = 0; i < full; i += LANES) {
            const size_t at = (interleaved ? 2 : 1) * i * es;
            step_both(dt, add, scaled, interleaved, sin_first, half, f_load(sin_a + i),
                      f_load(cos_a + i), c + i, s + i, o + at, b + at, add ? x + at : NULL,
                      add ? bx + at : NULL, os, is);
        }
    }
    return full;
}

/* Every field is copied into a local first: the vector stores may alias anything, which would
 * make the compiler reload the fields after each store. */
CPU_INLINE void sinusoidal_rows(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt, bool add,
                                bool scaled, int mode)
{
    const uint32_t half = a->half, rows = mode == ROWS_DIRECT ? 1 : a->rows;
    const vf os = f_set(a->output_scale), is = f_set(a->input_scale);
    const bool interleaved = a->layout == POSENC_SINUSOIDAL_INTERLEAVED;
    const bool sin_first = a->layout == POSENC_SINUSOIDAL_SIN_COS;
    const float *const sin_a = a->sin, *const cos_a = a->cos;
    const size_t step_stride = a->step_stride, step_sin_offset = a->step_sin_offset;
    const float *const steps = mode != ROWS_DIRECT ? a->steps + a->first_step * step_stride : NULL;
    uint8_t *const out = a->out, *const back_out = a->back_out;
    const uint8_t *const x = a->x, *const back_x = a->back_x;
    const int64_t out_stride = a->out_row_stride, x_stride = a->x_row_stride;
    uint32_t i = 0;
    if (mode == ROWS_BOTH)
        i = interleaved ? sinusoidal_steps_both(a, dt, add, scaled, true, os, is)
                        : sinusoidal_steps_both(a, dt, add, scaled, false, os, is);
    for (; i + LANES <= half; i += LANES)
        sinusoidal_column(dt, add, scaled, mode, interleaved, sin_first, half, rows, sin_a, cos_a,
                          steps, step_stride, step_sin_offset, out, back_out, out_stride, x,
                          back_x, x_stride, i, LANES, os, is);
    if (i < half)
        sinusoidal_column(dt, add, scaled, mode, interleaved, sin_first, half, rows, sin_a, cos_a,
                          steps, step_stride, step_sin_offset, out, back_out, out_stride, x,
                          back_x, x_stride, i, half - i, os, is);
    if (a->d_model > 2 * (int64_t)half) { /* odd d_model: a zero column */
        for (uint32_t r = 0; r < rows; r++) {
            if (mode == ROWS_DIRECT || (mode & ROWS_AFTER))
                emit(dt, add, scaled, !add, out + r * out_stride, add ? x + r * x_stride : NULL,
                     2 * (size_t)half, f_set(0.0f), os, is, 1);
            if (mode & ROWS_BEFORE)
                emit(dt, add, scaled, !add, back_out - r * out_stride,
                     add ? back_x - r * x_stride : NULL, 2 * (size_t)half, f_set(0.0f), os, is,
                     1);
        }
    }
}

/* One instance per combination, so that the loops test none of them. */
#define ROWS_CASES(add, scaled)                                                               \
    switch (mode) {                                                                           \
    case ROWS_DIRECT: sinusoidal_rows(a, dt, add, scaled, ROWS_DIRECT); break;                \
    case ROWS_AFTER: sinusoidal_rows(a, dt, add, scaled, ROWS_AFTER); break;                  \
    case ROWS_BEFORE: sinusoidal_rows(a, dt, add, scaled, ROWS_BEFORE); break;                \
    default: sinusoidal_rows(a, dt, add, scaled, ROWS_BOTH); break;                           \
    }

CPU_INLINE void sinusoidal_rows_dt(const posenc_cpu_sinusoidal_rows *a, posenc_dtype dt)
{
    int mode = !a->steps ? ROWS_DIRECT
                         : (a->out ? ROWS_AFTER : 0) | (a->back_out ? ROWS_BEFORE : 0);
    bool add = a->x || a->back_x, scaled = a->output_scale != 1.0f;
    if (add && scaled)
        ROWS_CASES(true, true)
    else if (add)
        ROWS_CASES(true, false)
    else if (scaled)
        ROWS_CASES(false, true)
    else
        ROWS_CASES(false, false)
}
#undef ROWS_CASES

static void k_sinusoidal_rows(const posenc_cpu_sinusoidal_rows *a)
{
    switch (a->dtype) {
    case DT_F16: sinusoidal_rows_dt(a, DT_F16); break;
    case DT_BF16: sinusoidal_rows_dt(a, DT_BF16); break;
    default: sinusoidal_rows_dt(a, DT_F32); break;
    }
}

#endif
