/*
 * The parser of a dump directory's meta.json (read by `convpool --load-dir`
 * from directories that may be hostile).
 *
 * Syntax: exactly RFC 8259 JSON. Any value, nested objects and arrays
 * included, may appear under an unknown key; numbers follow the RFC grammar
 * (no leading zeros, no bare words, no NaN or Infinity); strings take every
 * escape of the RFC, \uXXXX included, with surrogate pairs (a lone surrogate
 * is valid JSON and decodes as U+FFFD), and must be valid UTF-8 otherwise.
 * One UTF-8 byte order mark at the very start is accepted and skipped, as
 * Python's json.loads does with bytes (RFC 8259 section 8.1 lets a parser
 * ignore it); a second one, or one anywhere else, is an error. The one limit
 * beyond the RFC (section 9 allows it): values nested deeper than
 * CP_META_MAX_DEPTH.
 *
 * Meaning, checked only on a syntactically valid text: the top level is an
 * object with the keys of meta.h, each once, of the right type.
 *
 * The whole text is checked for syntax even after a problem of meaning was
 * found, so the result says which kind of error it is (meta.h); a syntax
 * error's message takes precedence over one of meaning.
 */
#include "meta.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cp_json {
  const unsigned char *s;
  size_t len, pos;
  char *err;
  size_t err_cap;
  int invalid; /* a problem of meaning is recorded in err */
} cp_json;

/* Write a message, then " (meta.json byte AT)", to err. */
static void cp_json_vreport(cp_json *j, size_t at, const char *fmt, va_list ap) {
  int n = vsnprintf(j->err, j->err_cap, fmt, ap);
  if (n >= 0 && (size_t)n < j->err_cap)
    snprintf(j->err + n, j->err_cap - (size_t)n, " (meta.json byte %zu)", at);
}

/* Not JSON: stop. */
static int cp_json_syntax(cp_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cp_json_syntax(cp_json *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cp_json_vreport(j, j->pos, fmt, ap);
  va_end(ap);
  return CP_META_SYNTAX;
}

/* JSON, but not a valid meta.json: the first such problem is kept, and the
   parse goes on to check the syntax of the rest. */
static void cp_json_invalid(cp_json *j, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cp_json_invalid(cp_json *j, size_t at, const char *fmt, ...) {
  if (j->invalid) return;
  j->invalid = 1;
  va_list ap;
  va_start(ap, fmt);
  cp_json_vreport(j, at, fmt, ap);
  va_end(ap);
}

/* The byte at pos, described for a message (never a control character). */
static int cp_json_unexpected(cp_json *j, const char *expected) {
  if (j->pos >= j->len)
    return cp_json_syntax(j, "expected %s, found the end of the file", expected);
  unsigned char c = j->s[j->pos];
  if (c > 0x20 && c < 0x7f) return cp_json_syntax(j, "expected %s, found '%c'", expected, c);
  return cp_json_syntax(j, "expected %s, found byte 0x%02x", expected, (unsigned)c);
}

static void cp_json_space(cp_json *j) {
  while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' || j->s[j->pos] == '\n' ||
                             j->s[j->pos] == '\r'))
    j->pos++;
}

static int cp_is_digit(unsigned char c) {
  return c >= '0' && c <= '9';
}

