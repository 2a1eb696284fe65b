/* Runs a flow program in SimGrid: the platform is generated as XML (SimGrid 3.32 has no C API to
 * build one), one actor per (GPU host, lane) sends its flows as messages and receives its own;
 * the hosts of a lane meet at a barrier between steps. SimGrid keeps one engine per process, so
 * each simulation runs in a forked child that returns its outcome through a pipe. */
#include "comm_rate.h"
#include "error.h"
#include "internal.h"
#include "u64map.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <simgrid/actor.h>
#include <simgrid/barrier.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/mailbox.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- platform ---- */

/* The executor's exact simulation (one GPU per host) uses SimGrid's selective (lazy) max-min
 * update, which re-solves only the constraints linked to what changed, with one pair link per
 * route: the route's first link,
 * its own, far faster than any other link (it never binds: the sharing is the same without it).
 * Why: SimGrid 3.32 finds what to re-solve when a message's latency ends (System::enable_var)
 * from the message's first link only (update_modified_cnst_set_from_variable: cnsts_[0]); when
 * that link is already marked in the same instant (another message from the same sender started
 * or ended then), the message's other links are not re-solved, and it gets a rate that ignores
 * them (its receiver's NIC carried more than its rate). A link of its own pair is marked only
 * through a message of that pair, whose route, the same, is then marked whole. The full update
 * re-solves everything at every message start and end (REFIT_SIM_REFERENCE=1, the tests'
 * reference): the same times to SimGrid's timing precision (docs/sim.md, Speed). On a coarse
 * platform (hosts of several GPUs) the full update is the faster one, with the same predictions:
 * a host's links carry messages to and from most other hosts, so a change marks most of the
 * system anyway and the lazy update's walk over it costs more than the solve it saves
 * (DeepSeek-V3 GB200 m2n on hosts of 8, lazy -> full: 19.7 -> 17.6 s CPU with a message per rank
 * pair, 11.0 -> 8.7 s with one per host pair as before; Kimi K3 on 1,024 + 1,024, hosts of 8, one
 * message per host pair: 0.34 -> 2.6 groups a second in the first minutes; the exact 512 ranks of
 * DeepSeek-V3 GB200 the other way, 22 s lazy against 46 s full; docs/sim.md, Speed). */
#define SIM_PAIR_LINK_BPS 1e18

static gboolean pair_links(const SimProgram *p) {
  return p->exec && !p->full_update && p->group == 1;
}

/* The distinct (source, destination) pairs of the program's flows, in first-seen order. */
static GArray *route_pairs(const SimProgram *p) {
  GArray *pairs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
  RfU64Map seen;
  rf_u64map_init(&seen, 1024, FALSE);
  for (guint i = 0; i < p->flows->len; i++) {
    const SimFlow *fl = &g_array_index(p->flows, SimFlow, i);
    const uint64_t key = ((uint64_t)(uint32_t)fl->src << 32 | (uint32_t)fl->dst) + 1;
    if (rf_u64map_get(&seen, key, 0)) continue;
    rf_u64map_set(&seen, key, 1);
    g_array_append_val(pairs, key);
  }
  rf_u64map_free(&seen);
  return pairs;
}

/* Routes for the (source, destination) pairs the program uses, and only those. */
static void write_routes(FILE *f, const SimProgram *p, const GArray *pairs) {
  for (guint i = 0; i < pairs->len; i++) {
    const uint64_t key = g_array_index(pairs, uint64_t, i) - 1;
    const int src = (int)(key >> 32), dst = (int)(uint32_t)key;
    int links[8];
    const int n =
        p->exec ? sim_exec_route(p, src, dst, links, NULL) : sim_route(p, src, dst, links);
    fprintf(f, "<route src=\"h%d\" dst=\"h%d\" symmetrical=\"NO\">", src, dst);
    if (pair_links(p)) fprintf(f, "<link_ctn id=\"p%u\"/>", i);
    for (int j = 0; j < n; j++) {
      fprintf(f, "<link_ctn id=\"l%d\"/>", links[j]);
    }
    fprintf(f, "</route>\n");
  }
}

