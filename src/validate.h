/* Checks at the API boundary: options, tensor alignment, buffer overlap. */
#ifndef CONVPOOL_VALIDATE_H
#define CONVPOOL_VALIDATE_H

#include "internal.h"

/* A caller's versioned struct (convpool_options, convpool_layer: `what`),
   whose first member is its size, into out, which holds the defaults:
   in_size must be one of the `versions` released sizes (oldest first), and
   the fields past it keep their defaults. */
convpool_status cp_read_sized(const char *what, const void *in, size_t in_size,
                              const size_t *released, size_t versions, void *out);

/* The caller's options (or the defaults when NULL), read up to the caller's
   size and checked. */
convpool_status cp_read_options(const convpool_options *options, convpool_options *o);

/* A tensor pointer must be aligned to its element (the packers read it as
   float or uint16_t); NULL passes. */
convpool_status cp_check_aligned(const char *name, const void *p, convpool_dtype dtype);

/* The bytes [a, a + a_bytes) and [b, b + b_bytes) must not overlap; the
   sizes are the bytes actually read and written. */
convpool_status cp_check_disjoint(const char *a_name, const void *a, size_t a_bytes,
                                  const char *b_name, const void *b, size_t b_bytes);

#endif
