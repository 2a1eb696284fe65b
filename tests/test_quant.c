/* Quantized inference targets: the e4m3 / e8m0 quantizer against its reference and known
 * values, whole matrices, the tensor rule, and quantized plans (bytes, scale shards, refusals). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "plan.h"
#include "quant.h"

static float bits_f(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static void test_e4m3_known(void) {
  g_assert_cmphex(rf_e4m3_from_float(1.0f), ==, 0x38);
  g_assert_cmphex(rf_e4m3_from_float(-1.0f), ==, 0xb8);
  g_assert_cmphex(rf_e4m3_from_float(448.0f), ==, 0x7e);
  g_assert_cmphex(rf_e4m3_from_float(-448.0f), ==, 0xfe);
  g_assert_cmphex(rf_e4m3_from_float(1.875f), ==, 0x3f);
  g_assert_cmphex(rf_e4m3_from_float(0.0f), ==, 0x00);
  g_assert_cmphex(rf_e4m3_from_float(-0.0f), ==, 0x80);
  g_assert_cmphex(rf_e4m3_from_float(NAN), ==, 0x7f);
  /* ties to even: 1 + 1/16 between 0x38 and 0x39, 1 + 3/16 between 0x39 and 0x3a */
  g_assert_cmphex(rf_e4m3_from_float(1.0625f), ==, 0x38);
  g_assert_cmphex(rf_e4m3_from_float(1.1875f), ==, 0x3a);
  g_assert_cmphex(rf_e4m3_from_float(1.07f), ==, 0x39);
  /* saturation: 464 would round up past 448; everything above stays 448 */
  g_assert_cmphex(rf_e4m3_from_float(460.0f), ==, 0x7e);
  g_assert_cmphex(rf_e4m3_from_float(464.0f), ==, 0x7e);
  g_assert_cmphex(rf_e4m3_from_float(1e30f), ==, 0x7e);
  g_assert_cmphex(rf_e4m3_from_float(INFINITY), ==, 0x7e);
  /* subnormals: steps of 2^-9; 2^-6 is the smallest normal */
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(1, -6)), ==, 0x08);
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(7, -9)), ==, 0x07);
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(1, -9)), ==, 0x01);
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(1, -10)), ==, 0x00); /* tie: to 0 (even) */
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(3, -10)), ==, 0x02); /* tie: to 2 (even) */
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(3, -11)), ==, 0x01);
  g_assert_cmphex(rf_e4m3_from_float(ldexpf(15, -10)), ==, 0x08); /* 7.5 steps: to 8 */
  g_assert_cmpfloat(rf_e4m3_to_float(0x7e), ==, 448.0f);
  g_assert_cmpfloat(rf_e4m3_to_float(0x01), ==, ldexpf(1, -9));
  g_assert_true(isnan(rf_e4m3_to_float(0x7f)));
  for (int c = 0; c < 256; c++)
    if ((c & 0x7f) != 0x7f)
      g_assert_cmphex(rf_e4m3_from_float(rf_e4m3_to_float((uint8_t)c)), ==, c);
}

/* Every BF16 value and a million random floats: the production path equals the reference. */
static void test_e4m3_vs_reference(void) {
  for (uint32_t b = 0; b < 65536; b++) {
    float x = rf_bf16_to_float((uint16_t)b);
    if (isnan(x)) continue;
    if (rf_e4m3_from_float(x) != rf_quant_ref_e4m3(x))
      g_error("bf16 0x%04x (%g): 0x%02x, reference 0x%02x", b, x, rf_e4m3_from_float(x),
              rf_quant_ref_e4m3(x));
  }
  GRand *r = g_rand_new_with_seed(7);
  for (int i = 0; i < 1000000; i++) {
    /* exponents around the e4m3 range, every mantissa bit */
    uint32_t u = (g_rand_int(r) & 0x807fffffu) | ((uint32_t)g_rand_int_range(r, 100, 140) << 23);
    float x = bits_f(u);
    if (rf_e4m3_from_float(x) != rf_quant_ref_e4m3(x))
      g_error("0x%08x (%g): 0x%02x, reference 0x%02x", u, x, rf_e4m3_from_float(x),
              rf_quant_ref_e4m3(x));
  }
  g_rand_free(r);
}