static gboolean write_platform(const SimProgram *p, const char *path, GError **error) {
  FILE *f = fopen(path, "w");
  if (!f) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "sim: cannot write %s: %s", path, g_strerror(errno));
    return FALSE;
  }
  fprintf(f,
          "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n<zone id=\"refit\" routing=\"Full\">\n");
  for (int h = 0; h < p->nhosts; h++)
    fprintf(f, "<host id=\"h%d\" speed=\"1Gf\"/>\n", h);
  for (int l = 0; l < sim_nlinks(p); l++)
    fprintf(f, "<link id=\"l%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\"/>\n", l,
            sim_link_Bps(p, l), sim_link_latency_s(p, l));
  g_autoptr(GArray) pairs = route_pairs(p);
  for (guint i = 0; pair_links(p) && i < pairs->len; i++)
    fprintf(f, "<link id=\"p%u\" bandwidth=\"%gBps\" latency=\"0s\"/>\n", i, SIM_PAIR_LINK_BPS);
  write_routes(f, p, pairs);
  fprintf(f, "</zone>\n</platform>\n");
  if (fclose(f) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "sim: cannot write %s", path);
    return FALSE;
  }
  return TRUE;
}

/* ---- the simulation (child process only) ---- */

static struct {
  const SimProgram *p;
  uint32_t *out_first, *out_count, *in_count; /* [step * nhosts + host] */
  uint32_t *step_phases;                      /* per step: bit mask of phases with flows in it */
  sg_bar_t bar[SIM_MAX_LANES];
  sg_bar_t bar_all; /* every actor of every lane: join steps */
  sg_mailbox_t *mb; /* [lane * nhosts + host] */
  sg_link_t *links; /* generated links, by index */
  SimOutcome out;
  int progress_rank;   /* the rank whose groups the progress line counts (-1: none) */
  gint64 wall0, shown; /* monotonic time at the start and of the last line */
} S;

#define PROGRESS_EVERY_US 10000000 /* 10 s */

/* After a group of the progress rank: a line on stderr every 10 s of wall time. */
static void show_progress(int done, int n) {
  gint64 now = g_get_monotonic_time();
  if (now - S.shown < PROGRESS_EVERY_US) return;
  S.shown = now;
  fprintf(stderr, "refit sim: executor: %s %d at group %d of %d, %.3f s simulated (%.0f s)\n",
          S.p->group > 1 ? "host" : "rank", S.progress_rank, done, n, simgrid_get_clock(),
          (now - S.wall0) / 1e6);
  fflush(stderr);
}

static int token = 1;

/* Group factors of step s (one lane: no other step runs now). */
static void step_set_bandwidths(const SimProgram *p, int s) {
  int nl = sim_nlinks(p);
  for (int l = 0; l < p->nhosts * SIM_HOST_LINKS; l++)
    sg_link_set_bandwidth(S.links[l], sim_link_base_Bps(p, l) * p->step_scale[(size_t)s * nl + l]);
}

static void step_mark_start(int s, double t0) {
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    if (S.step_phases[s] & (1u << l)) {
      if (!S.out.used[l] || t0 < S.out.start_s[l]) S.out.start_s[l] = t0;
      S.out.used[l] = 1;
    }
}

static void step_mark_end(const SimStep *st, int s) {
  double now = simgrid_get_clock();
  for (int l = 0; l < RF_PHASE_COUNT; l++)
    if ((S.step_phases[s] & (1u << l)) && (st->post_s > 0 || now > S.out.end_s[l]))
      if (now > S.out.end_s[l]) S.out.end_s[l] = now;
}

/* Host h's flows of step s in its lane: post every receive, send each flow once its offset from
 * t1 has passed, and record when each phase's last send ends. */
