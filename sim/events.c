/* refit's executor programs (SimProgram.exec, sim/models/refit_executor.c) run by a discrete-event
 * simulation of their own instead of SimGrid: the "events" engine.
 *
 * Why: SimGrid pays about 17 us of CPU per message start or end on these programs (simcalls,
 * mailbox matching, the max-min re-solve), so Kimi K3's 13 M messages on 2,048 + 1,024 GPUs take an
 * hour on hosts of 8 GPUs (docs/sim.md, Speed). This engine runs the same programs, one unit per
 * rank (or per simulated host), with the same semantics as engine.c's rank_actor:
 * - PACK r / UNPACK r add the round's copies to the time the unit owes (slept before its next
 *   post or wait, as the actor's sleeps);
 * - POST r pays the launch and what is owed, waits (on the one communication stream) for the
 *   groups still moving and their self-send copies, then posts the round's sends and receives;
 * - a message starts when both its ends have posted their round (NCCL's send / receive
 *   rendezvous, SimGrid's mailbox match), moves after its route's latency, and ends when its
 *   bytes are through;
 * - WAIT r blocks until every send and receive of the round has ended, and its self-send copy
 *   (SimExec.self_s) from its post.
 * The sharing is max-min, as SimGrid's (weighted as its CM02 model weighs it, by 1 / a message's
 * route latency), but solved locally: once every event of one time has run, the messages on the
 * links where messages started or ended at that time and those within two more link hops (the
 * hops stop once EV_CAP are in; a hop brings every message of its links) get max-min rates by
 * progressive filling over their links, the capacity the messages outside the solve use held
 * fixed; a message whose rate comes out the same keeps its end. SimGrid re-solves what a change
 * touches through any chain of shared links; a change this engine does not reach leaves a message
 * at its old rate until an event on one of its links. On the four reported configurations the two
 * give the same times within 1e-5 on one communicator and 1.5e-3 on lane communicators, where a
 * change of 1e-9 in the NIC efficiency moves a prediction by up to 7.9e-4 (docs/sim.md "The events
 * engine"; test /sim/executor/events-engine checks them on small plans), at a few microseconds an
 * event instead of SimGrid's tens: Kimi K3 m2n on 2,048 + 1,024 GB200 GPUs, on lane communicators
 * (refit run's default), 40.7 M events in 62-110 s (docs/sim.md "The executor's simulation speed").
 */
#include "error.h"
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define EV_NONE UINT32_MAX
#define EV_MAX_ROUTE 6          /* sim_route's longest: HBM, NIC, two leaf links, NIC, HBM */
#define EV_PROGRESS_US 10000000 /* a progress line every 10 s of wall time */
/* The local solve: the messages on the changed links and those within EV_DEPTH - 1 more link
 * hops, until EV_CAP are in (docs/sim.md "The events engine": at depth 1 DeepSeek-V3 GB200 m2n
 * was 0.29% slower than SimGrid's exact model; at 2 the four reported configurations came within
 * 1e-4 of it, at 3 within 1e-5; at 3 hops without a cap Kimi K3's first groups, every rank in
 * flight at once, solved up to 3,576 messages an event and took 45 s; capped at 64, the same
 * prediction to 1e-7 in 25 s) */
#define EV_DEPTH 3
#define EV_CAP 64

enum { U_RUN, U_SLEEP, U_BLOCK_POST, U_BLOCK_WAIT, U_DONE };

/* A growing array of message or link indices, pushed inline (GArray's append is a call and a
 * memcpy per element: 6% of DeepSeek-V3's whole run under cachegrind, in the local solve). */
typedef struct {
  uint32_t *a;
  uint32_t n, cap;
} Ids;

static void ids_reserve(Ids *v, uint32_t n) {
  if (n <= v->cap) return;
  v->cap = MAX(n, 2 * v->cap);
  v->a = g_renew(uint32_t, v->a, v->cap);
}

static inline void ids_push(Ids *v, uint32_t x) {
  if (v->n == v->cap) ids_reserve(v, v->n + 256);
  v->a[v->n++] = x;
}

/* A message in one cache line: what a local solve reads of the messages it takes in (rate,
 * weight, route, bytes left) and what an event changes; where it sits on its links and its ends
 * apart (MsgCold). Kimi K3's m2n keeps 34 k records: 2.2 MB, not the 4.3 MB of the 128-byte
 * record before, whose loads were a quarter of its engine time. Whether a message is in the
 * solve is a stamp in the record: the solve loads the record of every message it takes in, and a
 * stamp array beside it was a second cache miss each (a moving message is in no list, so the
 * stamp shares the list link's word). */
