# Kernel variants compiled and embedded at build time (see cmake/PosencKernels.cmake).
#   posenc_kernel_variant(<name> <file in shaders/> <define>...)
# <name> is what a backend looks up (posenc__spirv_find, posenc__cl_kernel_find in
# src/core/kernels.h); the same name in GLSL and OpenCL C means the same kernel.

posenc_kernel_variant(sinusoidal_f32  sinusoidal.comp POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_f16  sinusoidal.comp POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_bf16 sinusoidal.comp POSENC_OUT_BF16)

posenc_kernel_variant(sinusoidal_f32  sinusoidal.cl POSENC_OUT_F32)
posenc_kernel_variant(sinusoidal_f16  sinusoidal.cl POSENC_OUT_F16)
posenc_kernel_variant(sinusoidal_bf16 sinusoidal.cl POSENC_OUT_BF16)

# OpenCL backend (src/opencl): RoPE and the copy roofline.
posenc_kernel_variant(rope_f32  rope.cl POSENC_OUT_F32)
posenc_kernel_variant(rope_f16  rope.cl POSENC_OUT_F16)
posenc_kernel_variant(rope_bf16 rope.cl POSENC_OUT_BF16)
posenc_kernel_variant(copy_u32  copy.cl)
