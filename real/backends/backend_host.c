/* Host backend: host memory, memcpy for pack / unpack, MPI point-to-point for a group. The same
 * plan slicing, staging, forwarding and verification as the CUDA backend, runnable anywhere.
 *
 * With an emulated network (rf_real_emulate_network) every transfer to or from another rank is
 * paced: a send books its bytes on the rank's outgoing bucket of its kind (NVLink inside the
 * NVLink domain, NIC across) when the group is posted, and its MPI_Isend is held back until its
 * last byte has left at that rate, plus the latency; a receive, once MPI delivered it, books
 * its bytes on the rank's incoming bucket and completes when they are in, plus the latency. A
 * bucket runs its bookings one after another at the full rate (the same group times as a fair
 * share when a group waits for all of them). Bytes are never touched: only when things happen. */
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

/* Emulated network: one request's pacing. */
typedef struct {
  double release_s; /* send: when its bytes have left and arrived: MPI_Isend then */
  double done_s;    /* when the emulated transfer is over (receives: known once delivered) */
  const void *buf;  /* a send held back: what MPI_Isend will take */
  int count, dest, tag;
  int recv;     /* a receive */
  int kind;     /* EMU_NVLINK, EMU_NIC, or EMU_NONE (a send to itself) */
  int held;     /* a send not handed to MPI yet */
  int mpi_done; /* MPI completed it */
  uint64_t bytes;
} EmuReq;

enum { EMU_NVLINK, EMU_NIC, EMU_KINDS, EMU_NONE = EMU_KINDS };

/* One group in flight. */
typedef struct {
  MPI_Request *req;
  int *peer;  /* per request: the world rank it waits on */
  EmuReq *er; /* per request, with an emulated network */
  int n, cap;
  double posted_s; /* for the op-delay test hook */
} Lane;

