/* One reshard call (one parameter) of the published software as GPU-level flows and serial
 * costs, for each transport the evidence leaves open. Sources (docs/sim.md has the table):
 * - NeMo RL nemo_rl/weight_sync/xferdtensor_python.py (NVIDIA-NeMo/RL, PR #2971): striped
 *   plan, grouped send/recv, then an in-place all-gather on the replica sub-communicator.
 * - NVIDIA/nccl-extensions nccl_m2n/src/reshard_user_window.cu, reshard_prepare.cc,
 *   pack_staging.cc, reshard_limits.h, reshard_split_user_window.cu: PACK (CE pack, put,
 *   whole-slice store-and-forward along the domain chain, NVLink fan-out, CE unpack), the
 *   limits MAX_SOURCES / MAX_TARGETS, the 2 GiB staging bucket; the first release (commit
 *   4532497, "NCCL Xfer") for the zero-copy RING with 256 KiB chunk pipelining; DIRECT.
 * - NeMo RL nemo_rl/distributed/nccl_reshard_utils.py xferdtensor_golden (NVIDIA-NeMo/RL at
 *   bf68d87, PR #2413 / #2808 as run): one NCCL broadcast per unique source shard, in full, to
 *   every rank of the stage communicator; each destination copies its own shard out. */
#include "error.h"
#include "sw.h"

#include <math.h>
#include <string.h>

void sw_call_init(SwCall *c, int ngpus) {
  memset(c, 0, sizeof *c);
  c->flows = g_array_new(FALSE, FALSE, sizeof(SwFlow));
  c->pre_bytes = g_new0(double, ngpus > 0 ? ngpus : 1);
  c->post_bytes = g_new0(double, ngpus > 0 ? ngpus : 1);
}

void sw_call_clear(SwCall *c) {
  if (c->flows) g_array_free(c->flows, TRUE);
  g_free(c->pre_bytes);
  g_free(c->post_bytes);
  memset(c, 0, sizeof *c);
}

