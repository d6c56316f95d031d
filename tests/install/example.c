/* The README's C example, built against an installed convpool. */
#include <convpool.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

int run_layer(const float *x, const float *w, const float *bias, float *y) {
  convpool_op *op;
  convpool_status st = convpool_op_create(CONVPOOL_FLOAT32, w, bias, /*c_out*/ 64,
                                          /*c_in*/ 32, /*k*/ 3, /*pool*/ 2, NULL, &op);
  if (st != CONVPOOL_SUCCESS) {
    fprintf(stderr, "convpool: %s\n", convpool_last_error());
    return -1;
  }
  /* x: [4, 32, 56, 56] -> y: [4, 64, 27, 27] */
  st = convpool_op_run(op, x, 4, 56, 56, y, sizeof(float) * 4 * 64 * 27 * 27);
  if (st != CONVPOOL_SUCCESS) fprintf(stderr, "convpool: %s\n", convpool_last_error());
  convpool_op_destroy(op);
  return st == CONVPOOL_SUCCESS ? 0 : -1;
}

int main(void) {
  float *x = calloc(4 * 32 * 56 * 56, sizeof(float)), *w = calloc(64 * 32 * 9, sizeof(float));
  float *bias = calloc(64, sizeof(float)), *y = calloc(4 * 64 * 27 * 27, sizeof(float));
  if (!x || !w || !bias || !y) return 1;
  for (int i = 0; i < 64; i++) bias[i] = (float)i;
  for (int i = 0; i < 32 * 56 * 56 * 4; i++) x[i] = 1.0f;
  for (int i = 0; i < 64 * 32 * 9; i++) w[i] = 0.5f;
  if (run_layer(x, w, bias, y) != 0) return 1;
  /* every conv output is 32*9*0.5 = 144; channel c adds c (auto may pick
     Winograd, whose transforms round: within the contract's 1e-5 * sum|x*w|) */
  for (int c = 0; c < 64; c++)
    if (fabsf(y[(size_t)(3 * 64 + c) * 27 * 27 + 5] - (144.0f + (float)c)) > 1e-5f * 144.0f) {
      printf("wrong value in channel %d: %g\n", c, y[(size_t)(3 * 64 + c) * 27 * 27 + 5]);
      return 1;
    }
  printf("example: ok\n");
  return 0;
}
