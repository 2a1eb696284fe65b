/* Host backend: host memory, memcpy for pack / unpack, MPI point-to-point for a group. The same
 * plan slicing, staging, forwarding and verification as the CUDA backend, runnable anywhere.
 *
 * With an emulated network (rf_real_emulate_network, docs/real.md, Emulated network) MPI still
 * moves the bytes at once, but a group is over only when it would be on the emulated network,
 * by the rank's emulated clock:
 * - a rank's groups run one after another, as the cuda backend's do on its one communication
 *   stream: a group starts when it is posted or when the groups posted before it are over,
 *   whichever is later (the other lanes' groups are resolved first); with lane communicators
 *   (cfg.lane_comms, refit run --lane-comms) each lane is such a stream, as the cuda backend's
 *   lanes are: a group starts when it is posted or when the previous group of its own lane is
 *   over, and the groups of other lanes run meanwhile (nothing is resolved first). The buckets
 *   below stay per rank, direction and kind, shared by the lanes: one lane's bytes queue behind
 *   another's, in the order the groups are booked, and one lane's latency hides behind another
 *   lane's bytes;
 * - a transfer starts once both groups have (a rendezvous): the receiver tells the sender when
 *   its group started, in a time message of its own beside the data; the sender books the bytes
 *   on its outgoing bucket of their kind (NVLink inside the NVLink domain, NIC across) after what
 *   the bucket holds, at the full rate, and tells the receiver when they can leave and when the
 *   last one arrives (a latency after it left);
 * - the receiver books them on its incoming bucket of their kind as a fluid from when they can
 *   leave: a receive is over a latency after its last byte, and not before the sender's last
 *   byte arrives.
 * A bucket serves its bookings one after another at the full rate, which gives the same group
 * times as a fair share when a group waits for all of them. What is the host's and not the
 * network's costs no emulated time: noticing late that a group is over (polling, the wake-up of
 * an oversubscribed host) and leaving the refit's barrier late; the work between waits (copies,
 * the engine) is real time. */
#include "backend.h"
#include "boot.h"
#include "pattern.h"
#include "real.h"

#include <glib.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are int: longer operations go as several messages of this many bytes. */
#define HOST_CHUNK_BYTES (1u << 30)

/* Emulated network: the tags of a transfer's time messages are its data tag plus these (data
 * tags are chunk x RF_REAL_MAX_LANES + lane, far below; MPI_TAG_UB is at least 32767). */
#define EMU_READY_TAG 8192 /* receiver -> sender: when the receiving group started */
#define EMU_TIME_TAG 16384 /* sender -> receiver: when the last byte arrives */

enum { EMU_NVLINK, EMU_NIC, EMU_KINDS, EMU_NONE = EMU_KINDS };

/* Emulated network: one request of a group. */
typedef struct {
  double ready_s; /* when the receiving group started (a send: as its receiver told) */
  double at[2];   /* [0] when the first byte can leave (both groups started), [1] when the last
                   * arrives unless the receiver is slower; a receive: as its sender told */
  double done_s;  /* when the request is over in emulated time; -1: to book */
  uint64_t bytes;
  int recv;
  int kind;      /* EMU_NVLINK, EMU_NIC, or EMU_NONE (to or from itself: not paced) */
  int peer, tag; /* in the communicator, for the time message of a send */
} EmuReq;

/* One group in flight. */
typedef struct {
  MPI_Request *req;
  int *peer; /* per request: the world rank it waits on */
  int n, cap;
  double posted_s; /* for the op-delay test hook */
  /* emulated network */
  EmuReq *er;
  MPI_Request *rreq, *treq; /* per request: its time messages (MPI_REQUEST_NULL: none) */
  double start_s, end_s;    /* the group in emulated time; end_s once resolved */
  int sends_booked;         /* every receiver told when it started: the sends are booked */
  int resolved;             /* every sender told when its bytes arrive: the receives too */
} Lane;