static int cmp_gpu(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int sw_lsa_team(const int *gpus, int n, int G) {
  int team = 0, run = 0;
  for (int i = 0; i < n; i++) {
    if (i > 0 && gpus[i] / G == gpus[i - 1] / G) {
      run++;
      continue;
    }
    if (run) team = gcd(team, run);
    run = 1;
  }
  if (run) team = gcd(team, run);
  return team > 0 ? team : 1;
}

int sw_part_stage(const RfProblem *pb, uint32_t part) {
  const RfPlacement *pl = &pb->src.place[part];
  int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1;
  if (!pl->mesh || pb->src.nranks < pp) return 0;
  int idx = rf_side_index(&pb->src, rf_placement_rank(pl, 0, 0));
  int per = pb->src.nranks / pp;
  int s = idx >= 0 && per > 0 ? idx / per : 0;
  return s < pp ? s : pp - 1;
}

static void add_flow(SwCall *c, int src, int dst, int sub, RfPhase phase, double bytes,
                     double weight, double offset_s) {
  if (bytes <= 0 || src == dst) return;
  SwFlow f = {src, dst, (uint16_t)sub, (uint8_t)phase, 0, bytes, weight, offset_s};
  g_array_append_val(c->flows, f);
  if (sub + 1 > c->nsub) c->nsub = sub + 1;
}

/* Bytes of the intersection of two boxes (0 when empty); *row gets its innermost run. */
static double overlap_bytes(const RfBox *a, const RfBox *b, int ndim, int esize, double *row) {
  RfBox o;
  if (!rf_box_intersect(a, b, ndim, &o)) return 0;
  int64_t v = rf_box_volume(&o, ndim);
  if (row) *row = (double)(o.hi[ndim - 1] - o.lo[ndim - 1]) * esize;
  return (double)v * esize;
}

/* Whether the sub-box o of box b is one contiguous run in b's row-major storage: every dim
 * after the first that o cuts must be whole in b from there on. */
static gboolean box_contiguous(const RfBox *o, const RfBox *b, int ndim) {
  int d = 0;
  while (d < ndim && o->hi[d] - o->lo[d] == 1)
    d++;
  for (int k = d + 1; k < ndim; k++)
    if (o->lo[k] != b->lo[k] || o->hi[k] != b->hi[k]) return FALSE;
  return TRUE;
}

/* Gen-side GPUs of dst shard s's replicas, in replica order. */
static int *replica_gpus(const RfProblem *pb, const RfPlacement *pl, int s, int nrep) {
  int *g = g_new(int, nrep);
  for (int r = 0; r < nrep; r++)
    g[r] = pb->gpu[rf_placement_rank(pl, s, r)];
  return g;
}

/* Ring latency of an NCCL collective over the GPUs g[n] (base + per-hop latency). */
static double ring_latency_s(const RfProblem *pb, const RfCalibration *cal, const int *g, int n) {
  if (n <= 1) return 0;
  const RfTopology *t = pb->topo;
  double lat = cal->collective_base_s;
  for (int i = 0; i < n; i++) {
    int a = g[i], b = g[(i + 1) % n];
    if (i == n - 1) break;
    lat += a / t->gpus_per_domain == b / t->gpus_per_domain
               ? t->nvlink_latency_us * 1e-6
               : (t->nic_latency_us + t->switch_latency_us) * 1e-6;
  }
  return lat;
}

/* NVLink team of the communicator this part's call runs on: its PP stage's training ranks,
 * then every generation rank (NeMo RL nccl_reshard_weight_synchronizer.py). */
static int call_team(const RfProblem *pb, int stage) {
  int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1, per = pb->src.nranks / pp;
  int n = per + pb->dst.nranks;
  g_autofree int *g = g_new(int, n > 0 ? n : 1);
  for (int i = 0; i < per; i++)
    g[i] = pb->gpu[pb->src.ranks[stage * per + i]];
  for (int i = 0; i < pb->dst.nranks; i++)
    g[per + i] = pb->gpu[pb->dst.ranks[i]];
  return sw_lsa_team(g, n, pb->topo->gpus_per_domain);
}

/* Position of a generation GPU's rank in the communicator's generation part (for teams). */
static int gen_team_of(const RfProblem *pb, int rank, int per, int team) {
  int idx = rf_side_index(&pb->dst, rank);
  return (per + idx) / team;
}

/* One call's shapes and constants, shared by its sections. */
typedef struct {
  const RfProblem *pb;
  const RfCalibration *cal;
  SwTransport tr;
  uint32_t part;
  const RfTensor *t;
  const RfPlacement *S, *D;
  int nd, es, G;
  int nsS, nrS, nsD, nrD;
  RfBox *bS;        /* source shard boxes */
  gboolean *hasS;   /* source shard has a box */
  int *ntargets;    /* per source shard: the destination shards it overlaps */
  double nic_Bps;   /* one GPU's NICs at efficiency.nic */
  double net_lat;   /* NIC + switch latency, s */
  double nvl_lat;   /* NVLink latency, s */
  int per, team;    /* training ranks per PP stage; NVLink team of the call's communicator */
  double min_row;   /* smallest contiguous row of an overlap, bytes (0: none yet) */
  GHashTable *ops;  /* GPU + 1 -> NCCL operations the call issues from Python there */
  GHashTable *p2p;  /* GPU + 1 -> the fallback's sends and receives there (ops without the
                       replica group's collective) */
  int *uses;        /* fallback, striped: per source shard, the remote targets served so far */
  gboolean striped; /* fallback: the striped plan applies to this call */
} Call;

static gboolean is_m2n(SwTransport tr) {
  return tr == SW_M2N_PACK || tr == SW_M2N_RING_V01 || tr == SW_M2N_DIRECT;
}

/* One NCCL operation issued from Python on GPU g (a send, a receive, a broadcast or all-gather
 * call): counted per call, the busiest rank's count costs nemo.nccl_op_s of host time. */
static void count_in(GHashTable *h, int g) {
  gpointer key = GINT_TO_POINTER(g + 1);
  g_hash_table_insert(h, key, GINT_TO_POINTER(GPOINTER_TO_INT(g_hash_table_lookup(h, key)) + 1));
}

static void count_op(const Call *k, int g) {
  count_in(k->ops, g);
}

/* The largest per-rank count of h (k->ops: NCCL operations; k->p2p: sends and receives). */
static int busiest(GHashTable *h) {
  GHashTableIter it;
  gpointer key, val;
  int most = 0;
  g_hash_table_iter_init(&it, h);
  while (g_hash_table_iter_next(&it, &key, &val))
    if (GPOINTER_TO_INT(val) > most) most = GPOINTER_TO_INT(val);
  return most;
}

/* Stripe m of n of box b: its first dim cut in n equal parts (n = 1: the whole box). */
static RfBox stripe_box(const RfBox *b, int m, int n) {
  RfBox st = *b;
  int64_t w = (b->hi[0] - b->lo[0]) / n;
  st.lo[0] = b->lo[0] + m * w;
  st.hi[0] = st.lo[0] + w;
  return st;
}

/* Whether the fallback can stripe this call (xferdtensor_python.py at e40aa046e,
 * _build_striped_targets and _remote_transfers_avoid_double_staging): some destination shard has
 * replicas, every replicated shard's first dim divides by its replica count (NCCL all-gather's
 * equal counts), and no remote transfer needs both a packed source and a staged receive. If not,
 * the whole call takes the generic path (_xferdtensor_python_impl_v1). */
static gboolean fallback_striped(const Call *k) {
  if (k->nrD <= 1) return FALSE;
  for (int b = 0; b < k->nsD; b++) {
    RfBox bD;
    if (!rf_placement_shard_box(k->D, b, &bD, NULL)) continue;
    if ((bD.hi[0] - bD.lo[0]) % k->nrD != 0) return FALSE;
    for (int m = 0; m < k->nrD; m++) {
      RfBox st = stripe_box(&bD, m, k->nrD);
      for (int a = 0; a < k->nsS; a++) {
        RfBox o;
        if (!k->hasS[a] || !rf_box_intersect(&k->bS[a], &st, k->nd, &o)) continue;
        if (!box_contiguous(&o, &k->bS[a], k->nd) && !box_contiguous(&o, &bD, k->nd)) return FALSE;
      }
    }
  }
  return TRUE;
}

/* The fallback's transfers from source shard a into destination shard b (box bD, replicas on
 * GPUs mg). Striped: member m of the replica group receives stripe m of the box (its first dim
 * cut in nrD equal parts) from a source replica taken round-robin over the targets it serves
 * (_build_striped_transfers: source_group_uses), then an in-place all-gather rebuilds the box
 * (fallback_allgather). Generic: the representative (replica 0) receives the whole overlap from
 * the first holder (_build_exact_plan: holders[0]), then broadcasts the box to its replicas on
 * the replica sub-communicator (fallback_broadcast). A non-contiguous source view is packed by
 * .contiguous(), a non-contiguous destination view received into staging and copied back. Each
 * send and receive is one NCCL operation on its rank. */
static void fallback_transfers(Call *k, SwCall *c, int a, const RfBox *bD, const int *mg) {
  const RfProblem *pb = k->pb;
  int n = k->striped ? k->nrD : 1;
  for (int m = 0; m < n; m++) {
    RfBox st = stripe_box(bD, m, n), o;
    if (!rf_box_intersect(&k->bS[a], &st, k->nd, &o)) continue;
    double ov = (double)rf_box_volume(&o, k->nd) * k->es;
    int rep = k->striped ? k->uses[a]++ % k->nrS : 0;
    int sg = pb->gpu[rf_placement_rank(k->S, a, rep)];
    if (sg == mg[m]) continue; /* a local copy: no NCCL operation */
    add_flow(c, sg, mg[m], 0, RF_PHASE_INJECT, ov, 1.0, 0);
    count_op(k, sg);
    count_op(k, mg[m]);
    count_in(k->p2p, sg); /* one ncclSend / ncclRecv per pair (_exchange_exact_overlaps) */
    count_in(k->p2p, mg[m]);
    if (!box_contiguous(&o, &k->bS[a], k->nd)) c->pre_bytes[sg] += ov;
    if (!box_contiguous(&o, bD, k->nd)) c->post_bytes[mg[m]] += ov;
  }
}

/* The sources of destination shard box bD (replicas on GPUs mg): the fallback's transfers and
 * DIRECT's puts; counts the targets of each source. Returns the sources. */
static int shard_sources(Call *k, SwCall *c, const RfBox *bD, const int *mg) {
  const RfProblem *pb = k->pb;
  int nsrc = 0;
  for (int a = 0; a < k->nsS; a++) {
    if (!k->hasS[a]) continue;
    double row = 0, ov = overlap_bytes(&k->bS[a], bD, k->nd, k->es, &row);
    if (ov <= 0) continue;
    nsrc++;
    k->ntargets[a]++;
    if (k->min_row <= 0 || row < k->min_row) k->min_row = row;
    switch (k->tr) {
    case SW_PYTHON_FALLBACK:
      fallback_transfers(k, c, a, bD, mg);
      break;
    case SW_M2N_DIRECT:
      for (int m = 0; m < k->nrD; m++) {
        int sg = pb->gpu[rf_placement_rank(k->S, a, m % k->nrS)];
        add_flow(c, sg, mg[m], 0, RF_PHASE_INJECT, ov, 1.0, 0);
      }
      break;
    case SW_GOLDEN: /* golden_broadcast: the flows do not depend on the destination shard */
    case SW_M2N_PACK:
    case SW_M2N_RING_V01: {
      /* NODE_AWARE: replicas grouped by NVLink team; source replica k injects into the
       * first team of chain segment k; the chain is done per dst shard (team_chain) */
      break;
    }
    }
  }
  return nsrc;
}

/* M2N's limit on the source shards of one destination shard. */
static gboolean check_sources(const Call *k, int nsrc, GError **error) {
  int lim = k->tr == SW_M2N_DIRECT ? k->cal->m2n_direct_max_sources : k->cal->m2n_max_sources;
  if (nsrc <= lim) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "nccl-m2n cannot run %s: %d source shards overlap one destination shard, "
              "above MAX_%sSOURCES %d (nccl_m2n/src/reshard_limits.h; the call fails, no "
              "fallback)",
              k->t->name, nsrc, k->tr == SW_M2N_DIRECT ? "DIRECT_" : "", lim);
  return FALSE;
}

