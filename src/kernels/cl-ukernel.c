/* Dispatch table of the channels-in-lanes microkernels, built from cl-ukernels.inc. */
#include "cl-ukernel.h"

static const cp_cl_ukernel cp_cl_ukernels[] = {
#define CP_CL_UKERNEL(dt, cpack, mr, np, isa, ISA) \
  {#dt "-cl-" #mr "x" #np "-" #isa, ISA, cpack, mr, np, cp_##dt##_cl_ukernel_##mr##x##np##__##isa},
#include "cl-ukernels.inc"
#undef CP_CL_UKERNEL
};

const cp_cl_ukernel *cp_cl_ukernel_list(size_t *count) {
  *count = sizeof cp_cl_ukernels / sizeof cp_cl_ukernels[0];
  return cp_cl_ukernels;
}

const cp_cl_ukernel *cp_cl_ukernel_select(cp_isa isa, int cpack) {
  const cp_cl_ukernel *best = NULL;
  for (size_t i = 0; i < sizeof cp_cl_ukernels / sizeof cp_cl_ukernels[0]; i++) {
    const cp_cl_ukernel *u = &cp_cl_ukernels[i];
    if (u->cpack == cpack && u->isa <= isa && (best == NULL || u->isa > best->isa)) best = u;
  }
  return best;
}

const cp_cl_ukernel *cp_cl_ukernel_with_mr(const cp_cl_ukernel *uk, int mr) {
  for (size_t i = 0; i < sizeof cp_cl_ukernels / sizeof cp_cl_ukernels[0]; i++) {
    const cp_cl_ukernel *u = &cp_cl_ukernels[i];
    if (u->isa == uk->isa && u->cpack == uk->cpack && u->mr == mr) return u;
  }
  return uk;
}

static size_t cp_cl_tiles_cost(const cp_cl_ukernel *uk, size_t positions) {
  const size_t np = (size_t)uk->np;
  return (positions + np - 1) / np * (np + 1);
}

const cp_cl_ukernel *cp_cl_ukernel_for_positions(const cp_cl_ukernel *uk, size_t positions) {
  const cp_cl_ukernel *best = uk;
  for (size_t i = 0; i < sizeof cp_cl_ukernels / sizeof cp_cl_ukernels[0]; i++) {
    const cp_cl_ukernel *u = &cp_cl_ukernels[i];
    if (u->isa == uk->isa && u->cpack == uk->cpack && u->mr == uk->mr &&
        cp_cl_tiles_cost(u, positions) < cp_cl_tiles_cost(best, positions))
      best = u;
  }
  return best;
}
