/* A map from non-zero 64-bit keys to 32-bit values, open addressing with linear probing (a
 * GHashTable costs a node per key and a pointer chase per lookup; the plan's memory pass looks up
 * tens of millions of (rank, part) keys, the executor model's build one key per segment). With
 * track_used the slots taken are listed, so that rf_u64map_reset empties the map in the time of
 * what it holds and keeps its capacity (a map emptied once per round). */
#ifndef RF_U64MAP_H
#define RF_U64MAP_H

#include <glib.h>
#include <stdint.h>

typedef struct {
  uint64_t *key; /* 0: a free slot */
  int32_t *val;
  uint64_t *used; /* track_used: the slots taken, in the order they were taken; else NULL */
  uint64_t mask, n;
} RfU64Map;

/* Room for about want keys before the first growth. */
void rf_u64map_init(RfU64Map *m, uint64_t want, gboolean track_used);
void rf_u64map_free(RfU64Map *m);
/* Forget every key, keeping the capacity: O(keys) with track_used, else O(capacity). */
void rf_u64map_reset(RfU64Map *m);
/* Sets key's value (key != 0). */
void rf_u64map_set(RfU64Map *m, uint64_t key, int32_t v);

/* The slot of key k: MurmurHash3's 64-bit finalizer (fmix64), whose every output bit depends on
 * every key bit (a key's high half, a rank, must move the slot: a product's bits 17 and up,
 * before, depended on the key's low bits only, so (rank, part) keys of one part all met in one
 * probe run; rf_memory_of_schedule spent a quarter of its time probing). */
static inline uint64_t rf_u64map_slot(const RfU64Map *m, uint64_t k) {
  uint64_t h = k;
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  h *= UINT64_C(0xc4ceb9fe1a85ec53);
  h ^= h >> 33;
  uint64_t i = h & m->mask;
  while (m->key[i] && m->key[i] != k)
    i = (i + 1) & m->mask;
  return i;
}

/* The value at key, or dflt. */
static inline int32_t rf_u64map_get(const RfU64Map *m, uint64_t key, int32_t dflt) {
  const uint64_t i = rf_u64map_slot(m, key);
  return m->key[i] ? m->val[i] : dflt;
}

#endif