/* The fallback's in-place all-gather on the replica sub-communicator: an NCCL ring, no domain
 * awareness; each member sends (R-1)/R of the shard to the next. */
static void fallback_allgather(const Call *k, SwCall *c, const int *mg, double shard) {
  const int nrD = k->nrD;
  double w = k->cal->nic_efficiency / k->cal->allgather_efficiency;
  for (int m = 0; m < nrD; m++) {
    int nx = mg[(m + 1) % nrD];
    add_flow(c, mg[m], nx, 1, RF_PHASE_FANOUT, shard * (nrD - 1) / nrD,
             mg[m] / k->G != nx / k->G ? w : 1.0, 0);
    count_op(k, mg[m]);
  }
  double l = ring_latency_s(k->pb, k->cal, mg, nrD);
  if (l > c->latency_s) c->latency_s = l;
}

/* The generic path's broadcast of the representative's box to its replicas on the replica
 * sub-communicator (_broadcast_destination, root 0): an NCCL ring from the representative, each
 * member passing the whole box to the next, pipelined. */
static void fallback_broadcast(const Call *k, SwCall *c, const int *mg, double shard) {
  const int nrD = k->nrD;
  double w = k->cal->nic_efficiency / k->cal->broadcast_efficiency;
  for (int m = 0; m < nrD; m++) {
    if (m + 1 < nrD)
      add_flow(c, mg[m], mg[m + 1], 1, RF_PHASE_FANOUT, shard,
               mg[m] / k->G != mg[m + 1] / k->G ? w : 1.0, 0);
    count_op(k, mg[m]);
  }
  double l = ring_latency_s(k->pb, k->cal, mg, nrD);
  if (l > c->latency_s) c->latency_s = l;
}