static void step_flows(const SimProgram *p, int s, int h, int lane, double t1) {
  size_t idx = (size_t)s * p->nhosts + h;
  uint32_t nin = S.in_count[idx], nout = S.out_count[idx];
  g_autofree sg_comm_t *gets = g_new(sg_comm_t, nin > 0 ? nin : 1);
  g_autofree void **slots = g_new0(void *, nin > 0 ? nin : 1);
  for (uint32_t i = 0; i < nin; i++)
    gets[i] = sg_mailbox_get_async(S.mb[lane * p->nhosts + h], &slots[i]);
  g_autofree sg_comm_t *puts = g_new(sg_comm_t, nout > 0 ? nout : 1);
  g_autofree uint8_t *ph = g_new(uint8_t, nout > 0 ? nout : 1);
  for (uint32_t i = 0; i < nout; i++) {
    const SimFlow *f = &g_array_index(p->flows, SimFlow, S.out_first[idx] + i);
    if (t1 + f->offset_s > simgrid_get_clock()) sg_actor_sleep_until(t1 + f->offset_s);
    puts[i] = rf_sim_put_async_rate(S.mb[lane * p->nhosts + f->dst], &token, (long)(f->bytes + 0.5),
                                    f->rate_Bps);
    ph[i] = f->phase;
  }
  size_t left = nout;
  while (left > 0) {
    ssize_t k = sg_comm_wait_any(puts, left);
    double now = simgrid_get_clock();
    if (now > S.out.end_s[ph[k]]) S.out.end_s[ph[k]] = now;
    puts[k] = puts[left - 1];
    ph[k] = ph[left - 1];
    left--;
  }
  if (nin) sg_comm_wait_all(gets, nin);
}

static void host_actor(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const SimProgram *p = S.p;
  int h = (int)(intptr_t)sg_actor_self_get_data() / SIM_MAX_LANES;
  int lane = (int)(intptr_t)sg_actor_self_get_data() % SIM_MAX_LANES;
  for (int s = 0; s < p->nsteps; s++) {
    const SimStep *st = &p->steps[s];
    if (st->join && p->nlanes > 1) sg_barrier_wait(S.bar_all); /* every lane got here */
    if (st->lane != lane) continue;
    double t0 = simgrid_get_clock();
    if (h == 0 && p->nlanes == 1 && p->group > 1) step_set_bandwidths(p, s);
    if (h == 0) step_mark_start(s, t0);
    if (h == 0) S.out.step_start_s[s] = t0;
    if (st->pre_s > 0) sg_actor_sleep_for(st->pre_s);
    step_flows(p, s, h, lane, simgrid_get_clock());
    if (st->post_s > 0) sg_actor_sleep_for(st->post_s);
    double host_left = t0 + st->host_s - simgrid_get_clock();
    if (host_left > 0) sg_actor_sleep_for(host_left);
    sg_barrier_wait(S.bar[lane]);
    if (h == 0) step_mark_end(st, s);
    if (h == 0) S.out.step_end_s[s] = simgrid_get_clock();
  }
}

/* refit's executor: actor `rank` runs its program of the schedule (sim/models/refit_executor.c):
 * one rank's, or on a coarse platform the one program of the ranks of one simulated host. */

/* The actor's copies and host time are slept in one piece where nothing happens between them
 * (an unpack, the next pack and its group's launch): each sleep is a SimGrid event, and the times
 * are the same (the clock plus the owed time). */
static void pay(double *owed) {
  if (*owed > 0) sg_actor_sleep_for(*owed);
  *owed = 0;
}

/* sim_exec_self_end of the actor's round i (R: its rounds) posted at `posted`. */
static double self_end(const SimExec *e, const SimExecRound *R, int i, double posted) {
  return sim_exec_self_end(e, (uint64_t)(R - e->rounds) + (uint64_t)i, posted);
}

