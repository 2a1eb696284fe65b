/* From a plan to a flow program: the plan's movement as GPU-level records (export pieces routed
 * as NCCL rings, messages elsewhere), the hosts of a group size, and refit's own strategies as
 * steps (m2n, gather-broadcast buckets): which bytes move between which simulated hosts, in
 * which step, and how late each flow may start (pipeline fill). The published software and
 * refit's executor are modelled in models/; sim_program_build picks the model. */
#include "bigmem.h"
#include "error.h"
#include "internal.h"
#include "sort.h"
#include "sw.h"

#include <math.h>
#include <string.h>

typedef struct {
  int32_t src, dst;
  uint8_t phase;
  uint16_t depth;
  double bytes;
} Proto;

/* Open-addressing map from a packed 64-bit key to an index into an array of Proto: the plan of a
 * large refit yields tens of millions of (piece, hop) contributions, so this is the hot path. */
typedef struct {
  uint64_t *keys; /* key + 1; 0 = empty */
  uint32_t *vals;
  uint64_t cap, n;
} Map;

static void map_init(Map *m, uint64_t cap) {
  m->cap = 1024;
  while (m->cap < cap * 2)
    m->cap <<= 1;
  m->keys = g_new0(uint64_t, m->cap);
  m->vals = g_new(uint32_t, m->cap);
  m->n = 0;
}

static void map_clear(Map *m) {
  g_free(m->keys);
  g_free(m->vals);
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

/* Slot of key: *found tells whether it holds key already. */
static uint64_t map_slot(const Map *m, uint64_t key, gboolean *found) {
  uint64_t k = key + 1, i = mix64(key) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != k)
    i = (i + 1) & (m->cap - 1);
  *found = m->keys[i] == k;
  return i;
}

static void map_grow(Map *m) {
  Map n;
  map_init(&n, m->cap);
  for (uint64_t i = 0; i < m->cap; i++)
    if (m->keys[i]) {
      gboolean f;
      uint64_t j = map_slot(&n, m->keys[i] - 1, &f);
      n.keys[j] = m->keys[i];
      n.vals[j] = m->vals[i];
    }
  n.n = m->n;
  map_clear(m);
  *m = n;
}

typedef struct {
  int ngpus;
  int gpus_per_domain;
  GArray *protos; /* Proto between GPUs */
  Map map;
  double *load; /* per GPU x SIM_HOST_LINKS x RF_PHASE_COUNT: bytes over its own links */
  double inflate[RF_PHASE_COUNT]; /* network bytes of a phase count this many times (NCCL
                                     collectives) */
} Builder;

static inline guint64 proto_key(int s, int d, int depth, int phase) {
  /* 24 bits per endpoint: up to 16M GPUs */
  return ((guint64)s << 40) | ((guint64)d << 16) | ((guint64)depth << 3) | (guint64)phase;
}

static void proto_put(GArray *protos, Map *m, int s, int d, int depth, int phase, double bytes) {
  if (depth > 8191) depth = 8191;
  gboolean found;
  uint64_t key = proto_key(s, d, depth, phase), i = map_slot(m, key, &found);
  if (found) {
    g_array_index(protos, Proto, m->vals[i]).bytes += bytes;
    return;
  }
  Proto pr = {s, d, (uint8_t)phase, (uint16_t)depth, bytes};
  m->keys[i] = key + 1;
  m->vals[i] = protos->len;
  g_array_append_val(protos, pr);
  if (++m->n * 2 > m->cap) map_grow(m);
}

static void proto_add(Builder *b, RfPhase phase, int src_gpu, int dst_gpu, int depth,
                      double bytes) {
  if (bytes <= 0 || src_gpu == dst_gpu) return; /* a GPU keeps its own bytes */
  gboolean net = src_gpu / b->gpus_per_domain != dst_gpu / b->gpus_per_domain;
#define LOAD(g, k) b->load[((size_t)(g)*SIM_HOST_LINKS + (k)) * RF_PHASE_COUNT + phase]
  double w = net ? bytes * b->inflate[phase] : bytes;
  LOAD(src_gpu, SIM_LINK_HBM) += w;
  LOAD(dst_gpu, SIM_LINK_HBM) += w;
  LOAD(src_gpu, net ? SIM_LINK_NICUP : SIM_LINK_NVUP) += w;
  LOAD(dst_gpu, net ? SIM_LINK_NICDN : SIM_LINK_NVDN) += w;
#undef LOAD
  proto_put(b->protos, &b->map, src_gpu, dst_gpu, depth, phase, bytes);
}

