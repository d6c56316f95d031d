/* Row conversions between IEEE half and fp32, chosen once per operator by ISA. */
#ifndef CONVPOOL_CONVERT_H
#define CONVPOOL_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef void (*cp_widen_fn)(const uint16_t *src, float *dst, size_t n);
typedef void (*cp_narrow_fn)(const float *src, uint16_t *dst, size_t n); /* round to nearest even */

void cp_widen_f16_portable(const uint16_t *src, float *dst, size_t n);
void cp_narrow_f16_portable(const float *src, uint16_t *dst, size_t n);
void cp_widen_bf16_portable(const uint16_t *src, float *dst, size_t n);
void cp_narrow_bf16_portable(const float *src, uint16_t *dst, size_t n);
void cp_widen_f16_f16c(const uint16_t *src, float *dst, size_t n);
void cp_narrow_f16_f16c(const float *src, uint16_t *dst, size_t n);

/* Row conversions of a 16-bit dtype (NULL for float32). F16C comes with
   every CPU the AVX2 path accepts. */
static inline cp_widen_fn cp_widen_select(convpool_dtype dtype, cp_isa isa) {
  if (dtype == CONVPOOL_FLOAT16)
    return isa >= CP_ISA_AVX2 ? cp_widen_f16_f16c : cp_widen_f16_portable;
  if (dtype == CONVPOOL_BFLOAT16) return cp_widen_bf16_portable;
  return NULL;
}
static inline cp_narrow_fn cp_narrow_select(convpool_dtype dtype, cp_isa isa) {
  if (dtype == CONVPOOL_FLOAT16)
    return isa >= CP_ISA_AVX2 ? cp_narrow_f16_f16c : cp_narrow_f16_portable;
  if (dtype == CONVPOOL_BFLOAT16) return cp_narrow_bf16_portable;
  return NULL;
}

#endif
