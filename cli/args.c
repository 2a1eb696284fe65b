#include "args.h"
#include "advise.h"
#include "datafile.h"
#include "error.h"
#include "quant.h"

#include "report.h"

#include <string.h>

/* --domain-size: an integer in 1..RF_MAX_RANKS-1 (0 in RfArgs means "not given"). */
static gboolean parse_domain_size(const char *name, const char *value, gpointer data,
                                  GError **error) {
  RfArgs *a = data;
  char *end = NULL;
  long long v = g_ascii_strtoll(value, &end, 10);
  if (!*value || *end || v < 1 || v >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "%s must be 1..%d, got '%s'", name,
                RF_MAX_RANKS - 1, value);
    return FALSE;
  }
  a->domain_size = (int)v;
  return TRUE;
}

gboolean rf_args_parse(GOptionContext *ctx, int *argc, char ***argv, gboolean positional,
                       GError **error) {
  /* g_option_context_parse reorders argv: keep the original order to find the culprit */
  char **orig = g_memdup2(*argv, sizeof(char *) * (gsize)(*argc + 1));
  int n = *argc;
  GError *e = NULL;
  gboolean ok = g_option_context_parse(ctx, argc, argv, &e);
  if (!ok && e->domain == G_CONVERT_ERROR) {
    /* GLib says only "Invalid byte sequence in conversion input": name the option */
    for (int i = 1; i < n; i++) {
      char *u = g_locale_to_utf8(orig[i], -1, NULL, NULL, NULL);
      g_free(u);
      if (u) continue;
      const char *eq = orig[i][0] == '-' ? strchr(orig[i], '=') : NULL;
      char *opt = eq ? g_strndup(orig[i], (gsize)(eq - orig[i]))
                     : g_strdup(i > 1 && orig[i - 1][0] == '-' ? orig[i - 1] : "an argument");
      for (char *c = opt; *c; c++)
        if ((unsigned char)*c >= 0x80) *c = '?';
      char *codeset = g_get_codeset();
      g_clear_error(&e);
      g_set_error(&e, RF_ERROR, RF_ERROR_INPUT,
                  "%s: the value has bytes that are not text in this locale (%s)", opt, codeset);
      g_free(codeset);
      g_free(opt);
      break;
    }
  }
  g_free(orig);
  if (ok && !positional && *argc > 1) {
    char *arg = g_strdup((*argv)[1]);
    for (char *c = arg; *c; c++)
      if ((unsigned char)*c >= 0x80 || (unsigned char)*c < 0x20) *c = '?';
    g_set_error(&e, RF_ERROR, RF_ERROR_INPUT, "unexpected argument '%s'", arg);
    g_free(arg);
    ok = FALSE;
  }
  if (e) g_propagate_error(error, e);
  return ok;
}