static void rank_actor(int argc, char **argv) {
  (void)argc;
  (void)argv;
  const SimExec *e = S.p->exec;
  const int rank = (int)(intptr_t)sg_actor_self_get_data();
  const SimExecRound *R = e->rounds + e->round_first[rank];
  const int nr = (int)(e->round_first[rank + 1] - e->round_first[rank]);
  int cur[SIM_MAX_LANES], next = 0;
  double posted[SIM_MAX_LANES], done_at[SIM_MAX_LANES] = {0};
  GArray *comms[SIM_MAX_LANES];
  uint64_t moving = 0; /* lanes with a group in flight on the one stream, its comms or its
                        * self-send copy (bit per lane; none with lane_comms, whose groups wait
                        * for no other lane) */
  G_STATIC_ASSERT(SIM_MAX_LANES <= 64);
  for (int l = 0; l < SIM_MAX_LANES; l++)
    comms[l] = g_array_new(FALSE, FALSE, sizeof(sg_comm_t));
  void *slot = NULL;
  double owed = e->setup_s > 0 ? e->setup_s : 0; /* sleep not yet taken */
  for (uint64_t i = e->prog_first[rank]; i < e->prog_first[rank + 1]; i++) {
    const RfSchedOp *op = &e->prog[i];
    const int lane = op->lane;
    switch ((RfSchedOpKind)op->kind) {
    case RF_SOP_PACK:
      g_assert(next < nr && R[next].round == op->round);
      cur[lane] = next++;
      if (R[cur[lane]].pack_s > 0) owed += R[cur[lane]].pack_s;
      break;
    case RF_SOP_POST: {
      const SimExecRound *r = &R[cur[lane]];
      /* the host enqueues the group (while the groups before it still move); on the one
       * communication stream it starts when the rank's groups before it are done; with a
       * communicator and stream per lane (lane_comms) at once (its own lane's group before it
       * was waited before the lane was packed again) */
      if (e->launch_s > 0) owed += e->launch_s;
      pay(&owed);
      for (uint64_t m = moving; m; m &= m - 1) { /* (never set with lane_comms) */
        const int l = __builtin_ctzll(m);
        sg_comm_wait_all((sg_comm_t *)(void *)comms[l]->data, comms[l]->len);
        g_array_set_size(comms[l], 0);
        owed = self_end(e, R, cur[l], posted[l]) - simgrid_get_clock(); /* its self-sends' copy */
        pay(&owed);
        done_at[l] = simgrid_get_clock();
      }
      moving = 0;
      double now = simgrid_get_clock();
      posted[lane] = now;
      if (!S.out.step_start_s[r->step] || now < S.out.step_start_s[r->step])
        S.out.step_start_s[r->step] = now;
      char name[40];
      if (r->nrecv) {
        snprintf(name, sizeof name, "x%d.%d", rank, r->round);
        sg_mailbox_t mb = sg_mailbox_by_name(name);
        for (uint32_t k = 0; k < r->nrecv; k++) {
          sg_comm_t c = sg_mailbox_get_async(mb, &slot);
          g_array_append_val(comms[lane], c);
        }
      }
      for (uint32_t k = 0; k < r->nsend; k++) {
        const SimExecSend *sd = &e->sends[r->send_first + k];
        snprintf(name, sizeof name, "x%d.%d", sd->peer, r->round);
        sg_comm_t c =
            sg_mailbox_put_async(sg_mailbox_by_name(name), &token, (long)(sd->bytes + 0.5));
        g_array_append_val(comms[lane], c);
      }
      if ((comms[lane]->len || self_end(e, R, cur[lane], now) > now) && !e->lane_comms)
        moving |= UINT64_C(1) << lane;
      break;
    }
    case RF_SOP_WAIT: {
      const SimExecRound *r = &R[cur[lane]];
      pay(&owed);
      if (comms[lane]->len) {
        sg_comm_wait_all((sg_comm_t *)(void *)comms[lane]->data, comms[lane]->len);
        g_array_set_size(comms[lane], 0);
        done_at[lane] = simgrid_get_clock();
      }
      owed = self_end(e, R, cur[lane], posted[lane]) - simgrid_get_clock(); /* self-sends' copy */
      pay(&owed);
      moving &= ~(UINT64_C(1) << lane);
      double now = MAX(done_at[lane], posted[lane]);
      for (uint32_t k = 0; k < r->nsend; k++)
        sim_outcome_phase(&S.out, e->sends[r->send_first + k].phase, posted[lane], now);
      if (rank == S.progress_rank) show_progress(cur[lane] + 1, nr);
      break;
    }
    case RF_SOP_UNPACK: {
      const SimExecRound *r = &R[cur[lane]];
      if (r->unpack_s > 0) owed += r->unpack_s;
      double now = simgrid_get_clock() + owed;
      if (now > S.out.step_end_s[r->step]) S.out.step_end_s[r->step] = now;
      break;
    }
    }
  }
  pay(&owed); /* the last unpack ends the rank's refit */
  for (int l = 0; l < SIM_MAX_LANES; l++)
    g_array_free(comms[l], TRUE);
}

