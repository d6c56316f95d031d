/*
 * Template of the portable shift-reduce microkernel (see ukernel.h), written
 * so that the compiler vectorises the n loop with the baseline ISA. Each
 * (c, i, j) step first widens NR input elements to fp32 (a no-op for fp32).
 * Define: CP_MR, CP_NR, CP_ELEM, CP_TO_FLOAT(e), CP_FN.
 */
void CP_FN(const void *xv, size_t cs, size_t rs, size_t c_in, size_t k, const float *w, float *tile,
           size_t ld, int accumulate, const cp_sr_finish *finish) {
  const CP_ELEM *x = (const CP_ELEM *)xv;
  float acc[CP_MR][CP_NR];
  for (int m = 0; m < CP_MR; m++)
    for (int n = 0; n < CP_NR; n++) acc[m][n] = accumulate ? tile[m * ld + n] : 0.0f;
  for (size_t c = 0; c < c_in; c++) {
    for (size_t i = 0; i < k; i++) {
      const CP_ELEM *xr = x + c * cs + i * rs;
      for (size_t j = 0; j < k; j++) {
        float xin[CP_NR];
        for (int n = 0; n < CP_NR; n++) xin[n] = CP_TO_FLOAT(xr[j + n]);
        for (int m = 0; m < CP_MR; m++) {
          const float b = w[m];
          for (int n = 0; n < CP_NR; n++) acc[m][n] += b * xin[n];
        }
        w += CP_MR;
      }
    }
  }
  if (finish != NULL) { /* the pool-1 epilogue's order and clamp (ukernel.h) */
    for (int m = 0; m < CP_MR && m < finish->rows; m++)
      for (int n = 0; n < CP_NR; n++) {
        float v = acc[m][n];
        if (finish->res != NULL) v += finish->res[m * ld + n];
        if (finish->bias != NULL) v += finish->bias[m];
        if (v < finish->lo) v = finish->lo;
        if (v > finish->hi) v = finish->hi;
        tile[m * ld + n] = v;
      }
    return;
  }
  for (int m = 0; m < CP_MR; m++)
    for (int n = 0; n < CP_NR; n++) tile[m * ld + n] = acc[m][n];
}
