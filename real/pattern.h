/* Internal to real/: the deterministic weight pattern, shared by the host code and the CUDA
 * kernels. The includer may define RF_PATTERN_FN (the CUDA backend adds __host__ __device__). */
#ifndef RF_REAL_PATTERN_H
#define RF_REAL_PATTERN_H

#include "backend.h"

#ifndef RF_PATTERN_FN
#define RF_PATTERN_FN static inline
#endif

/* Element gidx of a tensor at a training step: every byte depends on all three, so a misplaced,
 * stale or missing element shows (except with probability 2^-8 per byte for a 1-byte dtype). */
RF_PATTERN_FN uint64_t rf_pattern(uint32_t tensor, uint64_t gidx, uint64_t step) {
  uint64_t x = gidx * 0x9E3779B97F4A7C15ull ^ ((uint64_t)tensor << 40) ^
               ((step + 1) * 0xD1B54A32D192ED03ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return x;
}

/* Global element index in the tensor of element seq (row-major) of a box. */
RF_PATTERN_FN uint64_t rf_pattern_gidx(const RfBoxDesc *b, uint64_t seq) {
  uint64_t g = 0;
  for (int d = b->ndim - 1; d >= 0; d--) {
    uint64_t ext = (uint64_t)b->ext[d];
    uint64_t c = seq % ext;
    seq /= ext;
    int64_t t = b->lo[d] + (int64_t)c + (d == b->seg_dim ? b->seg_off : 0);
    g += (uint64_t)t * (uint64_t)b->tstride[d];
  }
  return g;
}

#endif
