/*
 * Pooling epilogue row kernels: one pooled output row from the tile buffer.
 *
 *   dst[t] = convert(max_{a < P, b < P} src[a*ld + t*P + b] + bias)   for t < n
 *
 * The max propagates NaN (a NaN anywhere in a window gives NaN, as torch).
 * bias is NULL when the layer has none (nothing is added, so -0 stays -0).
 * dst is float, IEEE half or bfloat16 (rounded to nearest even).
 * src may be modified (it is scratch).
 */
#ifndef CONVPOOL_POOL_H
#define CONVPOOL_POOL_H

#include <stddef.h>

typedef enum cp_store_kind { CP_STORE_F32 = 0, CP_STORE_F16 = 1, CP_STORE_BF16 = 2 } cp_store_kind;

typedef void (*cp_pool_row_fn)(float *src, size_t ld, size_t n, const float *bias, void *dst,
                               cp_store_kind store);

void cp_pool1_row_avx512f(float *src, size_t ld, size_t n, const float *bias, void *dst,
                          cp_store_kind store);
void cp_pool2_row_avx512f(float *src, size_t ld, size_t n, const float *bias, void *dst,
                          cp_store_kind store);

#endif