/* NCCL Xfer v0.1 RING's leader of one source among the replicas of a destination shard on the
 * target domain (nccl_m2n/src/reshard_prepare.cc prepareReshardParams at 4532497): the sources of
 * the shard, in source shard order, spread over the nlocal replicas there, sources-per-replica
 * (plus one for the first nsrc % nlocal replicas) each: source p of nsrc goes to this replica. */
int sw_ring_leader(int p, int nsrc, int nlocal) {
  if (nlocal < 1 || nsrc < 1) return 0;
  int per = nsrc / nlocal, extra = nsrc % nlocal, threshold = extra * (per + 1), idx;
  if (p < threshold)
    idx = p / (per + 1);
  else
    idx = extra + (per > 0 ? (p - threshold) / per : 0);
  return idx < nlocal ? idx : nlocal - 1;
}

/* RING v0.1, one chain segment of destination shard b: every source piece is put into the
 * segment's first team at its own leader (sw_ring_leader over the sources of b), which fans it
 * out over NVLink to the team's other replicas and forwards it, chunk-pipelined, to the member of
 * the same index in the next team (ringNextWorldRank), and so on along the segment. */
static void ring_pieces(const Call *k, SwCall *c, const RfBox *bD, const int *mg, const int *mteam,
                        const int *cnt, int j, int seg, int hop, double chunk_s) {
  const RfProblem *pb = k->pb;
  int nsrc = 0, p = 0;
  for (int a = 0; a < k->nsS; a++)
    if (k->hasS[a] && overlap_bytes(&k->bS[a], bD, k->nd, k->es, NULL) > 0) nsrc++;
  for (int a = 0; a < k->nsS; a++) {
    double ov = k->hasS[a] ? overlap_bytes(&k->bS[a], bD, k->nd, k->es, NULL) : 0;
    if (ov <= 0) continue;
    int t = sw_ring_leader(p++, nsrc, cnt[j - hop]);
    int here = -1, prev = -1, seen = 0, seenp = 0;
    for (int m = 0; m < k->nrD; m++) {
      if (mteam[m] == j && seen++ == t % cnt[j]) here = m;
      if (hop > 0 && mteam[m] == j - 1 && seenp++ == t % cnt[j - 1]) prev = m;
    }
    if (hop == 0)
      add_flow(c, pb->gpu[rf_placement_rank(k->S, a, seg % k->nrS)], mg[here], 0, RF_PHASE_INJECT,
               ov, 1.0, 0);
    else
      add_flow(c, mg[prev], mg[here], 0, RF_PHASE_FORWARD, ov, 1.0, hop * chunk_s);
    for (int m = 0; m < k->nrD; m++)
      if (m != here && mteam[m] == j)
        add_flow(c, mg[here], mg[m], 0, RF_PHASE_FANOUT, ov, 1.0, hop * chunk_s + k->nvl_lat);
  }
}