/* The shared entries, bound to a (terminated). */
static void args_entries(RfArgs *a, GOptionEntry *out) {
  const GOptionEntry entries[RF_ARGS_NENTRIES] = {
      {"model", 'm', 0, G_OPTION_ARG_STRING, &a->model,
       "Model: a zoo name (refit model list), a config.json / tensor listing, or a checkpoint "
       "directory (config.json + safetensors headers)",
       "NAME|FILE|DIR"},
      {"train", 't', 0, G_OPTION_ARG_STRING, &a->train,
       "Megatron training layout, e.g. TP4xPP8xEP16 (DP omitted: smallest world consistent with "
       "EP)",
       "LAYOUT"},
      {"infer", 'i', 0, G_OPTION_ARG_STRING, &a->infer,
       "Inference layout, e.g. TP8xDP16 (vLLM: EP, if given, is TP x DP (one engine with vLLM "
       "DP, experts over all its ranks) or TP (experts over each engine's own TP ranks); SGLang: "
       "EP and ADP divide TP; Megatron: TP, EP, ETP, DP)",
       "LAYOUT"},
      {"infer-framework", 0, 0, G_OPTION_ARG_STRING, &a->infer_fw,
       "Inference layout of: vllm, sglang or megatron (generation backend); default vllm", "NAME"},
      {"lost", 0, 0, G_OPTION_ARG_STRING, &a->lost,
       "Elastic recovery: replan without these GPUs (global GPU indices, comma list)", "GPU,..."},
      {"lost-domain", 0, 0, G_OPTION_ARG_STRING, &a->lost_dom,
       "Elastic recovery: replan without every GPU of these NVLink domains (comma list)", "D,..."},
      {"infer-quant", 0, 0, G_OPTION_ARG_STRING, &a->quant,
       "Inference weights quantized: none, fp8-block (e4m3, 128x128 blocks, fp32 "
       "weight_scale_inv) or mxfp8 (e4m3, 32 along the input, e8m0 scales); default none",
       "FORMAT"},
      {"quant-at", 0, 0, G_OPTION_ARG_STRING, &a->quant_at,
       "Where to quantize: sender (before the network, FP8 on the wire) or receiver (BF16 on the "
       "wire); default sender",
       "WHERE"},
      {"spec", 0, 0, G_OPTION_ARG_FILENAME, &a->spec,
       "Raw DTensor spec (JSON, docs/formats.md) instead of model and layouts", "FILE"},
      {"topology", 'T', 0, G_OPTION_ARG_STRING, &a->topology,
       "Cluster: dgx-h100, gb200-nvl72, gb200-nvl72-800g or a .topo file (default: dgx-h100 for "
       "sim and step; NVLink domains of --domain-size GPUs, no bandwidths, for plan and run)",
       "NAME|FILE"},
      {"domain-size", 'D', 0, G_OPTION_ARG_CALLBACK, (gpointer)parse_domain_size,
       "GPUs per NVLink domain (default 8, or the topology's)", "N"},
      {"strategy", 's', 0, G_OPTION_ARG_STRING, &a->strategy,
       "gather-broadcast, p2p, m2n, hybrid, a comma list of them, or all (default all)", "NAME"},
      {"json", 0, 0, G_OPTION_ARG_NONE, &a->json, "Print JSON instead of a table", NULL},
      {"quiet", 'q', 0, G_OPTION_ARG_NONE, &a->quiet, "No placement notes on stderr", NULL},
      {"placement", 0, 0, G_OPTION_ARG_STRING, &a->placement,
       "GPU placement of the two sides: split (training domains first, then inference; default) "
       "or interleaved (training and inference domains alternate, as refit advise may pick)",
       "split|interleaved"},
      {"node-map", 0, 0, G_OPTION_ARG_INT, &a->node_map,
       "Print which node of N GPUs (8 on a DGX, 4 on a GB200 tray) holds which training and "
       "inference ranks (refit run: MPI rank = global rank)",
       "N"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  memcpy(out, entries, sizeof entries);
}

GOptionGroup *rf_args_group(RfArgs *a) {
  GOptionEntry entries[RF_ARGS_NENTRIES];
  args_entries(a, entries);
  GOptionGroup *g = g_option_group_new("problem", "Model, layouts and cluster",
                                       "Show model, layout and cluster options", a, NULL);
  g_option_group_add_entries(g, entries);
  return g;
}

gboolean rf_args_entry(RfArgs *a, const char *long_name, GOptionEntry *out) {
  GOptionEntry entries[RF_ARGS_NENTRIES];
  args_entries(a, entries);
  for (int i = 0; entries[i].long_name; i++)
    if (!strcmp(entries[i].long_name, long_name) && entries[i].arg != G_OPTION_ARG_CALLBACK) {
      *out = entries[i];
      return TRUE;
    }
  return FALSE;
}

void rf_args_clear(RfArgs *a) {
  g_free(a->model);
  g_free(a->train);
  g_free(a->infer);
  g_free(a->infer_fw);
  g_free(a->lost);
  g_free(a->lost_dom);
  g_free(a->quant);
  g_free(a->quant_at);
  g_free(a->spec);
  g_free(a->topology);
  g_free(a->strategy);
  g_free(a->placement);
  memset(a, 0, sizeof *a);
}

static RfProblem *args_problem(const RfArgs *a, GError **error) {
  RfTopology *topo;
  if (a->domain_size < 0 || a->domain_size >= RF_MAX_RANKS) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--domain-size must be 1..%d", RF_MAX_RANKS - 1);
    return NULL;
  }
  if (a->topology) {
    topo = rf_topology_load(a->topology, error);
    if (!topo) return NULL;
    if (a->domain_size > 0) topo->gpus_per_domain = a->domain_size;
  } else {
    topo = rf_topology_new_domains(a->domain_size > 0 ? a->domain_size : 8);
  }
  if (a->spec) {
    if (a->model || a->train || a->infer || a->infer_fw) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--spec replaces --model, --train, --infer and --infer-framework; give one or "
                  "the other");
      rf_topology_free(topo);
      return NULL;
    }
    char *text = NULL;
    gsize len = 0;
    GError *e = NULL;
    if (!rf_file_read(a->spec, RF_MAX_INPUT_BYTES, &text, &len, &e)) {
      g_set_error(error, RF_ERROR, e->code, "cannot read spec: %s", e->message);
      g_error_free(e);
      rf_topology_free(topo);
      return NULL;
    }
    RfProblem *pb = rf_problem_new_spec(text, (gssize)len, topo, error);
    g_free(text);
    return pb;
  }
  if (!a->model || !a->train || !a->infer) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "need --model, --train and --infer (or --spec FILE)");
    rf_topology_free(topo);
    return NULL;
  }
  RfInferFramework fw = RF_INFER_VLLM;
  if (a->infer_fw && !rf_infer_framework_parse(a->infer_fw, &fw, error)) {
    g_prefix_error(error, "--infer-framework: ");
    rf_topology_free(topo);
    return NULL;
  }
  RfModel *m = rf_model_load(a->model, error);
  if (m && !rf_model_check_plannable(m, error)) g_clear_pointer(&m, rf_model_free);
  if (!m) {
    rf_topology_free(topo);
    return NULL;
  }
  return rf_problem_new_preset_fw(m, a->train, a->infer, fw, topo, error);
}