static int domain_of(const Builder *b, int gpu) {
  return gpu / b->gpus_per_domain;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* One exported piece from src to the GPUs in dsts, routed as an NCCL ring would: inside the
 * source domain over NVLink; to other domains along a chain that enters each domain once, on
 * the rail of the source GPU when that GPU is a destination, then fans out over NVLink. */
static void export_piece(Builder *b, int src_gpu, int *dsts, int n, double bytes) {
  const int G = b->gpus_per_domain;
  int sd = domain_of(b, src_gpu);
  qsort(dsts, n, sizeof *dsts, cmp_int);
  /* domains in chain order: cyclically after the source domain */
  int ndom = 0;
  g_autofree int *doms = g_new(int, n);
  g_autofree int *first = g_new(int, n);
  g_autofree int *count = g_new(int, n);
  for (int i = 0; i < n; i++) {
    int d = domain_of(b, dsts[i]);
    if (ndom && doms[ndom - 1] == d) {
      count[ndom - 1]++;
      continue;
    }
    doms[ndom] = d;
    first[ndom] = i;
    count[ndom] = 1;
    ndom++;
  }
  int start = 0;
  while (start < ndom && doms[start] < sd)
    start++;
  int prev = src_gpu, hop = 0;
  for (int k = 0; k < ndom; k++) {
    int di = (start + k) % ndom;
    int *g = dsts + first[di];
    int c = count[di];
    if (doms[di] == sd) {
      for (int i = 0; i < c; i++)
        proto_add(b, RF_PHASE_EXPORT, src_gpu, g[i], 0, bytes);
      continue;
    }
    /* entry: the destination closest after the source's rail */
    int want = src_gpu % G, entry = g[0], best = G + 1;
    for (int i = 0; i < c; i++) {
      int dist = ((g[i] % G) - want + G) % G;
      if (dist < best) best = dist, entry = g[i];
    }
    proto_add(b, RF_PHASE_EXPORT, prev, entry, hop, bytes);
    hop++;
    for (int i = 0; i < c; i++)
      if (g[i] != entry) proto_add(b, RF_PHASE_EXPORT, entry, g[i], hop, bytes);
    prev = entry;
  }
}

/* NCCL latency of one ring collective over n ranks spread over `domains` NVLink domains. */
static double ring_latency(const RfTopology *t, const RfCalibration *cal, int n, int domains) {
  if (n <= 1) return 0;
  if (domains < 1) domains = 1;
  int inter = domains - 1, intra = (n - 1) - inter;
  if (intra < 0) intra = 0;
  return cal->collective_base_s + intra * t->nvlink_latency_us * 1e-6 +
         inter * (t->nic_latency_us + t->switch_latency_us) * 1e-6;
}

/* Export latency of the whole gather-broadcast group. Megatron-Bridge exports parameter by
 * parameter: per exported Megatron parameter a PP broadcast and the TP / EP all-gathers, each
 * costing its NCCL ring latency (a stacked expert entry is one parameter per local expert, and
 * its all-gather over EP yields EP experts); per checkpoint tensor produced, the calibrated
 * software overhead (conversion and bookkeeping in Python). */
static void export_latency(const RfPlan *plan, const gboolean *exported, const RfCalibration *cal,
                           SimProtos *x) {
  const RfProblem *pb = plan->problem;
  const RfParallel *par = &pb->src.par;
  const int G = pb->topo->gpus_per_domain;
  int pp = par->pp > 0 ? par->pp : 1, ep = par->ep > 0 ? par->ep : 1;
  int etp = par->etp > 0 ? par->etp : 1;
  double calls = 0, lat = 0, tensors = 0;
  g_autofree gboolean *seen = g_new0(gboolean, pb->model->ntensors + 1);
  /* the PP ring crosses as many domains as the training side spans, at most one per stage */
  int pp_domains = 0, last = -1;
  for (int i = 0; i < pb->src.nranks; i++) {
    int d = rf_problem_domain(pb, pb->src.ranks[i]);
    if (d != last) pp_domains++, last = d; /* ranks ascend, GPUs follow ranks */
  }
  if (pp_domains > pp) pp_domains = pp;
  for (uint32_t i = 0; i < pb->model->nparts; i++) {
    if (!exported[i]) continue;
    const RfPart *part = &pb->model->parts[i];
    const RfTensor *t = &pb->model->tensors[part->tensor];
    if (!seen[part->tensor]) {
      seen[part->tensor] = TRUE;
      tensors += (double)rf_tensor_count(t);
    }
    const RfPlacement *pl = &pb->src.place[i];
    int nshards = pl->mesh ? rf_placement_nshards(pl) : 1;
    double c = 1, a = 0;
    if (pp > 1) a += ring_latency(pb->topo, cal, pp, pp_domains);
    if (t->nexperts > 0 && pl->mesh) {
      RfBox box;
      int64_t local = t->nexperts;
      if (rf_placement_shard_box(pl, 0, &box, NULL)) local = box.hi[0] - box.lo[0];
      if (local < 1) local = 1;
      c = (double)local;
      int e = (int)(t->nexperts / local);
      if (e < ep) e = ep;
      if (e > 1) a += ring_latency(pb->topo, cal, e, (e + G - 1) / G);
      if (etp > 1) a += ring_latency(pb->topo, cal, etp, 1);
    } else if (nshards > 1) {
      a += ring_latency(pb->topo, cal, nshards, (nshards + G - 1) / G);
    }
    calls += c;
    lat += c * a;
  }
  x->export_calls = calls;
  x->export_tensors = tensors;
  /* These costs are Megatron-Bridge's export as NeMo RL runs it, per parameter and per tensor.
   * refit's own strategies move the plan's export messages in refit run's groups (the executor
   * model prices those), and the flow model of them carries no software cost: none here. */
  const gboolean theirs = cal->software != RF_SOFTWARE_REFIT;
  x->export_host_s = theirs ? tensors * cal->export_tensor_overhead_s : 0;
  x->export_latency_s = theirs ? lat + x->export_host_s : 0;
}

/* Sizes, per-phase weights and the GPUs in use. */
static void builder_init(Builder *b, SimProtos *x, const RfPlan *plan, const RfCalibration *cal) {
  const RfProblem *pb = plan->problem;
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] + 1 > b->ngpus) b->ngpus = pb->gpu[r] + 1;
  b->gpus_per_domain = pb->topo->gpus_per_domain;
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    b->inflate[l] = 1.0;
  /* NCCL collectives reach a lower fraction of the NIC than point-to-point copies: their
   * network bytes weigh nic / collective efficiency on the links */
  b->inflate[RF_PHASE_EXPORT] = cal->nic_efficiency / cal->allgather_efficiency;
  b->inflate[RF_PHASE_BROADCAST] = cal->nic_efficiency / cal->broadcast_efficiency;
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    x->inflate[l] = b->inflate[l];
  b->protos = g_array_new(FALSE, FALSE, sizeof(Proto));
  map_init(&b->map, 4096);
  b->load = g_new0(double, (size_t)(b->ngpus > 0 ? b->ngpus : 1) * SIM_HOST_LINKS * RF_PHASE_COUNT);
  x->ngpus = b->ngpus;
  x->used = g_new0(gboolean, b->ngpus > 0 ? b->ngpus : 1);
  for (int r = 0; r < pb->nranks; r++)
    if (pb->gpu[r] >= 0) x->used[pb->gpu[r]] = TRUE;
}

