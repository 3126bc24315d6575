/* SPDX-License-Identifier: MIT */
/* f16 and bf16 <-> f32 conversions, round-to-nearest-even, NaN and infinity preserved. */
#ifndef POSENC_CORE_HALF_H
#define POSENC_CORE_HALF_H

#include <stdint.h>

float posenc__f16_to_f32(uint16_t h);
uint16_t posenc__f32_to_f16(float f);
float posenc__bf16_to_f32(uint16_t h);
uint16_t posenc__f32_to_bf16(float f);

#endif
