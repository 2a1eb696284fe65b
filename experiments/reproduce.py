#!/usr/bin/env python3
"""Reproduce the reported refit table (experiments/reported-refit.csv) with `refit sim`.

For each of the four configurations, predicts gather-broadcast (the reported baseline) and
hybrid (the reported reshard) with the default calibration, and beside them full m2n and the
network lower bound of each plan. Prints reported, predicted and error; writes CSV and a PNG.

usage: /usr/bin/python3 experiments/reproduce.py [--build DIR | --refit PATH] [--out experiments/results]
  (the build directory defaults to $REFIT_BUILD, else build/)
"""
import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, Table, add_refit_args, refit_path, sim, write_csv  # noqa: E402

TABLE = os.path.join(ROOT, "experiments", "reported-refit.csv")


def read_table(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            rows.append(line.strip())
    return list(csv.DictReader(rows))


def dominant(r):
    """The stage that ends last and what bounds the run, in words."""
    st = max(r["stages"], key=lambda s: s["end_s"])
    return "%s ends last; %s" % (st["name"], r["bound_by"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--calibration", help="calibration file for every row (default: per topology)")
    a = ap.parse_args()
    a.refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    extra = ["--calibration", a.calibration] if a.calibration else []
    table = read_table(a.table)
    out_rows = []
    report = Table(os.path.join(a.out, "reproduce.txt"))
    report.line("# refit sim vs the reported table (default calibration: sim/calibration/<platform>.cal)")
    report.line("# %-12s %-17s %-14s %-10s %-17s %9s %9s %8s %8s %8s  %s" % (
        "platform", "model", "train", "infer", "strategy", "reported", "predicted", "err(%)",
        "m2n(s)", "bound(s)", "what dominates"))
    errors = []
    for row in table:
        res, wall = sim(a.refit, row["model"], row["train_layout"], row["infer_layout"],
                        row["platform"], ["gather-broadcast", "hybrid", "m2n"], extra)
        for strat, col in (("gather-broadcast", "baseline_s"), ("hybrid", "reshard_s")):
            r = res[strat]
            rep = float(row[col])
            pred = r["predicted_s"]
            err = 100.0 * (pred - rep) / rep
            errors.append(abs(err))
            rec = {
                "platform": row["platform"], "model": row["model"], "train": row["train_layout"],
                "infer": row["infer_layout"], "strategy": strat, "reported_s": rep,
                "predicted_s": round(pred, 4), "error_pct": round(err, 1),
                "m2n_s": round(res["m2n"]["predicted_s"], 4),
                "lower_bound_s": round(r["lower_bound_s"], 4),
                "m2n_lower_bound_s": round(res["m2n"]["lower_bound_s"], 4),
                "dominates": dominant(r), "sim_wall_s": round(wall, 1),
            }
            out_rows.append(rec)
            report.line("  %-12s %-17s %-14s %-10s %-17s %9.2f %9.2f %8.1f %8.2f %8.2f  %s" % (
                rec["platform"], rec["model"], rec["train"], rec["infer"], strat, rep, pred, err,
                rec["m2n_s"], rec["lower_bound_s"], rec["dominates"]))
    report.line("# mean |error| %.1f %%, max |error| %.1f %%; within 25%%: %d of %d; within 10%%: %d of %d"
          % (sum(errors) / len(errors), max(errors), sum(e <= 25 for e in errors), len(errors),
             sum(e <= 10 for e in errors), len(errors)))
    csv_path = os.path.join(a.out, "reproduce.csv")
    write_csv(csv_path, out_rows)
    png = os.path.join(a.out, "reproduce.png")
    plot(out_rows, png)
    report.save()
    print("# wrote %s, %s and %s" % (csv_path, png, report.path))


def plot(rows, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = ["%s\n%s\n%s" % (r["platform"], r["model"], r["strategy"]) for r in rows]
    x = range(len(rows))
    w = 0.38
    fig, ax = plt.subplots(figsize=(12, 4.8))
    ax.bar([i - w / 2 for i in x], [r["reported_s"] for r in rows], w, label="reported",
           color="#999999")
    ax.bar([i + w / 2 for i in x], [r["predicted_s"] for r in rows], w, label="predicted (refit sim)",
           color="#4c72b0")
    for i, r in enumerate(rows):
        ax.text(i + w / 2, r["predicted_s"], "%+.0f%%" % r["error_pct"], ha="center",
                va="bottom", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("refit time (s)")
    ax.set_title("Reported refit times vs refit sim (default calibration, not fitted)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
