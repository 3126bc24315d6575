# SPDX-License-Identifier: MIT
# Kernel variants compiled and embedded at build time (see cmake/PosencKernels.cmake).
#   posenc_kernel_variant(<name> <file in shaders/> <define>...)
# <name> becomes the id a backend looks the variant up by (POSENC__SPIRV_<NAME>, POSENC__CL_<NAME>
# in the generated kernel_ids.h; src/core/kernels.h); the same name in GLSL and OpenCL C means
# the same kernel.

posenc_kernel_variant(sinusoidal_f32  sinusoidal.comp POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_f16  sinusoidal.comp POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_bf16 sinusoidal.comp POSENC_OUT_BF16)

posenc_kernel_variant(sinusoidal_f32  sinusoidal.cl POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_f16  sinusoidal.cl POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_bf16 sinusoidal.cl POSENC_OUT_BF16)

# Vulkan backend (src/vulkan): RoPE, the sinusoidal kernels with 16-bit storage and on blocks,
# and the copy roofline. "_s16" variants keep 16-bit elements in uint16_t and need the device's
# 16-bit storage feature; the others pack two per 32-bit word. The "_blocks" variants move whole
# 16-byte blocks (heads or rows of consecutive, aligned elements) and need no 16-bit storage.
posenc_kernel_variant(rope_f32      rope.comp POSENC_OUT_F32)
posenc_kernel_variant(rope_f16      rope.comp POSENC_OUT_F16)
posenc_kernel_variant(rope_bf16     rope.comp POSENC_OUT_BF16)
posenc_kernel_variant(rope_f16_s16  rope.comp POSENC_OUT_F16 POSENC_STORAGE16=1)
posenc_kernel_variant(rope_bf16_s16 rope.comp POSENC_OUT_BF16 POSENC_STORAGE16=1)
# The same with the QK norm (POSENC_ROPE_FLAG_NORM), for the passes that normalize.
posenc_kernel_variant(rope_f32_norm      rope.comp POSENC_OUT_F32 POSENC_NORM=1)
posenc_kernel_variant(rope_f16_norm      rope.comp POSENC_OUT_F16 POSENC_NORM=1)
posenc_kernel_variant(rope_bf16_norm     rope.comp POSENC_OUT_BF16 POSENC_NORM=1)
posenc_kernel_variant(rope_f16_s16_norm  rope.comp POSENC_OUT_F16 POSENC_STORAGE16=1 POSENC_NORM=1)
posenc_kernel_variant(rope_bf16_s16_norm rope.comp POSENC_OUT_BF16 POSENC_STORAGE16=1 POSENC_NORM=1)
posenc_kernel_variant(rope_f32_blocks  rope_blocks.comp POSENC_OUT_F32)
posenc_kernel_variant(rope_f16_blocks  rope_blocks.comp POSENC_OUT_F16)
posenc_kernel_variant(rope_bf16_blocks rope_blocks.comp POSENC_OUT_BF16)
# The same with the QK norm per head, and per token; they need subgroup shuffles.
posenc_kernel_variant(rope_f32_blocks_norm  rope_blocks.comp POSENC_OUT_F32 POSENC_NORM=1)
posenc_kernel_variant(rope_f16_blocks_norm  rope_blocks.comp POSENC_OUT_F16 POSENC_NORM=1)
posenc_kernel_variant(rope_bf16_blocks_norm rope_blocks.comp POSENC_OUT_BF16 POSENC_NORM=1)
posenc_kernel_variant(rope_f32_blocks_token_norm  rope_blocks.comp POSENC_OUT_F32 POSENC_NORM=1
                      POSENC_NORM_PER_TOKEN=1)
posenc_kernel_variant(rope_f16_blocks_token_norm  rope_blocks.comp POSENC_OUT_F16 POSENC_NORM=1
                      POSENC_NORM_PER_TOKEN=1)
posenc_kernel_variant(rope_bf16_blocks_token_norm rope_blocks.comp POSENC_OUT_BF16 POSENC_NORM=1
                      POSENC_NORM_PER_TOKEN=1)
posenc_kernel_variant(sinusoidal_f16_s16  sinusoidal.comp POSENC_OUT_F16 POSENC_STORAGE16=1)
posenc_kernel_variant(sinusoidal_bf16_s16 sinusoidal.comp POSENC_OUT_BF16 POSENC_STORAGE16=1)
posenc_kernel_variant(sinusoidal_f32_blocks  sinusoidal_blocks.comp POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_f16_blocks  sinusoidal_blocks.comp POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_bf16_blocks sinusoidal_blocks.comp POSENC_OUT_BF16)
posenc_kernel_variant(copy_u32   copy.comp)
posenc_kernel_variant(copy_u32x4 copy.comp POSENC_COPY_VEC4)

# OpenCL backend (src/opencl): RoPE and the copy roofline.
posenc_kernel_variant(rope_f32  rope.cl POSENC_OUT_F32)
posenc_kernel_variant(rope_f16  rope.cl POSENC_OUT_F16)
posenc_kernel_variant(rope_bf16 rope.cl POSENC_OUT_BF16)
posenc_kernel_variant(copy_u32  copy.cl)
# OpenCL on CPU-type devices, for contiguous dims: eight pairs (frequencies) of a row per
# work-item in vector types; the same results as rope.cl and sinusoidal.cl.
posenc_kernel_variant(rope_contiguous_f32  rope_contiguous.cl POSENC_OUT_F32)
posenc_kernel_variant(rope_contiguous_f16  rope_contiguous.cl POSENC_OUT_F16)
posenc_kernel_variant(rope_contiguous_bf16 rope_contiguous.cl POSENC_OUT_BF16)
# The same with the QK norm, where every dim of a head is rotated.
posenc_kernel_variant(rope_contiguous_norm_f32  rope_contiguous_norm.cl POSENC_OUT_F32)
posenc_kernel_variant(rope_contiguous_norm_f16  rope_contiguous_norm.cl POSENC_OUT_F16)
posenc_kernel_variant(rope_contiguous_norm_bf16 rope_contiguous_norm.cl POSENC_OUT_BF16)
posenc_kernel_variant(sinusoidal_contiguous_f32  sinusoidal_contiguous.cl POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_contiguous_f16  sinusoidal_contiguous.cl POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_contiguous_bf16 sinusoidal_contiguous.cl POSENC_OUT_BF16)
