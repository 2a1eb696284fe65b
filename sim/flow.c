/* The flow program's primitives, shared by refit's own strategies (program.c) and the software
 * models (models/): steps on lanes, the routes and links of the simulated platform, and the
 * group factors that keep a grouped host's links as busy as its busiest GPU's. */
#include "internal.h"

#include <string.h>

int sim_add_step(SimProgram *p, int lane, const char *name, double pre_s, double post_s) {
  g_assert(p->nsteps < SIM_MAX_STEPS);
  if (p->nsteps == p->steps_cap) {
    p->steps_cap = MIN(MAX(64, 2 * p->steps_cap), SIM_MAX_STEPS);
    p->steps = g_renew(SimStep, p->steps, p->steps_cap);
    p->frac = g_realloc_n(p->frac, (gsize)p->steps_cap, sizeof p->frac[0]);
  }
  memset(p->frac[p->nsteps], 0, sizeof p->frac[0]);
  SimStep *s = &p->steps[p->nsteps];
  memset(s, 0, sizeof *s);
  s->lane = lane;
  s->pre_s = pre_s;
  s->post_s = post_s;
  g_strlcpy(s->name, name, sizeof s->name);
  return p->nsteps++;
}

/* A host of several GPUs gets the summed links of its GPUs, scaled so that each link is busy
 * exactly as long as the busiest of the GPU links it stands for, over the whole run
 * (link_scale, for the report) and in each step (step_scale, applied when the step starts):
 * grouping then cannot hide a hot GPU, and the bottleneck of the exact platform is kept.
 * load(p, ud, s, g, k): bytes of GPU g on host link k in step s (s < 0: the whole run). */
void sim_group_scales(SimProgram *p, int ngpus, SimLoadFn load, const void *ud) {
  int nl = sim_nlinks(p), group = p->group;
  p->link_scale = g_new(double, nl);
  p->step_scale = g_new(double, (size_t)nl *(p->nsteps > 0 ? p->nsteps : 1));
  for (int l = 0; l < nl; l++)
    p->link_scale[l] = 1.0;
  for (size_t l = 0; l < (size_t)nl * p->nsteps; l++)
    p->step_scale[l] = 1.0;
  if (group == 1) return;
  for (int h = 0; h < p->nhosts; h++)
    for (int k = 0; k < SIM_HOST_LINKS; k++)
      for (int s = -1; s < p->nsteps; s++) {
        double sum = 0, mx = 0;
        for (int g = p->host_gpu[h]; g < p->host_gpu[h] + group && g < ngpus; g++) {
          double v = load(p, ud, s, g, k);
          sum += v;
          if (v > mx) mx = v;
        }
        if (mx <= 0) continue;
        if (s < 0)
          p->link_scale[h * SIM_HOST_LINKS + k] = sum / (group * mx);
        else
          p->step_scale[(size_t)s * nl + h * SIM_HOST_LINKS + k] = sum / (group * mx);
      }
}

/* ---- routes and links ---- */

int sim_nlinks(const SimProgram *p) {
  return p->nhosts * SIM_HOST_LINKS + (p->leaves ? 2 * p->nleaves : 0);
}

gboolean sim_route_is_net(const SimProgram *p, int src, int dst) {
  return p->host_gpu[src] / p->gpus_per_domain != p->host_gpu[dst] / p->gpus_per_domain;
}

int sim_route(const SimProgram *p, int src, int dst, int *out) {
  int n = 0;
  out[n++] = src * SIM_HOST_LINKS + SIM_LINK_HBM;
  if (sim_route_is_net(p, src, dst)) {
    out[n++] = src * SIM_HOST_LINKS + SIM_LINK_NICUP;
    if (p->leaves && p->host_leaf[src] != p->host_leaf[dst]) {
      int base = p->nhosts * SIM_HOST_LINKS;
      out[n++] = base + 2 * p->host_leaf[src];
      out[n++] = base + 2 * p->host_leaf[dst] + 1;
    }
    out[n++] = dst * SIM_HOST_LINKS + SIM_LINK_NICDN;
  } else {
    out[n++] = src * SIM_HOST_LINKS + SIM_LINK_NVUP;
    out[n++] = dst * SIM_HOST_LINKS + SIM_LINK_NVDN;
  }
  if (dst != src) out[n++] = dst * SIM_HOST_LINKS + SIM_LINK_HBM;
  return n;
}

