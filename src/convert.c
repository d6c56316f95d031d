/* Portable half and bfloat16 <-> fp32 row conversions. */
#include "convert.h"

#include "half.h"

void cp_widen_f16_portable(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = cp_half_to_float(src[i]);
}

void cp_narrow_f16_portable(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = cp_float_to_half(src[i]);
}

void cp_widen_bf16_portable(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = cp_bf16_to_float(src[i]);
}

void cp_narrow_bf16_portable(const float *src, uint16_t *dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = cp_float_to_bf16(src[i]);
}
