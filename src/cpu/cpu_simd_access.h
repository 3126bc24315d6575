/* SPDX-License-Identifier: MIT */
/* The CPU kernel template's foundation (cpu_simd.h): when its small functions are forced
 * inline, and vectors loaded and stored by dtype over the variant's f_/h_/b_ vocabulary. */
#ifndef POSENC_CPU_SIMD_ACCESS_H
#define POSENC_CPU_SIMD_ACCESS_H

#include "cpu/cpu_kernels.h"

/* The kernels are small functions that must inline into their loops to be fast: the lane
 * counts, dtypes and modes they take are constants there. Where the build does not optimize,
 * or instruments every access (ASan, TSan), forcing that only multiplies the code, and the
 * compiler is left to choose: GCC at -O0 made 5 MB of k_sinusoidal_rows from its 48 instances,
 * and each kernel file took 40-70 s to compile at -O0 and 75 s with ASan, against 21 s at -O3,
 * whose code this leaves as it was. */
#if defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define CPU_INSTRUMENTED 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define CPU_INSTRUMENTED 1
#endif
#if defined(_MSC_VER) && !defined(__clang__)
#  define CPU_INLINE static __forceinline
#  define CPU_INLINE_ALWAYS static __forceinline
#else
#  define CPU_INLINE_ALWAYS static inline __attribute__((always_inline))
#  if !defined(__OPTIMIZE__) || defined(CPU_INSTRUMENTED)
#    define CPU_INLINE static inline
#  else
#    define CPU_INLINE CPU_INLINE_ALWAYS
#  endif
#endif
/* CPU_INLINE_ALWAYS is for the few whose arguments must be constants where they run in every
 * build: the held kernels' chunk sizes, which size their loops over arrays of registers (out
 * of line, GCC takes the arrays' unloaded entries for maybe-used uninitialized). */

/* Unrolls a loop whose trip count is a constant in the instance (16 at most). */
#if defined(__GNUC__) || defined(__clang__)
#  define UNROLL_ALL _Pragma("GCC unroll 16")
#else
#  define UNROLL_ALL
#endif

#define DT_F32 POSENC_DTYPE_F32
#define DT_F16 POSENC_DTYPE_F16
#define DT_BF16 POSENC_DTYPE_BF16

/* ---- element access by dtype; `dt` is a constant after inlining, so the branches fold ---- */

/* Keeps the vector `v` in a register. A loaded vector that two instructions use is otherwise
 * loaded by both (GCC folds the load into each as a memory operand): with the table in
 * registers, RoPE's f32 loop made four loads per two stores, and an f32 decode step with
 * AVX-512 on an Intel Xeon ran 4 % slower. */
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#  define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#else
#  define KEEP_IN_REGISTER(v) ((void)0)
#endif

CPU_INLINE size_t dt_size(posenc_dtype dt) { return dt == DT_F32 ? 4 : 2; }

CPU_INLINE vf load_dt(posenc_dtype dt, const uint8_t *p)
{
    if (dt == DT_F16)
        return h_load(p);
    if (dt == DT_BF16)
        return b_load(p);
    return f_load(p);
}

CPU_INLINE vf load_dt_part(posenc_dtype dt, const uint8_t *p, size_t n)
{
    if (dt == DT_F16)
        return h_load_part(p, n);
    if (dt == DT_BF16)
        return b_load_part(p, n);
    return f_load_part(p, n);
}

CPU_INLINE void store_dt(posenc_dtype dt, uint8_t *p, vf v)
{
    if (dt == DT_F16)
        h_store(p, v);
    else if (dt == DT_BF16)
        b_store(p, v);
    else
        f_store(p, v);
}

/* Two full vectors. */
CPU_INLINE void store_dt2(posenc_dtype dt, uint8_t *p, vf v, uint8_t *q, vf w)
{
#if defined(HAVE_H_STORE2)
    if (dt == DT_F16) {
        h_store2(p, v, q, w);
        return;
    }
#endif
    store_dt(dt, p, v);
    store_dt(dt, q, w);
}

/* Two full vectors of a head whose f16 NaNs are rewritten at its end (fix_nans_dt), when the
 * variant can: a mask accumulated in `nan` instead of a test and branch per store. */
CPU_INLINE void store_dt2_deferred(posenc_dtype dt, uint8_t *p, vf v, uint8_t *q, vf w,
                                   unsigned *nan)
{
#if defined(HAVE_H_FIX_NANS)
    if (dt == DT_F16) {
        *nan |= h_unordered(v, w);
        h_store_raw(p, v);
        h_store_raw(q, w);
        return;
    }
#endif
    (void)nan;
    store_dt2(dt, p, v, q, w);
}

/* The end of a head written with store_dt2_deferred: `n` values (a multiple of LANES). */
CPU_INLINE void fix_nans_dt(posenc_dtype dt, uint8_t *p, size_t n, unsigned nan)
{
#if defined(HAVE_H_FIX_NANS)
    if (dt == DT_F16 && nan)
        h_fix_nans(p, n);
#else
    (void)dt;
    (void)p;
    (void)n;
    (void)nan;
#endif
}

CPU_INLINE void store_dt_part(posenc_dtype dt, uint8_t *p, vf v, size_t n)
{
    if (dt == DT_F16)
        h_store_part(p, v, n);
    else if (dt == DT_BF16)
        b_store_part(p, v, n);
    else
        f_store_part(p, v, n);
}

#endif