typedef struct {
  double rate;      /* bytes/s */
  double w;         /* sharing weight: 1 / its route's latency (1 without latency) */
  double rem, last; /* bytes left, time rem was last brought up to date */
  int32_t links[EV_MAX_ROUTE];
  uint8_t nlinks, lane_src, lane_dst;
  uint8_t moving; /* its latency paid: on its links */
  union {
    uint32_t next; /* not moving: pending list (per receiving unit-round) or free list */
    uint32_t st;   /* moving: the last solve that took it in (Ev.stamp) */
  };
} Msg;
G_STATIC_ASSERT(sizeof(Msg) == 64);

typedef struct {
  int32_t src, dst;          /* units */
  uint32_t at[EV_MAX_ROUTE]; /* position in each link's list */
} MsgCold;

typedef struct {
  uint32_t *flow; /* messages moving on the link */
  uint32_t n, cap;
  double Bps;
  double used;   /* the rates of the messages on it, summed as they change (0 once it is empty) */
  double res;    /* local solve: capacity left to the messages being solved */
  double wsum;   /* local solve: weight of those not yet fixed */
  uint32_t cnt;  /* local solve: how many of them */
  uint32_t pos;  /* local solve: its index in Lam (and in Sh) */
  uint32_t fill; /* local solve: where its next message goes in Sol */
  uint8_t dirty; /* a message started or ended on it at the current time: in Ev.dirty */
} Link;

typedef struct {
  uint64_t pc, end;   /* program ops [pc, end) */
  uint64_t r0;        /* first of its rounds in exec->rounds */
  uint32_t next;      /* its next round (relative to r0) */
  uint8_t state, sub; /* POST / WAIT: 0 to start, 1 paid what was owed, 2 the self-copy slept */
  uint8_t block_lane;
  double owed;
  uint64_t moving;   /* lanes with groups in flight on the one stream */
  uint32_t *cur;     /* per lane: the round in flight (relative) */
  uint32_t *left;    /* per lane: sends and receives of that round not yet ended */
  uint32_t *nposted; /* per lane: sends and receives the round posted (the actor's comms) */
  double *posted, *done_at;
} Unit;

typedef struct {
  double key; /* the event's time */
  uint32_t h; /* its handle */
} HEnt;

typedef struct {
  const SimProgram *p;
  const SimExec *e;
  int nlanes;
  Unit *u;
  Link *l;
  int nlinks;
  Msg *m;
  MsgCold *mc; /* beside m */
  uint32_t nm, mcap, mfree;
  uint32_t *pending;     /* per unit-round: messages waiting for that round's post */
  uint8_t *round_posted; /* per unit-round: 0, or its lane + 1 once posted */
  /* indexed binary heap of handles: unit u is handle u, message i is handle nunits + i; each
   * entry holds its time (a comparison reads the entry, not a second array by handle) */
  HEnt *heap;
  uint32_t nheap, hcap;
  uint32_t *hpos; /* per handle: position in heap (EV_NONE: not there) */
  uint32_t hposcap;
  uint32_t stamp;
  uint32_t *lst;  /* per link: the last solve that took it in */
  Ids F, Lam;     /* local solve: messages and links */
  double *Sh;     /* local solve: per link of Lam, its share (INFINITY once none is left) */
  uint32_t shcap; /* Sh's room */
  Ids dirty;      /* links whose messages changed at the current time, not yet solved */
  Ids Off, Sol;   /* local solve: per link of Lam, its messages in the solve: Sol[Off[a] ..] */
  uint64_t solves, solved, solved_max, searched; /* searched: links read by the fill's search */
  double now;
  SimOutcome *out;
  int progress_unit;
  gint64 wall0, shown;
  uint64_t events;
} Ev;

/* ---- the heap ---- */

/* Earlier time first; equal times, the lower handle first. */
static inline gboolean h_less(const HEnt *a, const HEnt *b) {
  return a->key < b->key || (a->key == b->key && a->h < b->h);
}

static void h_up(Ev *v, uint32_t i) {
  const HEnt x = v->heap[i];
  while (i > 0) {
    const uint32_t parent = (i - 1) / 2;
    if (!h_less(&x, &v->heap[parent])) break;
    v->heap[i] = v->heap[parent];
    v->hpos[v->heap[i].h] = i;
    i = parent;
  }
  v->heap[i] = x;
  v->hpos[x.h] = i;
}

static void h_down(Ev *v, uint32_t i) {
  const HEnt x = v->heap[i];
  for (;;) {
    const uint32_t a = 2 * i + 1, b = a + 1;
    if (a >= v->nheap) break;
    const uint32_t c = b < v->nheap && h_less(&v->heap[b], &v->heap[a]) ? b : a;
    if (!h_less(&v->heap[c], &x)) break;
    v->heap[i] = v->heap[c];
    v->hpos[v->heap[i].h] = i;
    i = c;
  }
  v->heap[i] = x;
  v->hpos[x.h] = i;
}

