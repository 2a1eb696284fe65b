#!/usr/bin/env python3
"""What-if: refit of the two largest zoo models on GB200 clusters nobody has published numbers for.

Kimi K3 (2.8T) and Qwen3.8 2.4T-A95B, trained on 1024 GB200 GPUs (Megatron TP8xPP16xEP64, DP8)
and served on 1024 more (vLLM TP32xDP32), on GB200 NVL72 with 400G and with 800G NICs. Printed
beside the one public figure: Qwen3.8 2.4T moved by reshard in 4.3 s (layout and GPU count not
published). Beside refit's strategies, the published software's prediction: NeMo RL's
gather-broadcast and hybrid (`refit sim --software nemo-rl`, the hybrid's variants
python-fallback and m2n-pack) and NCCL M2N's m2n
(`--software nccl-m2n`), or the one-line reason the published code cannot run it. Writes CSV.

usage: /usr/bin/python3 experiments/whatif.py [--build DIR | --refit PATH] [--out experiments/results]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json  # noqa: E402
import subprocess  # noqa: E402

from common import ROOT, Table, add_refit_args, refit_path, sim, write_csv  # noqa: E402

# (variant None: NeMo RL's gather-broadcast, its collective path, to which no variant applies)
SOFTWARE = [("gather-broadcast", "nemo-rl", None), ("hybrid", "nemo-rl", "python-fallback"),
            ("hybrid", "nemo-rl", "m2n-pack"), ("m2n", "nccl-m2n", "pack")]


def sim_software(refit, model, train, infer, topo, strategy, software, variant):
    """The published-software prediction, or the reason it cannot run."""
    cmd = [refit, "sim", "-q", "--json", "-m", model, "-t", train, "-i", infer, "-T", topo, "-s",
           strategy, "--software", software] + (["--software-variant", variant] if variant else [])
    out = subprocess.run(cmd, capture_output=True, text=True,
                         env=dict(os.environ, REFIT_DATA_DIR=os.environ.get("REFIT_DATA_DIR", ROOT)))
    if out.returncode != 0:
        return None, out.stderr.strip().split("\n")[-1].split(": ", 1)[-1]
    return json.loads(out.stdout), ""

CASES = [
    ("kimi-k3", "TP8xPP16xEP64", "TP32xDP32"),
    ("qwen3.8-2.4t-a95b", "TP8xPP16xEP64", "TP32xDP32"),
]
TOPOS = ["gb200-nvl72", "gb200-nvl72-800g"]
STRATS = ["gather-broadcast", "hybrid", "m2n", "p2p"]
REPORTED = {"qwen3.8-2.4t-a95b": ("reshard microbenchmark", 4.3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    a = ap.parse_args()
    a.refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    report = Table(os.path.join(a.out, "whatif.txt"))
    report.line("# what-if: 1024 training + 1024 inference GB200 GPUs, default calibration")
    report.line("# model column: flows = refit's strategies by the flow model (refit sim "
                "--software-variant flows: the plan as flows at calibrated rates, no software "
                "cost; an ideal estimate, not refit run's executor, which "
                "experiments/executor_scale.py simulates); nemo-rl/..., nccl-m2n/...: the "
                "published software's model of that code path")
    report.line("# %-18s %-16s %-14s %-10s %-17s %-24s %10s %10s %7s  %s" % (
        "model", "topology", "train", "infer", "strategy", "model", "pred(s)", "bound(s)",
        "ratio", "reported"))
    for model, train, infer in CASES:
        for topo in TOPOS:
            print("# simulating %s on %s ..." % (model, topo), file=sys.stderr, flush=True)
            # refit's flow model (the plan as flows at calibrated rates): its executor, refit sim's
            # default, takes 10+ min per strategy at 2,048 ranks (executor_scale.py runs it)
            res, wall = sim(a.refit, model, train, infer, topo, STRATS,
                            ["--software-variant", "flows"])
            for s in STRATS:
                r = res[s]
                rep = ""
                if model in REPORTED and s in ("hybrid", "m2n"):
                    rep = "%s %.1f s" % REPORTED[model]
                rec = {"model": model, "topology": topo, "train": train, "infer": infer,
                       "strategy": s, "predicted_s": round(r["predicted_s"], 3),
                       "lower_bound_s": round(r["lower_bound_s"], 3),
                       "bound_by": r["bound_by"], "reported": rep, "sim_wall_s": round(wall, 1),
                       "predicted_by": r["predicted_by"]}
                rows.append(rec)
                ratio = r["predicted_s"] / r["lower_bound_s"] if r["lower_bound_s"] else 0
                report.line("  %-18s %-16s %-14s %-10s %-17s %-24s %10.3f %10.3f %7.2f  %s" % (
                    model, topo, train, infer, s, r["predicted_by"], r["predicted_s"],
                    r["lower_bound_s"], ratio, rep))
            for strat, sw, var in SOFTWARE if topo == TOPOS[0] else []:  # 400G only: minutes each
                r, why = sim_software(a.refit, model, train, infer, topo, strat, sw, var)
                name = "%s %s/%s" % (strat, sw, var) if var else "%s %s" % (strat, sw)
                rec = {"model": model, "topology": topo, "train": train, "infer": infer,
                       "strategy": name, "predicted_s": round(r["predicted_s"], 3) if r else "",
                       "lower_bound_s": round(r["lower_bound_s"], 3) if r else "",
                       "bound_by": r["bound_by"] if r else why,
                       "reported": "%s %.1f s" % REPORTED[model] if model in REPORTED else "",
                       "sim_wall_s": "", "predicted_by": r["predicted_by"] if r else ""}
                rows.append(rec)
                report.line("  %-18s %-16s %-14s %-10s %-17s %-24s %10s %10s %7s  %s" % (
                    model, topo, train, infer, name, r["predicted_by"] if r else "-",
                    "%.3f" % r["predicted_s"] if r else "-",
                    "%.3f" % r["lower_bound_s"] if r else "-", "", rec["reported"] if r else why))
    path = os.path.join(a.out, "whatif.csv")
    write_csv(path, rows)
    report.save()
    print("# wrote %s and %s" % (path, report.path))


if __name__ == "__main__":
    main()
