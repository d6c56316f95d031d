/* Checks at the API boundary that are not about one descriptor's fields. */
#include "validate.h"

#include <string.h>

#include "algo/algo.h"

static convpool_status cp_check_options(const convpool_options *o) {
  if (o->threads < 0 || o->threads > CP_MAX_THREADS)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "threads = %d must be in 0..%d (0 = all usable)",
                   o->threads, CP_MAX_THREADS);
  if (o->shared_pool != 0 && o->shared_pool != 1)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "shared_pool = %d must be 0 or 1", o->shared_pool);
  if (o->shared_pool && o->threads != 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "threads = %d with shared_pool = 1: an operator on the shared pool runs with "
                   "its size (convpool_shared_pool_set_threads); threads must be 0",
                   o->threads);
  if (o->rows_per_item < 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "rows_per_item = %d must be >= 0", o->rows_per_item);
  if (o->algo != CONVPOOL_ALGO_AUTO && cp_algorithm_find(o->algo) == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "algo = %d is not a convpool_algo", (int)o->algo);
  const int64_t expected[3] = {o->expected_batch, o->expected_height, o->expected_width};
  static const char *const names[3] = {"expected_batch", "expected_height", "expected_width"};
  for (int i = 0; i < 3; i++)
    if (expected[i] < 0)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s = %lld must be >= 0 (0: any shape)", names[i],
                     (long long)expected[i]);
  if ((expected[0] > 0) != (expected[1] > 0) || (expected[0] > 0) != (expected[2] > 0))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                   "expected_batch = %lld, expected_height = %lld, expected_width = %lld: give "
                   "all three (> 0) or none (0)",
                   (long long)expected[0], (long long)expected[1], (long long)expected[2]);
  if (o->allocator != NULL && (o->allocator->alloc == NULL || o->allocator->free == NULL))
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "options->allocator has a NULL function");
  return CONVPOOL_SUCCESS;
}

convpool_status cp_read_sized(const char *what, const void *in, size_t in_size,
                              const size_t *released, size_t versions, void *out) {
  for (size_t v = 0; v < versions; v++)
    if (in_size == released[v]) {
      memcpy(out, in, in_size); /* the fields past in_size keep the defaults in out */
      return CONVPOOL_SUCCESS;
    }
  return cp_fail(CONVPOOL_INVALID_ARGUMENT,
                 "%s->size = %zu is not the size of a released convpool_%s (%zu): initialise "
                 "it with convpool_%s_init",
                 what, in_size, what, released[versions - 1], what);
}

/* The sizes of every released convpool_options, oldest first. */
static const size_t cp_options_sizes[] = {offsetof(convpool_options, shared_pool),
                                          offsetof(convpool_options, expected_batch),
                                          sizeof(convpool_options)};

/* The caller's options (or the defaults), read up to the caller's size. */
convpool_status cp_read_options(const convpool_options *options, convpool_options *o) {
  convpool_options_init(o);
  if (options == NULL) return CONVPOOL_SUCCESS;
  const convpool_status st = cp_read_sized("options", options, options->size, cp_options_sizes,
                                           sizeof cp_options_sizes / sizeof cp_options_sizes[0], o);
  if (st != CONVPOOL_SUCCESS) return st;
  o->size = sizeof *o;
  return cp_check_options(o);
}

/* A tensor pointer must be aligned to its element (the packers read it as
   float or uint16_t). */
convpool_status cp_check_aligned(const char *name, const void *p, convpool_dtype dtype) {
  const size_t es = convpool_dtype_size(dtype);
  if (p != NULL && (uintptr_t)p % es != 0)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s %p is not aligned to its %zu-byte elements", name,
                   p, es);
  return CONVPOOL_SUCCESS;
}

/* The bytes [a, a + a_bytes) and [b, b + b_bytes) must not overlap; the
   sizes are the bytes actually read and written. */
convpool_status cp_check_disjoint(const char *a_name, const void *a, size_t a_bytes,
                                  const char *b_name, const void *b, size_t b_bytes) {
  const uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
  if (a_bytes > 0 && b_bytes > 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "%s %p (%zu bytes) overlaps %s %p (%zu bytes)",
                   a_name, a, a_bytes, b_name, b, b_bytes);
  return CONVPOOL_SUCCESS;
}
