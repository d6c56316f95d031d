/*
 * Block sizes per ISA (see config.h). The numbers come from measurement on
 * the benchmark's cases (README, "How it works"):
 * - panel L2/2 and tile buffer L2/4: the panel and the tile buffer stay in L2
 *   together, with room for the weights block streaming through;
 * - a run's shared workspace (Winograd's regions transformed once for every
 *   channel group) up to L3/2, so that the items read it from L3 (regions
 *   beyond it in rounds, plan.h);
 * - copy cost: copying one panel element costs about one vector multiply-add,
 *   i.e. as many kernel lanes as a vector holds;
 * - 4 items per thread: enough to balance uneven items, few enough that each
 *   item's panel is reused over many channel blocks;
 * - 16 rows of prefetch ahead of the panel copy (the pack of the headline
 *   went from ~10 ms to ~6.5 ms on one core);
 * - a region per thread, where channel groups would share a region prepared
 *   before the items, while the weights the items read are at most 8 L2s
 *   (plan.c, cp_choose_items);
 * - Winograd: V and M of up to 4 MiB each per thread (V up to a quarter of U
 *   where that is more, winograd.c: cp_wino_v_budget; they live in L3: the
 *   multiply reads each 36th of V from L2 while the weights of one point
 *   stream through), one pass over V for every channel block that fits M
 *   (scripts/wino_stages.c measured one pass over all 43 blocks of the headline
 *   ~20% faster than a pass per block), and a streamed weight costing about
 *   as much as 16 kernel lanes; an item's tiles advance along the row by
 *   whole vector loads of four tiles (16 conv columns);
 * - auto hands a Winograd run to shift-reduce (measured on 2 cores, README
 *   "Choosing the algorithm") with fewer than 8 tiles per item (256 -> 256
 *   channels on an 8x8 conv output ran 1.9x slower than shift-reduce; images
 *   side by side count together), fewer than 8 input
 *   channels (3 -> 64 channels at 224x224, pool 2: 5.5-7.0 ms against 7.0-7.4
 *   ms for shift-reduce), or batch x tiles x c_in x c_out below 2^16 (64 -> 64
 *   channels on a 12x12 conv output).
 */
#include "config.h"

static const cp_blocking cp_blockings[] = {
    /* isa  mr  nr  panel shared buf  copy items cols ahead local  V KiB M KiB  U  cols  auto:
       tiles c_in work */
    {CP_ISA_SCALAR, 4, 16, 2, 2, 4, 1.0, 4, 64, 16, 8, 4096, 4096, 1.0, 16, 8, 8, 65536},
    {CP_ISA_AVX2, 6, 16, 2, 2, 4, 8.0, 4, 64, 16, 8, 4096, 4096, 16.0, 16, 8, 8, 65536},
    {CP_ISA_AVX512, 12, 32, 2, 2, 4, 16.0, 4, 64, 16, 8, 4096, 4096, 16.0, 16, 8, 8, 65536},
    {CP_ISA_AVX512_BF16, 12, 32, 2, 2, 4, 16.0, 4, 64, 16, 8, 4096, 4096, 16.0, 16, 8, 8, 65536},
};

const cp_blocking *cp_blocking_for(cp_isa isa) {
  for (size_t i = 0; i < sizeof cp_blockings / sizeof cp_blockings[0]; i++)
    if (cp_blockings[i].isa == isa) return &cp_blockings[i];
  return &cp_blockings[0];
}