/* Length of the UTF-8 sequence at s (max n bytes), or 0 if invalid. */
static size_t cp_utf8_len(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len;
  unsigned min;
  unsigned cp;
  if ((s[0] & 0xe0) == 0xc0)
    len = 2, cp = s[0] & 0x1f, min = 0x80;
  else if ((s[0] & 0xf0) == 0xe0)
    len = 3, cp = s[0] & 0x0f, min = 0x800;
  else if ((s[0] & 0xf8) == 0xf0)
    len = 4, cp = s[0] & 0x07, min = 0x10000;
  else
    return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/* Decoded text: bytes past the capacity are counted, not stored. */
typedef struct cp_text {
  char *out;
  size_t cap, len;
} cp_text;

static void cp_text_put(cp_text *t, unsigned char c) {
  if (t->out != NULL && t->len + 1 < t->cap) t->out[t->len] = (char)c;
  t->len++;
}

static void cp_text_put_code_point(cp_text *t, unsigned cp) {
  if (cp < 0x80) {
    cp_text_put(t, (unsigned char)cp);
  } else if (cp < 0x800) {
    cp_text_put(t, (unsigned char)(0xc0 | (cp >> 6)));
    cp_text_put(t, (unsigned char)(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    cp_text_put(t, (unsigned char)(0xe0 | (cp >> 12)));
    cp_text_put(t, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
    cp_text_put(t, (unsigned char)(0x80 | (cp & 0x3f)));
  } else {
    cp_text_put(t, (unsigned char)(0xf0 | (cp >> 18)));
    cp_text_put(t, (unsigned char)(0x80 | ((cp >> 12) & 0x3f)));
    cp_text_put(t, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
    cp_text_put(t, (unsigned char)(0x80 | (cp & 0x3f)));
  }
}

/* The 4 hex digits of a \u escape at s + at, or -1. */
static long cp_json_hex4(const cp_json *j, size_t at) {
  if (at > j->len || j->len - at < 4) return -1;
  long v = 0;
  for (size_t i = 0; i < 4; i++) {
    unsigned char c = j->s[at + i];
    int d = cp_is_digit(c)         ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/*
 * A string at pos (its opening quote). The decoded UTF-8 goes to t (may have
 * no buffer: only checked); t->len is the full decoded length, even when cut.
 */
static int cp_json_string(cp_json *j, cp_text *t) {
  if (j->pos >= j->len || j->s[j->pos] != '"') return cp_json_unexpected(j, "a string");
  j->pos++;
  for (;;) {
    if (j->pos >= j->len) return cp_json_syntax(j, "unterminated string");
    unsigned char c = j->s[j->pos];
    if (c == '"') break;
    if (c < 0x20)
      return cp_json_syntax(j, "control character 0x%02x in a string (it must be escaped)", c);
    if (c != '\\') {
      size_t l = cp_utf8_len(j->s + j->pos, j->len - j->pos);
      if (l == 0) return cp_json_syntax(j, "invalid UTF-8 in a string");
      for (size_t i = 0; i < l; i++) cp_text_put(t, j->s[j->pos + i]);
      j->pos += l;
      continue;
    }
    if (j->pos + 1 >= j->len) return cp_json_syntax(j, "unterminated escape");
    unsigned char e = j->s[j->pos + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = e != '\0' ? strchr(from, e) : NULL;
    if (k != NULL) {
      cp_text_put(t, (unsigned char)to[k - from]);
      j->pos += 2;
      continue;
    }
    if (e != 'u') return cp_json_syntax(j, "invalid escape (byte 0x%02x after a backslash)", e);
    long u = cp_json_hex4(j, j->pos + 2);
    if (u < 0) return cp_json_syntax(j, "invalid \\u escape (it needs 4 hex digits)");
    j->pos += 6;
    if (u >= 0xd800 && u <= 0xdbff && j->len - j->pos >= 6 && j->s[j->pos] == '\\' &&
        j->s[j->pos + 1] == 'u') {
      long low = cp_json_hex4(j, j->pos + 2);
      if (low >= 0xdc00 && low <= 0xdfff) { /* a surrogate pair */
        cp_text_put_code_point(t,
                               0x10000 + (((unsigned)u - 0xd800) << 10) + ((unsigned)low - 0xdc00));
        j->pos += 6;
        continue;
      }
    }
    /* A lone surrogate is valid JSON but no character: U+FFFD. */
    cp_text_put_code_point(t, u >= 0xd800 && u <= 0xdfff ? 0xfffd : (unsigned)u);
  }
  j->pos++;
  if (t->out != NULL && t->cap > 0) t->out[t->len < t->cap ? t->len : t->cap - 1] = '\0';
  return 0;
}

/* A number per RFC 8259: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)? */
typedef struct cp_number {
  int negative, fraction, exponent;
  size_t digits, ndigits; /* the integer part */
} cp_number;

static int cp_json_number(cp_json *j, cp_number *nb) {
  memset(nb, 0, sizeof *nb);
  if (j->pos < j->len && j->s[j->pos] == '-') nb->negative = 1, j->pos++;
  if (j->pos >= j->len || !cp_is_digit(j->s[j->pos])) return cp_json_unexpected(j, "a digit");
  nb->digits = j->pos;
  if (j->s[j->pos] == '0') {
    j->pos++;
    if (j->pos < j->len && cp_is_digit(j->s[j->pos]))
      return cp_json_syntax(j, "a number must not have a leading zero");
  } else {
    while (j->pos < j->len && cp_is_digit(j->s[j->pos])) j->pos++;
  }
  nb->ndigits = j->pos - nb->digits;
  if (j->pos < j->len && j->s[j->pos] == '.') {
    j->pos++;
    if (j->pos >= j->len || !cp_is_digit(j->s[j->pos]))
      return cp_json_unexpected(j, "a digit after the decimal point");
    while (j->pos < j->len && cp_is_digit(j->s[j->pos])) j->pos++;
    nb->fraction = 1;
  }
  if (j->pos < j->len && (j->s[j->pos] == 'e' || j->s[j->pos] == 'E')) {
    j->pos++;
    if (j->pos < j->len && (j->s[j->pos] == '+' || j->s[j->pos] == '-')) j->pos++;
    if (j->pos >= j->len || !cp_is_digit(j->s[j->pos]))
      return cp_json_unexpected(j, "a digit in the exponent");
    while (j->pos < j->len && cp_is_digit(j->s[j->pos])) j->pos++;
    nb->exponent = 1;
  }
  return 0;
}

/* true, false or null at pos; *which gets 1, 0 or -1. */
static int cp_json_literal(cp_json *j, int *which) {
  static const char *const words[3] = {"true", "false", "null"};
  static const int values[3] = {1, 0, -1};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i]);
    if (j->s[j->pos] == (unsigned char)words[i][0]) {
      if (j->len - j->pos < n || memcmp(j->s + j->pos, words[i], n) != 0)
        return cp_json_syntax(j, "invalid value (not true, false or null)");
      j->pos += n;
      *which = values[i];
      return 0;
    }
  }
  return cp_json_unexpected(j, "a value");
}

/* An object member's key and colon (pos at the key); the value follows. */
static int cp_json_key(cp_json *j, cp_text *key) {
  int rc;
  if (j->pos >= j->len || j->s[j->pos] != '"') return cp_json_unexpected(j, "a string key");
  if ((rc = cp_json_string(j, key)) != 0) return rc;
  cp_json_space(j);
  if (j->pos >= j->len || j->s[j->pos] != ':') return cp_json_unexpected(j, "':' after a key");
  j->pos++;
  cp_json_space(j);
  return 0;
}

/*
 * Any JSON value at pos, checked and skipped; `depth` containers enclose it.
 * Iterative (a bit per level says object or array), so hostile nesting costs
 * no stack.
 */
static int cp_json_value(cp_json *j, int depth) {
  unsigned char is_object[CP_META_MAX_DEPTH / 8 + 1];
  const int base = depth;
  int rc, which;
  cp_number nb;
  memset(is_object, 0, sizeof is_object);
  for (;;) {
    /* a value starts at pos */
    unsigned char c = j->pos < j->len ? j->s[j->pos] : 0;
    if (j->pos >= j->len) {
      return cp_json_unexpected(j, "a value");
    } else if (c == '{' || c == '[') {
      if (depth >= CP_META_MAX_DEPTH) {
        cp_json_syntax(j, "values nested more than %d levels deep", CP_META_MAX_DEPTH);
        return CP_META_LIMIT;
      }
      if (c == '{')
        is_object[depth / 8] |= (unsigned char)(1u << (depth % 8));
      else
        is_object[depth / 8] &= (unsigned char)~(1u << (depth % 8));
      depth++;
      j->pos++;
      cp_json_space(j);
      if (j->pos < j->len && j->s[j->pos] == (c == '{' ? '}' : ']')) {
        j->pos++;
        depth--; /* empty: a complete value */
      } else {
        cp_text none = {NULL, 0, 0};
        if (c == '{' && (rc = cp_json_key(j, &none)) != 0) return rc;
        continue; /* its first value */
      }
    } else if (c == '"') {
      cp_text none = {NULL, 0, 0};
      if ((rc = cp_json_string(j, &none)) != 0) return rc;
    } else if (c == '-' || cp_is_digit(c)) {
      if ((rc = cp_json_number(j, &nb)) != 0) return rc;
    } else if ((rc = cp_json_literal(j, &which)) != 0) {
      return rc;
    }
    /* A value is complete: close the containers it ends, or go to the next. */
    for (;;) {
      if (depth == base) return 0;
      const int object = (is_object[(depth - 1) / 8] >> ((depth - 1) % 8)) & 1;
      cp_json_space(j);
      if (j->pos < j->len && j->s[j->pos] == ',') {
        j->pos++;
        cp_json_space(j);
        cp_text none = {NULL, 0, 0};
        if (object && (rc = cp_json_key(j, &none)) != 0) return rc;
        break;
      }
      if (j->pos < j->len && j->s[j->pos] == (object ? '}' : ']')) {
        j->pos++;
        depth--;
        continue;
      }
      return cp_json_unexpected(j, object ? "',' or '}'" : "',' or ']'");
    }
  }
}

/* The keys up to K_BIAS are required, the others optional. */
enum {
  K_DTYPE,
  K_BATCH,
  K_CIN,
  K_COUT,
  K_H,
  K_W,
  K_FILTER,
  K_POOL,
  K_BIAS,
  K_SEED,
  K_PADDING,
  K_ACTIVATION,
  K_POOL_STRIDE,
  K_POOL_PADDING,
  K_CEIL_MODE,
  K_STRIDE,
  K_DILATION,
  K_GROUPS,
  K_RESIDUAL,
  K_COUNT
};
static const char *const cp_meta_keys[K_COUNT] = {
    "dtype",   "batch",      "in_channels", "out_channels", "height",
    "width",   "filter",     "pool",        "bias",         "seed",
    "padding", "activation", "pool_stride", "pool_padding", "ceil_mode",
    "stride",  "dilation",   "groups",      "residual"};

/* Rounded to float32, numbers from here on overflow (2^128 - 2^103: half an
   ulp above FLT_MAX, where round-to-nearest-even goes to infinity). */
#define CP_FLOAT_OVERFLOW 340282356779733661637539395458142568448.0

/* Is the value at pos a number (by its first byte)? */
static int cp_json_at_number(const cp_json *j) {
  const unsigned char c = j->pos < j->len ? j->s[j->pos] : 0;
  return j->pos < j->len && (c == '-' || cp_is_digit(c));
}

/*
 * An integer value: a JSON integer in 0 .. 2^62. `label` names it in
 * messages; `depth` containers enclose it. *got is set to 1 when *out was
 * set. Anything else is recorded as invalid and skipped.
 */
static int cp_meta_int(cp_json *j, const char *label, int depth, int64_t *out, int *got) {
  const size_t at = j->pos;
  if (!cp_json_at_number(j)) {
    cp_json_invalid(j, at, "%s must be an integer", label);
    return cp_json_value(j, depth);
  }
  cp_number nb;
  int rc = cp_json_number(j, &nb);
  if (rc != 0) return rc;
  if (nb.fraction || nb.exponent) {
    cp_json_invalid(j, at, "%s must be an integer", label);
    return 0;
  }
  uint64_t v = 0;
  const uint64_t limit = (uint64_t)1 << 62;
  for (size_t i = 0; i < nb.ndigits; i++) {
    const uint64_t d = (uint64_t)(j->s[nb.digits + i] - '0');
    if (v > (limit - d) / 10) { /* checked before it could wrap */
      cp_json_invalid(j, at, "%s is too large (the limit is 2^62)", label);
      return 0;
    }
    v = v * 10 + d;
  }
  if (nb.negative) {
    cp_json_invalid(j, at, "%s = -%llu must not be negative", label, (unsigned long long)v);
    return 0;
  }
  *out = (int64_t)v;
  *got = 1;
  return 0;
}

/*
 * A clamp bound: any JSON number that rounds to a finite float32 (strtod,
 * then to nearest). Numbers are short in practice; a long one is copied to
 * the heap to be NUL-terminated for strtod.
 */
static int cp_meta_float(cp_json *j, const char *label, int depth, float *out, int *got) {
  const size_t at = j->pos;
  if (!cp_json_at_number(j)) {
    cp_json_invalid(j, at, "%s must be a number", label);
    return cp_json_value(j, depth);
  }
  cp_number nb;
  int rc = cp_json_number(j, &nb);
  if (rc != 0) return rc;
  const size_t n = j->pos - at;
  char small[64];
  char *text = n < sizeof small ? small : malloc(n + 1);
  if (text == NULL) {
    cp_json_invalid(j, at, "%s: no memory to read a number of %zu characters", label, n);
    return 0;
  }
  memcpy(text, j->s + at, n);
  text[n] = '\0';
  const double d = strtod(text, NULL); /* the grammar was checked: all of it is read */
  if (text != small) free(text);
  if (!(d > -CP_FLOAT_OVERFLOW && d < CP_FLOAT_OVERFLOW)) {
    cp_json_invalid(j, at, "%s is beyond the float32 range", label);
    return 0;
  }
  /* Between FLT_MAX and the overflow point the nearest float is FLT_MAX. */
  *out = d > FLT_MAX ? FLT_MAX : d < -FLT_MAX ? -FLT_MAX : (float)d;
  *got = 1;
  return 0;
}

/*
 * An array of exactly `n` items (pos at its '['), each read by `item` (an
 * integer or a float reader) into out[i]; `depth` containers enclose the
 * array. `what` describes the expected array in messages. Returns a syntax
 * result; problems of meaning are recorded. *got is 1 when all n were read.
 */
typedef int (*cp_item_reader)(cp_json *j, const char *label, int depth, void *out, int *got);

static int cp_int_item(cp_json *j, const char *label, int depth, void *out, int *got) {
  return cp_meta_int(j, label, depth, out, got);
}

static int cp_float_item(cp_json *j, const char *label, int depth, void *out, int *got) {
  return cp_meta_float(j, label, depth, out, got);
}

static int cp_meta_array(cp_json *j, const char *key, const char *what, int depth, size_t n,
                         cp_item_reader item, size_t item_size, void *out, int *got) {
  const size_t at = j->pos;
  if (j->pos >= j->len || j->s[j->pos] != '[') {
    cp_json_invalid(j, at, "\"%s\" must be %s", key, what);
    return cp_json_value(j, depth);
  }
  j->pos++;
  cp_json_space(j);
  size_t count = 0, read = 0;
  int64_t items[4]; /* n <= 4 items of at most 8 bytes */
  if (j->pos < j->len && j->s[j->pos] == ']') {
    j->pos++;
  } else {
    for (;;) {
      char label[48];
      snprintf(label, sizeof label, "\"%s\"[%zu]", key, count);
      int64_t scratch; /* items past n are checked, not kept */
      int one = 0;
      int rc =
          item(j, label, depth + 1,
               count < n ? (unsigned char *)items + count * item_size : (void *)&scratch, &one);
      if (rc != 0) return rc;
      read += (size_t)one;
      count++;
      cp_json_space(j);
      if (j->pos < j->len && j->s[j->pos] == ',') {
        j->pos++;
        cp_json_space(j);
        continue;
      }
      if (j->pos < j->len && j->s[j->pos] == ']') {
        j->pos++;
        break;
      }
      return cp_json_unexpected(j, "',' or ']'");
    }
  }
  if (count != n) {
    cp_json_invalid(j, at, "\"%s\" has %zu items: it must be %s", key, count, what);
  } else if (read == n) {
    memcpy(out, items, n * item_size);
    *got = 1;
  }
  return 0;
}

/* [top, left, bottom, right] (pos at the value). */
static int cp_meta_sides(cp_json *j, const char *key, int64_t out[4]) {
  int got = 0;
  return cp_meta_array(j, key, "an array of 4 integers [top, left, bottom, right]", 1, 4,
                       cp_int_item, sizeof(int64_t), out, &got);
}

/* "none", "relu", "relu6" or {"clamp": [min, max]} (pos at the value). */
static int cp_meta_activation(cp_json *j, cp_meta *meta) {
  static const char want[] =
      "\"activation\" must be \"none\", \"relu\", \"relu6\" or {\"clamp\": [min, max]}";
  const size_t at = j->pos;
  const unsigned char c = at < j->len ? j->s[at] : 0;
  int rc;
  if (at < j->len && c == '"') {
    char name[8];
    cp_text t = {name, sizeof name, 0};
    if ((rc = cp_json_string(j, &t)) != 0) return rc;
    /* compared with the full decoded length ("relu\u0000" is not "relu") */
    if (t.len == 4 && memcmp(name, "none", 4) == 0) {
      meta->activation = CP_META_ACT_NONE;
    } else if (t.len == 4 && memcmp(name, "relu", 4) == 0) {
      meta->activation = CP_META_ACT_RELU;
    } else if (t.len == 5 && memcmp(name, "relu6", 5) == 0) {
      meta->activation = CP_META_ACT_CLAMP;
      meta->clamp_min = 0.0f, meta->clamp_max = 6.0f;
    } else {
      cp_json_invalid(j, at, "%s", want);
    }
    return 0;
  }
  if (at >= j->len || c != '{') {
    cp_json_invalid(j, at, "%s", want);
    return cp_json_value(j, 1);
  }
  j->pos++;
  cp_json_space(j);
  int members = 0, clamp = 0, got = 0;
  float bounds[2] = {0, 0};
  if (j->pos < j->len && j->s[j->pos] == '}') {
    j->pos++;
  } else {
    for (;;) {
      char key[8];
      cp_text kt = {key, sizeof key, 0};
      if ((rc = cp_json_key(j, &kt)) != 0) return rc;
      members++;
      if (members == 1 && kt.len == 5 && memcmp(key, "clamp", 5) == 0) {
        clamp = 1;
        rc = cp_meta_array(j, "clamp", "an array of 2 numbers [min, max]", 2, 2, cp_float_item,
                           sizeof(float), bounds, &got);
      } else {
        rc = cp_json_value(j, 2);
      }
      if (rc != 0) return rc;
      cp_json_space(j);
      if (j->pos < j->len && j->s[j->pos] == ',') {
        j->pos++;
        cp_json_space(j);
        continue;
      }
      if (j->pos < j->len && j->s[j->pos] == '}') {
        j->pos++;
        break;
      }
      return cp_json_unexpected(j, "',' or '}'");
    }
  }
  if (members != 1 || !clamp) {
    cp_json_invalid(j, at,
                    "an \"activation\" object must have exactly one key: {\"clamp\": [min, max]}");
  } else if (got) {
    meta->activation = CP_META_ACT_CLAMP;
    meta->clamp_min = bounds[0], meta->clamp_max = bounds[1];
  }
  return 0;
}

/* The top-level object (pos at its '{'). */
static int cp_meta_object(cp_json *j, cp_meta *meta, int seen[K_COUNT]) {
  int64_t *const ints[K_COUNT] = {
      [K_BATCH] = &meta->batch,
      [K_CIN] = &meta->in_channels,
      [K_COUT] = &meta->out_channels,
      [K_H] = &meta->height,
      [K_W] = &meta->width,
      [K_FILTER] = &meta->filter,
      [K_POOL] = &meta->pool,
      [K_SEED] = &meta->seed,
      [K_POOL_STRIDE] = &meta->pool_stride,
      [K_STRIDE] = &meta->stride,
      [K_DILATION] = &meta->dilation,
      [K_GROUPS] = &meta->groups,
  };
  int rc;
  j->pos++;
  cp_json_space(j);
  if (j->pos < j->len && j->s[j->pos] == '}') {
    j->pos++;
    return 0;
  }
  for (;;) {
    char key[64];
    cp_text kt = {key, sizeof key, 0};
    if ((rc = cp_json_key(j, &kt)) != 0) return rc;
    int id = -1; /* known keys compare with their full decoded length ("a\u0000" is not "a") */
    for (int i = 0; i < K_COUNT; i++)
      if (kt.len == strlen(cp_meta_keys[i]) && memcmp(key, cp_meta_keys[i], kt.len) == 0) id = i;
    const size_t at = j->pos;
    if (id < 0) {
      rc = cp_json_value(j, 1); /* unknown keys are ignored, whatever their value */
    } else if (seen[id]) {
      cp_json_invalid(j, at, "duplicate key \"%s\"", cp_meta_keys[id]);
      rc = cp_json_value(j, 1);
    } else if (id == K_DTYPE) {
      seen[id] = 1;
      if (j->pos < j->len && j->s[j->pos] == '"') {
        char dtype[64];
        cp_text dt = {dtype, sizeof dtype, 0};
        if ((rc = cp_json_string(j, &dt)) != 0) return rc;
        int printable = dt.len < sizeof dtype;
        for (size_t i = 0; printable && i < dt.len; i++)
          printable = dtype[i] >= 0x20 && dtype[i] < 0x7f;
        if (dt.len >= sizeof meta->dtype)
          cp_json_invalid(j, at, "\"dtype\" is too long");
        else if (!printable) /* so that the CLI can quote it in a one-line message */
          cp_json_invalid(j, at, "\"dtype\" has a character that is not printable ASCII");
        else
          memcpy(meta->dtype, dtype, dt.len + 1);
      } else {
        cp_json_invalid(j, at, "\"dtype\" must be a string");
        rc = cp_json_value(j, 1);
      }
    } else if (id == K_BIAS || id == K_CEIL_MODE || id == K_RESIDUAL) {
      seen[id] = 1;
      int which = -1;
      const unsigned char c = j->pos < j->len ? j->s[j->pos] : 0;
      if (c == 't' || c == 'f') {
        rc = cp_json_literal(j, &which);
        *(id == K_BIAS        ? &meta->bias
          : id == K_CEIL_MODE ? &meta->ceil_mode
                              : &meta->residual) = which == 1;
      } else {
        cp_json_invalid(j, at, "\"%s\" must be true or false", cp_meta_keys[id]);
        rc = cp_json_value(j, 1);
      }
    } else if (id == K_PADDING || id == K_POOL_PADDING) {
      seen[id] = 1;
      rc = cp_meta_sides(j, cp_meta_keys[id], id == K_PADDING ? meta->padding : meta->pool_padding);
    } else if (id == K_ACTIVATION) {
      seen[id] = 1;
      rc = cp_meta_activation(j, meta);
    } else {
      seen[id] = 1;
      char label[32];
      snprintf(label, sizeof label, "\"%s\"", cp_meta_keys[id]);
      int64_t v = 0;
      int got = 0;
      rc = cp_meta_int(j, label, 1, &v, &got);
      const int positive = id == K_POOL_STRIDE || id == K_STRIDE || id == K_DILATION ||
                           id == K_GROUPS; /* 0 stands for an absent key */
      if (got && positive && v < 1)
        cp_json_invalid(j, at, "%s = %lld must be >= 1", label, (long long)v);
      else if (got)
        *ints[id] = v;
    }
    if (rc != 0) return rc;
    cp_json_space(j);
    if (j->pos < j->len && j->s[j->pos] == '}') {
      j->pos++;
      return 0;
    }
    if (j->pos >= j->len || j->s[j->pos] != ',') return cp_json_unexpected(j, "',' or '}'");
    j->pos++;
    cp_json_space(j);
  }
}

int cp_meta_parse(const char *text, size_t len, cp_meta *meta, char *err, size_t err_cap) {
  cp_json j = {(const unsigned char *)text, len, 0, err, err_cap, 0};
  int seen[K_COUNT] = {0};
  int rc;
  memset(meta, 0, sizeof *meta);
  if (err_cap > 0) err[0] = '\0';
  /* One UTF-8 byte order mark is skipped (see the top of this file). */
  if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) j.pos = 3;
  cp_json_space(&j);
  if (j.pos < len && text[j.pos] == '{') {
    if ((rc = cp_meta_object(&j, meta, seen)) != 0) return rc;
  } else {
    if (j.pos >= len) return cp_json_unexpected(&j, "a JSON object");
    cp_json_invalid(&j, j.pos, "meta.json must be a JSON object");
    if ((rc = cp_json_value(&j, 0)) != 0) return rc;
  }
  cp_json_space(&j);
  if (j.pos != len) return cp_json_syntax(&j, "trailing characters after the top-level value");
  if (j.invalid) return CP_META_INVALID;
  for (int i = 0; i < K_COUNT; i++)
    if (!seen[i] && i < K_SEED) {
      cp_json_invalid(&j, j.pos, "missing key \"%s\"", cp_meta_keys[i]);
      return CP_META_INVALID;
    }
  return CP_META_OK;
}

int cp_meta_format(const cp_meta *m, char *out, size_t cap) {
  char activation[96];
  if (m->activation == CP_META_ACT_NONE) {
    snprintf(activation, sizeof activation, "\"none\"");
  } else if (m->activation == CP_META_ACT_RELU) {
    snprintf(activation, sizeof activation, "\"relu\"");
  } else if (m->activation == CP_META_ACT_CLAMP) {
    /* JSON has no infinity or NaN; 9 significant digits give the float back */
    if (!(m->clamp_min >= -FLT_MAX && m->clamp_min <= FLT_MAX && m->clamp_max >= -FLT_MAX &&
          m->clamp_max <= FLT_MAX))
      return -1;
    snprintf(activation, sizeof activation, "{\"clamp\": [%.9g, %.9g]}", (double)m->clamp_min,
             (double)m->clamp_max);
  } else {
    return -1;
  }
  char stride[48] = ""; /* 0: absent (the stride is the pool) */
  if (m->pool_stride > 0)
    snprintf(stride, sizeof stride, "  \"pool_stride\": %lld,\n", (long long)m->pool_stride);
  char conv[160] = ""; /* the conv keys, each when given (> 0) */
  const char *const conv_keys[3] = {"stride", "dilation", "groups"};
  const int64_t conv_values[3] = {m->stride, m->dilation, m->groups};
  for (int i = 0, used = 0; i < 3; i++)
    if (conv_values[i] > 0)
      used += snprintf(conv + used, sizeof conv - (size_t)used, "  \"%s\": %lld,\n", conv_keys[i],
                       (long long)conv_values[i]);
  const int64_t *p = m->padding, *q = m->pool_padding;
  int n =
      snprintf(out, cap,
               "{\n  \"dtype\": \"%s\",\n  \"batch\": %lld,\n  \"in_channels\": %lld,\n"
               "  \"out_channels\": %lld,\n  \"height\": %lld,\n  \"width\": %lld,\n"
               "  \"filter\": %lld,\n  \"pool\": %lld,\n  \"bias\": %s,\n  \"seed\": %lld,\n"
               "  \"padding\": [%lld, %lld, %lld, %lld],\n  \"activation\": %s,\n"
               "%s  \"pool_padding\": [%lld, %lld, %lld, %lld],\n"
               "  \"ceil_mode\": %s,\n%s  \"residual\": %s\n}\n",
               m->dtype, (long long)m->batch, (long long)m->in_channels, (long long)m->out_channels,
               (long long)m->height, (long long)m->width, (long long)m->filter, (long long)m->pool,
               m->bias ? "true" : "false", (long long)m->seed, (long long)p[0], (long long)p[1],
               (long long)p[2], (long long)p[3], activation, stride, (long long)q[0],
               (long long)q[1], (long long)q[2], (long long)q[3], m->ceil_mode ? "true" : "false",
               conv, m->residual ? "true" : "false");
  return n < 0 || (size_t)n >= cap ? -1 : n;
}