/* First stage of the broadcast and of the m2n phases; network share of each; bytes the
 * gather-broadcast group broadcasts and checkpoint tensors moved by messages. */
static void scan_messages(const RfPlan *plan, SimProtos *x, int *first_bcast, int *first_m2n) {
  const RfProblem *pb = plan->problem;
  double bcast_net = 0, bcast_all = 0, m2n_net = 0, m2n_all = 0;
  g_autofree gboolean *bcast_piece = g_new0(gboolean, plan->npieces + 1);
  g_autofree gboolean *m2n_tensor = g_new0(gboolean, pb->model->ntensors + 1);
  *first_bcast = *first_m2n = -1;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    double by = (double)msg->bytes;
    gboolean net = (msg->flags & RF_XFER_NET) != 0;
    switch (msg->phase) {
    case RF_PHASE_BROADCAST:
      if (*first_bcast < 0 || msg->stage < *first_bcast) *first_bcast = msg->stage;
      bcast_all += by;
      if (net) bcast_net += by;
      for (uint32_t t = msg->first; t < msg->first + msg->count; t++) {
        uint32_t pc = plan->xfers[t].piece;
        if (!bcast_piece[pc]) {
          bcast_piece[pc] = TRUE;
          x->gb_bytes += (double)plan->pieces[pc].bytes;
        }
      }
      break;
    case RF_PHASE_INJECT:
    case RF_PHASE_FORWARD:
    case RF_PHASE_FANOUT:
      if (*first_m2n < 0 || msg->stage < *first_m2n) *first_m2n = msg->stage;
      m2n_all += by;
      if (net) m2n_net += by;
      for (uint32_t t = msg->first; t < msg->first + msg->count; t++) {
        uint32_t part = plan->pieces[plan->xfers[t].piece].part;
        uint32_t tensor = pb->model->parts[part].tensor;
        if (!m2n_tensor[tensor]) {
          m2n_tensor[tensor] = TRUE;
          x->m2n_tensors += (double)rf_tensor_count(&pb->model->tensors[tensor]);
        }
      }
      break;
    default:
      break;
    }
  }
  x->bcast_net_fraction = bcast_all > 0 ? bcast_net / bcast_all : 0;
  x->m2n_net_fraction = m2n_all > 0 ? m2n_net / m2n_all : 0;
}

