#!/usr/bin/env python3
"""refit's executor simulated at 2,048 ranks: Kimi K3 and Qwen3.8 2.4T on 1024 + 1024 GB200.

`refit sim` runs refit's executor model (`--software refit --software-variant executor`, the
default) on its events engine (sim/events.c: every rank's program, max-min sharing solved
locally, a GPU per simulated host at every size); `--engine simgrid` runs the same programs as
SimGrid actors, exact (an actor per rank) up to 1,024 ranks and on hosts of up to 8 GPUs above
(docs/sim.md, "The events engine", "refit's executor at scale"). This script
1. checks the events engine against SimGrid's exact model where SimGrid runs: the four reported
   configurations (experiments/results/executor.csv's rows), each strategy with `--engine simgrid`
   and with the default engine, both on the exact platform and one communicator (`--one-comm`:
   SimGrid takes 1-8 min a run with lane communicators; the engines on lane communicators are
   compared by the test /sim/executor/events-engine), their times and wall times (~2 min on the
   idle machine); with `--groups 8,9,...` also SimGrid's coarse platforms (N GPUs per
   simulated host, one actor per host; on GB200 NVL72 every N dividing its domain of 72) against
   its exact one: `refit sim` states those errors beside a prediction made on such a platform;
2. predicts m2n for Kimi K3 and Qwen3.8 2.4T (Megatron TP8xPP16xEP64, DP8 -> vLLM TP32xDP32, and
   Kimi K3 -> SGLang TP128xADP128xEP128xDP8, a layout that holds it: case kimi-k3@sglang) on
   gb200-nvl72 with the default engine, against the plan's network bound and, for the what-if's
   layouts, the published-software prediction of experiments/results/whatif.csv (NeMo RL's python
   fallback; written by experiments/whatif.py); 1-4 min each and 3-4 GB, `--jobs` at once;
   each by refit run's default (a communicator and stream per staging lane, 8 lanes chosen, the
   staging bound raised to 16 MiB to keep the schedule within 64 M segments) and on one
   communication stream (`--one-comm`, the default before 2026-12-04).

usage: /usr/bin/python3 experiments/executor_scale.py [--build DIR | --refit PATH]
       [--skip-check] [--groups 8,9,18,24,36,72]
       [--models kimi-k3,kimi-k3@sglang,qwen3.8-2.4t-a95b] [--jobs 2] [--out experiments/results]
(`--skip-check` keeps part 1's rows of the last run, `--models ''` runs part 1 only and keeps
part 2's; without `--groups` the coarse rows of the last run stay: each table says which rows it
kept)
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
# part 2's cases: name -> (model, train, infer, inference framework). Kimi K3 at vLLM TP32 is the
# what-if of experiments/whatif.py, whose weights alone (184.6 GB) overfill the GPU; no vLLM
# layout of 1,024 GPUs holds it (TP64 and TP128 do not divide its 96 KDA heads, EP1024 not its 896
# experts); SGLang's data-parallel attention with EP128 does (refit sim's memory line).
LARGE = {"kimi-k3": ("kimi-k3", "TP8xPP16xEP64", "TP32xDP32", "vllm"),
         "kimi-k3@sglang": ("kimi-k3", "TP8xPP16xEP64", "TP128xADP128xEP128xDP8", "sglang"),
         "qwen3.8-2.4t-a95b": ("qwen3.8-2.4t-a95b", "TP8xPP16xEP64", "TP32xDP32", "vllm")}
LARGE_TOPO = "gb200-nvl72"
ONE = "--one-comm"  # part 2's second variant; part 1 runs on it
DEFAULT = "default (lane communicators)"


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def domain_gpus(refit, topology):
    """GPUs per NVLink domain of a topology, as refit reads it (a group must divide it)."""
    out = subprocess.run([refit, "topology", "show", topology, "--json"], stdout=subprocess.PIPE,
                         text=True, check=True,
                         env=dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT)))
    return int(json.loads(out.stdout)["cluster.gpus_per_domain"])


def large(refit, case, variant, t0):
    """refit sim's m2n executor prediction of a case on 1024 + 1024 GPUs (its JSON row), wall s:
    refit run's default (DEFAULT: a communicator and stream per staging lane, chosen) or on one
    communication stream (ONE)."""
    model, train, infer, fw = LARGE[case]
    sys.stderr.write("executor_scale: %s %s started (%.0f s)\n" % (case, variant, time.time() - t0))
    cmd = [refit, "sim", "--json", "-m", model, "-t", train, "-i", infer, "--infer-framework", fw,
           "-T", LARGE_TOPO, "-s", "m2n"] + EXEC + ([ONE] if variant == ONE else [])
    w0 = time.time()
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT)))
    if out.returncode != 0:
        sys.exit("executor_scale: %s failed" % " ".join(cmd))
    sys.stderr.write("executor_scale: %s %s done (%.0f s)\n" % (case, variant, time.time() - t0))
    return json.loads(out.stdout)["strategies"][0], time.time() - w0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--skip-check", action="store_true",
                    help="skip part 1 (the engine and coarse checks on the four reported "
                         "configurations)")
    ap.add_argument("--groups", default="",
                    help="SimGrid's coarse platforms to check, GPUs per simulated host (each "
                         "where it divides the domain; e.g. 8,9,18,24,36,72)")
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
    groups = [int(g) for g in a.groups.split(",") if g]
    cases = [c for c in a.models.split(",") if c]
    for c in cases:  # before part 1's minutes
        if c not in LARGE:
            sys.exit("executor_scale: unknown case '%s' (%s)" % (c, ", ".join(LARGE)))
    earlier = read_csv(os.path.join(a.out, "executor-scale.csv"))
    if not a.skip_check and not exact:
        sys.exit("executor_scale: run experiments/executor.py first (the configurations)")
    if a.skip_check:  # the last run's checks stay
        rows += [r for r in earlier if r["kind"] in ("engine-check", "coarse-check")]
    else:
        for (platform, model, strategy), x in exact.items():
            train, infer = layouts[(platform, model)]
            got = {}
            for engine in ("simgrid", "events"):
                sys.stderr.write("executor_scale: %s %s %s %s (%.0f s)\n" % (
                    engine, platform, model, strategy, time.time() - t0))
                res, wall = sim(refit, model, train, infer, platform, [strategy],
                                extra=EXEC + [ONE, "--engine", engine, "--group", "1"])
                got[engine] = (res[strategy]["predicted_s"], wall)
            (ex, ex_wall), (ev, ev_wall) = got["simgrid"], got["events"]
            rows.append({"kind": "engine-check", "platform": platform, "model": model,
                         "strategy": strategy, "exact_s": ex, "predicted_s": ev,
                         "error": ev / ex - 1, "bound_s": float(x["bound_s"]),
                         "wall_s": ev_wall, "exact_wall_s": ex_wall, "group": 1,
                         "engine": "events", "published_software_s": ""})
        if groups:
            domain = {p: domain_gpus(refit, p) for (p, _, _) in exact}
            exact_s = {(r["platform"], r["model"], r["strategy"]): r["exact_s"] for r in rows}
            for g in groups:
                for (platform, model, strategy), x in exact.items():
                    if domain[platform] % g:
                        continue
                    sys.stderr.write("executor_scale: coarse %d %s %s %s (%.0f s)\n" % (
                        g, platform, model, strategy, time.time() - t0))
                    train, infer = layouts[(platform, model)]
                    res, wall = sim(refit, model, train, infer, platform, [strategy],
                                    extra=EXEC + [ONE, "--engine", "simgrid", "--group", str(g)])
                    ex, co = exact_s[(platform, model, strategy)], res[strategy]["predicted_s"]
                    rows.append({"kind": "coarse-check", "platform": platform, "model": model,
                                 "strategy": strategy, "exact_s": ex, "predicted_s": co,
                                 "error": co / ex - 1, "bound_s": float(x["bound_s"]),
                                 "wall_s": wall, "group": g, "engine": "simgrid",
                                 "published_software_s": ""})
        else:
            rows += [r for r in earlier if r["kind"] == "coarse-check"]
    checks = [r for r in rows if r["kind"] == "engine-check"]
    if checks:
        t.line("## The events engine against SimGrid's exact model (an actor per rank; one "
               "communicator, `--one-comm`)")
        t.line("")
        t.line("| platform | model | strategy | SimGrid (s) | events (s) | difference |"
               " SimGrid wall (s) | events wall (s) |")
        t.line("|---|---|---|---|---|---|---|---|")
        for r in checks:
            t.line("| %s | %s | %s | %.7f | %.7f | %+.1e | %.1f | %.1f |" % (
                r["platform"], r["model"], r["strategy"], float(r["exact_s"]),
                float(r["predicted_s"]), float(r["error"]), float(r["exact_wall_s"]),
                float(r["wall_s"])))
        e = [abs(float(r["error"])) for r in checks]
        t.line("")
        t.line("max |difference| %.1e on %d runs (wall: the whole `refit sim`, planning included)"
               % (max(e), len(e)))
        if a.skip_check:
            t.line("(from the run before: `--skip-check`)")
        t.line("")
    coarse = [r for r in rows if r["kind"] == "coarse-check"]
    if coarse:
        t.line("## SimGrid's coarse platform (N GPUs per simulated host, one actor per host) "
               "against its exact one")
        t.line("")
        t.line("| platform | model | strategy | GPUs per host | exact (s) | coarse (s) | error |"
               " coarse wall (s) |")
        t.line("|---|---|---|---|---|---|---|---|")
        errs = {}
        for r in coarse:
            err = float(r["error"])
            errs.setdefault(int(r["group"]), []).append(abs(err))
            t.line("| %s | %s | %s | %s | %.4f | %.4f | %+.1f%% | %.0f |" % (
                r["platform"], r["model"], r["strategy"], r["group"], float(r["exact_s"]),
                float(r["predicted_s"]), 100 * err, float(r["wall_s"])))
        t.line("")
        for g, e in errs.items():
            t.line("%d GPUs per host: mean |error| %.1f%%, max %.1f%% (%d runs)" % (
                g, 100 * sum(e) / len(e), 100 * max(e), len(e)))
        if a.skip_check or not groups:
            t.line("(from the run before)")
        t.line("")
    published = {(x["model"], x["train"], x["infer"]): float(x["predicted_s"])
                 for x in read_csv(os.path.join(ROOT, "experiments", "results", "whatif.csv"))
                 if x["topology"] == LARGE_TOPO and x["predicted_s"]
                 and x["strategy"].startswith("hybrid nemo-rl")}
    t.line("## Kimi K3 and Qwen3.8 2.4T on 1024 + 1024 %s, m2n, refit's executor" % LARGE_TOPO)
    t.line("")
    t.line("| case | train | infer | groups | model | engine | GPUs per simulated host |"
           " predicted (s) | network bound (s) | x bound | inference GPU peak (GB, of 186) |"
           " published software (s) | speedup | wall (s) |")
    t.line("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def line(r):
        pred, bound = float(r["predicted_s"]), float(r["bound_s"])
        pub, peak = r["published_software_s"], r.get("infer_peak_gb", "")
        t.line("| %s | %s | %s | %s | %s | %s | %s | %.3f | %.3f | %.2fx | %s | %s | %s | %.0f |" % (
            r["case"], r["train"], r["infer"], r.get("variant") or ONE,
            r.get("predicted_by") or "executor", r.get("engine") or "simgrid", r["group"], pred,
            bound, pred / bound,
            "%.1f%s" % (float(peak), " (exceeds)" if r.get("memory_exceeded") == "True" else "")
            if peak else "-",
            "%.2f" % float(pub) if pub else "-", "%.1fx" % (float(pub) / pred) if pub else "-",
            float(r["wall_s"])))

    kept = 0  # the last run's rows of the cases not run now stay
    for r in earlier:
        if r["kind"] == "scale" and r["case"] not in cases:
            rows.append(r)
            line(r)
            kept += 1
    with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        jobs = [(c, v) for c in cases for v in (DEFAULT, ONE)]
        done = list(pool.map(lambda cv: large(refit, cv[0], cv[1], t0), jobs))
    for (case, variant), (r, wall) in zip(jobs, done):
        model, train, infer, _ = LARGE[case]
        pub = published.get((model, train, infer))
        row = {"kind": "scale", "platform": LARGE_TOPO, "model": model, "strategy": "m2n",
               "exact_s": "", "predicted_s": r["predicted_s"], "error": "",
               "bound_s": r["lower_bound_s"], "wall_s": wall, "group": r["sim_group"],
               "engine": r["sim_engine"], "variant": variant,
               "predicted_by": r["predicted_by"],
               "published_software_s": pub if pub else "", "case": case, "train": train,
               "infer": infer, "infer_peak_gb": r["infer_peak_bytes"] / 1e9,
               "memory_exceeded": r["memory_exceeded"]}
        rows.append(row)
        line({k: str(v) for k, v in row.items()})
    if kept:
        t.line("")
        t.line("(%d row%s from the run before: not run this time)" % (kept, "" if kept == 1 else "s"))
    if not rows:
        sys.exit("executor_scale: nothing measured and no earlier rows to keep")
    fields = ["kind", "platform", "model", "strategy", "exact_s", "predicted_s", "error",
              "bound_s", "wall_s", "group", "published_software_s", "case", "train", "infer",
              "infer_peak_gb", "memory_exceeded", "engine", "exact_wall_s", "variant",
              "predicted_by"]
    write_csv(os.path.join(a.out, "executor-scale.csv"),
              [{k: r.get(k, "") for k in fields} for r in rows])
    t.line("")
    t.line("(wall %.0f s)" % (time.time() - t0))
    t.save()


if __name__ == "__main__":
    main()