static void spawn_rank_actors(const SimProgram *p) {
  S.progress_rank = -1;
  S.wall0 = S.shown = g_get_monotonic_time();
  uint64_t most = 0; /* progress: the rank with the most groups */
  for (int r = 0; p->progress && r < p->exec->nranks; r++)
    if (p->exec->host[r] >= 0 && p->exec->round_first[r + 1] - p->exec->round_first[r] > most) {
      most = p->exec->round_first[r + 1] - p->exec->round_first[r];
      S.progress_rank = r;
    }
  for (int r = 0; r < p->exec->nranks; r++) {
    if (p->exec->host[r] < 0 || p->exec->prog_first[r] == p->exec->prog_first[r + 1]) continue;
    char name[32], hn[32];
    snprintf(name, sizeof name, "r%d", r);
    snprintf(hn, sizeof hn, "h%d", p->exec->host[r]);
    sg_actor_t a = sg_actor_init(name, sg_host_by_name(hn));
    sg_actor_set_data(a, (void *)(intptr_t)r);
    sg_actor_start(a, rank_actor, 0, NULL);
  }
}

/* Per (step, host): the first of its outgoing flows (flows are sorted by step, then source),
 * how many it sends and how many it receives; per step, the phases it moves. */
static void index_flows(const SimProgram *p) {
  size_t n = (size_t)p->nsteps * p->nhosts;
  S.out_first = g_new0(uint32_t, n);
  S.out_count = g_new0(uint32_t, n);
  S.in_count = g_new0(uint32_t, n);
  S.step_phases = g_new0(uint32_t, MAX(p->nsteps, 1));
  for (guint i = 0; i < p->flows->len; i++) {
    const SimFlow *f = &g_array_index(p->flows, SimFlow, i);
    size_t o = (size_t)f->step * p->nhosts + f->src;
    if (!S.out_count[o]) S.out_first[o] = i;
    S.out_count[o]++;
    S.in_count[(size_t)f->step * p->nhosts + f->dst]++;
    S.step_phases[f->step] |= 1u << f->phase;
  }
  for (int s = 0; s < p->nsteps; s++)
    if (!S.step_phases[s] && p->steps[s].pre_s > 0 && !strncmp(p->steps[s].name, "export", 6))
      S.step_phases[s] |= 1u << RF_PHASE_EXPORT;
}

/* Links by index; one mailbox per (lane, host); one
 * barrier per lane; one actor per (host, lane). */
static void spawn_actors(const SimProgram *p) {
  int nl = sim_nlinks(p);
  S.links = g_new(sg_link_t, nl);
  for (int l = 0; l < nl; l++) {
    char name[32];
    snprintf(name, sizeof name, "l%d", l);
    S.links[l] = sg_link_by_name(name);
  }
  S.mb = g_new(sg_mailbox_t, (size_t)p->nlanes * p->nhosts);
  S.bar_all = sg_barrier_init((unsigned)(p->nhosts * p->nlanes));
  for (int lane = 0; lane < p->nlanes; lane++) {
    S.bar[lane] = sg_barrier_init((unsigned)p->nhosts);
    for (int h = 0; h < p->nhosts; h++) {
      char name[32];
      snprintf(name, sizeof name, "m%d.%d", h, lane);
      S.mb[lane * p->nhosts + h] = sg_mailbox_by_name(name);
    }
  }
  for (int lane = 0; lane < p->nlanes; lane++)
    for (int h = 0; h < p->nhosts; h++) {
      char name[32], hn[32];
      snprintf(name, sizeof name, "a%d.%d", h, lane);
      snprintf(hn, sizeof hn, "h%d", h);
      sg_actor_t a = sg_actor_init(name, sg_host_by_name(hn));
      sg_actor_set_data(a, (void *)(intptr_t)(h * SIM_MAX_LANES + lane));
      sg_actor_start(a, host_actor, 0, NULL);
    }
}

static gboolean write_all(int fd, const void *buf, size_t n) {
  const char *c = buf;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return FALSE;
    c += w;
    n -= (size_t)w;
  }
  return TRUE;
}

static gboolean read_all(int fd, void *buf, size_t n) {
  char *c = buf;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return FALSE;
    c += r;
    n -= (size_t)r;
  }
  return TRUE;
}