static void test_e8m0(void) {
  g_assert_cmpuint(rf_e8m0_from_amax(0), ==, 0);
  g_assert_cmpuint(rf_e8m0_from_amax(1.0f), ==, 119);   /* 2^(0 - 8) */
  g_assert_cmpuint(rf_e8m0_from_amax(448.0f), ==, 127); /* floor(log2 448) = 8 */
  g_assert_cmpuint(rf_e8m0_from_amax(511.9f), ==, 127);
  g_assert_cmpuint(rf_e8m0_from_amax(512.0f), ==, 128);
  g_assert_cmpuint(rf_e8m0_from_amax(ldexpf(1, -140)), ==, 0); /* clamped: 2^-127 */
  g_assert_cmpuint(rf_e8m0_from_amax(3e38f), ==, 246);
  g_assert_cmpfloat(rf_e8m0_to_float(127), ==, 1.0f);
  g_assert_cmpfloat(rf_e8m0_to_float(119), ==, ldexpf(1, -8));
  g_assert_true(isnan(rf_e8m0_to_float(255)));
  for (uint32_t b = 1; b < 0x7f80; b++) {
    float x = rf_bf16_to_float((uint16_t)b);
    g_assert_cmpuint(rf_e8m0_from_amax(x), ==, rf_quant_ref_e8m0(x));
  }
}

static void check_matrix(RfQuantFormat f, int64_t rows, int64_t cols, guint32 seed) {
  GRand *r = g_rand_new_with_seed(seed);
  uint16_t *w = g_new(uint16_t, rows * cols);
  for (int64_t i = 0; i < rows * cols; i++) /* signs, 2^-12 .. 2^11, every mantissa */
    w[i] = (uint16_t)((g_rand_int(r) & 0x807f) | ((uint32_t)g_rand_int_range(r, 115, 139) << 7));
  int64_t ns = rf_quant_scale_elems(f, rows, cols), ss = rf_dtype_size(rf_quant_scale_dtype(f));
  uint8_t *q = g_new(uint8_t, rows * cols), *qr = g_new(uint8_t, rows * cols);
  uint8_t *s = g_new(uint8_t, ns * ss), *sr = g_new(uint8_t, ns * ss);
  rf_quant_matrix(f, w, rows, cols, q, s);
  rf_quant_ref_matrix(f, w, rows, cols, qr, sr);
  g_assert_cmpmem(q, rows * cols, qr, rows * cols);
  g_assert_cmpmem(s, ns * ss, sr, ns * ss);
  /* every block's largest element maps to 448 (fp8-block) or to [256, 448] (mxfp8) */
  int64_t br, bc;
  rf_quant_block(f, &br, &bc);
  for (int64_t b = 0; b < ns; b++) {
    int64_t nbc = (cols + bc - 1) / bc, r0 = b / nbc * br, c0 = b % nbc * bc;
    float amax = 0, qmax = 0;
    for (int64_t i = r0; i < MIN(rows, r0 + br); i++)
      for (int64_t j = c0; j < MIN(cols, c0 + bc); j++) {
        amax = fmaxf(amax, fabsf(rf_bf16_to_float(w[i * cols + j])));
        qmax = fmaxf(qmax, fabsf(rf_e4m3_to_float(q[i * cols + j])));
      }
    if (f == RF_QUANT_FP8_BLOCK) {
      g_assert_cmpfloat(((float *)s)[b], ==, amax / 448.0f);
      g_assert_cmpfloat(qmax, ==, 448.0f);
    } else {
      g_assert_cmpfloat(qmax, >=, 256.0f);
      g_assert_cmpfloat(qmax, <=, 448.0f);
    }
  }
  g_free(w);
  g_free(q);
  g_free(qr);
  g_free(s);
  g_free(sr);
  g_rand_free(r);
}

static void test_matrix(void) {
  check_matrix(RF_QUANT_FP8_BLOCK, 300, 200, 1); /* partial blocks at both edges */
  check_matrix(RF_QUANT_FP8_BLOCK, 128, 128, 2);
  check_matrix(RF_QUANT_MXFP8, 5, 70, 3);
  check_matrix(RF_QUANT_MXFP8, 64, 256, 4);
  /* a known block: amax 896 gives scale_inv 2, and 2.0 quantizes to 1.0 (0x38) */
  uint16_t w[4] = {0x4000 /* 2 */, 0x4460 /* 896 */, 0x0000, 0xc000 /* -2 */};
  uint8_t q[4];
  float s;
  rf_quant_matrix(RF_QUANT_FP8_BLOCK, w, 2, 2, q, &s);
  g_assert_cmpfloat(s, ==, 2.0f);
  g_assert_cmphex(q[0], ==, 0x38);
  g_assert_cmphex(q[1], ==, 0x7e);
  g_assert_cmphex(q[2], ==, 0x00);
  g_assert_cmphex(q[3], ==, 0xb8);
  uint8_t e;
  rf_quant_matrix(RF_QUANT_MXFP8, w, 1, 4, q, &e);
  g_assert_cmpuint(e, ==, 127 + 9 - 8); /* floor(log2 896) = 9 */
  g_assert_cmphex(q[1], ==, 0x7e);      /* 896 / 2 = 448 */
  g_assert_cmphex(q[0], ==, 0x38);
}

