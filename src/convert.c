/* Portable half and bfloat16 <-> fp32 row conversions, and convpool_convert. */
#include "convert.h"

#include <string.h>

#include "half.h"
#include "validate.h"

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

/* The public conversion: the row functions the operators use (chosen by ISA),
   through a float32 buffer between two 16-bit dtypes. */
convpool_status convpool_convert(const void *src, convpool_dtype src_dtype, void *dst,
                                 convpool_dtype dst_dtype, size_t count) {
  cp_clear_error();
  const size_t src_es = convpool_dtype_size(src_dtype), dst_es = convpool_dtype_size(dst_dtype);
  if (src_es == 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "src_dtype = %d is not a convpool_dtype",
                   (int)src_dtype);
  if (dst_es == 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "dst_dtype = %d is not a convpool_dtype",
                   (int)dst_dtype);
  if (count == 0) return CONVPOOL_SUCCESS;
  if (src == NULL || dst == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s is NULL", src == NULL ? "src" : "dst");
  size_t src_bytes, dst_bytes;
  if (!cp_mul(count, src_es, &src_bytes) || !cp_mul(count, dst_es, &dst_bytes))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "count = %zu has a byte count that overflows", count);
  convpool_status st;
  if ((st = cp_check_aligned("src", src, src_dtype)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_aligned("dst", dst, dst_dtype)) != CONVPOOL_SUCCESS) return st;
  if ((st = cp_check_disjoint("dst", dst, dst_bytes, "src", src, src_bytes)) != CONVPOOL_SUCCESS)
    return st;
  if (src_dtype == dst_dtype) {
    memcpy(dst, src, dst_bytes);
    return CONVPOOL_SUCCESS;
  }
  const cp_isa isa = cp_cpu_get()->isa;
  const cp_widen_fn widen = cp_widen_select(src_dtype, isa);
  const cp_narrow_fn narrow = cp_narrow_select(dst_dtype, isa);
  if (widen == NULL) { /* float32 to a 16-bit dtype */
    narrow(src, dst, count);
  } else if (narrow == NULL) { /* a 16-bit dtype to float32 */
    widen(src, dst, count);
  } else { /* float16 <-> bfloat16 */
    float row[256];
    const uint16_t *s = src;
    uint16_t *d = dst;
    for (size_t i = 0; i < count; i += sizeof row / sizeof row[0]) {
      const size_t n =
          count - i < sizeof row / sizeof row[0] ? count - i : sizeof row / sizeof row[0];
      widen(s + i, row, n);
      narrow(row, d + i, n);
    }
  }
  return CONVPOOL_SUCCESS;
}