/* PACK / RING: destination shard b's replicas grouped by NVLink team, a chain of the teams per
 * source replica segment: the sources put into the segment's first team, which forwards to the
 * next (PACK: whole slice by one leader, store and forward; RING: each source piece by its own
 * leader, ring_pieces, pipelined chunks) and fans out over NVLink to its team. */
static void team_chain(const Call *k, SwCall *c, int b, const RfBox *bD, const int *mg,
                       double shard) {
  const RfProblem *pb = k->pb;
  const int nrD = k->nrD, nrS = k->nrS;
  /* teams holding replicas of b, in replica order; PACK's leader of a team is one of its
   * replicas of b, rotated by shard and call so that the leaders of different shards spread
   * over the team's GPUs (today's PACK load balancing was not read: rotation assumed) */
  g_autofree int *tid = g_new(int, nrD), *lead = g_new(int, nrD), *cnt = g_new0(int, nrD);
  g_autofree int *mteam = g_new(int, nrD);
  int nteams = 0;
  for (int m = 0; m < nrD; m++) {
    int tm = gen_team_of(pb, rf_placement_rank(k->D, b, m), k->per, k->team), j = 0;
    while (j < nteams && tid[j] != tm)
      j++;
    if (j == nteams) tid[nteams++] = tm;
    mteam[m] = j;
    cnt[j]++;
  }
  for (int j = 0; j < nteams; j++) {
    int want = (int)((b + k->part) % (uint32_t)cnt[j]), seen = 0;
    for (int m = 0; m < nrD; m++)
      if (mteam[m] == j && seen++ == want) lead[j] = m;
  }
  const gboolean pack = k->tr == SW_M2N_PACK;
  int segs = nrS < nteams ? nrS : nteams;
  double chunk_s = k->cal->m2n_ring_chunk_bytes / k->nic_Bps + k->net_lat;
  for (int j = 0; j < nteams; j++) {
    int seg = j * segs / nteams, first = (seg * nteams + segs - 1) / segs;
    int hop = j - first; /* hops along this segment's chain */
    int lg = mg[lead[j]];
    if (!pack) {
      ring_pieces(k, c, bD, mg, mteam, cnt, j, seg, hop, chunk_s);
      continue;
    }
    if (hop == 0) { /* sources put into the segment's first team */
      for (int a = 0; a < k->nsS; a++) {
        if (!k->hasS[a]) continue;
        double ov = overlap_bytes(&k->bS[a], bD, k->nd, k->es, NULL);
        int sg = pb->gpu[rf_placement_rank(k->S, a, seg % nrS)];
        add_flow(c, sg, lg, 0, RF_PHASE_INJECT, ov, 1.0, 0);
        c->pre_bytes[sg] += ov;
      }
    } else /* forwarded from the previous team's leader */
      add_flow(c, mg[lead[j - 1]], lg, hop, RF_PHASE_FORWARD, shard, 1.0, 0);
    /* NVLink fan-out to the team's other replicas of b */
    for (int m = 0; m < nrD; m++)
      if (m != lead[j] && mteam[m] == j)
        add_flow(c, lg, mg[m], hop + 1, RF_PHASE_FANOUT, shard, 1.0, 0);
  }
  if (pack)
    for (int m = 0; m < nrD; m++)
      c->post_bytes[mg[m]] += shard;
}

