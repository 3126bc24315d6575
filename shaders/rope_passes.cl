/* SPDX-License-Identifier: MIT */
/* The four passes every RoPE kernel takes as arguments (posenc_rope_pass, POSENC_ROPE_PASS_*
 * of posenc_kernel_params.h), as the kernels name them. Included after
 * posenc_kernel_params.h. */
#ifndef POSENC_ROPE_PASSES_CL
#define POSENC_ROPE_PASSES_CL

/* qp, kcp, vcp and kp, the passes of the array `passes`; `cache`, whether k and v go to the
 * cache; and k_in, k as the cache pass reads it, or as the k pass does (in place, through
 * k_out: k). */
#define POSENC_ROPE_PASS_POINTERS(passes)                                                    \
    const posenc_rope_pass *qp = &(passes)[POSENC_ROPE_PASS_Q];                              \
    const posenc_rope_pass *kcp = &(passes)[POSENC_ROPE_PASS_K_CACHE];                       \
    const posenc_rope_pass *vcp = &(passes)[POSENC_ROPE_PASS_V_CACHE];                       \
    const posenc_rope_pass *kp = &(passes)[POSENC_ROPE_PASS_K];                              \
    int cache = (kcp->flags & POSENC_ROPE_FLAG_SLOTS) != 0u;                                 \
    const posenc_rope_pass *k_in = cache ? kcp : kp

/* A kernel's pass arguments as private copies, which no store through a buffer may alias
 * (their words are read once, not again after every store), and POSENC_ROPE_PASS_POINTERS
 * to them. */
#define POSENC_ROPE_PRIVATE_PASSES(q_pass, k_cache_pass, v_cache_pass, k_pass)               \
    const posenc_rope_pass passes[POSENC_ROPE_PASSES] = {q_pass, k_cache_pass, v_cache_pass,  \
                                                         k_pass};                            \
    POSENC_ROPE_PASS_POINTERS(passes)

#endif
