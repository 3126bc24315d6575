/* SPDX-License-Identifier: MIT */
/* The AVX-512 kernels with AVX512_BF16 conversions for bf16 stores: cpu_kernels_avx512.c
 * compiled once more with -mavx512bf16. */
#define POSENC_CPU_BF16 1
#include "cpu_kernels_avx512.c"