/* The emulated network of this rank: its buckets, by direction and kind. */
typedef struct {
  int on;
  double Bps[EMU_KINDS], lat_s[EMU_KINDS];
  int nranks;
  int *domain;
  double out_free_s[EMU_KINDS], in_free_s[EMU_KINDS]; /* when each bucket is through its bookings */
  double stream_end_s;                                /* the end of the groups resolved so far */
  int lane_comms; /* a stream per lane (cfg.lane_comms): lane_end_s, not stream_end_s */
  double lane_end_s[RF_REAL_MAX_LANES]; /* per lane, the end of its last resolved group */
  double lag_s; /* how late the rank woke from its last wait: its clock is real time less this */
  /* the start of a refit: every rank's clock reads the latest mark 0 of the world (the
   * barrier after it waits for that one) at its first operation afterwards */
  MPI_Request start_req;
  double mark0_s, start_s;
  int start_pending;
} Emu;

struct RfDev {
  RfDevConfig cfg;
  GArray *marks; /* double, seconds */
  MPI_Comm comm; /* the data communicator: the world less the lost ranks (MPI_COMM_NULL for them) */
  Lane lane[RF_REAL_MAX_LANES];
  Emu emu;
};

/* Set by rf_real_emulate_network, copied by every device opened afterwards. */
static RfRealNetEmulation emu_config;
static int *emu_domain;

void rf_real_emulate_network(const RfRealNetEmulation *e) {
  g_free(emu_domain);
  emu_domain = NULL;
  memset(&emu_config, 0, sizeof emu_config);
  if (!e) return;
  emu_config = *e;
  emu_domain = g_memdup2(e->domain, sizeof(int) * (size_t)MAX(1, e->nranks));
  emu_config.domain = emu_domain;
}

#define MPICHECK(cmd) RF_MPICHECK(cmd, status = RF_REAL_ERR_MPI; goto out)

static RfRealStatus host_open(const RfDevConfig *cfg, RfDev **out) {
  RfDev *d = g_new0(RfDev, 1);
  d->cfg = *cfg;
  d->comm = MPI_COMM_NULL;
  d->marks = g_array_new(FALSE, TRUE, sizeof(double));
  if (emu_config.nranks > 0 && !cfg->local) {
    Emu *m = &d->emu;
    m->on = 1;
    m->Bps[EMU_NVLINK] = emu_config.nvlink_Bps;
    m->Bps[EMU_NIC] = emu_config.nic_Bps;
    m->lat_s[EMU_NVLINK] = emu_config.nvlink_latency_s;
    m->lat_s[EMU_NIC] = emu_config.nic_latency_s;
    m->nranks = emu_config.nranks;
    m->domain = g_memdup2(emu_config.domain, sizeof(int) * (size_t)m->nranks);
    m->start_req = MPI_REQUEST_NULL;
    m->lane_comms = cfg->lane_comms;
  }
  *out = d;
  return RF_REAL_OK;
}

/* The data communicator. Without lost ranks, the world itself; with them, the survivors in world
 * order (what ncclCommShrink makes of the CUDA backend's communicator), from MPI_Comm_split. */
static RfRealStatus host_connect(RfDev *d, const void *nccl_id, const void *nccl_id2) {
  (void)nccl_id;
  (void)nccl_id2;
  RfRealStatus status = RF_REAL_OK;
  const RfDevConfig *c = &d->cfg;
  if (!c->nexclude) {
    d->comm = MPI_COMM_WORLD;
    return RF_REAL_OK;
  }
  const int mine = c->comm_rank[c->rank];
  if (mine == 0)
    fprintf(stderr,
            "refit run: elastic recovery: %d lost rank(s) excluded: MPI_Comm_split of the world "
            "over %d survivors (host backend)\n",
            c->nexclude, c->world - c->nexclude);
  MPICHECK(MPI_Comm_split(MPI_COMM_WORLD, mine >= 0 ? 0 : MPI_UNDEFINED, c->rank, &d->comm));
  if (mine >= 0) {
    int r = -1;
    MPICHECK(MPI_Comm_rank(d->comm, &r));
    if (r != mine) status = RF_REAL_ERR_INTERNAL;
  }
out:
  return status;
}

