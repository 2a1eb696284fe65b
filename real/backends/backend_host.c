/* Host backend: host memory, memcpy for pack / unpack, MPI point-to-point for a group. The same
 * plan slicing, staging, forwarding and verification as the CUDA backend, runnable anywhere. */
#include "backend.h"
#include "boot.h"
#include "pattern.h"

#include <glib.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* MPI counts are int: longer operations go as several messages of this many bytes. */
#define HOST_CHUNK_BYTES (1u << 30)

/* One group in flight. */
typedef struct {
  MPI_Request *req;
  int *peer; /* per request: the world rank it waits on */
  int n, cap;
  double posted_s; /* for the op-delay test hook */
} Lane;

struct RfDev {
  RfDevConfig cfg;
  GArray *marks; /* double, seconds */
  MPI_Comm comm; /* the data communicator: the world less the lost ranks (MPI_COMM_NULL for them) */
  Lane lane[RF_REAL_MAX_LANES];
};

#define MPICHECK(cmd) RF_MPICHECK(cmd, status = RF_REAL_ERR_MPI; goto out)

static RfRealStatus host_open(const RfDevConfig *cfg, RfDev **out) {
  RfDev *d = g_new0(RfDev, 1);
  d->cfg = *cfg;
  d->comm = MPI_COMM_NULL;
  d->marks = g_array_new(FALSE, TRUE, sizeof(double));
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
  }
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

static RfRealStatus host_post(RfDev *d, int lane, const RfOp *sends, int nsends, const RfOp *recvs,
                              int nrecvs, void *sstage, void *rstage) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES || d->lane[lane].n) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  l->posted_s = now_s();
  if (!nsends && !nrecvs) return RF_REAL_OK;
  if (d->comm == MPI_COMM_NULL) return RF_REAL_ERR_INTERNAL; /* an excluded (lost) rank */
  const int *cr = d->cfg.comm_rank;                          /* ops name world ranks */
  int nreq = 0;
  for (int i = 0; i < nsends; i++)
    nreq += chunks_of(sends[i].bytes);
  for (int i = 0; i < nrecvs; i++)
    nreq += chunks_of(recvs[i].bytes);
  if (nreq > l->cap) {
    l->cap = nreq;
    l->req = g_renew(MPI_Request, l->req, nreq);
    l->peer = g_renew(int, l->peer, nreq);
  }
  /* Tags: the lane and the chunk, so that the groups of two lanes in flight between the same two
   * ranks never match each other's messages. */
  int k = 0;
  /* Receives first, so that no send arrives unexpected. */
  for (int i = 0; i < nrecvs; i++)
    for (uint64_t o = 0; o < recvs[i].bytes; o += HOST_CHUNK_BYTES) {
      uint64_t len = MIN(HOST_CHUNK_BYTES, recvs[i].bytes - o);
      l->peer[k] = recvs[i].peer;
      MPICHECK(MPI_Irecv((char *)rstage + recvs[i].off + o, (int)len, MPI_BYTE,
                         cr ? cr[recvs[i].peer] : recvs[i].peer,
                         (int)(o / HOST_CHUNK_BYTES) * RF_REAL_MAX_LANES + lane, d->comm,
                         &l->req[k]));
      l->n = ++k;
    }
  for (int i = 0; i < nsends; i++)
    for (uint64_t o = 0; o < sends[i].bytes; o += HOST_CHUNK_BYTES) {
      uint64_t len = MIN(HOST_CHUNK_BYTES, sends[i].bytes - o);
      l->peer[k] = sends[i].peer;
      MPICHECK(MPI_Isend((char *)sstage + sends[i].off + o, (int)len, MPI_BYTE,
                         cr ? cr[sends[i].peer] : sends[i].peer,
                         (int)(o / HOST_CHUNK_BYTES) * RF_REAL_MAX_LANES + lane, d->comm,
                         &l->req[k]));
      l->n = ++k;
    }
out:
  return status; /* on an MPI failure the caller aborts the job: pending requests die with it */
}

static RfRealStatus host_wait(RfDev *d, int lane, int *stuck_peer) {
  RfRealStatus status = RF_REAL_OK;
  if (lane < 0 || lane >= RF_REAL_MAX_LANES) return RF_REAL_ERR_INTERNAL;
  Lane *l = &d->lane[lane];
  hold_until(d, l->posted_s);
  if (!l->n) return RF_REAL_OK;
  double t0 = MPI_Wtime();
  int spins = 0;
  for (;;) {
    int done = 0;
    MPICHECK(MPI_Testall(l->n, l->req, &done, MPI_STATUSES_IGNORE));
    if (done) break;
    if (MPI_Wtime() - t0 > d->cfg.timeout_s) {
      for (int i = 0; i < l->n; i++) {
        int one = 0;
        if (l->req[i] != MPI_REQUEST_NULL &&
            MPI_Test(&l->req[i], &one, MPI_STATUS_IGNORE) == MPI_SUCCESS && !one) {
          *stuck_peer = l->peer[i];
          break;
        }
      }
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
