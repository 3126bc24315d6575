/* SPDX-License-Identifier: MIT */
/* Exact angle reduction and float-only sin/cos: the numerical core shared by every backend.
 *
 * An angle is kept as a fraction of a turn in Q0.64 fixed point, so reducing it modulo 2*pi is
 * exact integer wrap-around and the error does not grow with the position. A frequency
 * (radians per position) is stored once, on the host, as turns per position: an integer part
 * and a Q0.64 fraction, rounded from float64 with a double-double product. A position is a
 * Q31.32 signed fixed-point number (int32 positions exactly, float positions to 2^-33).
 *
 *   turns(p, f) = frac(p * f) = ((P * F) >> 32) + ((P * I) << 32)   (mod 2^64)
 *
 * with P the Q31.32 position, F the fraction and I the integer part of f. Everything after that
 * is float32: the turn is reduced to the nearest quadrant, the remainder (at most 1/8 turn) is
 * converted to radians with a float-float constant, and minimax polynomials on [-pi/4, pi/4]
 * give sin and cos within about 1 ulp each. The GLSL (shaders/angle.glsl) and OpenCL
 * (shaders/angle.cl) kernels implement the same steps on 32-bit words, so every device meets the
 * same bound without float64. tests/test_kernels.c measures it.
 */
#ifndef POSENC_CORE_ANGLE_H
#define POSENC_CORE_ANGLE_H

#include <stdbool.h>
#include <stdint.h>

/* A frequency in turns per position: integer part + Q0.64 fraction. GPU kernels receive it as
 * three 32-bit words (int_turns, frac >> 32, frac & 0xffffffff); RoPE kernels also get each
 * frequency's position component, after the triplets. */
typedef struct posenc__freq {
    uint64_t frac;
    uint32_t int_turns;
    uint32_t component; /* RoPE: which position component this frequency uses (0: the only one
                         * of plain RoPE; M-RoPE t, h, w = 0, 1, 2; vision h, w = 0, 1) */
} posenc__freq;

/* Rounds `radians_per_position` (finite, >= 0, < 2^32 turns) to fixed point. */
posenc__freq posenc__freq_from_radians(double radians_per_position);

/* Q31.32 positions. posenc__position_from_f32 returns false (and a zero position) for NaN or
 * magnitudes >= 2^31; callers then write NaN. */
int64_t posenc__position_from_i32(int32_t position);
bool posenc__position_from_f32(float position, int64_t *fixed);

/* frac(position * frequency) in Q0.64. */
uint64_t posenc__turns(int64_t position_fixed, posenc__freq freq);

/* sin and cos of 2*pi*turns/2^64, float32 only. */
void posenc__sincos_turns(uint64_t turns, float *sin_out, float *cos_out);

#endif
