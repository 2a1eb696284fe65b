#!/usr/bin/env python3
"""Test of the hypothesis that NeMo RL's per-refit python-fallback cost (`nemo.dispatch_s`,
fitted on the Qwen3-30B-A3B rows c1 c2 c3 c5) is vLLM work per MoE layer or per expert.

The calibration rows all move Qwen3-30B-A3B (48 MoE layers, 6,144 generation-side experts: no
row has expert parallelism on the generation side), so a cost per MoE layer or per generation-side
expert fitted on them is nemo.dispatch_s divided by 48 or by 6,144: the in-sample predictions do
not change. What changes is every other model. This runs `refit sim --software nemo-rl
--software-variant python-fallback` on the rows with another count, each with a copy of the
platform's calibration whose nemo.dispatch_s is the count times the per-unit cost:
- the design doc's Qwen3-4B row v10 (dense: 0 MoE layers; experiments/public-measurements.csv);
- the reported table's four reshard rows (experiments/reported-refit.csv), which
  experiments/reproduce.py predicts with the same variant.
The counts (MoE layers; MoE layers x routed experts: every generation rank holds every expert at
these layouts) are the model configs' (docs/models.md; `refit model show`).
Each row is also run with no such cost (0): the measured time minus that prediction is what any
per-refit software cost of the row would have to be, if the rest of the model is right.
Nothing here changes the default calibration: the predictions are a test, not a fit.

It also times, on this machine's CPU, the one per-MoE-layer loop the generation side runs per refit
in Python that the source shows (vLLM Qwen3MoeModel.load_weights, the misc set): for every misc
tensor that is not a stacked q/k/v or gate/up, a scan of expert_params_mapping (3 entries per
routed expert, built as FusedMoE.make_expert_params_mapping builds them) with a substring test.

usage: /usr/bin/python3 experiments/finalize-hypotheses.py [--build DIR | --refit PATH] [--out DIR]
writes DIR/finalize-hypotheses.{csv,txt} (default experiments/results)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (ROOT, Table, add_refit_args, calibration_copy,  # noqa: E402
                    calibration_value, refit_path, write_csv)

# (id, platform, model, train, infer, measured s, MoE layers, generation-side experts)
ROWS = [
    ("v10", "dgx-h100", "experiments/models/qwen3-4b.json", "DP8", "TP8", 0.275, 0, 0),
    ("table", "dgx-h100", "qwen3-235b-a22b", "TP4xPP8xEP16", "TP8xDP16", 1.90, 94, 94 * 128),
    ("table", "dgx-h100", "deepseek-v3", "PP16xEP16", "TP32xDP8", 2.60, 58, 58 * 256),
    ("table", "gb200-nvl72", "deepseek-v3", "PP16xEP16", "TP32xDP8", 2.30, 58, 58 * 256),
    ("table", "gb200-nvl72", "nemotron-3-ultra", "TP8xEP32xPP2", "TP8xDP8", 2.30, 48, 48 * 512),
]
CAL_LAYERS, CAL_EXPERTS = 48, 48 * 128  # Qwen3-30B-A3B, every calibration row


def run(refit, r, cal):
    _, platform, model, train, infer = r[:5]
    cmd = [refit, "sim", "-q", "--json", "-m", model, "-t", train, "-i", infer, "-T", platform,
           "-s", "hybrid", "--software", "nemo-rl", "--software-variant", "python-fallback",
           "-c", cal] + (["-D", "8"] if platform == "dgx-h100" else [])
    env = dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0:
        sys.exit("refit sim failed: %s\n%s" % (" ".join(cmd), out.stderr.strip()))
    return json.loads(out.stdout)["predicted_s"]


def scan_s(layers, experts, repeats=5):
    """Seconds of vLLM's expert_params_mapping scan over the misc tensors of one refit (min of
    repeats): per layer o_proj, q_norm, k_norm, the two layernorms and the router (mlp.gate),
    then embed_tokens, norm and lm_head; no name matches, so every scan runs to the end."""
    import time
    mapping = [("experts.w13_" if w in ("gate_proj", "up_proj") else "experts.w2_",
                "experts.%d.%s." % (e, w), e, sid)
               for e in range(experts)
               for sid, w in (("w1", "gate_proj"), ("w2", "down_proj"), ("w3", "up_proj"))]
    names = ["model.layers.%d.%s.weight" % (l, m) for l in range(layers)
             for m in ("self_attn.o_proj", "self_attn.q_norm", "self_attn.k_norm",
                       "input_layernorm", "post_attention_layernorm", "mlp.gate")]
    names += ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    best = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        for name in names:
            for m in mapping:
                param_name, weight_name, expert_id, shard_id = m
                if weight_name not in name:
                    continue
                break
        t = time.perf_counter() - t0
        best = t if best is None or t < best else best
    return best, len(names) * len(mapping)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    jobs = []
    for r in ROWS:
        d = calibration_value(r[1], "nemo", "dispatch_s")
        for name, value in (("none (0)", 0.0), ("per-refit (as calibrated)", d),
                            ("per MoE layer", d / CAL_LAYERS * r[6]),
                            ("per generation-side expert", d / CAL_EXPERTS * r[7])):
            jobs.append((r, name, value))
    with tempfile.TemporaryDirectory(prefix="refit-finalize-") as tmp, \
            ThreadPoolExecutor(max_workers=2) as ex:
        def one(j):
            r, _, value = j
            return run(refit, r, calibration_copy(r[1], {("nemo", "dispatch_s"): "%.6g" % value},
                                                  tmp))
        preds = list(ex.map(one, jobs))
    report = Table(os.path.join(a.out, "finalize-hypotheses.txt"))
    report.line("# nemo.dispatch_s read as a cost per refit, per MoE layer or per generation-side "
                "expert (fitted on Qwen3-30B-A3B: %d layers, %d experts)" % (CAL_LAYERS, CAL_EXPERTS))
    report.line("# %-5s %-11s %-16s %-13s %-9s %-27s %9s %9s %9s %7s" % (
        "row", "platform", "model", "train", "infer", "cost read as", "software",
        "measured", "predicted", "err(%)"))
    out = []
    for (r, name, value), p in zip(jobs, preds):
        err = 100.0 * (p - r[5]) / r[5]
        model = os.path.basename(r[2]).replace(".json", "")
        report.line("  %-5s %-11s %-16s %-13s %-9s %-27s %9.4f %9.3f %9.3f %7.1f" % (
            r[0], r[1], model, r[3], r[4], name, value, r[5], p, err))
        out.append({"row": r[0], "platform": r[1], "model": model, "train": r[3], "infer": r[4],
                    "moe_layers": r[6], "gen_experts": r[7], "cost_read_as": name,
                    "dispatch_s": round(value, 4), "measured_s": r[5],
                    "predicted_s": round(p, 4), "error_pct": round(err, 1)})
    t, n = scan_s(CAL_LAYERS, 128)
    report.line("# vLLM load_weights expert_params_mapping scan, Qwen3-30B-A3B misc set: %d tests, "
                "%.4f s on this machine's CPU (min of 5); the 4B model (dense) runs none" % (n, t))
    write_csv(os.path.join(a.out, "finalize-hypotheses.csv"), out)
    report.save()


if __name__ == "__main__":
    main()
