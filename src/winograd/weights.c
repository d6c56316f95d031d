/* The 1D matrices of F(4, 3) and F(2, 3) and the weight transform U = G g G^T, packed per point. */
#include <math.h>

#include "../half.h"
#include "winograd.h"

#define A_ 0.625
#define B_ 1.5
#define F0_ (A_ * A_ * B_ * B_)                   /* prod over the other points, at 0 */
#define F1_ (2.0 * A_ * A_ * (A_ * A_ - B_ * B_)) /* at +-a */
#define F3_ (2.0 * B_ * B_ * (B_ * B_ - A_ * A_)) /* at +-b */

/* Rows: the monic polynomials prod_{l != j} (x - p_l) for the finite points
   0, a, -a, b, -b, and prod_l (x - p_l) for inf; coefficients of x^0 .. x^5. */
const double cp_wino_bt[CP_WINO_ALPHA][CP_WINO_ALPHA] = {
    {A_ * A_ * B_ * B_, 0, -(A_ *A_ + B_ * B_), 0, 1, 0},
    {0, -A_ *B_ *B_, -B_ *B_, A_, 1, 0},
    {0, A_ *B_ *B_, -B_ *B_, -A_, 1, 0},
    {0, -A_ *A_ *B_, -A_ *A_, B_, 1, 0},
    {0, A_ *A_ *B_, -A_ *A_, -B_, 1, 0},
    {0, A_ *A_ *B_ *B_, 0, -(A_ *A_ + B_ * B_), 0, 1},
};

/* Row i: the points to the power i; inf contributes to the last row only. */
const double cp_wino_at[CP_WINO_M][CP_WINO_ALPHA] = {
    {1, 1, 1, 1, 1, 0},
    {0, A_, -A_, B_, -B_, 0},
    {0, A_ *A_, A_ *A_, B_ *B_, B_ *B_, 0},
    {0, A_ *A_ *A_, -A_ *A_ *A_, B_ *B_ *B_, -B_ *B_ *B_, 1},
};

/* Row j: p_j^k / prod_{l != j} (p_j - p_l); inf picks the last tap. */
const double cp_wino_g[CP_WINO_ALPHA][3] = {
    {1.0 / F0_, 0, 0},
    {1.0 / F1_, A_ / F1_, A_ *A_ / F1_},
    {1.0 / F1_, -A_ / F1_, A_ *A_ / F1_},
    {1.0 / F3_, B_ / F3_, B_ *B_ / F3_},
    {1.0 / F3_, -B_ / F3_, B_ *B_ / F3_},
    {0, 0, 1},
};

/* F(2, 3) with points {0, 1, -1, inf}: the same construction. */
static const double cp_wino2_bt[4][4] = {
    {1, 0, -1, 0},
    {0, 1, 1, 0},
    {0, -1, 1, 0},
    {0, 1, 0, -1},
};
static const double cp_wino2_at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double cp_wino2_g[4][3] = {
    {1, 0, 0},
    {0.5, 0.5, 0.5},
    {0.5, -0.5, 0.5},
    {0, 0, 1},
};

static const cp_wino_transforms cp_wino_f43_impls[] = {
    {"wino-f43-scalar", CP_ISA_SCALAR, 1, cp_wino_input_scalar, cp_wino_output_scalar,
     cp_wino_output_cl_scalar, 0},
    {"wino-f43-avx2", CP_ISA_AVX2, 8, cp_wino_input_avx2, cp_wino_output_avx2,
     cp_wino_output_cl_avx2, 2},
    {"wino-f43-avx512", CP_ISA_AVX512, 16, cp_wino_input_avx512, cp_wino_output_avx512,
     cp_wino_output_cl_avx512, 4},
};

static const cp_wino_transforms cp_wino_f23_impls[] = {
    {"wino-f23-scalar", CP_ISA_SCALAR, 1, cp_wino_input_f23_scalar, NULL,
     cp_wino_output_cl_f23_scalar, 0},
    {"wino-f23-avx2", CP_ISA_AVX2, 8, cp_wino_input_f23_avx2, NULL, cp_wino_output_cl_f23_avx2, 0},
    {"wino-f23-avx512", CP_ISA_AVX512, 16, cp_wino_input_f23_avx512, NULL,
     cp_wino_output_cl_f23_avx512, 0},
};

const cp_wino_kind cp_wino_f43 = {
    "F(4x4,3x3)",
    "0, +-5/8, +-3/2, inf",
    CP_WINO_M,
    CP_WINO_ALPHA,
    CP_WINO_POINTS,
    CP_WINO_SUMS,
    4,
    4,
    &cp_wino_bt[0][0],
    &cp_wino_at[0][0],
    &cp_wino_g[0][0],
    cp_wino_f43_impls,
    sizeof cp_wino_f43_impls / sizeof cp_wino_f43_impls[0],
    cp_wino_screen_tiles,
};

const cp_wino_kind cp_wino_f23 = {
    "F(2x2,3x3)",
    "0, +-1, inf",
    2,
    4,
    16,
    17,
    1,
    2,
    &cp_wino2_bt[0][0],
    &cp_wino2_at[0][0],
    &cp_wino2_g[0][0],
    cp_wino_f23_impls,
    sizeof cp_wino_f23_impls / sizeof cp_wino_f23_impls[0],
    cp_wino_screen_tiles_f23,
};