/* The communicator's GPUs (the part's PP stage's training ranks, then every generation rank;
 * NeMo RL's model_update_group when PP is 1), in rank order; returns their count. */
static int comm_gpus(const Call *k, int *g) {
  const RfProblem *pb = k->pb;
  int stage = sw_part_stage(pb, k->part), n = 0;
  for (int i = 0; i < k->per; i++)
    g[n++] = pb->gpu[pb->src.ranks[stage * k->per + i]];
  for (int i = 0; i < pb->dst.nranks; i++)
    g[n++] = pb->gpu[pb->dst.ranks[i]];
  return n;
}

/* golden: every unique source shard (replica 0 of each shard index: DP replicas deduplicated;
 * all-Replicate sources are one shard) broadcast in full from its holder to every other rank of
 * the communicator, one NCCL broadcast after another on the stream. A broadcast is an NCCL ring
 * with C channels (C the fewest member GPUs of a domain), each carrying shard / C: in the root's
 * domain the root hands slice c to its c-th member over NVLink; channel c enters every other
 * domain at its c-th member on that GPU's NIC, hop after hop; the c-th member of each domain
 * passes its slice to the domain's other members over NVLink. Each destination then copies its own
 * shard out of the full tensor. */
static void golden_broadcast(const Call *k, SwCall *c) {
  const RfProblem *pb = k->pb;
  const int ncomm = k->per + pb->dst.nranks, G = k->G;
  g_autofree int *g = g_new(int, ncomm > 0 ? ncomm : 1);
  int n = comm_gpus(k, g);
  g_autofree int *ord = g_memdup2(g, sizeof(int) * (n > 0 ? n : 1));
  qsort(ord, n, sizeof *ord, cmp_gpu);
  /* distinct GPUs grouped by domain: dom_first[d] .. dom_first[d + 1] */
  int m = 0;
  for (int i = 0; i < n; i++)
    if (m == 0 || ord[m - 1] != ord[i]) ord[m++] = ord[i];
  g_autofree int *dom_first = g_new(int, m + 1);
  int nd = 0;
  for (int i = 0; i < m; i++)
    if (i == 0 || ord[i] / G != ord[i - 1] / G) dom_first[nd++] = i;
  dom_first[nd] = m;
  int C = G;
  for (int d = 0; d < nd; d++)
    if (dom_first[d + 1] - dom_first[d] < C) C = dom_first[d + 1] - dom_first[d];
  const double w = k->cal->nic_efficiency / k->cal->broadcast_efficiency;
  for (int a = 0; a < k->nsS; a++) {
    if (!k->hasS[a]) continue;
    const double shard = (double)rf_box_volume(&k->bS[a], k->nd) * k->es;
    const int root = pb->gpu[rf_placement_rank(k->S, a, 0)];
    int rd = 0;
    while (rd < nd && ord[dom_first[rd]] / G != root / G)
      rd++;
    for (int d = 0; d < nd; d++) { /* the root's domain first, then the others in ring order */
      int dd = (rd + d) % nd, prev = (dd - 1 + nd) % nd;
      const int *mem = ord + dom_first[dd], cnt = dom_first[dd + 1] - dom_first[dd];
      double off = d * k->net_lat;
      for (int ch = 0; ch < C; ch++) {
        /* the root's domain: the root hands slice ch to its ch-th member over NVLink */
        int from = d == 0 ? root : ord[dom_first[prev] + ch], entry = mem[ch];
        if (d == 0)
          add_flow(c, from, entry, 0, RF_PHASE_INJECT, shard / C, 1.0, 0);
        else
          add_flow(c, from, entry, 0, RF_PHASE_FORWARD, shard / C, w, off);
        for (int i = 0; i < cnt; i++)
          if (i != ch && mem[i] != root)
            add_flow(c, entry, mem[i], 0, RF_PHASE_FANOUT, shard / C, 1.0, off + k->nvl_lat);
      }
    }
    c->latency_s += ring_latency_s(pb, k->cal, ord, m);
    for (int i = 0; i < m; i++) /* every rank of the communicator calls broadcast */
      count_op(k, ord[i]);
  }
  /* each destination rank copies its own shard out of the assembled tensor */
  RfBox b;
  for (int i = 0; i < pb->dst.nranks; i++) {
    int r = pb->dst.ranks[i];
    if (rf_side_rank_shard(&pb->dst, k->part, r, &b, NULL))
      c->post_bytes[pb->gpu[r]] += (double)rf_box_volume(&b, k->nd) * k->es;
  }
}