static void h_grow_handles(Ev *v, uint32_t need) {
  if (need <= v->hposcap) return;
  uint32_t cap = MAX(need, v->hposcap * 2);
  v->hpos = g_renew(uint32_t, v->hpos, cap);
  for (uint32_t i = v->hposcap; i < cap; i++)
    v->hpos[i] = EV_NONE;
  v->hposcap = cap;
}

/* Handle h's event at time t (placed, or moved if it had one). */
static void h_set(Ev *v, uint32_t h, double t) {
  uint32_t i = v->hpos[h];
  if (i == EV_NONE) {
    if (v->nheap == v->hcap) {
      v->hcap = v->hcap ? 2 * v->hcap : 1024;
      v->heap = g_renew(HEnt, v->heap, v->hcap);
    }
    i = v->nheap++;
    v->heap[i] = (HEnt){t, h};
    h_up(v, i);
    return;
  }
  const double old = v->heap[i].key;
  v->heap[i].key = t;
  if (t < old)
    h_up(v, i);
  else
    h_down(v, i);
}

/* The earliest event: its handle, its time in *t. */
static uint32_t h_pop(Ev *v, double *t) {
  const uint32_t h = v->heap[0].h;
  *t = v->heap[0].key;
  v->hpos[h] = EV_NONE;
  if (--v->nheap) {
    v->heap[0] = v->heap[v->nheap];
    h_down(v, 0);
  }
  return h;
}

/* ---- messages and links ---- */

static uint32_t msg_new(Ev *v) {
  uint32_t i;
  if (v->mfree != EV_NONE) {
    i = v->mfree;
    v->mfree = v->m[i].next;
  } else {
    if (v->nm == v->mcap) {
      const uint32_t cap = v->mcap ? 2 * v->mcap : 4096;
      Msg *m = g_aligned_alloc(cap, sizeof(Msg), 64); /* a record on one whole cache line */
      if (v->nm) memcpy(m, v->m, sizeof(Msg) * v->nm);
      g_aligned_free(v->m);
      v->m = m;
      v->mc = g_renew(MsgCold, v->mc, cap);
      v->mcap = cap;
    }
    i = v->nm++;
    h_grow_handles(v, (uint32_t)v->e->nranks + v->nm);
  }
  memset(&v->m[i], 0, sizeof v->m[i]);
  memset(&v->mc[i], 0, sizeof v->mc[i]);
  v->m[i].next = EV_NONE;
  return i;
}

static void msg_free(Ev *v, uint32_t i) {
  v->m[i].next = v->mfree;
  v->mfree = i;
}

static uint32_t msg_handle(const Ev *v, uint32_t i) {
  return (uint32_t)v->e->nranks + i;
}

static uint32_t stamp_start; /* sim_events_set_stamp_start (tests) */

void sim_events_set_stamp_start(uint32_t first) {
  stamp_start = first;
}

/* Room for a solve's two stamps (its own and its fixed messages'): at the 32-bit stamp's end, the
 * links' and the moving messages' stamps go back to 0 and so does the count (2^31 solves: never
 * yet, but then not a stamp taken for a later one's). */
static void stamp_room(Ev *v) {
  if (v->stamp < UINT32_MAX - 2) return;
  for (int l = 0; l < v->nlinks; l++) {
    v->lst[l] = 0;
    for (uint32_t j = 0; j < v->l[l].n; j++)
      v->m[v->l[l].flow[j]].st = 0;
  }
  v->stamp = 0;
}

/* Max-min rates of the messages within EV_DEPTH link hops of the changed links, weighted as
 * SimGrid's CM02 weights them (a message's share of a link in proportion to 1 / its route's
 * latency: its sharing penalty is that latency, network_cm02.cpp; equal where the latencies are,
 * as on a fabric without oversubscribed leaves): progressive filling over their links, the
 * capacity the other messages on those links use held fixed; the ends of those whose rate changed
 * moved. */