static void host_close(RfDev *d, int abort) {
  if (!d) return;
  /* After an abort the job is going down: do not free a communicator peers may still use. */
  if (!abort && d->emu.start_pending) MPI_Wait(&d->emu.start_req, MPI_STATUS_IGNORE);
  if (!abort && d->comm != MPI_COMM_NULL && d->comm != MPI_COMM_WORLD) MPI_Comm_free(&d->comm);
  g_array_free(d->marks, TRUE);
  for (int i = 0; i < RF_REAL_MAX_LANES; i++) {
    g_free(d->lane[i].req);
    g_free(d->lane[i].peer);
    g_free(d->lane[i].er);
    g_free(d->lane[i].treq);
    g_free(d->lane[i].rreq);
  }
  g_free(d->emu.domain);
  g_free(d);
}

static RfRealStatus host_alloc(RfDev *d, uint64_t bytes, void **out) {
  (void)d;
  *out = calloc(1, bytes ? bytes : 1);
  return *out ? RF_REAL_OK : RF_REAL_ERR_NOMEM;
}

static void host_release(RfDev *d, void *p) {
  (void)d;
  free(p);
}

static RfRealStatus host_upload(RfDev *d, void *dst, const void *src, uint64_t bytes) {
  (void)d;
  if (bytes) memcpy(dst, src, bytes);
  return RF_REAL_OK;
}

static double now_s(void) {
  return (double)g_get_monotonic_time() * 1e-6; /* also in local mode, without MPI */
}

/* Test hook: an operation that started at t0 lasts at least op_delay_s. */
static void hold_until(const RfDev *d, double t0) {
  double left = t0 + d->cfg.op_delay_s - now_s();
  if (d->cfg.op_delay_s > 0 && left > 0) g_usleep((gulong)(left * 1e6));
}

/* Emulated: the first operation of a refit, after the barrier. How late each rank left the
 * barrier is the oversubscribed host's, not the network's: the clocks of all ranks start
 * together, at the latest mark 0 (when the last rank reached the barrier). */
static RfRealStatus emu_start_wait(RfDev *d) {
  RfRealStatus status = RF_REAL_OK;
  Emu *m = &d->emu;
  const double t0 = now_s();
  for (int done = 0; !done;) {
    MPICHECK(MPI_Test(&m->start_req, &done, MPI_STATUS_IGNORE));
    if (!done && now_s() - t0 > d->cfg.timeout_s) return RF_REAL_ERR_TIMEOUT;
    if (!done) g_usleep(100);
  }
  m->start_pending = 0;
out:
  return status;
}

static RfRealStatus emu_start(RfDev *d) {
  Emu *m = &d->emu;
  if (!m->on || !m->start_pending) return RF_REAL_OK;
  const double now = now_s();
  RfRealStatus status = emu_start_wait(d);
  if (status == RF_REAL_OK) m->lag_s = MAX(0.0, now - m->start_s);
  return status;
}

static RfRealStatus host_copy(RfDev *d, void *const *bases, const RfCopy *list, uint64_t n,
                              uint64_t nsmall) {
  (void)nsmall; /* one thread: a copy's size does not change how it is done */
  RfRealStatus status = emu_start(d);
  if (status != RF_REAL_OK) return status;
  const double t0 = d->cfg.op_delay_s > 0 ? now_s() : 0;
  for (uint64_t i = 0; i < n; i++) {
    const RfCopy *c = &list[i];
    memcpy((char *)bases[c->dst_sp] + c->dst_off, (const char *)bases[c->src_sp] + c->src_off,
           c->bytes);
  }
  if (n) hold_until(d, t0);
  return RF_REAL_OK;
}

