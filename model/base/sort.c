#include "sort.h"

#include <string.h>

void rf_radix_sort(uint64_t *v, uint64_t *tmp, uint64_t n, const uint64_t *key, gboolean desc) {
  const uint64_t flip = desc ? ~UINT64_C(0) : 0;
#define RADIX_KEY(x) ((key ? key[(x)] : (x)) ^ flip)
  if (n < 32) {
    for (uint64_t i = 1; i < n; i++) {
      const uint64_t x = v[i], kx = RADIX_KEY(x);
      uint64_t j = i;
      for (; j > 0 && RADIX_KEY(v[j - 1]) > kx; j--)
        v[j] = v[j - 1];
      v[j] = x;
    }
    return;
  }
  uint64_t any = 0, all = ~UINT64_C(0);
  for (uint64_t i = 0; i < n; i++) {
    any |= RADIX_KEY(v[i]);
    all &= RADIX_KEY(v[i]);
  }
  const uint64_t varies = any ^ all;
  uint64_t *a = v, *b = tmp;
  for (int shift = 0; shift < 64; shift += 8) {
    if (!((varies >> shift) & 0xff)) continue;
    uint64_t count[257] = {0};
    for (uint64_t i = 0; i < n; i++)
      count[((RADIX_KEY(a[i]) >> shift) & 0xff) + 1]++;
    for (int d = 0; d < 256; d++)
      count[d + 1] += count[d];
    for (uint64_t i = 0; i < n; i++)
      b[count[(RADIX_KEY(a[i]) >> shift) & 0xff]++] = a[i];
    uint64_t *t = a;
    a = b;
    b = t;
  }
#undef RADIX_KEY
  if (a != v) memcpy(v, a, n * sizeof *v);
}
