/* Open-addressing map of non-zero 64-bit keys (u64map.h). */
#include "u64map.h"

#include "bigmem.h"

#include <string.h>

void rf_u64map_init(RfU64Map *m, uint64_t want, gboolean track_used) {
  uint64_t cap = 1024;
  while (cap < 2 * want)
    cap *= 2;
  /* a large map's pages on huge pages (bigmem.h): its slots are touched at random */
  m->key = RF_BIG_NEW0(uint64_t, cap);
  m->val = RF_BIG_NEW(int32_t, cap);
  m->used = track_used ? RF_BIG_NEW(uint64_t, cap / 2 + 1) : NULL;
  m->mask = cap - 1;
  m->n = 0;
}

void rf_u64map_free(RfU64Map *m) {
  g_free(m->key);
  g_free(m->val);
  g_free(m->used);
  memset(m, 0, sizeof *m);
}

void rf_u64map_reset(RfU64Map *m) {
  if (m->used)
    for (uint64_t i = 0; i < m->n; i++)
      m->key[m->used[i]] = 0;
  else
    memset(m->key, 0, sizeof(uint64_t) * (m->mask + 1));
  m->n = 0;
}

static void grow(RfU64Map *m) {
  RfU64Map g;
  rf_u64map_init(&g, m->mask + 1, m->used != NULL);
  if (m->used)
    for (uint64_t i = 0; i < m->n; i++)
      rf_u64map_set(&g, m->key[m->used[i]], m->val[m->used[i]]);
  else
    for (uint64_t i = 0; i <= m->mask; i++)
      if (m->key[i]) rf_u64map_set(&g, m->key[i], m->val[i]);
  rf_u64map_free(m);
  *m = g;
}

void rf_u64map_set(RfU64Map *m, uint64_t k, int32_t v) {
  uint64_t i = rf_u64map_slot(m, k);
  if (!m->key[i]) {
    if (2 * (m->n + 1) > m->mask + 1) {
      grow(m);
      i = rf_u64map_slot(m, k);
    }
    m->key[i] = k;
    if (m->used) m->used[m->n] = i;
    m->n++;
  }
  m->val[i] = v;
}