/* Export: the transfers of one (stage, source) sorted by piece, then each piece routed as a
 * ring; marks the exported parts. */
static void route_exports(Builder *b, const RfPlan *plan, gboolean *exported) {
  const RfProblem *pb = plan->problem;
  g_autoptr(GArray) pd = g_array_new(FALSE, FALSE, sizeof(uint64_t));  /* piece << 32 | dst GPU */
  g_autoptr(GArray) tmp = g_array_new(FALSE, FALSE, sizeof(uint64_t)); /* the sort's room */
  g_autoptr(GArray) dl = g_array_new(FALSE, FALSE, sizeof(int));
  uint64_t m = 0;
  while (m < plan->nmsgs) {
    const RfMessage *msg = &plan->msgs[m];
    if (msg->phase != RF_PHASE_EXPORT) {
      m++;
      continue;
    }
    uint64_t end = m;
    while (end < plan->nmsgs && plan->msgs[end].phase == RF_PHASE_EXPORT &&
           plan->msgs[end].stage == msg->stage && plan->msgs[end].src == msg->src)
      end++;
    g_array_set_size(pd, 0);
    for (uint64_t k = m; k < end; k++) {
      const RfMessage *mk = &plan->msgs[k];
      uint64_t dg = (uint32_t)pb->gpu[mk->dst];
      for (uint32_t t = mk->first; t < mk->first + mk->count; t++) {
        uint64_t v = ((uint64_t)plan->xfers[t].piece << 32) | dg;
        g_array_append_val(pd, v);
      }
    }
    /* a radix sort: qsort's merge sort, a call per comparison, was a sixth of Kimi K3's
     * gather-broadcast simulation */
    g_array_set_size(tmp, pd->len);
    rf_radix_sort((uint64_t *)(void *)pd->data, (uint64_t *)(void *)tmp->data, pd->len, NULL,
                  FALSE);
    int sg = pb->gpu[msg->src];
    for (guint i = 0; i < pd->len;) {
      uint32_t pc = (uint32_t)(g_array_index(pd, uint64_t, i) >> 32);
      g_array_set_size(dl, 0);
      while (i < pd->len && (uint32_t)(g_array_index(pd, uint64_t, i) >> 32) == pc) {
        int d = (int)(g_array_index(pd, uint64_t, i) & 0xffffffffu);
        g_array_append_val(dl, d);
        i++;
      }
      exported[plan->pieces[pc].part] = TRUE;
      export_piece(b, sg, (int *)dl->data, (int)dl->len, (double)plan->pieces[pc].bytes);
    }
    m = end;
  }
}

/* Everything but the export moves as the plan's messages, a stage deeper per stage after the
 * first of its phase group. */
static void add_messages(Builder *b, const RfPlan *plan, int first_bcast, int first_m2n) {
  const RfProblem *pb = plan->problem;
  for (uint64_t m = 0; m < plan->nmsgs; m++) {
    const RfMessage *msg = &plan->msgs[m];
    if (msg->phase == RF_PHASE_EXPORT || msg->phase >= RF_PHASE_COUNT) continue;
    int first = msg->phase == RF_PHASE_BROADCAST ? first_bcast : first_m2n;
    proto_add(b, (RfPhase)msg->phase, pb->gpu[msg->src], pb->gpu[msg->dst], msg->stage - first,
              (double)msg->bytes);
  }
}

SimProtos *sim_protos_build(const RfPlan *plan, const RfCalibration *cal) {
  SimProtos *x = g_new0(SimProtos, 1);
  x->plan = plan;
  Builder b = {0};
  builder_init(&b, x, plan, cal);
  int first_bcast, first_m2n;
  scan_messages(plan, x, &first_bcast, &first_m2n);
  g_autofree gboolean *exported = g_new0(gboolean, plan->problem->model->nparts + 1);
  route_exports(&b, plan, exported);
  add_messages(&b, plan, first_bcast, first_m2n);
  export_latency(plan, exported, cal, x);
  for (guint i = 0; i < b.protos->len; i++) {
    const Proto *pr = &g_array_index(b.protos, Proto, i);
    if (pr->phase == RF_PHASE_EXPORT || pr->phase == RF_PHASE_BROADCAST)
      x->has_gb = TRUE;
    else
      x->has_m2n = TRUE;
  }
  if (x->has_gb && x->gb_bytes <= 0) /* export without broadcast: size buckets on the export */
    for (guint i = 0; i < b.protos->len; i++)
      x->gb_bytes += g_array_index(b.protos, Proto, i).bytes;
  map_clear(&b.map);
  x->protos = b.protos;
  x->load = b.load;
  return x;
}