const cp_wino_transforms *cp_wino_transforms_select(const cp_wino_kind *kind, cp_isa isa) {
  const cp_wino_transforms *best = &kind->impls[0];
  for (size_t i = 0; i < kind->impl_count; i++)
    if (kind->impls[i].isa <= isa && kind->impls[i].isa >= best->isa) best = &kind->impls[i];
  return best;
}

size_t cp_wino_weight_floats(const cp_wino_kind *kind, int64_t c_out, int64_t c_in, int mr,
                             int mr_tail) {
  const size_t blocks = ((size_t)c_out + (size_t)mr - 1) / (size_t)mr;
  size_t n = (blocks - 1) * (size_t)mr + (size_t)mr_tail;
  if (!cp_mul(n, (size_t)c_in, &n) || !cp_mul(n, (size_t)kind->points_n, &n)) return 0;
  return n;
}

static double cp_wino_load(convpool_dtype dtype, const void *base, size_t i) {
  if (dtype == CONVPOOL_FLOAT16) return cp_half_to_float(((const uint16_t *)base)[i]);
  if (dtype == CONVPOOL_BFLOAT16) return cp_bf16_to_float(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

/*
 * U = G g G^T in double, rounded once to float. The output channels of a
 * block run innermost (up to CP_WINO_PACK_M at a time), as U stores them,
 * so the compiler vectorizes the transform across them; each value is the
 * same sum in the same order either way.
 */
#define CP_WINO_PACK_M 16
void cp_wino_pack_weights(const cp_wino_kind *kind, convpool_dtype dtype, const void *weights,
                          int64_t c_out, int64_t c_in, int mr, int mr_tail, float *u) {
  const size_t cin = (size_t)c_in, blocks = ((size_t)c_out + (size_t)mr - 1) / (size_t)mr;
  const int alpha = kind->alpha;
  const double(*gm)[3] = (const double(*)[3])kind->g;
  const size_t xi_stride =
      cp_wino_weight_floats(kind, c_out, c_in, mr, mr_tail) / (size_t)kind->points_n;
  for (size_t cb = 0; cb < blocks; cb++) {
    const size_t bmr = cb + 1 == blocks ? (size_t)mr_tail : (size_t)mr;
    for (size_t c = 0; c < cin; c++)
      for (size_t m0 = 0; m0 < bmr; m0 += CP_WINO_PACK_M) {
        const size_t nm = bmr - m0 < CP_WINO_PACK_M ? bmr - m0 : CP_WINO_PACK_M;
        double g[9][CP_WINO_PACK_M], t[CP_WINO_ALPHA][3][CP_WINO_PACK_M];
        for (size_t m = 0; m < nm; m++) {
          const size_t co = cb * (size_t)mr + m0 + m;
          for (size_t i = 0; i < 9; i++)
            g[i][m] = co < (size_t)c_out ? cp_wino_load(dtype, weights, (co * cin + c) * 9 + i) : 0;
        }
        for (int r = 0; r < alpha; r++) /* G g */
          for (int j = 0; j < 3; j++)
            for (size_t m = 0; m < nm; m++)
              t[r][j][m] = gm[r][0] * g[j][m] + gm[r][1] * g[3 + j][m] + gm[r][2] * g[6 + j][m];
        for (int r = 0; r < alpha; r++) /* (G g) G^T */
          for (int s = 0; s < alpha; s++) {
            float *to =
                u + (size_t)(r * alpha + s) * xi_stride + cb * (size_t)mr * cin + c * bmr + m0;
            for (size_t m = 0; m < nm; m++)
              to[m] =
                  (float)(t[r][0][m] * gm[s][0] + t[r][1][m] * gm[s][1] + t[r][2][m] * gm[s][2]);
          }
      }
  }
}

float cp_wino_block_scale(const cp_wino_kind *kind, convpool_dtype dtype, const void *weights,
                          int64_t c_out, int64_t c_in, int mr, int mr_tail, const float *u,
                          size_t cb) {
  const size_t cin = (size_t)c_in, blocks = ((size_t)c_out + (size_t)mr - 1) / (size_t)mr;
  const size_t points = (size_t)kind->points_n;
  const size_t xi_stride = cp_wino_weight_floats(kind, c_out, c_in, mr, mr_tail) / points;
  const size_t bmr = cb + 1 == blocks ? (size_t)mr_tail : (size_t)mr;
  float u_max = 0.0f;
  if (c_in < CP_WINO_MIN_CHANNELS) return -1.0f;
  for (size_t xi = 0; xi < points; xi++) {
    const float *ub = u + xi * xi_stride + cb * (size_t)mr * cin;
    for (size_t i = 0; i < cin * bmr; i++) {
      const float a = fabsf(ub[i]);
      if (!(a <= CP_WINO_U_MAX)) return -1.0f; /* Inf, NaN or too large */
      if (a > u_max) u_max = a;
    }
  }
  for (size_t m = 0; m < bmr; m++) {
    const size_t co = cb * (size_t)mr + m;
    if (co >= (size_t)c_out) break;
    double tap[9] = {0}, mean = 0, least = 0;
    for (size_t c = 0; c < cin; c++)
      for (size_t t = 0; t < 9; t++)
        tap[t] += fabs(cp_wino_load(dtype, weights, (co * cin + c) * 9 + t));
    for (size_t t = 0; t < 9; t++) {
      mean += tap[t] / 9;
      if (t == 0 || tap[t] < least) least = tap[t];
    }
    if (least * CP_WINO_SPREAD < mean) return -1.0f;
  }
  return u_max;
}
