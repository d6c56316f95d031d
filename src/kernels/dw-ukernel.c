/* Dispatch table of the depthwise microkernels, built from dw-ukernels.inc. */
#include "dw-ukernel.h"

#include <limits.h>

/* The channels-in-lanes functions of each ISA's line (dw-ukernel.h) and the
   widest conv outputs (stride 1, strided) it computes in lanes, measured on
   MobileNetV2's depthwise layers (src/algo/depthwise.c, cp_dw_layout).
   AVX-512 has no lanes kernel of its own: the 8-channel AVX2 one beats its
   16-position channel rows on planes of at most 10 columns only, where a
   rows vector is part empty. */
#define CP_DW_LANES_avx512f cp_f32_dw_lanes__avx2, cp_f32_dw_transpose__avx2, 10, 10
#define CP_DW_LANES_avx2 cp_f32_dw_lanes__avx2, cp_f32_dw_transpose__avx2, 28, LONG_MAX
#define CP_DW_LANES_scalar NULL, NULL, 0, 0

static const cp_dw_ukernel cp_dw_ukernels[] = {
#define CP_DW_UKERNEL(nr, lanes, isa, ISA) \
  {"f32-dw-1x" #nr "-" #isa,               \
   ISA,                                    \
   lanes,                                  \
   nr,                                     \
   cp_f32_dw_ukernel_##nr##__##isa,        \
   cp_f32_dw_compact__##isa,               \
   cp_f32_dw_rows__##isa,                  \
   cp_f32_dw_rows2__##isa,                 \
   cp_f32_dw_split2__##isa,                \
   CP_DW_LANES_##isa},
#include "dw-ukernels.inc"
#undef CP_DW_UKERNEL
};

const cp_dw_ukernel *cp_dw_ukernel_list(size_t *count) {
  *count = sizeof cp_dw_ukernels / sizeof cp_dw_ukernels[0];
  return cp_dw_ukernels;
}

const cp_dw_ukernel *cp_dw_ukernel_select(cp_isa isa) {
  const cp_dw_ukernel *best = NULL;
  for (size_t i = 0; i < sizeof cp_dw_ukernels / sizeof cp_dw_ukernels[0]; i++) {
    const cp_dw_ukernel *u = &cp_dw_ukernels[i];
    if (u->isa <= isa && (best == NULL || u->isa > best->isa)) best = u;
  }
  return best;
}
