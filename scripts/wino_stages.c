/*
 * Stage times of the Winograd F(4x4, 3x3) path on one core, for tuning:
 * panel copy, input transform, multiply (the shift-reduce kernels with k = 1)
 * and output transform + pool, over a whole layer (default: the headline
 * B=1, 256 -> 256, 224x224, pool 2, fp32), item by item, one thread.
 *
 *   convpool-wino-stages [C_in C_out H W pool tile_rows tile_cols pass iters]
 *
 * tile_rows x tile_cols tiles per item (tile_cols 0: the whole row); pass:
 * channel blocks multiplied per pass over V (0: all).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "winograd/winograd.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* this thread's CPU time: the machine is shared */
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *xalloc(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n ? n : 64) != 0) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0, n);
  return p;
}

int main(int argc, char **argv) {
  long a[9] = {256, 256, 224, 224, 2, 1, 0, 0, 3};
  for (int i = 1; i < argc && i <= 9; i++) a[i - 1] = atol(argv[i]);
  const size_t cin = (size_t)a[0], cout = (size_t)a[1], h = (size_t)a[2], w = (size_t)a[3];
  const size_t pool = (size_t)a[4], item_th = (size_t)a[5], iters = (size_t)a[8];
  const cp_isa isa = cp_cpu_get()->isa;
  const cp_sr_ukernel *uk = cp_sr_ukernel_select(CONVPOOL_FLOAT32, isa);
  const cp_sr_ukernel *tail = cp_sr_ukernel_tail(uk, (int)(cout % (size_t)uk->mr));
  const cp_wino_transforms *tr = cp_wino_transforms_select(&cp_wino_f43, isa);
  const size_t mr = (size_t)uk->mr, nr = (size_t)uk->nr, co_blocks = (cout + mr - 1) / mr;
  const size_t oh = h - 2, ow = w - 2, ph = oh / pool, pw = ow / pool;
  const size_t oh_used = ph * pool, ow_used = pw * pool;
  const size_t tiles_h = (oh_used + 3) / 4, tiles_w = (ow_used + 3) / 4;
  const size_t item_tw = a[6] > 0 ? (size_t)a[6] : tiles_w;
  const size_t pass = a[7] > 0 ? (size_t)a[7] : co_blocks;
  const size_t tw_pad = (item_tw + 3) / 4 * 4, tiles = item_th * tw_pad;
  const size_t nblk = (tiles + nr - 1) / nr, t_alloc = nblk * nr;
  const size_t ld = 4 * tw_pad + 4, cs = ((4 * item_th + 2) * ld + 15) / 16 * 16 + 16;
  const size_t vs = cp_wino_v_stride(cin, nr);
  const size_t buf_ld = 4 * tw_pad, buf_cols = 4 * item_th * buf_ld;

  float *x = xalloc(cin * h * w * sizeof(float));
  float *wt = xalloc(cout * cin * 9 * sizeof(float));
  for (size_t i = 0; i < cin * h * w; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
  for (size_t i = 0; i < cout * cin * 9; i++) wt[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
  const size_t uf =
      cp_wino_weight_floats(&cp_wino_f43, (int64_t)cout, (int64_t)cin, (int)mr, tail->mr);
  float *u = xalloc(uf * sizeof(float));
  double t0 = now();
  cp_wino_pack_weights(&cp_wino_f43, CONVPOOL_FLOAT32, wt, (int64_t)cout, (int64_t)cin, (int)mr,
                       tail->mr, u);
  const double t_weights = now() - t0;
  float *panel = xalloc((cin * cs + 64) * sizeof(float));
  float *v = xalloc(nblk * CP_WINO_POINTS * vs * sizeof(float));
  float *m = xalloc(pass * CP_WINO_POINTS * mr * t_alloc * sizeof(float));
  float *buf = xalloc(mr * buf_cols * sizeof(float));
  float *y = xalloc(cout * ph * pw * sizeof(float));
  cp_wino_mask *flags = xalloc(t_alloc * sizeof *flags);
  float *sums = xalloc(cp_wino_slices(cin) * tiles * CP_WINO_SUMS * sizeof(float));

  printf(
      "%s, %s; C_in %zu C_out %zu %zux%zu pool %zu; items of %zux%zu tiles (%zu lanes, %zu "
      "blocks of %zu), pass %zu blocks; V %.0f KiB, M %.0f KiB per item\n",
      tr->name, uk->name, cin, cout, h, w, pool, item_th, item_tw, tiles, nblk, nr, pass,
      (double)(nblk * CP_WINO_POINTS * vs * 4) / 1024,
      (double)(pass * CP_WINO_POINTS * mr * t_alloc * 4) / 1024);
  double best[4] = {1e30, 1e30, 1e30, 1e30}, best_total = 1e30;
  for (size_t it = 0; it < iters; it++) {
    double st[4] = {0, 0, 0, 0};
    const double start = now();
    for (size_t ty = 0; ty < tiles_h; ty += item_th)
      for (size_t tx = 0; tx < tiles_w; tx += item_tw) {
        const size_t row0 = 4 * ty, col0 = 4 * tx;
        const size_t conv_rows = oh_used - row0 < 4 * item_th ? oh_used - row0 : 4 * item_th;
        const size_t cw = ow_used - col0 < 4 * item_tw ? ow_used - col0 : 4 * item_tw;
        double s0 = now();
        for (size_t c = 0; c < cin; c++) { /* the panel: rows + 2 x cols + 2, zero elsewhere */
          float *to = panel + c * cs;
          for (size_t r = 0; r < 4 * item_th + 2; r++) {
            size_t n = 0;
            if (r < conv_rows + 2) {
              n = cw + 2;
              memcpy(to + r * ld, x + (c * h + row0 + r) * w + col0, n * sizeof(float));
            }
            memset(to + r * ld + n, 0, (ld - n) * sizeof(float));
          }
        }
        double s1 = now();
        st[0] += s1 - s0;
        const cp_wino_screen screen = {CP_WINO_RATIO,
                                       CP_WINO_RATIO_SUM,
                                       cp_wino_limit(1.0f),
                                       (int64_t)conv_rows,
                                       (int64_t)cw,
                                       0,
                                       0};
        for (size_t c0 = 0; c0 < cin; c0 += CP_WINO_SLICE) /* in slices, as the library */
          tr->input(panel + c0 * cs, cs, ld, cin - c0 < CP_WINO_SLICE ? cin - c0 : CP_WINO_SLICE,
                    tiles, tw_pad, nr, v + c0 * nr, vs,
                    sums + c0 / CP_WINO_SLICE * tiles * CP_WINO_SUMS);
        cp_wino_screen_tiles(sums, cp_wino_slices(cin), tiles * CP_WINO_SUMS, cin, tiles, tw_pad,
                             &screen, flags);
        double s2 = now();
        st[1] += s2 - s1;
        for (size_t cb0 = 0; cb0 < co_blocks; cb0 += pass) {
          const size_t cb1 = cb0 + pass < co_blocks ? cb0 + pass : co_blocks;
          double s3 = now();
          cp_wino_multiply(&cp_wino_f43, uk, tail, (int64_t)co_blocks, u, uf / CP_WINO_POINTS, v,
                           vs, cin, nblk, (int64_t)cb0, (int64_t)cb1, m);
          double s4 = now();
          st[2] += s4 - s3;
          for (size_t cb = cb0; cb < cb1; cb++) {
            const size_t mr_used = cb + 1 == co_blocks ? cout - cb * mr : mr;
            tr->output(m + (cb - cb0) * CP_WINO_POINTS * mr * t_alloc, t_alloc, mr, mr_used, tiles,
                       tw_pad, 0, 0, buf, buf_cols, buf_ld);
            for (size_t mm = 0; mm < mr_used; mm++) /* pool and store */
              for (size_t q = 0; q < conv_rows / pool; q++)
                for (size_t p = 0; p < cw / pool; p++) {
                  float best_v = buf[mm * buf_cols + q * pool * buf_ld + p * pool];
                  for (size_t i = 0; i < pool; i++)
                    for (size_t j = 0; j < pool; j++) {
                      float val = buf[mm * buf_cols + (q * pool + i) * buf_ld + p * pool + j];
                      if (val > best_v) best_v = val;
                    }
                  y[((cb * mr + mm) * ph + row0 / pool + q) * pw + col0 / pool + p] = best_v;
                }
          }
          st[3] += now() - s4;
        }
      }
    const double total = now() - start;
    for (int s = 0; s < 4; s++)
      if (st[s] < best[s]) best[s] = st[s];
    if (total < best_total) best_total = total;
  }
  const double flops =
      2.0 * CP_WINO_POINTS * (double)cin * (double)cout * (double)(tiles_h * tiles_w);
  printf("weights %.1f ms (once)\n", 1e3 * t_weights);
  printf(
      "pack %.1f ms, input transform %.1f ms, multiply %.1f ms (%.1f GFLOP/s), output "
      "transform + pool %.1f ms; total %.1f ms (best of %zu, one thread)\n",
      1e3 * best[0], 1e3 * best[1], 1e3 * best[2], flops / best[2] * 1e-9, 1e3 * best[3],
      1e3 * best_total, iters);
  printf("check %g\n", (double)y[0] + (double)y[cout * ph * pw - 1]);
  return 0;
}
