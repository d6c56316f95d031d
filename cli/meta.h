/* meta.json of a dump directory: a JSON object (RFC 8259), parsed strictly. */
#ifndef CONVPOOL_META_H
#define CONVPOOL_META_H

#include <stddef.h>
#include <stdint.h>

/* Activations of meta.json (the values of convpool_activation). */
enum { CP_META_ACT_NONE = 0, CP_META_ACT_RELU = 1, CP_META_ACT_CLAMP = 2 };

typedef struct cp_meta {
  char dtype[16];
  int64_t batch, in_channels, out_channels, height, width, filter, pool, seed;
  int bias;
  /* The optional layer keys; each takes the value in brackets when absent. */
  int64_t padding[4];         /* conv zero padding: top, left, bottom, right [0, 0, 0, 0] */
  int activation;             /* CP_META_ACT_* [none] */
  float clamp_min, clamp_max; /* the bounds of CP_META_ACT_CLAMP (finite); 0 otherwise */
  int64_t pool_stride;        /* >= 1 when given; 0 when absent (the stride is then pool) */
  int64_t pool_padding[4];    /* pool padding: top, left, bottom, right [0, 0, 0, 0] */
  int ceil_mode;              /* 0 or 1 [0] */
  int64_t stride;             /* conv stride: >= 1 when given; 0 when absent (then 1) */
  int64_t dilation;           /* conv dilation: likewise */
  int64_t groups;             /* conv groups: likewise */
  int residual;               /* 0 or 1 [0]: residual.bin is part of the directory */
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
 * without fraction or exponent) and bias (true or false). Optional keys:
 *   seed          an integer in 0..2^62 (0)
 *   padding       an array of exactly 4 such integers, [top, left, bottom, right]
 *   pool_padding  likewise
 *   pool_stride   an integer in 1..2^62
 *   stride, dilation, groups  likewise (conv stride, dilation and groups)
 *   activation    "none", "relu", "relu6" (the clamp [0, 6]) or the object
 *                 {"clamp": [min, max]} with exactly that one key and two JSON
 *                 numbers that round to finite float32 values (|v| < 2^128 -
 *                 2^103; read with strtod in the C locale, then rounded to
 *                 nearest float); min <= max is the library's check, not this
 *                 parser's
 *   ceil_mode     true or false
 *   residual      true or false
 * Each of these keys may appear once; other keys are ignored, whatever their
 * value. Returns CP_META_OK, or one of the
 * negative results above with a one-line reason without control characters
 * in err (capacity err_cap, which may be 0). Syntax is checked to the end of
 * the text even after a problem of meaning, so the result tells the two
 * apart; the message is that of the syntax error if there is one, else of
 * the first problem of meaning.
 */
int cp_meta_parse(const char *text, size_t len, cp_meta *meta, char *err, size_t err_cap);

/* Write meta as JSON into out (capacity cap), every key of cp_meta_parse
   included (pool_stride, stride, dilation and groups only when > 0;
   activation as "none", "relu" or
   {"clamp": [min, max]} with %.9g bounds, which read back to the same
   floats); returns the length, or -1 when it does not fit or a clamp bound
   is not finite. */
int cp_meta_format(const cp_meta *meta, char *out, size_t cap);

#endif