void sim_protos_free(SimProtos *x) {
  if (!x) return;
  g_array_free(x->protos, TRUE);
  g_free(x->load);
  g_free(x->used);
  g_free(x);
}

uint64_t sim_protos_count(const SimProtos *x) {
  return x->protos->len;
}

double sim_plan_m2n_tensors(const RfPlan *plan) {
  const RfModel *m = plan->problem->model;
  g_autofree gboolean *seen = g_new0(gboolean, m->ntensors + 1);
  double n = 0;
  for (uint64_t i = 0; i < plan->nxfers; i++) {
    uint8_t ph = plan->xfers[i].phase;
    if (ph != RF_PHASE_INJECT && ph != RF_PHASE_FORWARD && ph != RF_PHASE_FANOUT) continue;
    uint32_t t = m->parts[plan->pieces[plan->xfers[i].piece].part].tensor;
    if (!seen[t]) {
      seen[t] = TRUE;
      n += (double)rf_tensor_count(&m->tensors[t]);
    }
  }
  return n;
}

static int cmp_flow(const void *a, const void *b) {
  const SimFlow *x = a, *y = b;
  if (x->step != y->step) return (x->step > y->step) - (x->step < y->step);
  if (x->src != y->src) return (x->src > y->src) - (x->src < y->src);
  return (x->offset_s > y->offset_s) - (x->offset_s < y->offset_s);
}

static void emit(SimProgram *p, const Proto *pr, int step, double scale, double offset_s,
                 double pace_s) {
  p->frac[step][pr->phase] = scale;
  double w = sim_route_is_net(p, pr->src, pr->dst) ? p->inflate[pr->phase] : 1.0;
  SimFlow f = {pr->src,  pr->dst, pr->phase, 0, 0, (uint32_t)step, pr->bytes * scale * w,
               offset_s, 0,       w};
  if (f.bytes <= 0) return;
  if (pace_s > 0) f.rate_Bps = f.bytes / pace_s;
  g_array_append_val(p->flows, f);
  p->phase_bytes[pr->phase] += pr->bytes * scale;
}

static void set_links(SimProgram *p, const RfTopology *t, const RfCalibration *cal) {
  double g = p->group;
  p->nvl_Bps = t->nvlink_GBps * 1e9 * cal->nvlink_efficiency * g;
  double nic = t->nic_Gbps / 8.0 * 1e9 * cal->nic_efficiency;
  double pcie = t->pcie_GBps * 1e9;
  p->nic_Bps = t->nics_per_gpu * (nic < pcie ? nic : pcie) * g;
  p->hbm_Bps =
      rf_topology_copy_Bps(t, cal->hbm_efficiency) * g; /* a pack or unpack: a copy's payload */
  p->nvl_lat_s = t->nvlink_latency_us * 1e-6;
  p->nic_lat_s = t->nic_latency_us * 1e-6;
  p->sw_lat_s = t->switch_latency_us * 1e-6;
  p->leaves = t->oversubscription > 1.0;
  int per_leaf = t->gpus_per_leaf > 0 ? t->gpus_per_leaf : 1;
  p->leaf_Bps = per_leaf * (p->nic_Bps / g) / t->oversubscription;
  p->host_leaf = g_new0(int, p->nhosts > 0 ? p->nhosts : 1);
  int maxleaf = 0;
  for (int h = 0; h < p->nhosts; h++) {
    int gpu = p->host_gpu[h], G = t->gpus_per_domain;
    int leaf = t->fabric == RF_FABRIC_RAIL_OPTIMIZED ? (gpu % G) + G * ((gpu / G) / per_leaf)
                                                     : gpu / per_leaf;
    p->host_leaf[h] = leaf;
    if (leaf > maxleaf) maxleaf = leaf;
  }
  p->nleaves = maxleaf + 1;
}

static SimProgram *program_new(const SimProtos *x, int group) {
  SimProgram *p = g_new0(SimProgram, 1);
  p->group = group;
  p->gpus_per_domain = x->plan->problem->topo->gpus_per_domain;
  p->flows = g_array_new(FALSE, FALSE, sizeof(SimFlow));
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    p->inflate[l] = x->inflate[l];
  p->export_calls = x->export_calls;
  p->export_tensors = x->export_tensors;
  p->export_latency_s = x->export_latency_s;
  p->export_host_s = x->export_host_s;
  p->m2n_tensors = x->m2n_tensors;
  p->gb_bytes = x->gb_bytes;
  return p;
}