/* M2N's limit on the destination shards (DIRECT: shard replicas) one source shard serves. */
static gboolean check_targets(const Call *k, GError **error) {
  const gboolean direct = k->tr == SW_M2N_DIRECT;
  for (int a = 0; a < k->nsS; a++) {
    int lim = direct ? k->cal->m2n_direct_max_targets : k->cal->m2n_max_targets;
    /* DIRECT: overlapping dst shards x the target replicas one source replica serves */
    int n = direct ? k->ntargets[a] * ((k->nrD + k->nrS - 1) / k->nrS) : k->ntargets[a];
    if (n > lim) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "nccl-m2n cannot run %s: one source shard overlaps %d destination %s, above "
                  "MAX_%sTARGETS %d (nccl_m2n/src/reshard_limits.h; the call fails, no fallback)",
                  k->t->name, n, direct ? "shard replicas" : "shards", direct ? "DIRECT_" : "",
                  lim);
      return FALSE;
    }
  }
  return TRUE;
}

/* PACK's staging: the whole local shard (areaBytes = max(src local, dst local, 2048)) in one
 * bucket of at most 2 GiB: a larger request fails (pack_staging.cc). */
static gboolean check_staging(const Call *k, GError **error) {
  RfBox b0;
  double area = 0;
  if (rf_placement_shard_box(k->S, 0, &b0, NULL)) area = (double)rf_box_volume(&b0, k->nd) * k->es;
  if (rf_placement_shard_box(k->D, 0, &b0, NULL) &&
      (double)rf_box_volume(&b0, k->nd) * k->es > area)
    area = (double)rf_box_volume(&b0, k->nd) * k->es;
  if (area <= k->cal->m2n_staging_max_bytes) return TRUE;
  g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
              "nccl-m2n cannot run %s: its local shard of %.3g GB exceeds the %.3g GB PACK "
              "staging bucket (nccl_m2n/src/pack_staging.cc; the call fails)",
              k->t->name, area / 1e9, k->cal->m2n_staging_max_bytes / 1e9);
  return FALSE;
}

/* The call's serial costs on the stream and the host. */
static void call_costs(const Call *k, SwCall *c) {
  const RfCalibration *cal = k->cal;
  /* per-call latencies on the stream: PACK runs two barriers per phase and, with split
   * communicators (default for PACK), phase A then phase B: 4; RING / DIRECT 2; golden: its
   * broadcasts' ring latencies (golden_broadcast) */
  if (k->tr == SW_M2N_PACK)
    c->latency_s += 4 * cal->m2n_barrier_s;
  else if (is_m2n(k->tr))
    c->latency_s += 2 * cal->m2n_barrier_s;
  else if (k->tr == SW_PYTHON_FALLBACK)
    c->latency_s += cal->message_latency_s; /* the grouped send / recv */
  /* DIRECT (NCCL Xfer v0.1 at 4532497, reshard_user_window.cu l.358-407) has no credit window:
   * lane 0 of warp 0 of each CTA posts every put of every target without waiting, so nothing
   * per call beyond the two barriers; the flows carry its bytes (shard_sources) */
  /* the fallback's group costs per operation of its busiest rank */
  if (k->tr == SW_PYTHON_FALLBACK) c->latency_s += busiest(k->p2p) * cal->nemo_p2p_op_s;
  /* host side per NCCL operation NeMo RL issues from Python (nccl4py send / recv / broadcast /
   * all-gather and the torch work that prepares it: views, record_stream, .contiguous(),
   * staging), on the call's busiest rank; the host runs ahead of the stream (no sync per call) */
  if (k->tr == SW_PYTHON_FALLBACK || k->tr == SW_GOLDEN)
    c->host_s += busiest(k->ops) * cal->nemo_nccl_op_s;
  /* host side per call: NCCL Xfer v0.1 (the bench's library at 4532497: ring-v0.1, direct and
   * NeMo RL's xfer-v0.1) and today's M2N PACK are different libraries, each its own cost */
  if (k->tr == SW_M2N_PACK)
    c->host_s += cal->m2n_pack_plan_s;
  else if (is_m2n(k->tr))
    c->host_s += cal->m2n_plan_s;
}

