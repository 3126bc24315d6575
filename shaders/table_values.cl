/* SPDX-License-Identifier: MIT */
/* Elements of 1-D tables the host passes as they are (the caller's cos and sin, the QK norm's
 * weights), read through words so that one argument type takes every element type. Included
 * after dtype.cl and posenc_kernel_params.h. */
#ifndef POSENC_TABLE_VALUES_CL
#define POSENC_TABLE_VALUES_CL

/* Element `index` of a table of `dtype` (POSENC_TABLE_*). */
POSENC_INLINE float posenc_rope_table_value(const global uint *table, uint index, uint dtype)
{
    if (dtype == POSENC_TABLE_F32)
        return as_float(table[index]);
    if (dtype == POSENC_TABLE_F16)
        return vload_half(index, (const global half *)table);
    return posenc_bf16_to_f32(((const global ushort *)table)[index]);
}

#endif
