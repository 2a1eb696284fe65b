#!/usr/bin/env python3
"""refit's executor simulated at 2,048 ranks: Kimi K3 and Qwen3.8 2.4T on 1024 + 1024 GB200.

The exact executor model (`refit sim --software refit --software-variant executor`, one SimGrid
actor per rank) does not finish at this size on a small machine; above 1,024 ranks `refit sim`
runs it on a coarse platform, 8 GPUs of a domain per simulated host and one actor per host
(docs/sim.md, "refit's executor at scale"). This script
1. measures what the coarse platform costs in accuracy where the exact one runs: the four
   reported configurations with `--group 8` beside the exact (`--group 1`) prediction of
   experiments/results/executor.csv (written by experiments/executor.py; ~4 min at load 3-5);
2. predicts m2n for Kimi K3 and Qwen3.8 2.4T (Megatron TP8xPP16xEP64, DP8 -> vLLM TP32xDP32) on
   gb200-nvl72, against the plan's network bound and the published-software prediction of
   experiments/results/whatif.csv (NeMo RL's python fallback; written by experiments/whatif.py).
   with one simulated message per rank pair (since 2026-12-02) Kimi K3 takes about an hour and
   3.5 GB alone on a core (about 20 min with the per-host messages before), Qwen3.8 less; both at
   once on 2 cores
   (`--jobs`; refit's progress lines on stderr).

usage: /usr/bin/python3 experiments/executor_scale.py [--build DIR | --refit PATH]
       [--skip-check] [--models kimi-k3,qwen3.8-2.4t-a95b] [--jobs 2] [--out experiments/results]
writes OUT/executor-scale.{csv,txt}
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Table, add_refit_args, refit_path, sim, write_csv  # noqa: E402
from reproduce import TABLE, read_table  # noqa: E402

EXEC = ["--software", "refit", "--software-variant", "executor"]
LARGE = {"kimi-k3": ("TP8xPP16xEP64", "TP32xDP32"),
         "qwen3.8-2.4t-a95b": ("TP8xPP16xEP64", "TP32xDP32")}
LARGE_TOPO = "gb200-nvl72"


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def large(refit, model, t0):
    """refit sim's m2n executor prediction of model on 1024 + 1024 GPUs (its JSON row), wall s."""
    train, infer = LARGE[model]
    sys.stderr.write("executor_scale: %s started (%.0f s)\n" % (model, time.time() - t0))
    cmd = [refit, "sim", "--json", "-m", model, "-t", train, "-i", infer, "-T", LARGE_TOPO,
           "-s", "m2n"] + EXEC
    w0 = time.time()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT)))
    if out.returncode != 0:
        sys.exit("executor_scale: %s failed" % " ".join(cmd))
    sys.stderr.write("executor_scale: %s done (%.0f s)\n" % (model, time.time() - t0))
    return json.loads(out.stdout)["strategies"][0], time.time() - w0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--skip-check", action="store_true",
                    help="skip the coarse-vs-exact check on the four reported configurations")
    ap.add_argument("--models", default=",".join(LARGE))
    ap.add_argument("--jobs", type=int, default=2, help="large simulations run at once")
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    t = Table(os.path.join(a.out, "executor-scale.txt"))
    rows = []
    t0 = time.time()
    exact = {(x["platform"], x["model"], x["strategy"]): x
             for x in read_csv(os.path.join(ROOT, "experiments", "results", "executor.csv"))}
    layouts = {(r["platform"], r["model"]): (r["train_layout"], r["infer_layout"])
               for r in read_table(TABLE)}
    if not a.skip_check:
        if not exact:
            sys.exit("executor_scale: run experiments/executor.py first (the exact predictions)")
        t.line("## The coarse platform (8 GPUs per simulated host) against the exact one")
        t.line("")
        t.line("| platform | model | strategy | exact (s) | coarse (s) | error | coarse wall (s) |")
        t.line("|---|---|---|---|---|---|---|")
        errs = []
        for (platform, model, strategy), x in exact.items():
            sys.stderr.write("executor_scale: coarse %s %s %s (%.0f s)\n" % (
                platform, model, strategy, time.time() - t0))
            train, infer = layouts[(platform, model)]
            res, wall = sim(refit, model, train, infer, platform, [strategy],
                            extra=EXEC + ["--group", "8"])
            ex, co = float(x["executor_2_s"]), res[strategy]["predicted_s"]
            err = co / ex - 1
            errs.append(abs(err))
            rows.append({"kind": "coarse-check", "platform": platform, "model": model,
                         "strategy": strategy, "exact_s": ex, "predicted_s": co, "error": err,
                         "bound_s": float(x["bound_s"]), "wall_s": wall, "group": 8,
                         "published_software_s": ""})
            t.line("| %s | %s | %s | %.4f | %.4f | %+.1f%% | %.0f |" % (
                platform, model, strategy, ex, co, 100 * err, wall))
        t.line("")
        t.line("mean |error| %.1f%%, max %.1f%%" % (100 * sum(errs) / len(errs), 100 * max(errs)))
        t.line("")
    published = {x["model"]: float(x["predicted_s"])
                 for x in read_csv(os.path.join(ROOT, "experiments", "results", "whatif.csv"))
                 if x["topology"] == LARGE_TOPO and x["predicted_s"]
                 and x["strategy"].startswith("hybrid nemo-rl")}
    t.line("## Kimi K3 and Qwen3.8 2.4T on 1024 + 1024 %s, m2n, refit's executor" % LARGE_TOPO)
    t.line("")
    t.line("| model | train | infer | GPUs per simulated host | predicted (s) | network bound (s) |"
           " x bound | published software (s) | speedup | wall (s) |")
    t.line("|---|---|---|---|---|---|---|---|---|---|")
    models = [m for m in a.models.split(",") if m]
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        done = list(pool.map(lambda m: large(refit, m, t0), models))
    for model, (r, wall) in zip(models, done):
        train, infer = LARGE[model]
        pred, bound = r["predicted_s"], r["lower_bound_s"]
        pub = published.get(model)
        rows.append({"kind": "scale", "platform": LARGE_TOPO, "model": model, "strategy": "m2n",
                     "exact_s": "", "predicted_s": pred, "error": "", "bound_s": bound,
                     "wall_s": wall, "group": r["sim_group"],
                     "published_software_s": pub if pub else ""})
        t.line("| %s | %s | %s | %d | %.3f | %.3f | %.2fx | %s | %s | %.0f |" % (
            model, train, infer, r["sim_group"], pred, bound, pred / bound,
            "%.2f" % pub if pub else "-", "%.1fx" % (pub / pred) if pub else "-", wall))
    write_csv(os.path.join(a.out, "executor-scale.csv"), rows)
    t.line("")
    t.line("(wall %.0f s)" % (time.time() - t0))
    t.save()


if __name__ == "__main__":
    main()
