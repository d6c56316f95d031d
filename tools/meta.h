/* meta.json of a dump directory: a JSON object (RFC 8259), parsed strictly. */
#ifndef CONVPOOL_META_H
#define CONVPOOL_META_H

#include <stddef.h>
#include <stdint.h>

typedef struct cp_meta {
  char dtype[16];
  int64_t batch, in_channels, out_channels, height, width, filter, pool, seed;
  int bias;
} cp_meta;

/* Results of cp_meta_parse. */
enum {
  CP_META_OK = 0,
  CP_META_SYNTAX = -1,  /* not JSON (RFC 8259) */
  CP_META_INVALID = -2, /* JSON, but not a valid meta.json */
  CP_META_LIMIT = -3    /* JSON nested deeper than CP_META_MAX_DEPTH */
};
enum { CP_META_MAX_DEPTH = 512 }; /* objects and arrays, the top-level object included */

/*
 * Parse text[0..len) into meta. Accepts exactly RFC 8259 JSON (one leading
 * UTF-8 byte order mark is skipped; values nested deeper than
 * CP_META_MAX_DEPTH are refused) whose top level is an object with dtype (a
 * string of printable ASCII, at most 15 bytes), batch, in_channels,
 * out_channels, height, width, filter, pool (integers in 0..2^62, written
 * without fraction or exponent) and bias (true or false); seed (an integer)
 * is optional, 0 when absent. Each of these keys may appear once; other keys
 * are ignored, whatever their value. Returns CP_META_OK, or one of the
 * negative results above with a one-line reason without control characters
 * in err (capacity err_cap, which may be 0). Syntax is checked to the end of
 * the text even after a problem of meaning, so the result tells the two
 * apart; the message is that of the syntax error if there is one, else of
 * the first problem of meaning.
 */
int cp_meta_parse(const char *text, size_t len, cp_meta *meta, char *err, size_t err_cap);

/* Write meta as JSON into out (capacity cap); returns the length or -1. */
int cp_meta_format(const cp_meta *meta, char *out, size_t cap);

#endif