static RfRealStatus host_fill(RfDev *d, void *const *bases, const RfRun *runs, uint64_t n,
                              const RfBoxDesc *boxes, uint64_t step) {
  (void)d;
  for (uint64_t i = 0; i < n; i++) {
    const RfRun *r = &runs[i];
    const RfBoxDesc *b = &boxes[r->box];
    unsigned char *p = (unsigned char *)bases[r->sp] + r->off * (uint64_t)b->esize;
    for (uint64_t e = 0; e < r->elems; e++) {
      uint64_t v = rf_pattern(b->tensor, rf_pattern_gidx(b, r->seq0 + e), step);
      for (int k = 0; k < b->esize; k++)
        *p++ = (unsigned char)(v >> (8 * k));
    }
  }
  return RF_REAL_OK;
}

static RfRealStatus host_verify(RfDev *d, void *const *bases, const RfRun *runs, uint64_t n,
                                const RfBoxDesc *boxes, uint64_t step, uint64_t *wrong) {
  (void)d;
  uint64_t bad = 0;
  for (uint64_t i = 0; i < n; i++) {
    const RfRun *r = &runs[i];
    const RfBoxDesc *b = &boxes[r->box];
    const unsigned char *p = (const unsigned char *)bases[r->sp] + r->off * (uint64_t)b->esize;
    for (uint64_t e = 0; e < r->elems; e++) {
      uint64_t v = rf_pattern(b->tensor, rf_pattern_gidx(b, r->seq0 + e), step);
      int ok = 1;
      for (int k = 0; k < b->esize; k++)
        ok &= p[k] == (unsigned char)(v >> (8 * k));
      bad += !ok;
      p += b->esize;
    }
  }
  *wrong = bad;
  return RF_REAL_OK;
}

static int chunks_of(uint64_t bytes) {
  return (int)((bytes + HOST_CHUNK_BYTES - 1) / HOST_CHUNK_BYTES);
}

/* ---- the emulated network ---- */

/* A rank waiting on the emulated network looks at MPI this often and sleeps in between, so that
 * the ranks of an oversubscribed host leave each other the cores; noticing late costs no
 * emulated time. */
#define EMU_POLL_S 200e-6

static int emu_kind(const RfDev *d, int peer) {
  const Emu *m = &d->emu;
  const int me = d->cfg.rank;
  if (peer == me || peer < 0 || peer >= m->nranks || me < 0 || me >= m->nranks) return EMU_NONE;
  return m->domain[peer] == m->domain[me] ? EMU_NVLINK : EMU_NIC;
}

static void sleep_until(double t) {
  const double left = t - now_s();
  if (left > 0) g_usleep((gulong)(left * 1e6) + 1);
}

/* The first request of the lane not completed yet: whom a timed-out wait waited on. */
static int stuck_on(Lane *l) {
  for (int i = 0; i < l->n; i++) {
    int one = 0;
    if (l->req[i] != MPI_REQUEST_NULL &&
        MPI_Test(&l->req[i], &one, MPI_STATUS_IGNORE) == MPI_SUCCESS && !one)
      return l->peer[i];
    if (l->treq && l->treq[i] != MPI_REQUEST_NULL &&
        MPI_Test(&l->treq[i], &one, MPI_STATUS_IGNORE) == MPI_SUCCESS && !one)
      return l->peer[i];
    if (l->rreq && l->rreq[i] != MPI_REQUEST_NULL &&
        MPI_Test(&l->rreq[i], &one, MPI_STATUS_IGNORE) == MPI_SUCCESS && !one)
      return l->peer[i];
  }
  return -1;
}

/* A receive on its incoming bucket: its bytes come in after what the bucket holds and not
 * before they can leave the sender, as a fluid (the sender may share its rate among several
 * receivers meanwhile); it is over a latency after its last byte, and not before the sender's
 * last byte arrives. */
