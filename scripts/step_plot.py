#!/usr/bin/env python3
"""Plot of `refit step --plot`: end-to-end speedup of a synchronous step against the baseline
refit's share of that step, one Amdahl curve per strategy pair (refit speedup r:
1 / (1 - s + s / r)), the workload's own points marked (black dots), and the points of the shipped
workload files of experiments/workloads/ with the same refit times (open squares).
Usage: step_plot.py ROWS.csv OUT.png (rows: kind,label,x,y; kind ratio: x = r; kind point: this
workload; kind shipped: a shipped workload file)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: step_plot.py ROWS.csv OUT.png")
    rows = list(csv.DictReader(open(sys.argv[1])))
    shares = [i / 200 for i in range(201)]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r["kind"] != "ratio":
            continue
        k = float(r["x"])
        ax.plot(shares, [1 / (1 - s + s / k) for s in shares],
                label="%s (refit %.2fx)" % (r["label"], k))
    for r in rows:
        if r["kind"] == "point":
            ax.plot([float(r["x"])], [float(r["y"])], marker="o", color="black")
            ax.annotate(r["label"], (float(r["x"]), float(r["y"])), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))
    for r in rows:
        if r["kind"] == "shipped":
            ax.plot([float(r["x"])], [float(r["y"])], marker="s", markerfacecolor="none",
                    color="tab:red")
            ax.annotate(r["label"], (float(r["x"]), float(r["y"])), fontsize=6, color="tab:red",
                        textcoords="offset points", xytext=(4, -10))
    ax.set_xlabel("baseline refit share of a synchronous step")
    ax.set_ylabel("end-to-end step speedup (x)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
