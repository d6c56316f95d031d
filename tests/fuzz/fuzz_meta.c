/*
 * libFuzzer target for cp_meta_parse (cli/meta.c), the parser of the
 * meta.json that `convpool --load-dir` reads from untrusted directories.
 *
 * Properties checked on every input (a violation aborts):
 *  - the result is CP_META_OK, _SYNTAX, _INVALID or _LIMIT, and the parser
 *    never reads outside the input (the input buffer has exactly `size`
 *    bytes; ASan watches the edges); _LIMIT needs more than
 *    CP_META_MAX_DEPTH brackets and braces in the input;
 *  - on an error: the reason is non-empty, NUL-terminated within the capacity, one
 *    line with no control character below 0x20 (no newline, carriage return
 *    or escape: it is printed as the CLI's single stderr line),
 *    and small capacities (0 .. 16) are respected byte for byte;
 *  - on 0: every integer (the padding and pool_padding items, pool_stride,
 *    stride, dilation and groups included) is in 0 .. 2^62 and, unless 0,
 *    appears in the input as a maximal run of decimal digits (no silent
 *    wrap-around); bias, ceil_mode and residual are 0 or 1; the activation is
 *    none, relu or clamp, a clamp's bounds are finite floats and the others'
 *    are 0; dtype is a NUL-terminated string; and cp_meta_format ->
 *    cp_meta_parse gives the same values back, clamp bounds bit for bit
 *    (when dtype needs no escaping and was not cut to fit its 16-byte
 *    buffer).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond, ...)                    \
  do {                                            \
    if (!(cond)) {                                \
      fprintf(stderr, "fuzz_meta: " __VA_ARGS__); \
      fputc('\n', stderr);                        \
      abort();                                    \
    }                                             \
  } while (0)

#define GUARD 0x5A

/* Are all n bytes at p still the guard value? */
static int guard_ok(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)p[i] != GUARD) return 0;
  return 1;
}

static int is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}

/* Does value appear in data as a maximal digit run (leading zeros ignored)? */
static int has_number(const uint8_t *data, size_t size, int64_t value) {
  char want[32];
  int n = snprintf(want, sizeof want, "%lld", (long long)value);
  for (size_t i = 0; i < size; i++) {
    if (!is_digit(data[i]) || (i > 0 && is_digit(data[i - 1]))) continue;
    size_t j = i;
    while (j < size && is_digit(data[j])) j++;
    size_t s = i;
    while (s + 1 < j && data[s] == '0') s++;
    if (j - s == (size_t)n && memcmp(data + s, want, (size_t)n) == 0) return 1;
    i = j;
  }
  return 0;
}

static int same_meta(const cp_meta *a, const cp_meta *b) {
  return strcmp(a->dtype, b->dtype) == 0 && a->batch == b->batch &&
         a->in_channels == b->in_channels && a->out_channels == b->out_channels &&
         a->height == b->height && a->width == b->width && a->filter == b->filter &&
         a->pool == b->pool && a->seed == b->seed && a->bias == b->bias &&
         memcmp(a->padding, b->padding, sizeof a->padding) == 0 && a->activation == b->activation &&
         memcmp(&a->clamp_min, &b->clamp_min, sizeof a->clamp_min) == 0 &&
         memcmp(&a->clamp_max, &b->clamp_max, sizeof a->clamp_max) == 0 &&
         a->pool_stride == b->pool_stride &&
         memcmp(a->pool_padding, b->pool_padding, sizeof a->pool_padding) == 0 &&
         a->ceil_mode == b->ceil_mode && a->stride == b->stride && a->dilation == b->dilation &&
         a->groups == b->groups && a->residual == b->residual;
}