gboolean sw_call_build(const RfProblem *pb, const RfCalibration *cal, SwTransport tr, uint32_t part,
                       SwCall *c, GError **error) {
  const RfPart *pt = &pb->model->parts[part];
  const RfPlacement *S = &pb->src.place[part], *D = &pb->dst.place[part];
  g_array_set_size(c->flows, 0);
  c->nsub = 0;
  c->host_s = c->latency_s = 0;
  c->ce_row_bytes = 0;
  if (!S->mesh || !D->mesh) return TRUE;
  const RfTopology *topo = pb->topo;
  Call k = {.pb = pb,
            .cal = cal,
            .tr = tr,
            .part = part,
            .t = &pb->model->tensors[pt->tensor],
            .S = S,
            .D = D};
  k.nd = S->ndim;
  k.es = rf_dtype_size(k.t->dtype);
  k.G = topo->gpus_per_domain;
  k.nsS = rf_placement_nshards(S), k.nrS = rf_placement_nreplicas(S);
  k.nsD = rf_placement_nshards(D), k.nrD = rf_placement_nreplicas(D);
  g_autofree RfBox *bS = k.bS = g_new(RfBox, k.nsS);
  g_autofree gboolean *hasS = k.hasS = g_new0(gboolean, k.nsS);
  for (int a = 0; a < k.nsS; a++)
    hasS[a] = rf_placement_shard_box(S, a, &bS[a], NULL);
  g_autofree int *ntargets = k.ntargets = g_new0(int, k.nsS);
  k.nic_Bps = topo->nics_per_gpu * topo->nic_Gbps / 8.0 * 1e9 * cal->nic_efficiency;
  k.net_lat = (topo->nic_latency_us + topo->switch_latency_us) * 1e-6;
  k.nvl_lat = topo->nvlink_latency_us * 1e-6;
  int stage = sw_part_stage(pb, part);
  int pp = pb->src.par.pp > 0 ? pb->src.par.pp : 1;
  k.per = pb->src.nranks / pp;
  k.team = is_m2n(tr) ? call_team(pb, stage) : 0;
  g_autoptr(GHashTable) ops = k.ops = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autoptr(GHashTable) p2p = k.p2p = g_hash_table_new(g_direct_hash, g_direct_equal);
  g_autofree int *uses = k.uses = g_new0(int, k.nsS);
  k.striped = tr == SW_PYTHON_FALLBACK && fallback_striped(&k);
  if (tr == SW_GOLDEN) {
    golden_broadcast(&k, c);
    call_costs(&k, c);
    return TRUE;
  }
  for (int b = 0; b < k.nsD; b++) {
    RfBox bD;
    if (!rf_placement_shard_box(D, b, &bD, NULL)) continue;
    double shard = (double)rf_box_volume(&bD, k.nd) * k.es;
    g_autofree int *mg = replica_gpus(pb, D, b, k.nrD);
    int nsrc = shard_sources(&k, c, &bD, mg);
    if (is_m2n(tr) && !check_sources(&k, nsrc, error)) return FALSE;
    if (tr == SW_PYTHON_FALLBACK && k.nrD > 1)
      (k.striped ? fallback_allgather : fallback_broadcast)(&k, c, mg, shard);
    if (tr == SW_M2N_PACK || tr == SW_M2N_RING_V01) team_chain(&k, c, b, &bD, mg, shard);
  }
  if (is_m2n(tr) && !check_targets(&k, error)) return FALSE;
  if (tr == SW_M2N_PACK) {
    if (!check_staging(&k, error)) return FALSE;
    c->ce_row_bytes = k.min_row;
  }
  call_costs(&k, c);
  return TRUE;
}