static void rerate(Ev *v, const uint32_t *links, uint32_t n) {
  stamp_room(v);
  const uint32_t st = ++v->stamp;
  Ids *F = &v->F, *Lam = &v->Lam;
  uint32_t *lst = v->lst;
  F->n = Lam->n = 0;
  for (uint32_t k = 0; k < n; k++) {
    if (lst[links[k]] == st) continue;
    lst[links[k]] = st;
    ids_push(Lam, links[k]);
  }
  uint32_t from = 0; /* links whose messages join */
  for (int d = 0; d < EV_DEPTH && (d == 0 || F->n < EV_CAP); d++) {
    const uint32_t to = Lam->n;
    for (uint32_t a = from; a < to; a++) {
      const Link *L = &v->l[Lam->a[a]];
      for (uint32_t j = 0; j < L->n; j++) {
        /* the records of a link's messages are scattered: each a cache miss, taken a few at a
         * time (the load of the route was a quarter of Kimi K3's engine time) */
        if (j + 6 < L->n) __builtin_prefetch(&v->m[L->flow[j + 6]]);
        const uint32_t i = L->flow[j];
        Msg *g = &v->m[i];
        if (g->st == st) continue;
        g->st = st;
        ids_push(F, i);
        for (int q = 0; q < g->nlinks; q++) {
          if (lst[g->links[q]] == st) continue;
          lst[g->links[q]] = st;
          ids_push(Lam, (uint32_t)g->links[q]);
        }
      }
    }
    from = to;
  }
  const uint32_t *f = F->a, nf = F->n;
  uint32_t *lam = Lam->a, nl = Lam->n;
  /* capacity left on each link by the messages outside the solve: what all its messages use
   * less what those in the solve do (every link of a message in the solve is in Lam); and the
   * solve's messages of each link, by its place in Lam (off, Sol: the fill below visits those,
   * not every message on the link) */
  ids_reserve(&v->Off, nl + 1);
  uint32_t *off = v->Off.a;
  for (uint32_t a = 0; a < nl; a++) {
    Link *L = &v->l[lam[a]];
    L->res = L->Bps - L->used;
    L->wsum = 0;
    L->cnt = 0;
    L->pos = a;
  }
  uint32_t nsol = 0;
  for (uint32_t j = 0; j < nf; j++) {
    const Msg *g = &v->m[f[j]];
    for (int q = 0; q < g->nlinks; q++) {
      Link *L = &v->l[g->links[q]];
      L->res += g->rate;
      L->cnt++;
      L->wsum += g->w;
    }
    nsol += g->nlinks;
  }
  off[0] = 0;
  for (uint32_t a = 0; a < nl; a++) {
    Link *L = &v->l[lam[a]];
    L->fill = off[a];
    off[a + 1] = off[a] + L->cnt;
  }
  ids_reserve(&v->Sol, nsol);
  uint32_t *sol = v->Sol.a;
  for (uint32_t j = 0; j < nf; j++) {
    const Msg *g = &v->m[f[j]];
    for (int q = 0; q < g->nlinks; q++)
      sol[v->l[g->links[q]].fill++] = f[j];
  }
  v->solves++;
  v->solved += nf;
  v->solved_max = MAX(v->solved_max, nf);
  const uint32_t fx = ++v->stamp; /* a fixed message carries this stamp */
  /* each link's share (bytes/s per unit of weight), kept dense beside Lam and recomputed only
   * where a fixed message changed it: the search for the smallest reads one array (the same
   * values and the same first-smallest as computing each from its link at every step) */
  if (nl > v->shcap) {
    v->shcap = MAX(nl, 2 * v->shcap);
    v->Sh = g_renew(double, v->Sh, v->shcap);
  }
  double *sh = v->Sh;
  uint32_t dead = 0; /* links of Lam with none of the solve's messages left (share INFINITY) */
  for (uint32_t a = 0; a < nl; a++) {
    const Link *L = &v->l[lam[a]];
    sh[a] = L->cnt ? MAX(L->res, 0) / L->wsum : INFINITY;
    dead += !L->cnt;
  }
  for (uint32_t left = nf; left;) {
    if (dead > 8 && 2 * dead > nl) { /* the search reads only links with messages left: the
                                        others dropped, in order (the same first-smallest) */
      uint32_t w = 0;
      for (uint32_t a = 0; a < nl; a++)
        if (sh[a] < INFINITY) {
          sh[w] = sh[a];
          lam[w] = lam[a];
          off[w] = off[a];
          v->l[lam[w]].pos = w;
          w++;
        }
      nl = w;
      dead = 0;
    }
    double share = INFINITY;
    guint at = 0;
    v->searched += nl;
    for (uint32_t a = 0; a < nl; a++)
      if (sh[a] < share) {
        share = sh[a];
        at = a;
      }
    g_assert(share < INFINITY);
    const Link *A = &v->l[lam[at]];
    const double floor = 1e-9 * A->Bps;
    for (uint32_t k = off[at]; k < A->fill; k++) { /* fill: the end of its messages in sol */
      const uint32_t i = sol[k];
      Msg *g = &v->m[i];
      if (g->st != st) continue; /* fixed */
      g->st = fx;
      /* never stalled: a floor far below any rate (links are checked > 0 at the start) */
      const double rate = MAX(g->w * share, floor), delta = rate - g->rate;
      left--;
      /* a rate the solve gives again (to rounding: 1e-12 of it) stays, and so do its bytes left
       * and its end: on DeepSeek-V3's m2n six in ten of the messages solved */
      const gboolean moved = fabs(delta) > 1e-12 * rate;
      if (moved) { /* bytes left brought up to date at the old rate */
        g->rem -= g->rate * (v->now - g->last);
        if (g->rem < 0) g->rem = 0;
        g->last = v->now;
        g->rate = rate;
      }
      for (int q = 0; q < g->nlinks; q++) {
        Link *Q = &v->l[g->links[q]];
        if (moved) Q->used += delta;
        Q->res -= g->rate;
        Q->wsum -= g->w;
        if (--Q->cnt)
          sh[Q->pos] = MAX(Q->res, 0) / Q->wsum;
        else {
          sh[Q->pos] = INFINITY;
          dead++;
        }
      }
      if (moved) h_set(v, msg_handle(v, i), v->now + g->rem / rate);
    }
  }
}

