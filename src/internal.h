/* Internal declarations shared by the library's translation units. */
#ifndef CONVPOOL_INTERNAL_H
#define CONVPOOL_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "convpool.h"

/* ---- errors (status.c) ---- */

/* Record a printf-style message for convpool_last_error() and return status. */
convpool_status cp_fail(convpool_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cp_clear_error(void);

/* ---- sizes shared by every room ---- */

/* The most threads an operator or the shared pool may have. */
#define CP_MAX_THREADS 1024

/* Bytes of a cache line: scratch regions start on one, and padded strides
   count in them. */
#define CP_CACHE_LINE 64

/* ---- memory (status.c) ---- */

const convpool_allocator *cp_allocator_or_default(const convpool_allocator *allocator);
void *cp_alloc(const convpool_allocator *a, size_t size); /* 64-byte aligned */
void cp_free(const convpool_allocator *a, void *p);

/* Overflow-checked size arithmetic: return 0 on overflow. */
static inline int cp_mul(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
static inline int cp_add(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline size_t cp_round_up(size_t a, size_t m) {
  return (a + m - 1) / m * m;
}

/* ---- CPU facts (cpu.c) ---- */

#include "cpu.h"

#endif