/* Runs the program and writes its outcome to fd; never returns. */
static void run_child(const SimProgram *p, const char *xml, int fd) {
  int argc = 7;
  char *argv[16] = {"refit-sim", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                    /* no TCP window: BRIEF section 6 says TCP-gamma:0, but CM02 then also
                     * drops a flow's own rate bound (bound = min(rate, gamma / 2 latency));
                     * an unbounded gamma removes the window and keeps the rate bounds */
                    "--cfg=network/TCP-gamma:1e300",
                    /* the flow model: the full update (SimGrid's lazy one let an oversubscribed
                     * leaf uplink carry 118% of its rate on one plan, docs/sim.md); the
                     * exact executor: the lazy one with pair links (pair_links above) */
                    pair_links(p) ? "--cfg=network/optim:Lazy" : "--cfg=network/optim:Full",
                    "--cfg=contexts/stack-size:256", "--log=root.thresh:critical", NULL};
  /* REFIT_SIM_CFG: more SimGrid options, space-separated, for experiments (docs/sim.md, Speed) */
  const char *more = g_getenv("REFIT_SIM_CFG");
  GStrv extra = g_strsplit(more ? more : "", " ", 8); /* freed before _exit (no cleanup runs) */
  for (int i = 0; extra[i] && argc < 15; i++)
    if (*extra[i]) argv[argc++] = extra[i];
  argv[argc] = NULL;
  simgrid_init(&argc, argv);
  simgrid_load_platform(xml);
  memset(&S, 0, sizeof S);
  S.p = p;
  sim_outcome_start(&S.out, p->nsteps);
  if (p->exec) {
    spawn_rank_actors(p);
  } else {
    index_flows(p);
    spawn_actors(p);
  }
  simgrid_run();
  S.out.total_s = simgrid_get_clock();
  /* the figures (the parent's own step arrays kept), then the step times */
  SimOutcome fixed = S.out;
  fixed.step_start_s = fixed.step_end_s = NULL;
  const size_t nb = sizeof(double) * (size_t)p->nsteps;
  gboolean ok = write_all(fd, &fixed, sizeof fixed) && write_all(fd, S.out.step_start_s, nb) &&
                write_all(fd, S.out.step_end_s, nb);
  close(fd);
  g_strfreev(extra);
  _exit(ok ? 0 : 3);
}

/* Forks the child that runs the program; reads its outcome back. */
static gboolean run_forked(const SimProgram *p, const char *xml, SimOutcome *out, GError **error) {
  int pfd[2];
  if (pipe(pfd) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "sim: pipe: %s", g_strerror(errno));
    return FALSE;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO, "sim: fork: %s", g_strerror(errno));
    close(pfd[0]);
    close(pfd[1]);
    return FALSE;
  }
  if (pid == 0) {
    close(pfd[0]);
    run_child(p, xml, pfd[1]);
  }
  close(pfd[1]);
  SimOutcome fixed;
  const size_t nb = sizeof(double) * (size_t)p->nsteps;
  gboolean got = read_all(pfd[0], &fixed, sizeof fixed) && fixed.nsteps == p->nsteps &&
                 read_all(pfd[0], out->step_start_s, nb) && read_all(pfd[0], out->step_end_s, nb);
  if (got) {
    fixed.step_start_s = out->step_start_s;
    fixed.step_end_s = out->step_end_s;
    *out = fixed;
  }
  close(pfd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_IO,
                "sim: the SimGrid run failed (status %d, platform %s)", status, xml);
    return FALSE;
  }
  return TRUE;
}

gboolean sim_engine_run(const SimProgram *p, gboolean keep_platform, SimOutcome *out,
                        GError **error) {
  sim_outcome_start(out, p->nsteps);
  if (p->nhosts == 0) return TRUE;
  if (p->nlanes > SIM_MAX_LANES || p->nsteps > SIM_MAX_STEPS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "sim: at most %d lanes and %d steps",
                SIM_MAX_LANES, SIM_MAX_STEPS);
    return FALSE;
  }
  g_autofree char *xml = NULL;
  int tfd = g_file_open_tmp("refit-sim-XXXXXX.xml", &xml, error);
  if (tfd < 0) return FALSE;
  close(tfd);
  gboolean ok = write_platform(p, xml, error);
  if (ok && !run_forked(p, xml, out, error)) {
    ok = FALSE;
    keep_platform = TRUE; /* for the error message */
  }
  if (keep_platform && ok)
    g_printerr("sim: platform kept in %s\n", xml);
  else if (!keep_platform)
    g_unlink(xml);
  return ok;
}
