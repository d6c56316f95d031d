/* Status strings, the per-thread error message, dtypes and the allocator. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The strings come from the header's list; the enum values must be 0, 1, ...
   in list order, so that a status indexes the table. */
#define CP_STATUS_STRING(name, value, string, meaning) [value] = string,
static const char *const cp_status_strings[] = {CONVPOOL_STATUS_LIST(CP_STATUS_STRING)};
#undef CP_STATUS_STRING
#define CP_STATUS_ONE(name, value, string, meaning) +1
enum { CP_STATUS_COUNT = 0 CONVPOOL_STATUS_LIST(CP_STATUS_ONE) };
#undef CP_STATUS_ONE
#define CP_STATUS_CHECK(name, value, string, meaning)      \
  _Static_assert(name == value && value < CP_STATUS_COUNT, \
                 #name " is " #value " and indexes the string table");
CONVPOOL_STATUS_LIST(CP_STATUS_CHECK)
#undef CP_STATUS_CHECK
_Static_assert(sizeof cp_status_strings / sizeof cp_status_strings[0] == CP_STATUS_COUNT,
               "one string per status");

const char *convpool_status_string(convpool_status status) {
  if ((unsigned)status >= CP_STATUS_COUNT || cp_status_strings[status] == NULL)
    return "unknown status";
  return cp_status_strings[status];
}

static _Thread_local char cp_error_message[512];

convpool_status cp_fail(convpool_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cp_error_message, sizeof cp_error_message, fmt, ap);
  va_end(ap);
  return status;
}

void cp_clear_error(void) {
  cp_error_message[0] = '\0';
}

const char *convpool_last_error(void) {
  return cp_error_message;
}

size_t convpool_dtype_size(convpool_dtype dtype) {
  switch (dtype) {
    case CONVPOOL_FLOAT32:
      return 4;
    case CONVPOOL_FLOAT16:
    case CONVPOOL_BFLOAT16:
      return 2;
  }
  return 0;
}

const char *convpool_dtype_name(convpool_dtype dtype) {
  switch (dtype) {
    case CONVPOOL_FLOAT32:
      return "float32";
    case CONVPOOL_FLOAT16:
      return "float16";
    case CONVPOOL_BFLOAT16:
      return "bfloat16";
  }
  return "unknown";
}

convpool_status convpool_dtype_from_name(const char *name, convpool_dtype *dtype) {
  static const convpool_dtype dtypes[] = {CONVPOOL_FLOAT32, CONVPOOL_FLOAT16, CONVPOOL_BFLOAT16};
  cp_clear_error();
  if (name == NULL || dtype == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "name or dtype is NULL");
  char known[64] = "";
  size_t used = 0;
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
    if (strcmp(name, convpool_dtype_name(dtypes[i])) == 0) {
      *dtype = dtypes[i];
      return CONVPOOL_SUCCESS;
    }
    snprintf(known + used, sizeof known - used, "%s%s", i > 0 ? ", " : "",
             convpool_dtype_name(dtypes[i]));
    used += strlen(known + used);
  }
  return cp_fail(CONVPOOL_INVALID_ARGUMENT, "'%.64s' is not one of %s", name, known);
}

void convpool_options_init(convpool_options *options) {
  if (options == NULL) return;
  memset(options, 0, sizeof *options);
  options->size = sizeof *options;
  options->threads = 0;
  options->algo = CONVPOOL_ALGO_AUTO;
  options->rows_per_item = 0;
  options->allocator = NULL;
}

/* ---- allocator ---- */

static void *cp_default_alloc(void *context, size_t size, size_t alignment) {
  (void)context;
  void *p = NULL;
  if (size == 0) size = 1;
  if (posix_memalign(&p, alignment < sizeof(void *) ? sizeof(void *) : alignment, size) != 0)
    return NULL;
  return p;
}

static void cp_default_free(void *context, void *p) {
  (void)context;
  free(p);
}

static const convpool_allocator cp_builtin_allocator = {cp_default_alloc, cp_default_free, NULL};
static convpool_allocator cp_global_allocator = {cp_default_alloc, cp_default_free, NULL};

convpool_status convpool_set_default_allocator(const convpool_allocator *allocator) {
  cp_clear_error();
  if (allocator == NULL) {
    cp_global_allocator = cp_builtin_allocator;
    return CONVPOOL_SUCCESS;
  }
  if (allocator->alloc == NULL || allocator->free == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "allocator->%s is NULL",
                   allocator->alloc == NULL ? "alloc" : "free");
  cp_global_allocator = *allocator;
  return CONVPOOL_SUCCESS;
}

const convpool_allocator *cp_allocator_or_default(const convpool_allocator *allocator) {
  return allocator != NULL ? allocator : &cp_global_allocator;
}

void *cp_alloc(const convpool_allocator *a, size_t size) {
  return a->alloc(a->context, size, 64);
}

void cp_free(const convpool_allocator *a, void *p) {
  if (p != NULL) a->free(a->context, p);
}
