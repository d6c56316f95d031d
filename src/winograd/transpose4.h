/*
 * The in-lane 4x4 transpose of the vector Winograd transforms (both tile
 * sizes): four vectors a0..a3 of CP_V, each 128-bit lane holding 4 floats,
 * into o0..o3 with o_j's lane 4k + u = a_u's lane-k element j. Over the
 * template's CP_W_UNPACKLO, CP_W_UNPACKHI and CP_W_SHUF (per 128-bit lane).
 */
#ifndef CONVPOOL_WINOGRAD_TRANSPOSE4_H
#define CONVPOOL_WINOGRAD_TRANSPOSE4_H

#define CP_W_TRANSPOSE4(a0, a1, a2, a3, o0, o1, o2, o3) \
  do {                                                  \
    const CP_V t0_ = CP_W_UNPACKLO(a0, a1);             \
    const CP_V t1_ = CP_W_UNPACKHI(a0, a1);             \
    const CP_V t2_ = CP_W_UNPACKLO(a2, a3);             \
    const CP_V t3_ = CP_W_UNPACKHI(a2, a3);             \
    o0 = CP_W_SHUF(t0_, t2_, 0x44);                     \
    o1 = CP_W_SHUF(t0_, t2_, 0xEE);                     \
    o2 = CP_W_SHUF(t1_, t3_, 0x44);                     \
    o3 = CP_W_SHUF(t1_, t3_, 0xEE);                     \
  } while (0)

#endif
