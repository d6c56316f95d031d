/* meta.json of a dump directory: a flat JSON object, parsed strictly. */
#ifndef CONVPOOL_META_H
#define CONVPOOL_META_H

#include <stddef.h>
#include <stdint.h>

typedef struct cp_meta {
  char dtype[16];
  int64_t batch, in_channels, out_channels, height, width, filter, pool, seed;
  int bias;
} cp_meta;

/*
 * Parse text[0..len) into meta. Returns 0 on success, or -1 with a one-line
 * reason in err (capacity err_cap). Requires dtype, batch, in_channels,
 * out_channels, height, width, filter, pool and bias; seed is optional (0).
 * Integers must be in 0..2^62; unknown keys are ignored; nesting, duplicate
 * keys and invalid UTF-8 are errors.
 */
int cp_meta_parse(const char *text, size_t len, cp_meta *meta, char *err, size_t err_cap);

/* Write meta as JSON into out (capacity cap); returns the length or -1. */
int cp_meta_format(const cp_meta *meta, char *out, size_t cap);

#endif