static void emu_book_recv(Emu *m, const Lane *l, EmuReq *q) {
  const int k = q->kind;
  const double start = MAX(MAX(m->in_free_s[k], l->start_s), q->at[0]);
  m->in_free_s[k] = start + (double)q->bytes / m->Bps[k];
  q->done_s = MAX(m->in_free_s[k] + m->lat_s[k], q->at[1]);
}

/* When a request's first byte could leave: a send, once its receiver is ready (its group
 * started); a receive, by its sender's word. */
static double emu_leave_s(const Lane *l, const EmuReq *q) {
  return q->recv ? q->at[0] : MAX(l->start_s, q->ready_s);
}

/* The request of the lane, send or receive, still to book whose bytes could leave first; -1:
 * none (a group holds a few dozen requests at most). */
static int emu_first(const Lane *l, int recv) {
  int best = -1;
  double best_s = 0;
  for (int k = 0; k < l->n; k++) {
    const EmuReq *q = &l->er[k];
    if (q->done_s >= 0 || q->recv != recv) continue;
    const double s = emu_leave_s(l, q);
    if (best < 0 || s < best_s) best = k, best_s = s;
  }
  return best;
}

/* Once every receiver of the group told when it started: the sends booked on the outgoing
 * buckets, in the order they can leave (a transfer starts when both sides have started, as a
 * rendezvous does), and each arrival time sent. *booked: whether they are. */
static RfRealStatus emu_book_sends(RfDev *d, Lane *l, int *booked) {
  RfRealStatus status = RF_REAL_OK;
  Emu *m = &d->emu;
  int flag = 0;
  if ((*booked = l->sends_booked)) return RF_REAL_OK;
  MPICHECK(MPI_Testall(l->n, l->rreq, &flag, MPI_STATUSES_IGNORE));
  if (!flag) goto out;
  for (int k = 0; k < l->n; k++)
    if (!l->er[k].recv && l->er[k].kind != EMU_NONE) l->er[k].done_s = -1;
  for (int k; (k = emu_first(l, 0)) >= 0;) {
    EmuReq *q = &l->er[k];
    const int c = q->kind;
    const double start = MAX(m->out_free_s[c], emu_leave_s(l, q));
    m->out_free_s[c] = start + (double)q->bytes / m->Bps[c];
    q->at[0] = emu_leave_s(l, q);
    q->at[1] = q->done_s = m->out_free_s[c] + m->lat_s[c];
    MPICHECK(MPI_Isend(q->at, 2, MPI_DOUBLE, q->peer, q->tag + EMU_TIME_TAG, d->comm, &l->treq[k]));
  }
  *booked = l->sends_booked = 1;
out:
  return status;
}

/* Once the sends are booked and every sender told when its bytes arrive: the receives booked,
 * in the order their first byte left the sender, and the group's end. *resolved: whether it
 * is. */
static RfRealStatus emu_resolve(RfDev *d, Lane *l, int *resolved) {
  RfRealStatus status = RF_REAL_OK;
  Emu *m = &d->emu;
  int flag = 0;
  *resolved = l->resolved;
  if (l->resolved) return RF_REAL_OK;
  if ((status = emu_book_sends(d, l, &flag)) != RF_REAL_OK || !flag) return status;
  MPICHECK(MPI_Testall(l->n, l->treq, &flag, MPI_STATUSES_IGNORE));
  if (!flag) goto out;
  for (int k = 0; k < l->n; k++)
    if (l->er[k].recv && l->er[k].kind != EMU_NONE) l->er[k].done_s = -1;
  for (int k; (k = emu_first(l, 1)) >= 0;)
    emu_book_recv(m, l, &l->er[k]);
  l->end_s = l->start_s;
  for (int k = 0; k < l->n; k++)
    l->end_s = MAX(l->end_s, l->er[k].done_s);
  m->stream_end_s = MAX(m->stream_end_s, l->end_s);
  const ptrdiff_t lane = l - d->lane;
  m->lane_end_s[lane] = MAX(m->lane_end_s[lane], l->end_s);
  *resolved = l->resolved = 1;
out:
  return status;
}