static void link_add(Ev *v, uint32_t i) {
  Msg *g = &v->m[i];
  g->st = 0; /* in no list now: below every solve's stamp */
  for (int k = 0; k < g->nlinks; k++) {
    Link *L = &v->l[g->links[k]];
    if (L->n == L->cap) {
      L->cap = L->cap ? 2 * L->cap : 4;
      L->flow = g_renew(uint32_t, L->flow, L->cap);
    }
    v->mc[i].at[k] = L->n;
    L->flow[L->n++] = i;
  }
}

static void link_remove(Ev *v, uint32_t i) {
  Msg *g = &v->m[i];
  for (int k = 0; k < g->nlinks; k++) {
    Link *L = &v->l[g->links[k]];
    L->used = L->n > 1 ? L->used - g->rate : 0; /* empty: no rounding left behind */
    uint32_t pos = v->mc[i].at[k], last = L->flow[--L->n];
    L->flow[pos] = last;
    Msg *o = &v->m[last];
    for (int q = 0; q < o->nlinks; q++) /* the moved message's slot on this link */
      if (o->links[q] == g->links[k] && v->mc[last].at[q] == L->n) {
        v->mc[last].at[q] = pos;
        break;
      }
  }
}

/* Links whose set of moving messages changed at the current time: one local solve over all of
 * them once every event of that time has run (flush), instead of a solve per message starting or
 * ending. The messages of a group start together, a route's latency after their post, and many
 * end together: the solve per event was most of the engine's time. Nothing that runs at the same
 * time reads a rate, so the rates from the time on are those of a solve over every change. */
static void mark_dirty(Ev *v, const int32_t *links, int n) {
  for (int k = 0; k < n; k++) {
    Link *L = &v->l[links[k]];
    if (L->dirty) continue;
    L->dirty = 1;
    ids_push(&v->dirty, (uint32_t)links[k]);
  }
}

static void flush(Ev *v) {
  rerate(v, v->dirty.a, v->dirty.n);
  for (uint32_t k = 0; k < v->dirty.n; k++)
    v->l[v->dirty.a[k]].dirty = 0;
  v->dirty.n = 0;
}

/* Both ends have posted: the message pays its route's latency, then moves. */
static void msg_start(Ev *v, uint32_t i) {
  Msg *g = &v->m[i];
  double lat;
  int route[8];
  const int n =
      sim_exec_route(v->p, v->e->host[v->mc[i].src], v->e->host[v->mc[i].dst], route, &lat);
  g_assert(n <= EV_MAX_ROUTE);
  g->nlinks = (uint8_t)n;
  for (int k = 0; k < n; k++)
    g->links[k] = route[k];
  g->w = lat > 0 ? 1 / lat : 1; /* SimGrid's penalty: the latency, or 1 without one */
  g->moving = 0;
  g->last = v->now;
  h_set(v, msg_handle(v, i), v->now + lat);
}

static void unit_ready(Ev *v, int u) {
  v->u[u].state = U_RUN;
  h_set(v, (uint32_t)u, v->now);
}

/* One send or receive of unit u's round on lane has ended. */
static void unit_end_one(Ev *v, int u, int lane) {
  Unit *U = &v->u[u];
  U->left[lane]--;
  if (U->state == U_BLOCK_WAIT && U->block_lane == lane && !U->left[lane]) unit_ready(v, u);
  if (U->state == U_BLOCK_POST) {
    gboolean all = TRUE;
    for (uint64_t m = U->moving; m && all; m &= m - 1)
      all = U->left[__builtin_ctzll(m)] == 0;
    if (all) unit_ready(v, u);
  }
}

