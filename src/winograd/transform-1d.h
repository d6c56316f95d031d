/*
 * The 1D transforms of F(4, 3) with points {0, +-a, +-b, inf}, a = 5/8,
 * b = 3/2, factored into even and odd parts (see winograd.h). Written over
 * macros so that the portable and the vector transforms share them:
 *   CP_W_ADD(x, y), CP_W_SUB(x, y), CP_W_MUL(x, y)   x + y, x - y, x * y
 *   CP_W_FMA(x, y, z)    x * y + z
 *   CP_W_FNMA(x, y, z)   z - x * y
 *   CP_W_K(c)            the constant c as an operand
 */
#ifndef CONVPOOL_WINOGRAD_TRANSFORM_1D_H
#define CONVPOOL_WINOGRAD_TRANSFORM_1D_H

/* a^2 b^2, a^2 + b^2, a^2, b^2, a^3, b^3 (all exact in fp32) */
#define CP_W_A2B2 0.87890625f /* 225/256 */
#define CP_W_A2PB2 2.640625f  /* 169/64 */
#define CP_W_A2 0.390625f     /* 25/64 */
#define CP_W_B2 2.25f         /* 9/4 */
#define CP_W_A3 0.244140625f  /* 125/512 */
#define CP_W_B3 3.375f        /* 27/8 */

/* B^T d: six inputs d0..d5 -> six outputs v0..v5. */
#define CP_W_INPUT_1D(d0, d1, d2, d3, d4, d5, v0, v1, v2, v3, v4, v5)                \
  do {                                                                               \
    const CP_W_T e1_ = CP_W_FNMA(CP_W_K(CP_W_B2), d2, d4);                           \
    const CP_W_T o1_ = CP_W_MUL(CP_W_K(0.625f), CP_W_FNMA(CP_W_K(CP_W_B2), d1, d3)); \
    const CP_W_T e2_ = CP_W_FNMA(CP_W_K(CP_W_A2), d2, d4);                           \
    const CP_W_T o2_ = CP_W_MUL(CP_W_K(1.5f), CP_W_FNMA(CP_W_K(CP_W_A2), d1, d3));   \
    v0 = CP_W_FMA(CP_W_K(CP_W_A2B2), d0, CP_W_FNMA(CP_W_K(CP_W_A2PB2), d2, d4));     \
    v5 = CP_W_FMA(CP_W_K(CP_W_A2B2), d1, CP_W_FNMA(CP_W_K(CP_W_A2PB2), d3, d5));     \
    v1 = CP_W_ADD(e1_, o1_);                                                         \
    v2 = CP_W_SUB(e1_, o1_);                                                         \
    v3 = CP_W_ADD(e2_, o2_);                                                         \
    v4 = CP_W_SUB(e2_, o2_);                                                         \
  } while (0)

/* A^T m: six inputs m0..m5 -> four outputs y0..y3. */
#define CP_W_OUTPUT_1D(m0, m1, m2, m3, m4, m5, y0, y1, y2, y3)               \
  do {                                                                       \
    const CP_W_T s1_ = CP_W_ADD(m1, m2), d1_ = CP_W_SUB(m1, m2);             \
    const CP_W_T s2_ = CP_W_ADD(m3, m4), d2_ = CP_W_SUB(m3, m4);             \
    y0 = CP_W_ADD(CP_W_ADD(m0, s1_), s2_);                                   \
    y1 = CP_W_FMA(CP_W_K(0.625f), d1_, CP_W_MUL(CP_W_K(1.5f), d2_));         \
    y2 = CP_W_FMA(CP_W_K(CP_W_A2), s1_, CP_W_MUL(CP_W_K(CP_W_B2), s2_));     \
    y3 = CP_W_FMA(CP_W_K(CP_W_A3), d1_, CP_W_FMA(CP_W_K(CP_W_B3), d2_, m5)); \
  } while (0)

/*
 * The 16 window sums of the range rule (winograd.h): s[4 * p + q] = sum of
 * a[p + i][q + j] over i, j < 3, for a 6x6 array a (of sums of |d| over the
 * channels), separably: three-sums along each row, then down each column.
 */
#define CP_W_WINDOWS(a, s)                                                       \
  do {                                                                           \
    CP_W_T r_[6][4];                                                             \
    for (int i_ = 0; i_ < 6; i_++) {                                             \
      const CP_W_T p_ = CP_W_ADD(a[i_][1], a[i_][2]);                            \
      const CP_W_T q_ = CP_W_ADD(a[i_][3], a[i_][4]);                            \
      r_[i_][0] = CP_W_ADD(a[i_][0], p_), r_[i_][1] = CP_W_ADD(p_, a[i_][3]);    \
      r_[i_][2] = CP_W_ADD(a[i_][2], q_), r_[i_][3] = CP_W_ADD(q_, a[i_][5]);    \
    }                                                                            \
    for (int j_ = 0; j_ < 4; j_++) {                                             \
      const CP_W_T p_ = CP_W_ADD(r_[1][j_], r_[2][j_]);                          \
      const CP_W_T q_ = CP_W_ADD(r_[3][j_], r_[4][j_]);                          \
      s[0 + j_] = CP_W_ADD(r_[0][j_], p_), s[4 + j_] = CP_W_ADD(p_, r_[3][j_]);  \
      s[8 + j_] = CP_W_ADD(r_[2][j_], q_), s[12 + j_] = CP_W_ADD(q_, r_[5][j_]); \
    }                                                                            \
  } while (0)

#endif
