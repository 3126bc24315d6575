/* SPDX-License-Identifier: MIT */
/* f16 and bf16 <-> f32 conversions for the command-line tool (round to nearest even), and
 * reading any float .npy element as double. */
#ifndef POSENC_CLI_CONVERT_H
#define POSENC_CLI_CONVERT_H

#include <stdint.h>

#include "npy.h"

float cli_f16_to_f32(uint16_t h);
uint16_t cli_f32_to_f16(float f);
float cli_bf16_to_f32(uint16_t h);
uint16_t cli_f32_to_bf16(float f);

/* Element `index` of a .npy array of any dtype, as double. */
double cli_npy_element(const cli_npy_array *array, uint64_t index);

#endif