static void msg_event(Ev *v, uint32_t i) {
  Msg *g = &v->m[i];
  if (!g->moving) { /* its latency is paid */
    g->moving = 1;
    g->last = v->now;
    g->rate = 0;
    if (!g->nlinks) { /* nothing can slow it: done now */
      h_set(v, msg_handle(v, i), v->now);
      g->rem = 0;
      return;
    }
    link_add(v, i);
    mark_dirty(v, g->links, g->nlinks);
    return;
  }
  /* it has ended */
  int32_t links[EV_MAX_ROUTE];
  int n = g->nlinks;
  memcpy(links, g->links, sizeof(int32_t) * (size_t)n);
  const int src = v->mc[i].src, dst = v->mc[i].dst, ls = g->lane_src, ld = g->lane_dst;
  if (n) link_remove(v, i);
  msg_free(v, i);
  mark_dirty(v, links, n);
  unit_end_one(v, src, ls);
  unit_end_one(v, dst, ld);
}

/* ---- units: engine.c's rank_actor as a state machine ---- */

/* The index in exec->rounds of unit u's round `round` (it takes part in it): a galloping search
 * from the unit's next round, near which a peer's rounds fall (a binary search over all of them
 * missed the cache at its probes: 13% of Kimi K3's p2p run; the engine's 30.0 s -> 26.4 s, the
 * same prediction). */
static uint64_t unit_round(const Ev *v, int u, int round) {
  const SimExec *e = v->e;
  const uint64_t first = e->round_first[u], end = e->round_first[u + 1];
  uint64_t at = MIN(first + v->u[u].next, end - 1), lo, hi;
  if (e->rounds[at].round < round) { /* ahead: [at + 1, end) */
    uint64_t step = 1;
    lo = at + 1;
    while (lo + step < end && e->rounds[lo + step - 1].round < round) {
      lo += step;
      step *= 2;
    }
    hi = MIN(lo + step, end);
  } else { /* at or behind: [first, at] */
    uint64_t step = 1;
    hi = at + 1;
    while (hi - first > step && e->rounds[hi - step - 1].round >= round) {
      hi -= step;
      step *= 2;
    }
    lo = hi - first > step ? hi - step - 1 : first;
  }
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (e->rounds[mid].round < round)
      lo = mid + 1;
    else
      hi = mid;
  }
  g_assert(lo < end && e->rounds[lo].round == round);
  return lo;
}

/* sim_exec_self_end of the group unit u has in flight on the lane. */
static double self_end(const Ev *v, int u, int lane) {
  const Unit *U = &v->u[u];
  return sim_exec_self_end(v->e, U->r0 + U->cur[lane], U->posted[lane]);
}

static void post_round(Ev *v, int u, int lane) {
  Unit *U = &v->u[u];
  const SimExec *e = v->e;
  const uint64_t ri = U->r0 + U->cur[lane];
  const SimExecRound *r = &e->rounds[ri];
  U->posted[lane] = v->now;
  SimOutcome *o = v->out;
  if (!o->step_start_s[r->step] || v->now < o->step_start_s[r->step])
    o->step_start_s[r->step] = v->now;
  U->left[lane] += r->nrecv + r->nsend;
  U->nposted[lane] = r->nrecv + r->nsend;
  /* the receives: messages waiting for this post start now */
  v->round_posted[ri] = (uint8_t)(lane + 1);
  for (uint32_t i = v->pending[ri]; i != EV_NONE;) {
    uint32_t nx = v->m[i].next;
    v->m[i].next = EV_NONE;
    v->m[i].lane_dst = (uint8_t)lane;
    msg_start(v, i);
    i = nx;
  }
  v->pending[ri] = EV_NONE;
  for (uint32_t k = 0; k < r->nsend; k++) {
    const SimExecSend *sd = &e->sends[r->send_first + k];
    uint32_t i = msg_new(v);
    Msg *g = &v->m[i];
    v->mc[i].src = u;
    v->mc[i].dst = sd->peer;
    g->rem = (double)(long)(sd->bytes + 0.5);
    g->lane_src = (uint8_t)lane;
    uint64_t di = unit_round(v, sd->peer, r->round);
    if (v->round_posted[di]) { /* the receiver's lane of that round, + 1 */
      g->lane_dst = (uint8_t)(v->round_posted[di] - 1);
      msg_start(v, i);
    } else {
      g->next = v->pending[di];
      v->pending[di] = i;
    }
  }
  if ((U->nposted[lane] || self_end(v, u, lane) > v->now) && !e->lane_comms)
    U->moving |= UINT64_C(1) << lane;
}

/* Sleeps what unit u owes; TRUE when it has gone to sleep (resume at the same op). */
static gboolean pay(Ev *v, int u) {
  Unit *U = &v->u[u];
  if (U->owed <= 0) return FALSE;
  U->state = U_SLEEP;
  h_set(v, (uint32_t)u, v->now + U->owed);
  U->owed = 0;
  return TRUE;
}

