/* The list of algorithms (algorithms.inc), the choice of auto, and the names. */
#include <stdio.h>
#include <string.h>

#include "algo.h"

static const cp_algorithm *const cp_algorithms[] = {
#define CP_ALGORITHM(name) &cp_algorithm_##name,
#include "algorithms.inc"
#undef CP_ALGORITHM
};

/* Their short names, in the same order. */
static const char *const cp_algorithm_names[] = {
#define CP_ALGORITHM(name) #name,
#include "algorithms.inc"
#undef CP_ALGORITHM
};

const char *cp_algorithm_short_name(const cp_algorithm *algo) {
  for (size_t i = 0; i < sizeof cp_algorithms / sizeof cp_algorithms[0]; i++)
    if (cp_algorithms[i] == algo) return cp_algorithm_names[i];
  return "?";
}

const cp_algorithm *const *cp_algorithm_list(size_t *count) {
  *count = sizeof cp_algorithms / sizeof cp_algorithms[0];
  return cp_algorithms;
}

const cp_algorithm *cp_algorithm_find(convpool_algo id) {
  for (size_t i = 0; i < sizeof cp_algorithms / sizeof cp_algorithms[0]; i++)
    if (cp_algorithms[i]->id == id) return cp_algorithms[i];
  return NULL;
}

convpool_status cp_algorithm_choose(convpool_algo requested, const cp_layer *layer,
                                    const cp_cpu *cpu, const cp_algorithm **out, char *declined,
                                    size_t capacity) {
  char why[256];
  size_t used = 0;
  *out = NULL;
  if (declined != NULL && capacity > 0) declined[0] = '\0';
  if (requested != CONVPOOL_ALGO_AUTO) {
    const cp_algorithm *a = cp_algorithm_find(requested);
    if (a == NULL)
      return cp_fail(CONVPOOL_INVALID_ARGUMENT, "algo = %d is not a convpool_algo", (int)requested);
    const char *reason = a->declines(layer, cpu, why, sizeof why);
    if (reason != NULL)
      return cp_fail(CONVPOOL_UNSUPPORTED, "algorithm %s declines the layer: %s", a->name, reason);
    *out = a;
    return CONVPOOL_SUCCESS;
  }
  const cp_algorithm *skipped = NULL; /* the first that auto skipped for a later one */
  for (size_t i = 0; i < sizeof cp_algorithms / sizeof cp_algorithms[0]; i++) {
    const cp_algorithm *a = cp_algorithms[i];
    const char *reason = *out != NULL ? NULL : a->declines(layer, cpu, why, sizeof why);
    const char *skip = *out != NULL || reason != NULL || a->auto_skips == NULL
                           ? NULL
                           : a->auto_skips(layer, cpu, why, sizeof why);
    char line[384];
    if (*out != NULL)
      snprintf(line, sizeof line, "auto           %s: not tried (after %s in the measured order)\n",
               a->name, (*out)->name);
    else if (reason != NULL)
      snprintf(line, sizeof line, "auto           %s: declined: %s\n", a->name, reason);
    else if (skip != NULL)
      snprintf(line, sizeof line, "auto           %s: passed over: %s\n", a->name, skip);
    else
      snprintf(line, sizeof line, "auto           %s: chosen (first in the list to accept)\n",
               a->name);
    if (*out == NULL && reason == NULL && skip != NULL && skipped == NULL) skipped = a;
    if (*out == NULL && reason == NULL && skip == NULL) *out = a;
    if (declined != NULL && used < capacity) {
      snprintf(declined + used, capacity - used, "%s", line);
      used += strlen(declined + used);
    }
  }
  if (*out == NULL && skipped != NULL) { /* no later one takes it after all */
    *out = skipped;
    if (declined != NULL && used < capacity)
      snprintf(declined + used, capacity - used,
               "auto           %s: chosen (no later algorithm takes the layer)\n", skipped->name);
  }
  if (*out == NULL) return cp_fail(CONVPOOL_UNSUPPORTED, "no algorithm computes this layer");
  return CONVPOOL_SUCCESS;
}

const char *convpool_algo_name(convpool_algo algo) {
  if (algo == CONVPOOL_ALGO_AUTO) return "auto";
  const cp_algorithm *a = cp_algorithm_find(algo);
  return a != NULL ? cp_algorithm_short_name(a) : NULL;
}

convpool_status convpool_algo_from_name(const char *name, convpool_algo *algo) {
  cp_clear_error();
  if (name == NULL || algo == NULL)
    return cp_fail(CONVPOOL_INVALID_ARGUMENT, "name or algo is NULL");
  char known[256] = "auto";
  size_t used = strlen(known);
  if (strcmp(name, "auto") == 0) {
    *algo = CONVPOOL_ALGO_AUTO;
    return CONVPOOL_SUCCESS;
  }
  for (size_t i = 0; i < sizeof cp_algorithms / sizeof cp_algorithms[0]; i++) {
    if (strcmp(name, cp_algorithm_names[i]) == 0) {
      *algo = cp_algorithms[i]->id;
      return CONVPOOL_SUCCESS;
    }
    snprintf(known + used, sizeof known - used, ", %s", cp_algorithm_names[i]);
    used += strlen(known + used);
  }
  return cp_fail(CONVPOOL_INVALID_ARGUMENT, "'%.64s' is not one of %s", name, known);
}

size_t convpool_algo_list(convpool_algo *algos, size_t capacity) {
  const size_t count = 1 + sizeof cp_algorithms / sizeof cp_algorithms[0];
  for (size_t i = 0; i < count && i < capacity; i++)
    algos[i] = i == 0 ? CONVPOOL_ALGO_AUTO : cp_algorithms[i - 1]->id;
  return count;
}
