/* DTensor layout algebra: boxes, torch.chunk sharding, device meshes, placements.
 *
 * A placement describes how one logical tensor is spread over the ranks of an N-d device mesh:
 * each mesh dim either shards one tensor dim (Shard(d)) or replicates (Replicate). Several mesh
 * dims may shard the same tensor dim; they nest left to right (the leftmost mesh dim splits
 * first, the next one splits each of its chunks). Chunking follows torch.chunk: chunk =
 * ceil(n / m), trailing shards short or empty (10 over 4 -> 3,3,3,1).
 *
 * A placement may chunk a padded extent (pad_shape >= shape, as for vocab padding); the boxes it
 * yields are clipped to the logical shape, while the local buffer keeps the padded extent. */
#ifndef RF_DTENSOR_H
#define RF_DTENSOR_H

#include <glib.h>
#include <stdint.h>

#define RF_MAX_DIMS 8
#define RF_REPLICATE (-1)
/* Limits every input is checked against: rank ids (and world sizes) stay below 2^20 (far above
 * any cluster, small enough that a mesh of every rank builds in well under a second; 2^24 would
 * still let a (stage, source, destination) key pack into 64 bits); a tensor has at most 2^56
 * elements. */
#define RF_MAX_RANKS (1 << 20)
#define RF_MAX_ELEMS (INT64_C(1) << 56)

/* Half-open box [lo, hi) in global (logical) tensor coordinates. */
typedef struct {
  int64_t lo[RF_MAX_DIMS];
  int64_t hi[RF_MAX_DIMS];
} RfBox;

/* Device mesh over an explicit rank list, row-major (last mesh dim fastest). */
typedef struct {
  int ndim;
  int dims[RF_MAX_DIMS];
  int nranks;
  int *ranks;   /* owned */
  int *by_rank; /* owned: positions sorted by rank id, for lookups */
} RfMesh;

/* Placement of one logical tensor. The mesh is borrowed (shared by many tensors). */
typedef struct {
  const RfMesh *mesh;
  int ndim;                       /* tensor rank */
  int64_t shape[RF_MAX_DIMS];     /* logical shape */
  int64_t pad_shape[RF_MAX_DIMS]; /* extent chunked by the placement, >= shape */
  int8_t place[RF_MAX_DIMS];      /* per mesh dim: tensor dim it shards, or RF_REPLICATE */
} RfPlacement;

/* torch.chunk: [*lo, *hi) of chunk i when n elements are split into m chunks. */
void rf_chunk(int64_t n, int m, int i, int64_t *lo, int64_t *hi);

int64_t rf_box_volume(const RfBox *b, int ndim);
gboolean rf_box_empty(const RfBox *b, int ndim);
/* Intersection; returns FALSE (and leaves *out undefined) when empty. */
gboolean rf_box_intersect(const RfBox *a, const RfBox *b, int ndim, RfBox *out);
/* a minus cut as disjoint boxes written to out (room for 2 * ndim): returns their count
 * (a itself when they do not meet, 0 when cut covers a). */
int rf_box_subtract(const RfBox *a, const RfBox *cut, int ndim, RfBox *out);
gboolean rf_box_contains(const RfBox *outer, const RfBox *inner, int ndim);
void rf_box_full(RfBox *b, const int64_t *shape, int ndim);
/* "[0:3,5:7]" into buf; returns buf. */
char *rf_box_format(const RfBox *b, int ndim, char *buf, size_t len);

/* New mesh with dims[ndim] over ranks (copied); NULL + error when the rank count mismatches. */
RfMesh *rf_mesh_new(int ndim, const int *dims, const int *ranks, int nranks, GError **error);
void rf_mesh_free(RfMesh *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(RfMesh, rf_mesh_free)
/* Row-major position of a rank in the mesh, or -1. O(log n). */
int rf_mesh_position(const RfMesh *m, int rank);

/* Check a placement: dims in range, pad_shape >= shape, every rank distinct. */
gboolean rf_placement_check(const RfPlacement *p, GError **error);

/* Number of distinct shards (product of sharding mesh dims) and replicas per shard
 * (product of replicating mesh dims). shards * replicas == mesh ranks. */
int rf_placement_nshards(const RfPlacement *p);
int rf_placement_nreplicas(const RfPlacement *p);

/* Box of shard s (0 <= s < nshards; shard index is row-major over the sharding mesh dims).
 * chunk (may be NULL) gets the unclipped box on pad_shape: the extent of the local buffer.
 * Returns FALSE when the clipped box is empty. */
gboolean rf_placement_shard_box(const RfPlacement *p, int s, RfBox *box, RfBox *chunk);

/* Rank of replica r (0 <= r < nreplicas) of shard s. */
int rf_placement_rank(const RfPlacement *p, int s, int r);

/* Shard index and replica index held by mesh position pos (0 <= pos < mesh->nranks). */
void rf_placement_locate(const RfPlacement *p, int pos, int *shard, int *replica);

/* Parse "S0" / "Shard(0)" / "R" / "Replicate()" into a placement code. */
gboolean rf_placement_parse(const char *s, int8_t *out, GError **error);

#endif
