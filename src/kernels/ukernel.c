/* Dispatch table of the shift-reduce microkernels, built from sr-ukernels.inc. */
#include "ukernel.h"

#include "../config.h"

static const cp_sr_ukernel cp_sr_ukernels[] = {
#define CP_SR_UKERNEL(dt, DTYPE, mr, nr, isa, ISA) \
  {                                                \
      #dt "-sr-" #mr "x" #nr "-" #isa,             \
      DTYPE,                                       \
      ISA,                                         \
      mr,                                          \
      nr,                                          \
      DTYPE == CONVPOOL_BFLOAT16 ? 2 : 1,          \
      cp_##dt##_sr_ukernel_##mr##x##nr##__##isa},
#include "sr-ukernels.inc"
#undef CP_SR_UKERNEL
};

const cp_sr_ukernel *cp_sr_ukernel_list(size_t *count) {
  *count = sizeof cp_sr_ukernels / sizeof cp_sr_ukernels[0];
  return cp_sr_ukernels;
}

const cp_sr_ukernel *cp_sr_ukernel_select(convpool_dtype dtype, cp_isa isa) {
  /* The highest listed ISA not above `isa`, then the kernel with that ISA's
     register tile (config.c), or its first listed kernel. */
  const cp_sr_ukernel *best = NULL;
  for (size_t i = 0; i < sizeof cp_sr_ukernels / sizeof cp_sr_ukernels[0]; i++) {
    const cp_sr_ukernel *u = &cp_sr_ukernels[i];
    if (u->dtype != dtype || u->isa > isa) continue;
    if (best == NULL || u->isa > best->isa) best = u;
  }
  if (best == NULL) return NULL;
  const cp_blocking *cfg = cp_blocking_for(best->isa);
  for (size_t i = 0; i < sizeof cp_sr_ukernels / sizeof cp_sr_ukernels[0]; i++) {
    const cp_sr_ukernel *u = &cp_sr_ukernels[i];
    if (u->dtype == dtype && u->isa == best->isa && u->mr == cfg->mr && u->nr == cfg->nr) return u;
  }
  return best;
}

const cp_sr_ukernel *cp_sr_ukernel_tail(const cp_sr_ukernel *main, int remainder) {
  /* The narrowest kernel of the same family that covers the remainder. */
  const cp_sr_ukernel *best = main;
  if (remainder <= 0) return main;
  for (size_t i = 0; i < sizeof cp_sr_ukernels / sizeof cp_sr_ukernels[0]; i++) {
    const cp_sr_ukernel *u = &cp_sr_ukernels[i];
    if (u->dtype == main->dtype && u->isa == main->isa && u->nr == main->nr && u->mr >= remainder &&
        u->mr < best->mr)
      best = u;
  }
  return best;
}

const cp_sr_ukernel *cp_sr_ukernel_with_nr(const cp_sr_ukernel *k, int nr) {
  for (size_t i = 0; i < sizeof cp_sr_ukernels / sizeof cp_sr_ukernels[0]; i++) {
    const cp_sr_ukernel *u = &cp_sr_ukernels[i];
    if (u->dtype == k->dtype && u->isa == k->isa && u->mr == k->mr && u->nr == nr) return u;
  }
  return NULL;
}
