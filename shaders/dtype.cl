/* SPDX-License-Identifier: MIT */
/* Output element types of the OpenCL C kernels, chosen by one define per variant:
 *   POSENC_OUT_F32, POSENC_OUT_F16 or POSENC_OUT_BF16.
 * POSENC_OUT_TYPE is the element type of out/x pointers; posenc_load_out/posenc_store_out read
 * and write one element as float. f16 uses vload_half/vstore_half_rte, which OpenCL 1.2 has
 * without cl_khr_fp16; bf16 rounds to nearest even on the 32-bit pattern as src/core/half.c
 * does (NaN kept quiet). 16-bit stores are plain: OpenCL memory is byte-addressable.
 */
#ifndef POSENC_DTYPE_CL
#define POSENC_DTYPE_CL

#if defined(POSENC_OUT_F32) && !defined(POSENC_OUT_F16) && !defined(POSENC_OUT_BF16)
#define POSENC_OUT_TYPE float
#elif defined(POSENC_OUT_F16) && !defined(POSENC_OUT_F32) && !defined(POSENC_OUT_BF16)
#define POSENC_OUT_TYPE half
#elif defined(POSENC_OUT_BF16) && !defined(POSENC_OUT_F32) && !defined(POSENC_OUT_F16)
#define POSENC_OUT_TYPE ushort
#else
#error "define exactly one of POSENC_OUT_F32, POSENC_OUT_F16, POSENC_OUT_BF16"
#endif