static void test_parse(void) {
  RfQuantFormat f;
  RfQuantAt a;
  GError *e = NULL;
  g_assert_true(rf_quant_format_parse("fp8-block", &f, &e) && f == RF_QUANT_FP8_BLOCK);
  g_assert_true(rf_quant_format_parse("mxfp8", &f, &e) && f == RF_QUANT_MXFP8);
  g_assert_true(rf_quant_at_parse("receiver", &a, &e) && a == RF_QUANT_AT_RECEIVER);
  g_assert_false(rf_quant_format_parse("nvfp4", &f, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "unknown inference quantization 'nvfp4'"));
  g_clear_error(&e);
  g_assert_false(rf_quant_at_parse("network", &a, &e));
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_clear_error(&e);
}

static RfProblem *tiny(const char *model, const char *train, const char *infer, RfQuantFormat f,
                       RfQuantAt a, GError **e) {
  g_autofree char *path = g_build_filename(g_getenv("REFIT_DATA_DIR"), model, NULL);
  RfModel *m = rf_model_load(g_str_has_suffix(model, ".json") ? path : model, e);
  if (!m) return NULL;
  RfProblem *pb = rf_problem_new_preset(m, train, infer, rf_topology_new_domains(4), e);
  if (pb && !rf_problem_set_quant(pb, f, a, e)) {
    rf_problem_free(pb);
    return NULL;
  }
  return pb;
}

/* The tensor rule on a real model: the projections quantized, the rest kept. */
static void test_rule(void) {
  GError *e = NULL;
  g_autoptr(RfProblem) pb =
      tiny("deepseek-v3", "TP8xPP4xEP8", "TP8xDP4", RF_QUANT_FP8_BLOCK, RF_QUANT_AT_RECEIVER, &e);
  g_assert_no_error(e);
  for (uint32_t i = 0; i < pb->model->nparts; i++) {
    const RfTensor *t = &pb->model->tensors[pb->model->parts[i].tensor];
    gboolean want = strstr(t->name, "_proj") && g_str_has_suffix(t->name, ".weight");
    if (pb->quant->target[i] != want) g_error("%s: target %d", t->name, pb->quant->target[i]);
  }
}

/* Sender: the weights move as e4m3 (half the bytes) plus their scales, every scale shard the
 * blocks of its weight shard; receiver: the plan is the BF16 one. */