/* The emulated network of this rank: its buckets, by direction and kind. */
typedef struct {
  int on;
  double Bps[EMU_KINDS], lat_s[EMU_KINDS];
  int nranks;
  int *domain;
  double out_free_s[EMU_KINDS], in_free_s[EMU_KINDS]; /* when each bucket has sent all it booked */
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
  if (!abort && d->comm != MPI_COMM_NULL && d->comm != MPI_COMM_WORLD) MPI_Comm_free(&d->comm);
  g_array_free(d->marks, TRUE);
  for (int i = 0; i < RF_REAL_MAX_LANES; i++) {
    g_free(d->lane[i].req);
    g_free(d->lane[i].peer);
    g_free(d->lane[i].er);
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

static RfRealStatus emu_pump(RfDev *d, double now, double *next_s);

static RfRealStatus host_copy(RfDev *d, void *const *bases, const RfCopy *list, uint64_t n,
                              uint64_t nsmall) {
  (void)nsmall; /* one thread: a copy's size does not change how it is done */
  const double t0 = d->cfg.op_delay_s > 0 ? now_s() : 0;
  for (uint64_t i = 0; i < n; i++) {
    const RfCopy *c = &list[i];
    memcpy((char *)bases[c->dst_sp] + c->dst_off, (const char *)bases[c->src_sp] + c->src_off,
           c->bytes);
  }
  if (n) hold_until(d, t0);
  double next = G_MAXDOUBLE;
  return d->emu.on ? emu_pump(d, now_s(), &next) : RF_REAL_OK; /* held sends leave on time */
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

/* A rank waiting on an emulated transfer looks at MPI this often (the receives it books and
 * the progress of the transfers MPI runs), and sleeps in between: the ranks of an oversubscribed
 * host leave each other the cores. */
#define EMU_POLL_S 200e-6

static int emu_kind(const RfDev *d, int peer) {
  const Emu *m = &d->emu;
  const int me = d->cfg.rank;
  if (peer == me || peer < 0 || peer >= m->nranks || me < 0 || me >= m->nranks) return EMU_NONE;
  return m->domain[peer] == m->domain[me] ? EMU_NVLINK : EMU_NIC;
}

/* A send's bytes leave after everything booked on its bucket before it, at the bucket's rate;
 * the message is handed to MPI a latency after its last byte left. */
static void emu_book_send(Emu *m, EmuReq *q, double now) {
  const int k = q->kind;
  const double start = MAX(now, m->out_free_s[k]);
  m->out_free_s[k] = start + (double)q->bytes / m->Bps[k];
  q->release_s = q->done_s = m->out_free_s[k] + m->lat_s[k];
}

/* A receive MPI delivered at `now`: its bytes came in after the ones booked on the incoming
 * bucket before it, and no earlier than they could have left the sender (now less the latency
 * and the time they take); it completes a latency after its last byte, and never before now. */
static void emu_book_recv(Emu *m, EmuReq *q, double now) {
  const int k = q->kind;
  const double len_s = (double)q->bytes / m->Bps[k];
  const double start = MAX(m->in_free_s[k], now - m->lat_s[k] - len_s);
  m->in_free_s[k] = start + len_s;
  q->done_s = MAX(now, m->in_free_s[k] + m->lat_s[k]);
}

/* Every lane: hand to MPI the sends whose time has come, and note what MPI completed (booking
 * the receives). *next_s: lowered to the earliest send still held back. */
static RfRealStatus emu_pump(RfDev *d, double now, double *next_s) {
  RfRealStatus status = RF_REAL_OK;
  for (int li = 0; li < RF_REAL_MAX_LANES; li++) {
    Lane *l = &d->lane[li];
    for (int k = 0; k < l->n; k++) {
      EmuReq *q = &l->er[k];
      if (q->mpi_done) continue;
      if (q->held && q->release_s > now) {
        *next_s = MIN(*next_s, q->release_s);
        continue;
      }
      if (q->held) {
        MPICHECK(MPI_Isend(q->buf, q->count, MPI_BYTE, q->dest, q->tag, d->comm, &l->req[k]));
        q->held = 0;
      }
      int flag = 0;
      MPICHECK(MPI_Test(&l->req[k], &flag, MPI_STATUS_IGNORE));
      if (!flag) continue;
      q->mpi_done = 1;
      if (q->kind == EMU_NONE)
        q->done_s = now;
      else if (q->recv)
        emu_book_recv(&d->emu, q, now);
    }
  }
out:
  return status;
}

static void sleep_until(double t) {
  const double left = t - now_s();
  if (left > 0) g_usleep((gulong)(left * 1e6) + 1);
}

/* One request of a group: posted now, or (an emulated send to another rank) booked and held. */
static RfRealStatus host_request(RfDev *d, Lane *l, int recv, const RfOp *op, uint64_t o,
                                 char *stage, int lane, double now) {
  RfRealStatus status = RF_REAL_OK;
  const int k = l->n;
  const uint64_t len = MIN(HOST_CHUNK_BYTES, op->bytes - o);
  const int *cr = d->cfg.comm_rank; /* ops name world ranks */
  const int peer = cr ? cr[op->peer] : op->peer;
  const int tag = (int)(o / HOST_CHUNK_BYTES) * RF_REAL_MAX_LANES + lane;
  char *buf = stage + op->off + o;
  l->peer[k] = op->peer;
  l->req[k] = MPI_REQUEST_NULL;
  EmuReq *q = d->emu.on ? &l->er[k] : NULL;
  if (q) {
    *q = (EmuReq){.buf = buf,
                  .count = (int)len,
                  .dest = peer,
                  .tag = tag,
                  .recv = recv,
                  .kind = emu_kind(d, op->peer),
                  .bytes = len};
    if (!recv && q->kind != EMU_NONE) {
      emu_book_send(&d->emu, q, now);
      q->held = 1;
      l->n = k + 1;
      return RF_REAL_OK;
    }
  }
  if (recv)
    MPICHECK(MPI_Irecv(buf, (int)len, MPI_BYTE, peer, tag, d->comm, &l->req[k]));
  else
    MPICHECK(MPI_Isend(buf, (int)len, MPI_BYTE, peer, tag, d->comm, &l->req[k]));
  l->n = k + 1;
out:
  return status;
}

static RfRealStatus host_post(RfDev *d, int lane, const RfOp *sends, int nsends, const RfOp *recvs,
                              int nrecvs, void *sstage, void *rstage) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES || d->lane[lane].n) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  const double now = now_s();
  l->posted_s = now;
  if (!nsends && !nrecvs) return RF_REAL_OK;
  if (d->comm == MPI_COMM_NULL) return RF_REAL_ERR_INTERNAL; /* an excluded (lost) rank */
  int nreq = 0;
  for (int i = 0; i < nsends; i++)
    nreq += chunks_of(sends[i].bytes);
  for (int i = 0; i < nrecvs; i++)
    nreq += chunks_of(recvs[i].bytes);
  if (nreq > l->cap) {
    l->cap = nreq;
    l->req = g_renew(MPI_Request, l->req, nreq);
    l->peer = g_renew(int, l->peer, nreq);
    if (d->emu.on) l->er = g_renew(EmuReq, l->er, nreq);
  }
  /* Tags: the lane and the chunk, so that the groups of two lanes in flight between the same two
   * ranks never match each other's messages. Receives first, so that no send arrives
   * unexpected. */
  for (int i = 0; i < nrecvs && !status; i++)
    for (uint64_t o = 0; o < recvs[i].bytes && !status; o += HOST_CHUNK_BYTES)
      status = host_request(d, l, 1, &recvs[i], o, rstage, lane, now);
  for (int i = 0; i < nsends && !status; i++)
    for (uint64_t o = 0; o < sends[i].bytes && !status; o += HOST_CHUNK_BYTES)
      status = host_request(d, l, 0, &sends[i], o, sstage, lane, now);
  double next = G_MAXDOUBLE;
  if (!status && d->emu.on) status = emu_pump(d, now_s(), &next);
  return status; /* on an MPI failure the caller aborts the job: pending requests die with it */
}

/* The first request of the lane not completed yet: whom a timed-out wait waited on. */
static int stuck_on(Lane *l) {
  for (int i = 0; i < l->n; i++) {
    int one = 0;
    if (l->er && l->er[i].held) return l->peer[i];
    if (l->req[i] != MPI_REQUEST_NULL &&
        MPI_Test(&l->req[i], &one, MPI_STATUS_IGNORE) == MPI_SUCCESS && !one)
      return l->peer[i];
  }
  return -1;
}

/* With an emulated network: until MPI completed every request of the lane and the emulated
 * transfers are over, handing held sends of every lane to MPI on time. */
static RfRealStatus emu_wait(RfDev *d, Lane *l, int *stuck_peer) {
  const double t0 = now_s();
  for (;;) {
    const double now = now_s();
    double next = now + EMU_POLL_S, until = 0;
    RfRealStatus status = emu_pump(d, now, &next);
    if (status != RF_REAL_OK) return status;
    int done = 1;
    for (int k = 0; k < l->n; k++) {
      done &= l->er[k].mpi_done;
      until = MAX(until, l->er[k].done_s);
    }
    if (done && until <= now) break;
    if (now - t0 > d->cfg.timeout_s) {
      *stuck_peer = stuck_on(l);
      return RF_REAL_ERR_TIMEOUT; /* the caller aborts the job: pending requests die with it */
    }
    sleep_until(done ? MIN(next, until) : next);
  }
  l->n = 0;
  return RF_REAL_OK;
}

static RfRealStatus host_wait(RfDev *d, int lane, int *stuck_peer) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  hold_until(d, l->posted_s);
  if (!l->n) return RF_REAL_OK;
  if (d->emu.on) return emu_wait(d, l, stuck_peer);
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
  if ((guint)i >= d->marks->len) g_array_set_size(d->marks, i + 1);
  g_array_index(d->marks, double, i) = g_get_monotonic_time() * 1e-6;
  return RF_REAL_OK;
}

static RfRealStatus host_finish(RfDev *d, int nmarks, double *since_start_s, int *done_marks) {
  for (int i = 0; i < nmarks && (guint)i < d->marks->len; i++)
    since_start_s[i] = g_array_index(d->marks, double, i) - g_array_index(d->marks, double, 0);
  *done_marks = nmarks;
  return RF_REAL_OK;
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