ushort posenc_bf16_from_f32(float value)
{
    uint u = as_uint(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a (quiet) NaN */
        return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

float posenc_bf16_to_f32(ushort bits)
{
    return as_float((uint)bits << 16);
}

float posenc_load_out(const global POSENC_OUT_TYPE *p, uint index)
{
#if defined(POSENC_OUT_F32)
    return p[index];
#elif defined(POSENC_OUT_F16)
    return vload_half(index, p);
#else
    return posenc_bf16_to_f32(p[index]);
#endif
}

void posenc_store_out(global POSENC_OUT_TYPE *p, uint index, float value)
{
#if defined(POSENC_OUT_F32)
    p[index] = value;
#elif defined(POSENC_OUT_F16)
    vstore_half_rte(value, index, p);
#else
    p[index] = posenc_bf16_from_f32(value);
#endif
}

/* out[out_index] = value, plus x[x_index] * input_scale when `add`: the sinusoidal kernels'
 * store. */
void posenc_put_out(global POSENC_OUT_TYPE *out, uint out_index, const global POSENC_OUT_TYPE *x,
                    uint x_index, int add, float input_scale, float value)
{
    if (add)
        value = posenc_load_out(x, x_index) * input_scale + value;
    posenc_store_out(out, out_index, value);
}

/* Eight consecutive elements at p[index..index+7] as float8, and back: the vector twins of
 * posenc_load_out/posenc_store_out for the kernels that work on runs of a row
 * (rope_contiguous.cl, sinusoidal_contiguous.cl), bit for bit the same conversions.
 * f16 runs are converted by the CPU's own instructions where the compiler has _Float16 with
 * them (POSENC_NATIVE_F16: clang, PoCL's among them, on x86-64 with F16C or on arm64), at any
 * alignment, 16 at a time where the device has 16-wide registers. Elsewhere runs 16 bytes
 * aligned go through vloada_half8/vstorea_half8_rte (PoCL's split a run of 16 into two of 8,
 * each taken apart and put together again) and other runs are converted with integer
 * operations as src/core/half.c does (vload_half is scalar in some implementations). Every
 * way rounds to nearest even as half.c does; a NaN may keep more of its payload. */

/* The 8-wide helpers run in the kernels' inner loops: always inlined, as LLVM (PoCL) would
 * otherwise call the 16-bit stores out of line, twice the time of the loop itself. */
#if defined(__clang__)
#define POSENC_INLINE static inline __attribute__((always_inline))
#else
#define POSENC_INLINE static inline
#endif

/* The kernels on runs of a row keep their 16-wide vectors in 512-bit registers where the
 * device has them: LLVM's tuning for AVX-512 CPUs otherwise splits whatever it converts or
 * builds itself into 256-bit halves (the conversions of f16 among them). */
#if defined(__clang__) && defined(__has_attribute)
#if __has_attribute(min_vector_width)
#define POSENC_WIDE_KERNEL __attribute__((min_vector_width(512)))
#endif
#endif
#if !defined(POSENC_WIDE_KERNEL)
#define POSENC_WIDE_KERNEL
#endif

#if defined(POSENC_OUT_F16) && defined(__clang__) && defined(__FLT16_MANT_DIG__) && \
    ((defined(__x86_64__) && defined(__F16C__)) || defined(__aarch64__))
#define POSENC_NATIVE_F16 1
typedef _Float16 posenc_f16x8 __attribute__((ext_vector_type(8)));
typedef _Float16 posenc_f16x16 __attribute__((ext_vector_type(16)));
/* Runs of 16-bit elements at any even address. */
typedef ushort posenc_u16x8_any __attribute__((ext_vector_type(8), aligned(2)));
typedef ushort posenc_u16x16_any __attribute__((ext_vector_type(16), aligned(2)));
#endif

#if defined(POSENC_OUT_F16)
POSENC_INLINE float8 posenc_f16_to_f32_8(ushort8 bits)
{
    uint8 h = convert_uint8(bits);
    uint8 sign = (h & 0x8000u) << 16;
    uint8 exponent = (h >> 10) & 0x1fu;
    uint8 mantissa = h & 0x3ffu;
    uint8 normal = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    /* Infinity or NaN (quieted, payload kept). */
    uint8 special = sign | 0x7f800000u | (mantissa << 13) | (as_uint8(mantissa != 0u) & 0x400000u);
    /* Zero or subnormal: mantissa * 2^-24, exact in float (and never a float subnormal). */
    uint8 small = sign | as_uint8(convert_float8(mantissa) * 0x1p-24f);
    uint8 result = select(normal, special, exponent == 0x1fu);
    result = select(result, small, exponent == 0u);
    return as_float8(result);
}

POSENC_INLINE ushort8 posenc_f32_to_f16_8(float8 value)
{
    uint8 u = as_uint8(value);
    uint8 sign = (u >> 16) & 0x8000u;
    uint8 magnitude = u & 0x7fffffffu;
    /* Normal: rebias the exponent and round the 13 dropped bits to nearest even. */
    uint8 result = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
    /* Below the smallest normal 2^-14: adding 0.5 makes the float unit round the mantissa to
     * the nearest even multiple of 2^-24. */
    uint8 small = as_uint8(as_float8(magnitude) + 0.5f) - 0x3f000000u;
    result = select(result, small, magnitude < 0x38800000u);
    result = select(result, (uint8)0x7c00u, magnitude >= 0x477ff000u); /* to infinity */
    uint8 special = 0x7c00u | (as_uint8(magnitude > 0x7f800000u) & 0x200u);
    result = select(result, special, magnitude >= 0x7f800000u); /* infinity, NaN */
    return convert_ushort8((result | sign) & 0xffffu);
}
#endif

#if defined(POSENC_OUT_BF16)
/* Whether any lane of a comparison's result is set: where clang has __builtin_reduce_or, one
 * mask test (PoCL made the tree of ors below into a vector operation per step, a fifth of the
 * bf16 word loop). */
#if defined(__clang__) && defined(__has_builtin)
#if __has_builtin(__builtin_reduce_or)
#define POSENC_REDUCE_OR 1
#endif
#endif
POSENC_INLINE int posenc_any8(int8 lanes)
{
#if defined(POSENC_REDUCE_OR)
    return __builtin_reduce_or(lanes) != 0;
#else
    int4 quarter = lanes.lo | lanes.hi;
    int2 eighth = quarter.lo | quarter.hi;
    return (eighth.x | eighth.y) != 0;
#endif
}

POSENC_INLINE int posenc_any16(int16 lanes)
{
#if defined(POSENC_REDUCE_OR)
    return __builtin_reduce_or(lanes) != 0;
#else
    return posenc_any8(lanes.lo | lanes.hi);
#endif
}

POSENC_INLINE ushort8 posenc_bf16_from_f32_8(float8 value)
{
    uint8 u = as_uint8(value);
    uint8 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint8 nan = (u >> 16) | 0x40u; /* NaN: keep it a (quiet) NaN */
    return convert_ushort8(select(rounded, nan, (u & 0x7fffffffu) > 0x7f800000u) & 0xffffu);
}

/* Two runs of 8 at once, the first's bits then the second's: the same bits as
 * posenc_bf16_from_f32_8 on each, in fewer operations. NaNs, rare, are looked for in all 16
 * lanes at once (a float compare, or-ed down to one test) before their lanes are replaced,
 * and the 16 results are packed to 16 bits together. */
POSENC_INLINE ushort16 posenc_bf16_from_f32_16(float8 first, float8 second)
{
    uint16 u = as_uint16((float16)(first, second));
    uint16 high = u >> 16;
    uint16 rounded = (u + 0x7fffu + (high & 1u)) >> 16;
    if (posenc_any8((first != first) | (second != second))) {
        float16 value = (float16)(first, second);
        rounded = select(rounded, high | 0x40u, as_uint16(value != value)); /* a quiet NaN */
    }
    return convert_ushort16(rounded);
}
#endif

#if defined(POSENC_OUT_BF16)
/* Two vectors of 16 values rounded to bf16 as posenc_bf16_from_f32 rounds them, as 16 32-bit
 * words: `low`'s values in their low halves, `high`'s in their high halves (pairs of adjacent
 * elements). NaNs, rare, are looked for in all 32 values at once before their lanes are
 * replaced. */
POSENC_INLINE uint16 posenc_bf16_words(float16 low, float16 high)
{
    uint16 ul = as_uint16(low), uh = as_uint16(high);
    uint16 words = ((ul + 0x7fffu + ((ul >> 16) & 1u)) >> 16) |
                   ((uh + 0x7fffu + ((uh >> 16) & 1u)) & 0xffff0000u);
    int16 nan_low = low != low, nan_high = high != high;
    if (posenc_any16(nan_low | nan_high)) { /* quiet NaNs, as posenc_bf16_from_f32 */
        uint16 low_bits = select(words & 0xffffu, (ul >> 16) | 0x40u, as_uint16(nan_low));
        uint16 high_bits =
            select(words & 0xffff0000u, (uh & 0xffff0000u) | 0x400000u, as_uint16(nan_high));
        words = low_bits | high_bits;
    }
    return words;
}
#endif

POSENC_INLINE float8 posenc_load8_out(const global POSENC_OUT_TYPE *p, uint index)
{
#if defined(POSENC_OUT_F32)
    return vload8(0, p + index);
#elif defined(POSENC_NATIVE_F16)
    posenc_u16x8_any bits = *(const global posenc_u16x8_any *)(p + index);
    return __builtin_convertvector(__builtin_astype(bits, posenc_f16x8), float8);
#elif defined(POSENC_OUT_F16)
    const global half *at = p + index;
    if (((uintptr_t)at & 15u) == 0u)
        return vloada_half8(0, at);
    return posenc_f16_to_f32_8(vload8(0, (const global ushort *)at));
#else
    return as_float8(convert_uint8(vload8(0, p + index)) << 16);
#endif
}

#if !defined(POSENC_OUT_F32)
/* vstore8 of ushort8 runs as eight 2-byte stores in PoCL; 4-byte aligned, the same bytes go
 * out as one uint4 store. */
POSENC_INLINE void posenc_store8_bits16(global ushort *p, uint index, ushort8 bits)
{
    global ushort *at = p + index;
    if (((uintptr_t)at & 3u) == 0u)
        vstore4(as_uint4(bits), 0, (global uint *)at);
    else
        vstore8(bits, 0, at);
}
#endif

POSENC_INLINE void posenc_store8_out(global POSENC_OUT_TYPE *p, uint index, float8 value)
{
#if defined(POSENC_OUT_F32)
    vstore8(value, 0, p + index);
#elif defined(POSENC_NATIVE_F16)
    posenc_f16x8 h = __builtin_convertvector(value, posenc_f16x8);
    *(global posenc_u16x8_any *)(p + index) = __builtin_astype(h, posenc_u16x8_any);
#elif defined(POSENC_OUT_F16)
    global half *at = p + index;
    if (((uintptr_t)at & 15u) == 0u)
        vstorea_half8_rte(value, 0, at);
    else
        posenc_store8_bits16((global ushort *)p, index, posenc_f32_to_f16_8(value));
#else
    posenc_store8_bits16(p, index, posenc_bf16_from_f32_8(value));
#endif
}

/* Sixteen consecutive elements at p[index..index+15] as float16, and back: two runs of 8 with
 * half the instructions where the device has 16-wide registers (AVX-512 in PoCL), the same
 * conversions bit for bit (without POSENC_NATIVE_F16, f16 runs 32 bytes aligned through
 * vloada_half16 and vstorea_half16_rte). `aligned`: p + index is 32 bytes aligned, which a
 * caller knows once for a run of loads or stores (a test and a branch each was a fifth of a
 * 16-bit kernel's loop). */
POSENC_INLINE float16 posenc_load16_out_at(const global POSENC_OUT_TYPE *p, uint index,
                                           int aligned)
{
#if defined(POSENC_OUT_F32)
    (void)aligned;
    return vload16(0, p + index);
#elif defined(POSENC_NATIVE_F16)
    (void)aligned;
    posenc_u16x16_any bits = *(const global posenc_u16x16_any *)(p + index);
    return __builtin_convertvector(__builtin_astype(bits, posenc_f16x16), float16);
#elif defined(POSENC_OUT_F16)
    if (aligned)
        return vloada_half16(0, p + index);
    return (float16)(posenc_load8_out(p, index), posenc_load8_out(p, index + 8u));
#else
    (void)aligned;
    return as_float16(convert_uint16(vload16(0, p + index)) << 16);
#endif
}

POSENC_INLINE void posenc_store16_out_at(global POSENC_OUT_TYPE *p, uint index, int aligned,
                                         float16 value)
{
#if defined(POSENC_OUT_F32)
    (void)aligned;
    vstore16(value, 0, p + index);
#elif defined(POSENC_NATIVE_F16)
    (void)aligned;
    posenc_f16x16 h = __builtin_convertvector(value, posenc_f16x16);
    *(global posenc_u16x16_any *)(p + index) = __builtin_astype(h, posenc_u16x16_any);
#elif defined(POSENC_OUT_F16)
    if (aligned) {
        vstorea_half16_rte(value, 0, p + index);
        return;
    }
    posenc_store8_out(p, index, value.lo);
    posenc_store8_out(p, index + 8u, value.hi);
#else
    ushort16 bits = posenc_bf16_from_f32_16(value.lo, value.hi);
    global ushort *run = p + index;
    if (aligned || ((uintptr_t)run & 3u) == 0u)
        vstore8(as_uint8(bits), 0, (global uint *)run);
    else
        vstore16(bits, 0, run);
#endif
}

/* The same where the caller does not know the alignment. */
POSENC_INLINE int posenc_aligned32(const global POSENC_OUT_TYPE *p, uint index)
{
    return ((uintptr_t)(p + index) & 31u) == 0u;
}

POSENC_INLINE float16 posenc_load16_out(const global POSENC_OUT_TYPE *p, uint index)
{
    return posenc_load16_out_at(p, index, posenc_aligned32(p, index));
}

POSENC_INLINE void posenc_store16_out(global POSENC_OUT_TYPE *p, uint index, float16 value)
{
    posenc_store16_out_at(p, index, posenc_aligned32(p, index), value);
}

#endif
