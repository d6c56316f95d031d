/*
 * Block sizes per ISA (see config.h). The numbers come from measurement on
 * the benchmark's cases (README, "How it works"):
 * - panel L2/2 and tile buffer L2/4: the panel and the tile buffer stay in L2
 *   together, with room for the weights block streaming through;
 * - copy cost: copying one panel element costs about one vector multiply-add,
 *   i.e. as many kernel lanes as a vector holds;
 * - 4 items per thread: enough to balance uneven items, few enough that each
 *   item's panel is reused over many channel blocks;
 * - 16 rows of prefetch ahead of the panel copy (the pack of the headline
 *   went from ~10 ms to ~6.5 ms on one core).
 */
#include "config.h"

static const cp_blocking cp_blockings[] = {
    /* isa               mr  nr  lanes panel buf copy items cols ahead */
    {CP_ISA_SCALAR, 4, 16, 1, 2, 4, 1.0, 4, 64, 16},
    {CP_ISA_AVX2, 6, 16, 8, 2, 4, 8.0, 4, 64, 16},
    {CP_ISA_AVX512, 12, 32, 16, 2, 4, 16.0, 4, 64, 16},
    {CP_ISA_AVX512_BF16, 12, 32, 16, 2, 4, 16.0, 4, 64, 16},
};

const cp_blocking *cp_blocking_for(cp_isa isa) {
  for (size_t i = 0; i < sizeof cp_blockings / sizeof cp_blockings[0]; i++)
    if (cp_blockings[i].isa == isa) return &cp_blockings[i];
  return &cp_blockings[0];
}