/* Every lane in flight: resolve what can be (its peers may wait on its time messages). */
static RfRealStatus emu_pump(RfDev *d) {
  RfRealStatus status = RF_REAL_OK;
  for (int i = 0; i < RF_REAL_MAX_LANES && status == RF_REAL_OK; i++) {
    int resolved = 0;
    if (d->lane[i].n && !d->lane[i].resolved) status = emu_resolve(d, &d->lane[i], &resolved);
  }
  return status;
}

/* Until the lane's group is resolved (its end known), or the timeout. */
static RfRealStatus emu_resolve_wait(RfDev *d, Lane *l, int *stuck_peer) {
  const double t0 = now_s();
  for (;;) {
    RfRealStatus status = emu_pump(d);
    if (status != RF_REAL_OK || l->resolved) return status;
    if (now_s() - t0 > d->cfg.timeout_s) {
      *stuck_peer = stuck_on(l);
      return RF_REAL_ERR_TIMEOUT; /* the caller aborts the job: pending requests die with it */
    }
    sleep_until(now_s() + EMU_POLL_S);
  }
}

/* One request of a group, and (emulated, to or from another rank) its time message: a send's
 * bytes booked on the outgoing bucket, after what it holds and not before the group starts. */
static RfRealStatus host_request(RfDev *d, Lane *l, int recv, const RfOp *op, uint64_t o,
                                 char *stage, int lane) {
  RfRealStatus status = RF_REAL_OK;
  const int k = l->n;
  const uint64_t len = MIN(HOST_CHUNK_BYTES, op->bytes - o);
  const int *cr = d->cfg.comm_rank; /* ops name world ranks */
  const int peer = cr ? cr[op->peer] : op->peer;
  const int tag = (int)(o / HOST_CHUNK_BYTES) * RF_REAL_MAX_LANES + lane;
  char *buf = stage + op->off + o;
  l->peer[k] = op->peer;
  l->req[k] = MPI_REQUEST_NULL;
  l->n = k + 1;
  if (recv)
    MPICHECK(MPI_Irecv(buf, (int)len, MPI_BYTE, peer, tag, d->comm, &l->req[k]));
  else
    MPICHECK(MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, d->comm, &l->req[k]));
  if (!d->emu.on) goto out;
  EmuReq *q = &l->er[k];
  *q = (EmuReq){.done_s = l->start_s,
                .bytes = len,
                .recv = recv,
                .kind = emu_kind(d, op->peer),
                .peer = peer,
                .tag = tag};
  l->treq[k] = l->rreq[k] = MPI_REQUEST_NULL;
  if (q->kind == EMU_NONE) goto out;
  if (recv) { /* tell the sender when this group started; hear when the bytes arrive */
    q->ready_s = l->start_s;
    MPICHECK(
        MPI_Isend(&q->ready_s, 1, MPI_DOUBLE, peer, tag + EMU_READY_TAG, d->comm, &l->rreq[k]));
    MPICHECK(MPI_Irecv(q->at, 2, MPI_DOUBLE, peer, tag + EMU_TIME_TAG, d->comm, &l->treq[k]));
  } else { /* hear when the receiver started; booked then (emu_book_sends) */
    MPICHECK(
        MPI_Irecv(&q->ready_s, 1, MPI_DOUBLE, peer, tag + EMU_READY_TAG, d->comm, &l->rreq[k]));
  }
out:
  return status;
}