/* "3,17,42": non-negative decimal numbers below 2^31, appended to out. */
static gboolean parse_index_list(const char *opt, const char *s, GArray *out, GError **error) {
  char **tok = g_strsplit(s, ",", -1);
  gboolean ok = tok[0] != NULL;
  for (int i = 0; ok && tok[i]; i++) {
    const char *t = tok[i];
    size_t nd = strspn(t, "0123456789");
    ok = nd > 0 && nd <= 10 && !t[nd] && g_ascii_strtoll(t, NULL, 10) <= G_MAXINT32;
    if (ok) {
      int v = (int)g_ascii_strtoll(t, NULL, 10);
      g_array_append_val(out, v);
    }
  }
  g_strfreev(tok);
  if (!ok) {
    g_autofree char *es = g_strescape(s, NULL);
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                "%s '%s': want a comma list of whole numbers from 0 (e.g. 3,17)", opt, es);
  }
  return ok;
}

/* Mark the GPUs of --lost and of --lost-domain lost. */
static gboolean args_set_lost(RfProblem *pb, GArray *gpus, GArray *doms, GError **error) {
  int D = pb->topo->gpus_per_domain;
  for (guint i = 0; i < doms->len; i++) {
    int d = g_array_index(doms, int, i), any = 0;
    for (int r = 0; r < pb->nranks; r++)
      if (pb->gpu[r] >= 0 && pb->gpu[r] / D == d) {
        g_array_append_val(gpus, pb->gpu[r]);
        any = 1;
      }
    if (!any) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT,
                  "--lost-domain %d: no rank of this refit sits in NVLink domain %d", d, d);
      return FALSE;
    }
  }
  return rf_problem_set_lost(pb, (const int *)gpus->data, (int)gpus->len, error);
}

