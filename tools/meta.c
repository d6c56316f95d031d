/* A strict parser for the flat meta.json of a dump directory. */
#include "meta.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct cp_json {
  const char *s;
  size_t len, pos;
  char *err;
  size_t err_cap;
} cp_json;

static int cp_json_error(cp_json *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(j->err, j->err_cap, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n < j->err_cap)
    snprintf(j->err + n, j->err_cap - (size_t)n, " (meta.json byte %zu)", j->pos);
  return -1;
}

static void cp_json_space(cp_json *j) {
  while (j->pos < j->len && (j->s[j->pos] == ' ' || j->s[j->pos] == '\t' ||
                             j->s[j->pos] == '\n' || j->s[j->pos] == '\r'))
    j->pos++;
}

/* Length of the UTF-8 sequence at s (max n bytes), or 0 if invalid. */
static size_t cp_utf8_len(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len;
  unsigned min;
  unsigned cp;
  if ((s[0] & 0xe0) == 0xc0) len = 2, cp = s[0] & 0x1f, min = 0x80;
  else if ((s[0] & 0xf0) == 0xe0) len = 3, cp = s[0] & 0x0f, min = 0x800;
  else if ((s[0] & 0xf8) == 0xf0) len = 4, cp = s[0] & 0x07, min = 0x10000;
  else return 0;
  if (len > n) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/* A string without escapes other than \" \\ \/ (keys and dtype names need no more). */
static int cp_json_string(cp_json *j, char *out, size_t cap) {
  if (j->pos >= j->len || j->s[j->pos] != '"') return cp_json_error(j, "expected a string");
  j->pos++;
  size_t n = 0;
  while (j->pos < j->len && j->s[j->pos] != '"') {
    unsigned char c = (unsigned char)j->s[j->pos];
    if (c < 0x20) return cp_json_error(j, "control character in a string");
    if (c == '\\') {
      if (j->pos + 1 >= j->len) return cp_json_error(j, "unterminated escape");
      char e = j->s[j->pos + 1];
      if (e != '"' && e != '\\' && e != '/')
        return cp_json_error(j, "unsupported escape (byte 0x%02x after a backslash)",
                             (unsigned)(unsigned char)e);
      if (n + 1 < cap) out[n++] = e;
      j->pos += 2;
      continue;
    }
    size_t l = cp_utf8_len((const unsigned char *)j->s + j->pos, j->len - j->pos);
    if (l == 0) return cp_json_error(j, "invalid UTF-8");
    for (size_t i = 0; i < l; i++)
      if (n + 1 < cap) out[n++] = j->s[j->pos + i];
    j->pos += l;
  }
  if (j->pos >= j->len) return cp_json_error(j, "unterminated string");
  j->pos++;
  out[n] = '\0';
  return 0;
}

static int cp_json_int(cp_json *j, const char *key, int64_t *out) {
  int neg = 0;
  if (j->pos < j->len && j->s[j->pos] == '-') neg = 1, j->pos++;
  if (j->pos >= j->len || j->s[j->pos] < '0' || j->s[j->pos] > '9')
    return cp_json_error(j, "\"%s\" must be an integer", key);
  uint64_t v = 0;
  const uint64_t limit = (uint64_t)1 << 62;
  while (j->pos < j->len && j->s[j->pos] >= '0' && j->s[j->pos] <= '9') {
    const uint64_t d = (uint64_t)(j->s[j->pos] - '0');
    if (v > (limit - d) / 10) return cp_json_error(j, "\"%s\" is too large", key); /* before it wraps */
    v = v * 10 + d;
    j->pos++;
  }
  if (j->pos < j->len && (j->s[j->pos] == '.' || j->s[j->pos] == 'e' || j->s[j->pos] == 'E'))
    return cp_json_error(j, "\"%s\" must be an integer", key);
  if (neg) return cp_json_error(j, "\"%s\" = -%llu must not be negative", key, (unsigned long long)v);
  *out = (int64_t)v;
  return 0;
}

/* Skip a scalar value of an unknown key; objects and arrays are refused. */
static int cp_json_skip(cp_json *j) {
  if (j->pos >= j->len) return cp_json_error(j, "missing value");
  char c = j->s[j->pos];
  if (c == '"') {
    char tmp[8];
    return cp_json_string(j, tmp, sizeof tmp);
  }
  if (c == '{' || c == '[') return cp_json_error(j, "nested objects and arrays are not allowed");
  size_t start = j->pos;
  while (j->pos < j->len && j->s[j->pos] != ',' && j->s[j->pos] != '}' && j->s[j->pos] != ' ' &&
         j->s[j->pos] != '\n' && j->s[j->pos] != '\r' && j->s[j->pos] != '\t') {
    unsigned char u = (unsigned char)j->s[j->pos];
    if (!((u >= '0' && u <= '9') || u == '-' || u == '+' || u == '.' || u == 'e' || u == 'E' ||
          (u >= 'a' && u <= 'z')))
      return cp_json_error(j, "invalid value");
    j->pos++;
  }
  if (j->pos == start) return cp_json_error(j, "missing value");
  return 0;
}

enum { K_DTYPE, K_BATCH, K_CIN, K_COUT, K_H, K_W, K_FILTER, K_POOL, K_BIAS, K_SEED, K_COUNT };
static const char *const cp_meta_keys[K_COUNT] = {
    "dtype", "batch", "in_channels", "out_channels", "height", "width", "filter", "pool", "bias",
    "seed"};

int cp_meta_parse(const char *text, size_t len, cp_meta *meta, char *err, size_t err_cap) {
  cp_json j = {text, len, 0, err, err_cap};
  int seen[K_COUNT] = {0};
  memset(meta, 0, sizeof *meta);
  if (err_cap > 0) err[0] = '\0';
  cp_json_space(&j);
  if (j.pos >= len || text[j.pos] != '{') return cp_json_error(&j, "meta.json must be a JSON object");
  j.pos++;
  cp_json_space(&j);
  int first = 1;
  while (j.pos < len && text[j.pos] != '}') {
    if (!first) {
      if (text[j.pos] != ',') return cp_json_error(&j, "expected ',' or '}'");
      j.pos++;
      cp_json_space(&j);
    }
    first = 0;
    char key[64];
    if (cp_json_string(&j, key, sizeof key) != 0) return -1;
    cp_json_space(&j);
    if (j.pos >= len || text[j.pos] != ':') return cp_json_error(&j, "expected ':' after \"%s\"", key);
    j.pos++;
    cp_json_space(&j);
    int id = -1;
    for (int i = 0; i < K_COUNT; i++)
      if (strcmp(key, cp_meta_keys[i]) == 0) id = i;
    if (id < 0) {
      if (cp_json_skip(&j) != 0) return -1;
    } else {
      if (seen[id]) return cp_json_error(&j, "duplicate key \"%s\"", key);
      seen[id] = 1;
      int64_t *ints[K_COUNT] = {NULL,          &meta->batch,  &meta->in_channels,
                                &meta->out_channels, &meta->height, &meta->width,
                                &meta->filter, &meta->pool,   NULL,
                                &meta->seed};
      if (id == K_DTYPE) {
        char dtype[64];
        if (cp_json_string(&j, dtype, sizeof dtype) != 0) return -1;
        if (strlen(dtype) >= sizeof meta->dtype) return cp_json_error(&j, "\"dtype\" is too long");
        memcpy(meta->dtype, dtype, strlen(dtype) + 1);
      } else if (id == K_BIAS) {
        if (len - j.pos >= 4 && memcmp(text + j.pos, "true", 4) == 0)
          meta->bias = 1, j.pos += 4;
        else if (len - j.pos >= 5 && memcmp(text + j.pos, "false", 5) == 0)
          meta->bias = 0, j.pos += 5;
        else
          return cp_json_error(&j, "\"bias\" must be true or false");
      } else if (cp_json_int(&j, key, ints[id]) != 0) {
        return -1;
      }
    }
    cp_json_space(&j);
  }
  if (j.pos >= len) return cp_json_error(&j, "unterminated object");
  j.pos++;
  cp_json_space(&j);
  if (j.pos != len) return cp_json_error(&j, "trailing characters after the object");
  for (int i = 0; i < K_COUNT; i++)
    if (!seen[i] && i != K_SEED) return cp_json_error(&j, "missing key \"%s\"", cp_meta_keys[i]);
  return 0;
}

int cp_meta_format(const cp_meta *m, char *out, size_t cap) {
  int n = snprintf(out, cap,
                   "{\n  \"dtype\": \"%s\",\n  \"batch\": %lld,\n  \"in_channels\": %lld,\n"
                   "  \"out_channels\": %lld,\n  \"height\": %lld,\n  \"width\": %lld,\n"
                   "  \"filter\": %lld,\n  \"pool\": %lld,\n  \"bias\": %s,\n  \"seed\": %lld\n}\n",
                   m->dtype, (long long)m->batch, (long long)m->in_channels,
                   (long long)m->out_channels, (long long)m->height, (long long)m->width,
                   (long long)m->filter, (long long)m->pool, m->bias ? "true" : "false",
                   (long long)m->seed);
  return n < 0 || (size_t)n >= cap ? -1 : n;
}