/* Hosts: groups of `group` GPUs of one domain holding at least one GPU of the plan. Returns the
 * host of each group slot (GPU / group), -1 for an empty slot. */
static int *place_hosts(SimProgram *p, const SimProtos *x) {
  int group = p->group, nslots = x->ngpus / group + 1;
  int *slot_host = g_new(int, nslots);
  for (int i = 0; i < nslots; i++)
    slot_host[i] = -1;
  GArray *hg = g_array_new(FALSE, FALSE, sizeof(int)), *hn = g_array_new(FALSE, FALSE, sizeof(int));
  for (int i = 0; i < x->ngpus; i++) {
    if (!x->used[i]) continue;
    int s = i / group;
    if (slot_host[s] < 0) {
      slot_host[s] = (int)hg->len;
      int first = s * group, zero = 0;
      g_array_append_val(hg, first);
      g_array_append_val(hn, zero);
    }
    g_array_index(hn, int, slot_host[s])++;
  }
  p->nhosts = (int)hg->len;
  p->host_gpu = (int *)g_array_free(hg, FALSE);
  p->host_ngpus = (int *)g_array_free(hn, FALSE);
  return slot_host;
}

/* Pipeline depths beyond SIM_DEPTH_CLASSES fold into that many classes of equal width (a chain
 * through 3000 ranks fills in ~0.1 s: a class is a fraction of it): width per phase. */
static void depth_widths(const SimProtos *x, int width[RF_PHASE_COUNT]) {
  int maxdepth[RF_PHASE_COUNT] = {0};
  for (guint i = 0; i < x->protos->len; i++) {
    const Proto *pr = &g_array_index(x->protos, Proto, i);
    if (pr->depth > maxdepth[pr->phase]) maxdepth[pr->phase] = pr->depth;
  }
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    width[l] = (maxdepth[l] + SIM_DEPTH_CLASSES) / SIM_DEPTH_CLASSES;
}

/* The GPU-level records aggregated between hosts, per depth class. */
static GArray *host_protos(const SimProtos *x, int group, const int *slot_host,
                           const int width[RF_PHASE_COUNT]) {
  GArray *hp = g_array_new(FALSE, FALSE, sizeof(Proto));
  Map map;
  map_init(&map, x->protos->len / (group * group) + 1024);
  for (guint i = 0; i < x->protos->len; i++) {
    const Proto *pr = &g_array_index(x->protos, Proto, i);
    int s = slot_host[pr->src / group], d = slot_host[pr->dst / group];
    proto_put(hp, &map, s, d, pr->depth / width[pr->phase], pr->phase, pr->bytes);
  }
  map_clear(&map);
  return hp;
}

/* Per-hop pipeline fill (one NCCL chunk per hop on the link the hop uses) and copy rate. */
typedef struct {
  double t_net, t_nvl;   /* one chunk over a network / an NVLink hop */
  double t_bcast, t_m2n; /* the same, weighted by the network share of the phase group */
  double copy_Bps;       /* pack / unpack copy */
  double per_gpu_nic_Bps, per_gpu_nvl_Bps;
  int width[RF_PHASE_COUNT]; /* depth class widths */
} Fill;

static void fill_init(Fill *f, const SimProgram *p, const SimProtos *x, const RfCalibration *cal) {
  const RfTopology *t = x->plan->problem->topo;
  f->per_gpu_nic_Bps = p->nic_Bps / p->group;
  f->per_gpu_nvl_Bps = p->nvl_Bps / p->group;
  f->t_net = cal->chunk_bytes / f->per_gpu_nic_Bps + p->nic_lat_s + p->sw_lat_s;
  f->t_nvl = cal->chunk_bytes / f->per_gpu_nvl_Bps + p->nvl_lat_s;
  double fb = x->bcast_net_fraction, fm = x->m2n_net_fraction;
  f->t_bcast = fb * f->t_net + (1 - fb) * f->t_nvl;
  f->t_m2n = fm * f->t_net + (1 - fm) * f->t_nvl;
  f->copy_Bps = rf_topology_copy_Bps(t, cal->hbm_efficiency);
  depth_widths(x, f->width);
}

/* Centre of a record's depth class, in hops. */
static double depth_hops(const Fill *f, const Proto *pr) {
  int w = f->width[pr->phase];
  return pr->depth * w + (w - 1) / 2.0;
}