/* Room for nreq requests in lane l (which holds none). */
static void lane_reserve(RfDev *d, Lane *l, int nreq) {
  if (nreq <= l->cap) return;
  l->cap = nreq;
  l->req = g_renew(MPI_Request, l->req, nreq);
  l->peer = g_renew(int, l->peer, nreq);
  if (!d->emu.on) return;
  l->er = g_renew(EmuReq, l->er, nreq);
  l->treq = g_renew(MPI_Request, l->treq, nreq);
  l->rreq = g_renew(MPI_Request, l->rreq, nreq);
}

static RfRealStatus host_post(RfDev *d, int lane, const RfOp *sends, int nsends, const RfOp *recvs,
                              int nrecvs, void *sstage, void *rstage) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES || d->lane[lane].n) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  if ((status = emu_start(d)) != RF_REAL_OK) return status;
  l->posted_s = now_s();
  if (!nsends && !nrecvs) return RF_REAL_OK;
  if (d->comm == MPI_COMM_NULL) return RF_REAL_ERR_INTERNAL; /* an excluded (lost) rank */
  int nreq = 0;
  for (int i = 0; i < nsends; i++)
    nreq += chunks_of(sends[i].bytes);
  for (int i = 0; i < nrecvs; i++)
    nreq += chunks_of(recvs[i].bytes);
  lane_reserve(d, l, nreq);
  if (d->emu.on && d->emu.lane_comms) { /* once its lane's previous group is over */
    l->start_s = MAX(l->posted_s - d->emu.lag_s, d->emu.lane_end_s[lane]);
    l->end_s = l->start_s;
    l->sends_booked = l->resolved = 0;
  } else if (d->emu.on) { /* the group starts once the groups posted before it are over */
    for (int i = 0; i < RF_REAL_MAX_LANES; i++) {
      int stuck = -1;
      if (i != lane && d->lane[i].n && (status = emu_resolve_wait(d, &d->lane[i], &stuck)))
        return status;
    }
    l->start_s = MAX(l->posted_s - d->emu.lag_s, d->emu.stream_end_s);
    l->end_s = l->start_s;
    l->sends_booked = l->resolved = 0;
  }
  /* Tags: the lane and the chunk, so that the groups of two lanes in flight between the same two
   * ranks never match each other's messages. Receives first, so that no send arrives
   * unexpected. */
  for (int i = 0; i < nrecvs && !status; i++)
    for (uint64_t o = 0; o < recvs[i].bytes && !status; o += HOST_CHUNK_BYTES)
      status = host_request(d, l, 1, &recvs[i], o, rstage, lane);
  for (int i = 0; i < nsends && !status; i++)
    for (uint64_t o = 0; o < sends[i].bytes && !status; o += HOST_CHUNK_BYTES)
      status = host_request(d, l, 0, &sends[i], o, sstage, lane);
  return status; /* on an MPI failure the caller aborts the job: pending requests die with it */
}

/* Emulated: until the group is resolved, MPI completed it, and its emulated end has come. The
 * rank's clock then reads the later of that end and its clock when it began to wait: how late
 * the host noticed (polling, the wake-up of an oversubscribed host) is not emulated time. */
static RfRealStatus emu_wait(RfDev *d, Lane *l, int *stuck_peer) {
  const double t0 = now_s(), clock0 = t0 - d->emu.lag_s;
  RfRealStatus status = emu_resolve_wait(d, l, stuck_peer);
  for (int done = 0; status == RF_REAL_OK && (!done || now_s() < l->end_s);) {
    if (!done) MPICHECK(MPI_Testall(l->n, l->req, &done, MPI_STATUSES_IGNORE));
    if (!done && now_s() - t0 > d->cfg.timeout_s) {
      *stuck_peer = stuck_on(l);
      return RF_REAL_ERR_TIMEOUT;
    }
    status = emu_pump(d); /* the other lanes' time messages, which peers may wait on */
    sleep_until(MIN(now_s() + EMU_POLL_S, done ? l->end_s : G_MAXDOUBLE));
  }
  d->emu.lag_s = MAX(0.0, now_s() - MAX(l->end_s, clock0));
out:
  return status;
}