static void show_progress(Ev *v, int done, int n) {
  gint64 t = g_get_monotonic_time();
  if (t - v->shown < EV_PROGRESS_US) return;
  v->shown = t;
  fprintf(
      stderr, "refit sim: executor (events): %s %d at group %d of %d, %.3f s simulated (%.0f s)\n",
      v->p->group > 1 ? "host" : "rank", v->progress_unit, done, n, v->now, (t - v->wall0) / 1e6);
  fflush(stderr);
}

/* Runs unit u's program from where it stands until it sleeps, blocks or ends. */
static void unit_run(Ev *v, int u) {
  Unit *U = &v->u[u];
  const SimExec *e = v->e;
  U->state = U_RUN;
  while (U->pc < U->end) {
    const RfSchedOp *op = &e->prog[U->pc];
    const int lane = op->lane;
    switch ((RfSchedOpKind)op->kind) {
    case RF_SOP_PACK: {
      g_assert(U->r0 + U->next < e->round_first[u + 1]);
      U->cur[lane] = U->next++;
      const SimExecRound *r = &e->rounds[U->r0 + U->cur[lane]];
      g_assert(r->round == op->round);
      if (r->pack_s > 0) U->owed += r->pack_s;
      break;
    }
    case RF_SOP_POST:
      if (U->sub == 0) {
        if (e->launch_s > 0) U->owed += e->launch_s;
        U->sub = 1;
        if (pay(v, u)) return;
      }
      if (U->sub == 1) {
        for (uint64_t m = U->moving; m; m &= m - 1)
          if (U->left[__builtin_ctzll(m)]) {
            U->state = U_BLOCK_POST;
            return;
          }
        /* the groups' self-send copies too, slept once (sub 2: a wake-up a rounding short of
         * the end would otherwise sleep again, and again, at one time) */
        for (uint64_t m = U->moving; m; m &= m - 1)
          U->owed = MAX(U->owed, self_end(v, u, __builtin_ctzll(m)) - v->now);
        U->sub = 2;
        if (pay(v, u)) return;
      }
      for (uint64_t m = U->moving; m; m &= m - 1) {
        const int l = __builtin_ctzll(m);
        U->nposted[l] = 0;
        U->done_at[l] = v->now;
      }
      U->moving = 0;
      post_round(v, u, lane);
      U->sub = 0;
      break;
    case RF_SOP_WAIT: {
      if (U->sub == 0) {
        U->sub = 1;
        if (pay(v, u)) return;
      }
      if (U->sub == 1) {
        if (U->nposted[lane]) {
          if (U->left[lane]) {
            U->state = U_BLOCK_WAIT;
            U->block_lane = (uint8_t)lane;
            return;
          }
          U->nposted[lane] = 0;
          U->done_at[lane] = v->now;
        }
        /* the group's self-send copy, slept once (sub 2, as in POST) */
        U->owed = MAX(0.0, self_end(v, u, lane) - v->now);
        U->sub = 2;
        if (pay(v, u)) return;
      }
      U->sub = 0;
      U->moving &= ~(UINT64_C(1) << lane);
      const SimExecRound *r = &e->rounds[U->r0 + U->cur[lane]];
      double end = MAX(U->done_at[lane], U->posted[lane]);
      for (uint32_t k = 0; k < r->nsend; k++)
        sim_outcome_phase(v->out, e->sends[r->send_first + k].phase, U->posted[lane], end);
      if (u == v->progress_unit)
        show_progress(v, (int)U->cur[lane] + 1, (int)(e->round_first[u + 1] - U->r0));
      break;
    }
    case RF_SOP_UNPACK: {
      const SimExecRound *r = &e->rounds[U->r0 + U->cur[lane]];
      if (r->unpack_s > 0) U->owed += r->unpack_s;
      double t = v->now + U->owed;
      if (t > v->out->step_end_s[r->step]) v->out->step_end_s[r->step] = t;
      break;
    }
    }
    U->pc++;
  }
  if (pay(v, u)) return; /* the last unpack ends the unit's refit */
  U->state = U_DONE;
}

