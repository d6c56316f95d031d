/*
 * Prints how cp_meta_parse (cli/meta.c) classifies each file given:
 *
 *   CLASS<TAB>PATH<TAB>DETAIL
 *
 * With the single argument "-", documents are read from stdin instead, each
 * as its decimal length, a newline and its bytes, and PATH is the document's
 * number (from 0).
 *
 * CLASS is ok, syntax (not JSON), invalid (JSON, not a valid meta.json) or
 * limit (nested deeper than CP_META_MAX_DEPTH); DETAIL is the values read
 * (ok: "dtype=float32 batch=2 ... bias=1 seed=0 padding=0,0,0,0 activation=none
 * pool_stride=0 pool_padding=0,0,0,0 ceil_mode=0 stride=0 dilation=0 groups=0 residual=0"; a
 * clamp as
 * "activation=clamp:MIN,MAX" with %.9g bounds) or the message. Used by meta_differential.py
 * to compare the parser with Python's json module. Exit status 0 when every
 * file could be read.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta.h"

/* text with bytes outside printable ASCII, and backslashes, as \xNN: one line. */
static void print_escaped(const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
    if (*p >= 0x20 && *p < 0x7f && *p != '\\')
      putchar(*p);
    else
      printf("\\x%02x", *p);
  }
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    char *bigger = realloc(buf, cap * 2);
    if (bigger == NULL) free(buf);
    buf = bigger;
    cap *= 2;
  }
  if (buf != NULL && ferror(f)) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = n;
  return buf;
}

static void classify(const char *name, const char *text, size_t len) {
  cp_meta m;
  char err[256];
  int rc = cp_meta_parse(text, len, &m, err, sizeof err);
  const char *cls = rc == CP_META_OK        ? "ok"
                    : rc == CP_META_SYNTAX  ? "syntax"
                    : rc == CP_META_INVALID ? "invalid"
                    : rc == CP_META_LIMIT   ? "limit"
                                            : "unknown";
  printf("%s\t%s\t", cls, name);
  if (rc == CP_META_OK) {
    printf("dtype=");
    print_escaped(m.dtype);
    printf(
        " batch=%lld in_channels=%lld out_channels=%lld height=%lld width=%lld filter=%lld "
        "pool=%lld bias=%d seed=%lld",
        (long long)m.batch, (long long)m.in_channels, (long long)m.out_channels,
        (long long)m.height, (long long)m.width, (long long)m.filter, (long long)m.pool, m.bias,
        (long long)m.seed);
    printf(" padding=%lld,%lld,%lld,%lld", (long long)m.padding[0], (long long)m.padding[1],
           (long long)m.padding[2], (long long)m.padding[3]);
    if (m.activation == CP_META_ACT_CLAMP)
      printf(" activation=clamp:%.9g,%.9g", (double)m.clamp_min, (double)m.clamp_max);
    else
      printf(" activation=%s", m.activation == CP_META_ACT_RELU   ? "relu"
                               : m.activation == CP_META_ACT_NONE ? "none"
                                                                  : "unknown");
    printf(" pool_stride=%lld pool_padding=%lld,%lld,%lld,%lld ceil_mode=%d",
           (long long)m.pool_stride, (long long)m.pool_padding[0], (long long)m.pool_padding[1],
           (long long)m.pool_padding[2], (long long)m.pool_padding[3], m.ceil_mode);
    printf(" stride=%lld dilation=%lld groups=%lld residual=%d\n", (long long)m.stride,
           (long long)m.dilation, (long long)m.groups, m.residual);
  } else {
    print_escaped(err);
    putchar('\n');
  }
}

/* Length-prefixed documents from stdin; returns 0 when all were complete. */
static int classify_stdin(void) {
  unsigned long long len;
  for (long n = 0; scanf("%llu", &len) == 1; n++) {
    if (getchar() != '\n' || len > ((size_t)1 << 30)) return 1;
    char *text = malloc(len ? len : 1);
    if (text == NULL || fread(text, 1, len, stdin) != len) {
      free(text);
      return 1;
    }
    char name[32];
    snprintf(name, sizeof name, "%ld", n);
    classify(name, text, len);
    free(text);
  }
  return feof(stdin) ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "-") == 0) return classify_stdin();
  int status = 0;
  for (int i = 1; i < argc; i++) {
    size_t len = 0;
    char *text = read_all(argv[i], &len);
    if (text == NULL) {
      printf("unreadable\t%s\t\n", argv[i]);
      status = 1;
      continue;
    }
    classify(argv[i], text, len);
    free(text);
  }
  return status;
}