double sim_link_Bps(const SimProgram *p, int link) {
  return sim_link_base_Bps(p, link) * (p->link_scale ? p->link_scale[link] : 1.0);
}

double sim_link_base_Bps(const SimProgram *p, int link) {
  int base = p->nhosts * SIM_HOST_LINKS;
  if (link >= base) return p->leaf_Bps;
  double s = 1.0;
  switch (link % SIM_HOST_LINKS) {
  case SIM_LINK_HBM:
    return p->hbm_Bps * s;
  case SIM_LINK_NVUP:
  case SIM_LINK_NVDN:
    return p->nvl_Bps * s;
  default:
    return p->nic_Bps * s;
  }
}

/* Latency of link l: NVLink on the sending side of an NVLink hop, NIC + switch on the sending
 * side of a network hop, a switch on leaf uplinks. */
double sim_link_latency_s(const SimProgram *p, int l) {
  if (l >= p->nhosts * SIM_HOST_LINKS) return p->sw_lat_s;
  int k = l % SIM_HOST_LINKS;
  if (k == SIM_LINK_NVUP) return p->nvl_lat_s;
  if (k == SIM_LINK_NICUP) return p->nic_lat_s + p->sw_lat_s;
  return 0;
}

/* TRUE when host h's HBM link cannot be the bottleneck of any flow: every flow over it also
 * crosses one of the host's four NVLink / NIC links, so its load never exceeds their summed
 * capacity. Max-min sharing is then the same without it, and SimGrid solves a smaller system
 * (every message start and end re-solves the sharing of all messages in flight). Only for the
 * executor's rank actors: the flow model rescales links per step (step_set_bandwidths). */
gboolean sim_link_hbm_slack(const SimProgram *p, int h) {
  double sum = 0;
  for (int k = SIM_LINK_NVUP; k < SIM_HOST_LINKS; k++)
    sum += sim_link_Bps(p, h * SIM_HOST_LINKS + k);
  return sim_link_Bps(p, h * SIM_HOST_LINKS + SIM_LINK_HBM) >= sum;
}

int sim_exec_route(const SimProgram *p, int src, int dst, int *out, double *lat_s) {
  int all[8], n = sim_route(p, src, dst, all), kept = 0;
  double lat = 0;
  for (int k = 0; k < n; k++) {
    const int l = all[k];
    lat += sim_link_latency_s(p, l);
    if (!p->exact_routes && l < p->nhosts * SIM_HOST_LINKS && l % SIM_HOST_LINKS == SIM_LINK_HBM &&
        sim_link_hbm_slack(p, l / SIM_HOST_LINKS))
      continue;
    out[kept++] = l;
  }
  if (lat_s) *lat_s = lat;
  return kept;
}

void sim_outcome_start(SimOutcome *o, int nsteps) {
  sim_outcome_clear(o);
  o->nsteps = nsteps;
  o->step_start_s = g_new0(double, MAX(nsteps, 1));
  o->step_end_s = g_new0(double, MAX(nsteps, 1));
}

void sim_outcome_clear(SimOutcome *o) {
  g_free(o->step_start_s);
  g_free(o->step_end_s);
  memset(o, 0, sizeof *o);
}

void sim_outcome_phase(SimOutcome *o, int ph, double start, double end) {
  if (!o->used[ph] || start < o->start_s[ph]) o->start_s[ph] = start;
  o->used[ph] = 1;
  if (end > o->end_s[ph]) o->end_s[ph] = end;
}

char *sim_link_name(const SimProgram *p, const RfProblem *pb, int link) {
  (void)pb;
  int base = p->nhosts * SIM_HOST_LINKS;
  if (link >= base) {
    int l = (link - base) / 2;
    return g_strdup_printf("leaf%d.%s", l, (link - base) % 2 ? "down" : "up");
  }
  int h = link / SIM_HOST_LINKS;
  static const char *kind[SIM_HOST_LINKS] = {"HBM", "NVLink.tx", "NVLink.rx", "NIC.tx", "NIC.rx"};
  if (p->group == 1)
    return g_strdup_printf("gpu%d.%s", p->host_gpu[h], kind[link % SIM_HOST_LINKS]);
  return g_strdup_printf("gpu%d-%d.%s", p->host_gpu[h], p->host_gpu[h] + p->group - 1,
                         kind[link % SIM_HOST_LINKS]);
}
