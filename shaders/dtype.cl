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

#endif