/* Is f a finite float (no libm)? */
static int finite_float(float f) {
  return f == f && f - f == 0.0f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so reading past the end is caught even when the
     caller's buffer is larger. */
  char *text = malloc(size ? size : 1);
  if (text == NULL) abort();
  if (size) memcpy(text, data, size);
  cp_meta m;
  char err[256 + 16];
  memset(err, GUARD, sizeof err);
  int rc = cp_meta_parse(text, size, &m, err, 256);
  FUZZ_ASSERT(
      rc == CP_META_OK || rc == CP_META_SYNTAX || rc == CP_META_INVALID || rc == CP_META_LIMIT,
      "result %d", rc);
  if (rc == CP_META_LIMIT) {
    size_t opens = 0;
    for (size_t i = 0; i < size; i++) opens += data[i] == '[' || data[i] == '{';
    FUZZ_ASSERT(opens > CP_META_MAX_DEPTH, "nesting limit with only %zu '[' and '{'", opens);
  }
  FUZZ_ASSERT(guard_ok(err + 256, 16), "the reason overran its capacity");
  if (rc != 0) {
    const char *end = memchr(err, '\0', 256);
    FUZZ_ASSERT(end != NULL && end > err, "the reason is empty or not terminated");
    for (const char *p = err; p < end; p++)
      FUZZ_ASSERT((unsigned char)*p >= 0x20, "the reason contains control byte 0x%02x: \"%s\"",
                  (unsigned char)*p, err);
  } else {
    const int64_t ints[20] = {m.batch,
                              m.in_channels,
                              m.out_channels,
                              m.height,
                              m.width,
                              m.filter,
                              m.pool,
                              m.seed,
                              m.padding[0],
                              m.padding[1],
                              m.padding[2],
                              m.padding[3],
                              m.pool_stride,
                              m.pool_padding[0],
                              m.pool_padding[1],
                              m.pool_padding[2],
                              m.pool_padding[3],
                              m.stride,
                              m.dilation,
                              m.groups};
    static const char *const names[20] = {"batch",
                                          "in_channels",
                                          "out_channels",
                                          "height",
                                          "width",
                                          "filter",
                                          "pool",
                                          "seed",
                                          "padding[0]",
                                          "padding[1]",
                                          "padding[2]",
                                          "padding[3]",
                                          "pool_stride",
                                          "pool_padding[0]",
                                          "pool_padding[1]",
                                          "pool_padding[2]",
                                          "pool_padding[3]",
                                          "stride",
                                          "dilation",
                                          "groups"};
    for (int i = 0; i < 20; i++) {
      FUZZ_ASSERT(ints[i] >= 0 && ints[i] <= ((int64_t)1 << 62), "%s = %lld out of range", names[i],
                  (long long)ints[i]);
      if (i < 7 || ints[i] != 0) /* the optional keys: 0 when absent */
        FUZZ_ASSERT(has_number(data, size, ints[i]),
                    "%s = %lld does not appear in the input (wrapped?)", names[i],
                    (long long)ints[i]);
    }
    FUZZ_ASSERT(m.bias == 0 || m.bias == 1, "bias = %d", m.bias);
    FUZZ_ASSERT(m.ceil_mode == 0 || m.ceil_mode == 1, "ceil_mode = %d", m.ceil_mode);
    FUZZ_ASSERT(m.residual == 0 || m.residual == 1, "residual = %d", m.residual);
    FUZZ_ASSERT(m.activation == CP_META_ACT_NONE || m.activation == CP_META_ACT_RELU ||
                    m.activation == CP_META_ACT_CLAMP,
                "activation = %d", m.activation);
    if (m.activation == CP_META_ACT_CLAMP)
      FUZZ_ASSERT(finite_float(m.clamp_min) && finite_float(m.clamp_max),
                  "clamp bounds %g, %g are not finite", (double)m.clamp_min, (double)m.clamp_max);
    else
      FUZZ_ASSERT(m.clamp_min == 0.0f && m.clamp_max == 0.0f,
                  "clamp bounds %g, %g set without a clamp", (double)m.clamp_min,
                  (double)m.clamp_max);
    FUZZ_ASSERT(memchr(m.dtype, '\0', sizeof m.dtype) != NULL, "dtype is not terminated");
    /* A dtype that filled its buffer may have been cut (even inside a UTF-8
       sequence); such a value can never name a dtype, so only shorter ones
       are expected to survive the round trip. */
    if (strpbrk(m.dtype, "\"\\") == NULL && strlen(m.dtype) + 1 < sizeof m.dtype) {
      char out[1024];
      int n = cp_meta_format(&m, out, sizeof out);
      FUZZ_ASSERT(n > 0, "cp_meta_format failed");
      cp_meta again;
      char err2[256];
      FUZZ_ASSERT(cp_meta_parse(out, (size_t)n, &again, err2, sizeof err2) == 0,
                  "the formatted meta.json does not parse: %s", err2);
      FUZZ_ASSERT(same_meta(&m, &again), "format -> parse changed the values");
    }
  }
  /* Small capacities: a terminated prefix, nothing written past the capacity. */
  for (size_t cap = 0; cap <= 16; cap += 4) {
    memset(err, GUARD, sizeof err);
    int rc2 = cp_meta_parse(text, size, &m, cap ? err : NULL, cap);
    FUZZ_ASSERT(rc2 == rc, "capacity %zu changed the result", cap);
    if (cap) FUZZ_ASSERT(memchr(err, '\0', cap) != NULL, "capacity %zu: not terminated", cap);
    FUZZ_ASSERT(guard_ok(err + cap, sizeof err - cap), "capacity %zu: overran", cap);
  }
  free(text);
  return 0;
}