/* m2n / p2p: one step in which injection, forwarding and fan-out overlap; per moved checkpoint
 * tensor, the calibrated software time of the reshard path. */
static void add_m2n_step(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                         const GArray *hp, const Fill *f, int lane) {
  int st = sim_add_step(p, lane, "m2n", x->m2n_tensors * cal->m2n_tensor_overhead_s, 0);
  for (guint i = 0; i < hp->len; i++) {
    const Proto *pr = &g_array_index(hp, Proto, i);
    if (pr->phase == RF_PHASE_EXPORT || pr->phase == RF_PHASE_BROADCAST) continue;
    emit(p, pr, st, 1.0, depth_hops(f, pr) * f->t_m2n + cal->message_latency_s, 0);
  }
}

/* Transfer time of the export on its busiest GPU link, uncontended. */
static double export_uncontended_s(const SimProtos *x, const Fill *f) {
  double unc = 0;
  for (int g = 0; g < x->ngpus; g++)
    for (int k = SIM_LINK_NVUP; k < SIM_HOST_LINKS; k++) {
      double bw =
          (k == SIM_LINK_NVUP || k == SIM_LINK_NVDN) ? f->per_gpu_nvl_Bps : f->per_gpu_nic_Bps;
      double v = x->load[((size_t)g * SIM_HOST_LINKS + k) * RF_PHASE_COUNT + RF_PHASE_EXPORT] / bw;
      if (v > unc) unc = v;
    }
  return unc;
}

/* Buckets: the export of bucket k+1 overlaps the broadcast of bucket k (two buffers). The first
 * bucket's export and the last bucket's broadcast stand alone; in between both run together
 * and share the links. */
static void add_gb_steps(SimProgram *p, const SimProtos *x, const RfCalibration *cal,
                         const GArray *hp, const Fill *f, int lane) {
  double bucket = rf_calibration_bucket_bytes(cal);
  double nb = ceil(p->gb_bytes / bucket);
  if (nb < 1) nb = 1;
  p->bucket_bytes = bucket;
  p->nbuckets = nb;
  double f1 = nb > 1 ? bucket / p->gb_bytes : 1.0;
  double flast = nb > 1 ? (p->gb_bytes - (nb - 1) * bucket) / p->gb_bytes : 1.0;
  /* GPU side of the export, uncontended: the collectives' NCCL latencies (one after another on
   * the stream), the packing copies and the transfer on the busiest GPU link. Host side: the
   * per-tensor Python time. With export.host_overlap (NeMo RL packed_tensor.py since 73e0c09d,
   * Megatron-Bridge since 9fc84370: no host sync per tensor, one per packed buffer, two buffers)
   * the host runs ahead and the export lasts the longer of the two; without it (a host sync per
   * tensor, the older code) software time and collective alternate, and the two add up. */
  double host = p->export_host_s,
         gpu_serial = p->export_latency_s - host + p->gb_bytes / f->copy_Bps;
  double unc = export_uncontended_s(x, f);
  gboolean hov = cal->export_host_overlap;
  double serial = hov ? MAX(host, gpu_serial) : host + gpu_serial;
  gboolean overlap = nb > 1 && cal->buffers >= 2;
  double fa = overlap ? f1 : 1.0, fc = overlap ? flast : 1.0;
  /* The first bucket's export (the whole export with one bucket) takes its latencies and host
   * time, overlapped or added as above, then its transfers: with host_overlap that errs slow by
   * at most the first bucket's transfer time. In the overlapped middle step both the export
   * flows and the broadcast flows that trail them are paced to the export's uncontended duration
   * (a rate bound per flow), and contention can only stretch it. */
  double pace =
      overlap ? (1 - fa) * (hov ? MAX(host, gpu_serial + unc) : host + gpu_serial + unc) : 0;
  p->export_pace_s = pace;
  int sa = sim_add_step(p, lane, "export-first", fa * serial, 0);
  int sb = overlap ? sim_add_step(p, lane, "export+broadcast", 0, 0) : -1;
  int sc = sim_add_step(p, lane, "broadcast-last", 0, fc * p->gb_bytes / f->copy_Bps);
  double calls_b = overlap ? nb - 1 : 0, calls_c = overlap ? 1 : nb;
  for (guint i = 0; i < hp->len; i++) {
    const Proto *pr = &g_array_index(hp, Proto, i);
    if (pr->phase == RF_PHASE_EXPORT) {
      double off = depth_hops(f, pr) * f->t_net;
      emit(p, pr, sa, fa, off, 0);
      if (sb >= 0) emit(p, pr, sb, 1 - fa, off, pace);
    } else if (pr->phase == RF_PHASE_BROADCAST) {
      double off = depth_hops(f, pr) * f->t_bcast + cal->message_latency_s;
      if (sb >= 0) emit(p, pr, sb, 1 - fc, off + calls_b * cal->collective_base_s, pace);
      emit(p, pr, sc, fc, off + calls_c * cal->collective_base_s, 0);
    }
  }
}