static RfRealStatus host_wait(RfDev *d, int lane, int *stuck_peer) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  hold_until(d, l->posted_s);
  if (!l->n) return RF_REAL_OK;
  if (d->emu.on) {
    if ((status = emu_wait(d, l, stuck_peer)) == RF_REAL_OK) l->n = 0;
    return status;
  }
  double t0 = MPI_Wtime();
  int spins = 0;
  for (;;) {
    int done = 0;
    MPICHECK(MPI_Testall(l->n, l->req, &done, MPI_STATUSES_IGNORE));
    if (done) break;
    if (MPI_Wtime() - t0 > d->cfg.timeout_s) {
      *stuck_peer = stuck_on(l);
      status = RF_REAL_ERR_TIMEOUT;
      goto out; /* the caller aborts the job: pending requests die with it */
    }
    /* Busy-poll first (latency), then back off so oversubscribed ranks can progress. */
    if (++spins > 1000) g_usleep(20);
  }
  l->n = 0;
out:
  return status;
}

static RfRealStatus host_peer_copy(RfDev *d, void *dst, const void *src, uint64_t bytes) {
  (void)d;
  if (bytes) memcpy(dst, src, bytes);
  return RF_REAL_OK;
}

static RfRealStatus host_mark(RfDev *d, int i) {
  RfRealStatus status = RF_REAL_OK;
  Emu *m = &d->emu;
  if ((guint)i >= d->marks->len) g_array_set_size(d->marks, i + 1);
  /* emulated: the rank's clock (emu_wait) after the start, real time less how late it woke */
  g_array_index(d->marks, double, i) = now_s() - (m->on && i ? m->lag_s : 0);
  /* emulated: mark 0 starts a refit, on every rank of the communicator (emu_start) */
  if (i == 0 && m->on && d->comm != MPI_COMM_NULL) {
    if (m->start_pending && (status = emu_start_wait(d)) != RF_REAL_OK) return status;
    m->mark0_s = g_array_index(d->marks, double, 0);
    MPICHECK(
        MPI_Iallreduce(&m->mark0_s, &m->start_s, 1, MPI_DOUBLE, MPI_MAX, d->comm, &m->start_req));
    m->start_pending = 1;
  }
out:
  return status;
}

/* Emulated: a refit's times count from its start, the latest mark 0 of the world (emu_start),
 * not from this rank's own mark 0: how long a rank waited at the barrier for a slower host is
 * not the network's either. */
static RfRealStatus host_finish(RfDev *d, int nmarks, double *since_start_s, int *done_marks) {
  RfRealStatus status = RF_REAL_OK;
  Emu *m = &d->emu;
  double origin = d->marks->len ? g_array_index(d->marks, double, 0) : 0;
  *done_marks = 0;
  if (m->on && nmarks > 1 && d->comm != MPI_COMM_NULL && m->mark0_s > 0) {
    /* every rank passed the barrier: the start is known (or at hand) */
    if (m->start_pending && (status = emu_start_wait(d)) != RF_REAL_OK) return status;
    origin = MAX(origin, m->start_s);
  }
  for (int i = 0; i < nmarks && (guint)i < d->marks->len; i++)
    since_start_s[i] = i ? MAX(0.0, g_array_index(d->marks, double, i) - origin) : 0;
  *done_marks = nmarks;
  return status;
}

const RfDevOps rf_dev_host = {
    .name = "host",
    .open = host_open,
    .connect = host_connect,
    .needs_nccl_id = 0,
    .close = host_close,
    .alloc = host_alloc,
    .release = host_release,
    .upload = host_upload,
    .download = host_upload,
    .copy = host_copy,
    .fill = host_fill,
    .verify = host_verify,
    .post = host_post,
    .wait = host_wait,
    .peer_copy = host_peer_copy,
    .mark = host_mark,
    .finish = host_finish,
};