gboolean sim_events_run(const SimProgram *p, SimOutcome *out, GError **error) {
  const SimExec *e = p->exec;
  sim_outcome_start(out, p->nsteps);
  if (!e) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "sim: the events engine runs refit's executor programs only");
    return FALSE;
  }
  Ev v = {.p = p, .e = e, .out = out, .mfree = EV_NONE, .progress_unit = -1, .stamp = stamp_start};
  for (uint64_t i = 0; i < e->prog_first[e->nranks]; i++)
    v.nlanes = MAX(v.nlanes, e->prog[i].lane + 1);
  v.nlanes = MAX(v.nlanes, 1);
  if (v.nlanes > SIM_MAX_LANES) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "sim: at most %d lanes", SIM_MAX_LANES);
    return FALSE;
  }
  v.nlinks = sim_nlinks(p);
  v.l = g_new0(Link, v.nlinks);
  for (int l = 0; l < v.nlinks; l++) {
    v.l[l].Bps = sim_link_Bps(p, l);
    if (!(v.l[l].Bps > 0)) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "sim: events engine: link %d has no bandwidth",
                  l);
      g_free(v.l);
      return FALSE;
    }
  }
  const uint64_t nrounds = e->round_first[e->nranks];
  v.pending = g_new(uint32_t, nrounds + 1);
  for (uint64_t i = 0; i <= nrounds; i++)
    v.pending[i] = EV_NONE;
  v.round_posted = g_new0(uint8_t, nrounds + 1);
  v.lst = g_new0(uint32_t, v.nlinks ? v.nlinks : 1);
  const int nu = e->nranks;
  v.u = g_new0(Unit, nu);
  g_autofree uint32_t *ubuf = g_new0(uint32_t, (size_t)nu * v.nlanes * 3);
  g_autofree double *dbuf = g_new0(double, (size_t)nu *v.nlanes * 2);
  h_grow_handles(&v, (uint32_t)nu + 1024);
  v.wall0 = v.shown = g_get_monotonic_time();
  uint64_t most = 0;
  for (int u = 0; u < nu; u++) {
    Unit *U = &v.u[u];
    U->cur = ubuf + (size_t)u * v.nlanes * 3;
    U->left = U->cur + v.nlanes;
    U->nposted = U->left + v.nlanes;
    U->posted = dbuf + (size_t)u * v.nlanes * 2;
    U->done_at = U->posted + v.nlanes;
    U->pc = e->prog_first[u];
    U->end = e->prog_first[u + 1];
    U->r0 = e->round_first[u];
    U->owed = e->setup_s > 0 ? e->setup_s : 0;
    if (e->host[u] < 0 || U->pc == U->end) {
      U->state = U_DONE;
      continue;
    }
    if (p->progress && e->round_first[u + 1] - e->round_first[u] > most) {
      most = e->round_first[u + 1] - e->round_first[u];
      v.progress_unit = u;
    }
    U->state = U_RUN;
    h_set(&v, (uint32_t)u, 0);
  }
  while (v.nheap || v.dirty.n) {
    if (v.dirty.n && (!v.nheap || v.heap[0].key > v.now)) {
      flush(&v);
      continue;
    }
    const uint32_t h = h_pop(&v, &v.now);
    if (v.nheap) { /* the next event's record, loading while this one runs */
      const uint32_t x = v.heap[0].h;
      if (x < (uint32_t)nu) {
        __builtin_prefetch(&v.u[x]);
        __builtin_prefetch(&e->prog[v.u[x].pc]);
      } else {
        __builtin_prefetch(&v.m[x - (uint32_t)nu]);
        __builtin_prefetch(&v.mc[x - (uint32_t)nu]);
      }
    }
    v.events++;
    if (h < (uint32_t)nu) {
      if (v.u[h].state != U_DONE) unit_run(&v, (int)h);
    } else {
      msg_event(&v, h - (uint32_t)nu);
    }
  }
  out->total_s = v.now;
  gboolean ok = TRUE;
  for (int u = 0; u < nu && ok; u++)
    if (v.u[u].state != U_DONE) {
      g_set_error(error, RF_ERROR, RF_ERROR_VERIFY,
                  "sim: events engine: unit %d stopped before the end of its program (a round "
                  "whose peer never posted)",
                  u);
      ok = FALSE;
    }
  if (g_getenv("REFIT_SIM_VERBOSE"))
    g_printerr(
        "sim: events engine: %" G_GUINT64_FORMAT " events, %u message records, %" G_GUINT64_FORMAT
        " solves of %.1f messages (most %" G_GUINT64_FORMAT "), %.1f links searched a solve, "
        "%.2f s\n",
        v.events, v.nm, v.solves, v.solves ? (double)v.solved / v.solves : 0.0, v.solved_max,
        v.solves ? (double)v.searched / v.solves : 0.0, (g_get_monotonic_time() - v.wall0) / 1e6);
  for (int l = 0; l < v.nlinks; l++)
    g_free(v.l[l].flow);
  g_free(v.l);
  g_free(v.F.a);
  g_free(v.Lam.a);
  g_free(v.Sh);
  g_free(v.dirty.a);
  g_free(v.Off.a);
  g_free(v.Sol.a);
  g_free(v.mc);
  g_free(v.lst);
  g_free(v.u);
  g_aligned_free(v.m);
  g_free(v.pending);
  g_free(v.round_posted);
  g_free(v.heap);
  g_free(v.hpos);
  return ok;
}