/* The flow program's load: the plan's per-phase GPU link bytes, weighted by each step's share. */
static double plan_load(const SimProgram *p, const void *ud, int s, int g, int k) {
  const SimProtos *x = ud;
  double v = 0;
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    v += (s < 0 ? 1.0 : p->frac[s][l]) *
         x->load[((size_t)g * SIM_HOST_LINKS + k) * RF_PHASE_COUNT + l];
  return v;
}

typedef struct {
  const SimProtos *x;
  const RfCalibration *cal;
  const GArray *hp;
  const Fill *f;
} GbArgs;

static void gb_steps_cb(SimProgram *p, int lane, void *ud) {
  const GbArgs *a = ud;
  add_gb_steps(p, a->x, a->cal, a->hp, a->f, lane);
}

SimProgram *sim_program_build(const SimProtos *x, const RfCalibration *cal, int group,
                              GError **error) {
  const RfTopology *t = x->plan->problem->topo;
  const int G = t->gpus_per_domain;
  if (group < 1 || G % group) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "sim: %d GPUs per simulated host does not divide the domain size %d", group, G);
    return NULL;
  }
  /* 1. hosts and their links */
  SimProgram *p = program_new(x, group);
  g_autofree int *slot_host = place_hosts(p, x);
  set_links(p, t, cal);

  /* 2. the records between hosts, and the pipeline fill of each hop */
  Fill f;
  fill_init(&f, p, x, cal);
  g_autoptr(GArray) hp = host_protos(x, group, slot_host, f.width);

  /* 3. steps per lane: setup, m2n, then the gather-broadcast buckets (a lane of their own when
   * a hybrid overlaps the two) */
  const gboolean exec = rf_variant_is_executor(cal->software, cal->variant);
  if (cal->software != RF_SOFTWARE_REFIT || exec) { /* published software, or the executor */
    GbArgs ga = {x, cal, hp, &f};
    gboolean ok = exec ? sw_exec_build(p, x, cal, slot_host, error)
                  : cal->software == RF_SOFTWARE_NEMO_RL
                      ? sw_nemo_rl_build(p, x, cal, slot_host, gb_steps_cb, &ga, error)
                      : sw_nccl_m2n_build(p, x, cal, slot_host, error);
    if (!ok) {
      sim_program_free(p);
      return NULL;
    }
    /* the executor's come sorted (sw_exec_build) */
    if (!exec && p->flows->len > 1) qsort(p->flows->data, p->flows->len, sizeof(SimFlow), cmp_flow);
    if (!exec) sw_group_scales(p); /* the executor: one host per GPU, links as they are */
    return p;
  }
  int lane_m2n = 0, lane_gb = 0;
  p->nlanes = 1;
  if (x->has_gb && x->has_m2n && cal->hybrid_overlap) lane_gb = 1, p->nlanes = 2;
  if (cal->fixed_s > 0) /* per-refit software time before any byte moves; every lane waits */
    for (int l = 0; l < p->nlanes; l++)
      sim_add_step(p, l, "setup", cal->fixed_s, 0);
  if (x->has_m2n) add_m2n_step(p, x, cal, hp, &f, lane_m2n);
  if (x->has_gb) add_gb_steps(p, x, cal, hp, &f, lane_gb);
  if (p->flows->len > 1) qsort(p->flows->data, p->flows->len, sizeof(SimFlow), cmp_flow);

  /* 4. group factors */
  sim_group_scales(p, x->ngpus, plan_load, x);
  return p;
}

void sim_program_free(SimProgram *p) {
  if (!p) return;
  g_free(p->host_gpu);
  g_free(p->host_ngpus);
  g_free(p->host_leaf);
  g_free(p->link_scale);
  g_free(p->step_scale);
  g_free(p->sw_load);
  g_free(p->steps);
  g_free(p->frac);
  if (p->exec) {
    g_free(p->exec->host);
    g_free(p->exec->round_first);
    g_free(p->exec->rounds);
    rf_bigvec_free(p->exec->sends); /* refit_executor.c's exec_build */
    g_free(p->exec->self_s);
    g_free(p->exec->prog_first);
    g_free(p->exec->prog);
    g_free(p->exec);
  }
  g_array_free(p->flows, TRUE);
  g_free(p);
}