RfProblem *rf_args_problem(const RfArgs *a, GError **error) {
  g_autoptr(GArray) gpus = g_array_new(FALSE, FALSE, sizeof(int));
  g_autoptr(GArray) doms = g_array_new(FALSE, FALSE, sizeof(int));
  RfQuantFormat qf = RF_QUANT_NONE;
  RfQuantAt qa = RF_QUANT_AT_SENDER;
  if (a->lost && !parse_index_list("--lost", a->lost, gpus, error)) return NULL;
  if (a->lost_dom && !parse_index_list("--lost-domain", a->lost_dom, doms, error)) return NULL;
  if (a->quant && !rf_quant_format_parse(a->quant, &qf, error)) {
    g_prefix_error(error, "--infer-quant: ");
    return NULL;
  }
  if (a->quant_at && !rf_quant_at_parse(a->quant_at, &qa, error)) {
    g_prefix_error(error, "--quant-at: ");
    return NULL;
  }
  if (a->quant_at && qf == RF_QUANT_NONE) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--quant-at needs --infer-quant fp8-block|mxfp8");
    return NULL;
  }
  RfPlacementKind place = RF_PLACE_SPLIT;
  if (a->placement && !rf_placement_kind_parse(a->placement, &place, error)) {
    g_prefix_error(error, "--placement: ");
    return NULL;
  }
  if (a->node_map < 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--node-map %d: GPUs per node must be >= 1",
                a->node_map);
    return NULL;
  }
  g_autoptr(RfProblem) pb = args_problem(a, error);
  if (pb && place == RF_PLACE_INTERLEAVED) rf_problem_interleave(pb);
  if (pb && (a->lost || a->lost_dom) && !args_set_lost(pb, gpus, doms, error)) return NULL;
  if (pb && !rf_problem_set_quant(pb, qf, qa, error)) return NULL;
  return g_steal_pointer(&pb);
}

/* "a-b,c" of the sorted ranks in v (n of them), "-" for none. */
static void append_ranges(GString *out, const int *v, int n) {
  if (n == 0) g_string_append_c(out, '-');
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && v[j + 1] == v[j] + 1)
      j++;
    g_string_append_printf(out, "%s%d", i ? "," : "", v[i]);
    if (j > i) g_string_append_printf(out, "-%d", v[j]);
    i = j + 1;
  }
}

/* The ranks of side (sorted) whose GPU is in [lo, hi). */
static int side_ranks_on(const RfProblem *pb, const RfSide *side, int lo, int hi, int *out) {
  int n = 0;
  for (int i = 0; i < side->nranks; i++) {
    int g = pb->gpu[side->ranks[i]];
    if (g >= lo && g < hi) out[n++] = side->ranks[i];
  }
  return n;
}

static int cmp_int(const void *x, const void *y) {
  return (*(const int *)x > *(const int *)y) - (*(const int *)x < *(const int *)y);
}

void rf_args_print_node_map(FILE *f, const RfArgs *a, const RfProblem *pb) {
  if (a->node_map <= 0) return;
  const int N = a->node_map, D = pb->topo->gpus_per_domain;
  int maxgpu = -1;
  for (int r = 0; r < pb->nranks; r++)
    maxgpu = MAX(maxgpu, pb->gpu[r]);
  int *buf = g_new(int, MAX(pb->nranks, 1));
  fprintf(f, "# node map: %d GPUs per node, %d per NVLink domain (%s)%s\n", N, D, pb->topo->name,
          D % N && N % D ? "; nodes straddle NVLink domains" : "");
  fprintf(f, "# %-6s %-8s %-11s %-24s %s\n", "node", "domain", "GPUs", "training ranks",
          "inference ranks");
  for (int node = 0; node * N <= maxgpu; node++) {
    const int lo = node * N, hi = lo + N;
    g_autoptr(GString) tr = g_string_new(NULL), in = g_string_new(NULL);
    int nt = side_ranks_on(pb, &pb->src, lo, hi, buf);
    qsort(buf, (size_t)nt, sizeof *buf, cmp_int);
    append_ranges(tr, buf, nt);
    int ni = side_ranks_on(pb, &pb->dst, lo, hi, buf);
    qsort(buf, (size_t)ni, sizeof *buf, cmp_int);
    append_ranges(in, buf, ni);
    if (nt + ni == 0) continue; /* a node the refit leaves idle */
    char gpus[32], dom[16];
    g_snprintf(gpus, sizeof gpus, "%d-%d", lo, hi - 1);
    g_snprintf(dom, sizeof dom, lo / D == (hi - 1) / D ? "%d" : "%d-%d", lo / D, (hi - 1) / D);
    fprintf(f, "  %-6d %-8s %-11s %-24s %s\n", node, dom, gpus, tr->str, in->str);
  }
  g_free(buf);
}

