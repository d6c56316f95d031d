/*
 * The 1D transforms of F(2, 3) with points {0, 1, -1, inf} (winograd.h,
 * weights.c), over the macros of transform-1d.h (CP_W_ADD, CP_W_SUB), so
 * that the portable and the vector transforms compute the same values.
 */
#ifndef CONVPOOL_WINOGRAD_F23_1D_H
#define CONVPOOL_WINOGRAD_F23_1D_H

/* B^T d: four inputs d0..d3 -> four outputs v0..v3. */
#define CP_W2_INPUT_1D(d0, d1, d2, d3, v0, v1, v2, v3) \
  do {                                                 \
    v0 = CP_W_SUB(d0, d2);                             \
    v1 = CP_W_ADD(d1, d2);                             \
    v2 = CP_W_SUB(d2, d1);                             \
    v3 = CP_W_SUB(d1, d3);                             \
  } while (0)

/* A^T m: four inputs m0..m3 -> two outputs y0, y1. */
#define CP_W2_OUTPUT_1D(m0, m1, m2, m3, y0, y1) \
  do {                                          \
    y0 = CP_W_ADD(CP_W_ADD(m0, m1), m2);        \
    y1 = CP_W_SUB(CP_W_SUB(m1, m2), m3);        \
  } while (0)

#endif