static void check_plans(RfQuantFormat f) {
  GError *e = NULL;
  const char *M = "tests/data/tiny-fp8.json";
  g_autoptr(RfProblem) none = tiny(M, "TP2xPP2", "TP2xDP2", RF_QUANT_NONE, 0, &e);
  g_assert_no_error(e);
  g_autoptr(RfProblem) snd = tiny(M, "TP2xPP2", "TP2xDP2", f, RF_QUANT_AT_SENDER, &e);
  g_assert_no_error(e);
  g_autoptr(RfProblem) rcv = tiny(M, "TP2xPP2", "TP2xDP2", f, RF_QUANT_AT_RECEIVER, &e);
  g_assert_no_error(e);
  const RfProblemQuant *q = snd->quant;
  g_assert_cmpuint(q->ntargets, >, 0);
  g_assert_cmpuint(snd->model->nparts, ==, q->nparts + q->ntargets);
  /* expected destination bytes: targets at 1 B, plus their scales */
  uint64_t bf16 = 0, fp8 = 0, scales = 0;
  int64_t br, bc;
  rf_quant_block(f, &br, &bc);
  for (uint32_t pi = 0; pi < q->nparts; pi++) {
    if (!q->target[pi]) continue;
    uint32_t si = (uint32_t)q->scale_part[pi];
    for (int i = 0; i < snd->dst.nranks; i++) {
      RfBox wb, sb;
      int r = snd->dst.ranks[i];
      gboolean have = rf_side_rank_shard(&snd->dst, pi, r, &wb, NULL);
      g_assert_true(have == rf_side_rank_shard(&snd->dst, si, r, &sb, NULL));
      if (!have) continue;
      int nd = snd->model->parts[pi].ndim;
      for (int d = 0; d < nd; d++) {
        int64_t b = d == nd - 1 ? bc : d == nd - 2 ? br : 1;
        g_assert_cmpint(wb.lo[d] % b, ==, 0);
        g_assert_cmpint(sb.lo[d], ==, wb.lo[d] / b);
        g_assert_cmpint(sb.hi[d], ==, (wb.hi[d] + b - 1) / b);
      }
      uint64_t v = (uint64_t)rf_box_volume(&wb, nd);
      bf16 += 2 * v;
      fp8 += v;
      scales += (uint64_t)rf_box_volume(&sb, nd) * rf_dtype_size(rf_quant_scale_dtype(f));
    }
  }
  g_assert_cmpuint(fp8 * 2, ==, bf16);
  for (int s = 0; s < RF_STRATEGY_COUNT; s++) {
    g_autoptr(RfPlan) pn = rf_plan_build(none, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_autoptr(RfPlan) ps = rf_plan_build(snd, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_autoptr(RfPlan) pr = rf_plan_build(rcv, (RfStrategy)s, NULL, &e);
    g_assert_no_error(e);
    g_assert_true(rf_plan_verify(ps, &e));
    g_assert_no_error(e);
    g_assert_cmpuint(ps->stats.payload_bytes, ==, pn->stats.payload_bytes - bf16 + fp8 + scales);
    g_assert_cmpuint(pr->stats.payload_bytes, ==, pn->stats.payload_bytes);
    g_assert_cmpuint(pr->stats.network_bytes, ==, pn->stats.network_bytes);
    g_assert_cmpuint(ps->stats.network_bytes, <, pn->stats.network_bytes);
    /* the quantize pass: receivers read 2 B and write 1 B per element plus scales */
    uint64_t *by = g_new0(uint64_t, rcv->nranks);
    rf_quant_pass_bytes(rcv, pr, by, NULL);
    uint64_t sum = 0;
    for (int r = 0; r < rcv->nranks; r++)
      sum += by[r];
    g_assert_cmpuint(sum, ==, bf16 + fp8 + scales);
    g_free(by);
    g_assert_cmpuint(rf_quant_pass_bytes(snd, ps, NULL, NULL), >, 0);
  }
}

static void test_plans_fp8_block(void) {
  check_plans(RF_QUANT_FP8_BLOCK);
}

static void test_plans_mxfp8(void) {
  check_plans(RF_QUANT_MXFP8);
}

/* A shard boundary inside a block: one line naming the tensor, refused. */
static void test_refused(void) {
  GError *e = NULL;
  /* tiny-moe: hidden 96 split by TP2 at 48 */
  RfProblem *pb =
      tiny("tiny-moe", "TP2xPP2", "TP2xDP2", RF_QUANT_FP8_BLOCK, RF_QUANT_AT_RECEIVER, &e);
  g_assert_null(pb);
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "inference shard of"));
  g_assert_nonnull(strstr(e->message, "inside a 128-wide block"));
  g_assert_null(strchr(e->message, '\n'));
  g_clear_error(&e);
  /* training TP4 splits the 256 k / v rows at 64: fine at the receiver, refused at the sender */
  const char *M = "tests/data/tiny-fp8.json";
  pb = tiny(M, "TP4", "TP2xDP2", RF_QUANT_FP8_BLOCK, RF_QUANT_AT_RECEIVER, &e);
  g_assert_no_error(e);
  rf_problem_free(pb);
  pb = tiny(M, "TP4", "TP2xDP2", RF_QUANT_FP8_BLOCK, RF_QUANT_AT_SENDER, &e);
  g_assert_null(pb);
  g_assert_error(e, RF_ERROR, RF_ERROR_INPUT);
  g_assert_nonnull(strstr(e->message, "training shard of"));
  g_assert_nonnull(strstr(e->message, "quantize at the receiver"));
  g_clear_error(&e);
  /* mxfp8 only blocks the input dim: the same training split is fine */
  pb = tiny(M, "TP4", "TP2xDP2", RF_QUANT_MXFP8, RF_QUANT_AT_SENDER, &e);
  g_assert_no_error(e);
  rf_problem_free(pb);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/quant/e4m3/known", test_e4m3_known);
  g_test_add_func("/quant/e4m3/reference", test_e4m3_vs_reference);
  g_test_add_func("/quant/e8m0", test_e8m0);
  g_test_add_func("/quant/matrix", test_matrix);
  g_test_add_func("/quant/parse", test_parse);
  g_test_add_func("/quant/rule", test_rule);
  g_test_add_func("/quant/plan/fp8-block", test_plans_fp8_block);
  g_test_add_func("/quant/plan/mxfp8", test_plans_mxfp8);
  g_test_add_func("/quant/refused", test_refused);
  return g_test_run();
}