int rf_args_strategies(const RfArgs *a, RfStrategy out[RF_STRATEGY_COUNT], GError **error) {
  if (!a->strategy || !strcmp(a->strategy, "all")) {
    for (int i = 0; i < RF_STRATEGY_COUNT; i++)
      out[i] = (RfStrategy)i;
    return RF_STRATEGY_COUNT;
  }
  int n = 0;
  char **tok = g_strsplit(a->strategy, ",", -1);
  for (int i = 0; tok[i]; i++) {
    if (!strcmp(tok[i], "all")) { /* rf_strategy_parse names "all" as valid: it is, alone */
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--strategy all stands alone, not in a list");
      g_strfreev(tok);
      return -1;
    }
    gboolean dup = FALSE;
    if (n < RF_STRATEGY_COUNT && rf_strategy_parse(tok[i], &out[n], NULL))
      for (int j = 0; j < n; j++)
        dup |= out[j] == out[n];
    if (dup) {
      g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "strategy '%s' given twice", tok[i]);
      g_strfreev(tok);
      return -1;
    }
    if (n == RF_STRATEGY_COUNT || !rf_strategy_parse(tok[i], &out[n], error)) {
      if (n == RF_STRATEGY_COUNT)
        g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "too many strategies in '%s'", a->strategy);
      g_strfreev(tok);
      return -1;
    }
    n++;
  }
  g_strfreev(tok);
  if (n == 0) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "empty --strategy");
    return -1;
  }
  return n;
}

void rf_plan_args_entries(RfPlanArgs *p, GOptionEntry *entries) {
  const GOptionEntry e[RF_PLAN_ARGS_NENTRIES] = {
      {"dump", 0, 0, G_OPTION_ARG_FILENAME, &p->dump,
       "Write every transfer as JSON (with several strategies, FILE gets .STRATEGY before its "
       "extension)",
       "FILE"},
      {"verify", 0, 0, G_OPTION_ARG_NONE, &p->verify,
       "Check each plan's invariants (exactly-once delivery, senders hold what they send)", NULL},
      {"bcast-channels", 0, 0, G_OPTION_ARG_INT, &p->bcast_channels,
       "Rings of the gather-broadcast root broadcast, 1..1024 (default: the topology's)", "N"},
      {"strict", 0, 0, G_OPTION_ARG_NONE, &p->strict,
       "Refuse (exit 2) when inference weights + refit memory exceed the topology's GPU memory",
       NULL},
      {"double-bank", 0, 0, G_OPTION_ARG_NONE, &p->double_bank,
       "Count the memory of refit run --double-bank (a second weight bank; default: in place)",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  memcpy(entries, e, sizeof e);
}

void rf_plan_args_clear(RfPlanArgs *p) {
  g_free(p->dump);
  memset(p, 0, sizeof *p);
}

gboolean rf_plan_args_check(const RfPlanArgs *p, GError **error) {
  if (p->bcast_channels < 0 || p->bcast_channels > 1024) {
    g_set_error(error, RF_ERROR, RF_ERROR_INPUT, "--bcast-channels must be 1..1024");
    return FALSE;
  }
  return TRUE;
}

RfPlan *rf_plan_args_build(const RfPlanArgs *p, const RfProblem *pb, RfStrategy s, gboolean several,
                           GError **error) {
  if (!rf_plan_args_check(p, error)) return NULL;
  RfPlanOptions opt = {p->bcast_channels};
  RfPlan *plan = rf_plan_build(pb, s, &opt, error);
  if (plan && p->verify && !rf_plan_verify(plan, error)) {
    g_prefix_error(error, "%s plan fails verification: ", rf_strategy_name(s));
    rf_plan_free(plan);
    return NULL;
  }
  if (plan && p->dump) {
    char *path = rf_strategy_path(p->dump, rf_strategy_name(s), several);
    gboolean ok = rf_plan_dump(plan, path, error);
    g_free(path);
    if (!ok) {
      rf_plan_free(plan);
      return NULL;
    }
  }
  return plan;
}
