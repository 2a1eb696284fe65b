#!/usr/bin/env python3
"""Plot of `refit advise --plot`.

Several inference GPU counts: the best predicted refit time at each count (one bold line, each
point named by its engine, layout and strategy), the best of each strategy behind it in thin
lines, the fastest marked. One GPU count: predicted time against inference TP, one line per
strategy. Usage: advise_plot.py ROWS.csv OUT.png TITLE (the CSV of `refit advise --csv`)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def best_by(rows, key):
    best = {}
    for r in rows:
        k = key(r)
        if k not in best or float(r["predicted_s"]) < float(best[k]["predicted_s"]):
            best[k] = r
    return best


def label(r):
    return "%s %s %s" % (r.get("framework", "vllm"), r["infer"], r["strategy"])


def plot_counts(ax, rows):
    per_strategy = best_by(rows, lambda r: (r["strategy"], int(r["infer_gpus"])))
    for s in sorted({k[0] for k in per_strategy}):
        xs = sorted(x for (st, x) in per_strategy if st == s)
        ax.plot(xs, [float(per_strategy[(s, x)]["predicted_s"]) for x in xs], marker=".",
                linewidth=0.8, alpha=0.45, label="best %s" % s)
    best = best_by(rows, lambda r: int(r["infer_gpus"]))
    xs = sorted(best)
    ys = [float(best[x]["predicted_s"]) for x in xs]
    ax.plot(xs, ys, marker="o", color="black", linewidth=2.2, label="best candidate")
    for x, y in zip(xs, ys):
        ax.annotate("%.3g s\n%s" % (y, label(best[x])), (x, y), textcoords="offset points",
                    xytext=(0, 9), ha="center", fontsize=7)
    top = min(rows, key=lambda r: float(r["predicted_s"]))
    ax.plot([int(top["infer_gpus"])], [float(top["predicted_s"])], marker="*", markersize=18,
            color="gold", markeredgecolor="black", linestyle="none",
            label="fastest: %d GPUs %s" % (int(top["infer_gpus"]), label(top)))
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    ax.set_xlabel("inference GPUs")
    ax.set_ylim(0, max(ys + [float(r["predicted_s"]) for r in per_strategy.values()]) * 1.25)


def plot_tp(ax, rows):
    best = best_by(rows, lambda r: (r["strategy"], int(r["tp"])))
    for s in sorted({k[0] for k in best}):
        xs = sorted(x for (st, x) in best if st == s)
        ax.plot(xs, [float(best[(s, x)]["predicted_s"]) for x in xs], marker="o", label=s)
    top = min(rows, key=lambda r: float(r["predicted_s"]))
    ax.plot([int(top["tp"])], [float(top["predicted_s"])], marker="*", markersize=18,
            color="black", linestyle="none",
            label="chosen: %s %s %s" % (label(top), top["placement"], ""))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("inference TP")


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: advise_plot.py ROWS.csv OUT.png TITLE")
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "simulated"]
    if not rows:
        sys.exit("no simulated candidate to plot")
    fig, ax = plt.subplots(figsize=(9, 5))
    if len({int(r["infer_gpus"]) for r in rows}) > 1:
        plot_counts(ax, rows)
    else:
        plot_tp(ax, rows)
    ax.set_ylabel("predicted refit time (s)")
    ax.set_title(sys.argv[3], fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
