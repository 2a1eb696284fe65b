#!/usr/bin/env python3
"""Plot of `refit advise --plot`: predicted refit time against inference GPUs (or TP when one GPU
count was searched), one line per strategy (its best layout at each x), the chosen point marked.
Usage: advise_plot.py ROWS.csv OUT.png TITLE (the CSV of `refit advise --csv`)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: advise_plot.py ROWS.csv OUT.png TITLE")
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "simulated"]
    if not rows:
        sys.exit("no simulated candidate to plot")
    gpus = sorted({int(r["infer_gpus"]) for r in rows})
    xkey = "infer_gpus" if len(gpus) > 1 else "tp"
    best = {}
    for r in rows:
        k = (r["strategy"], int(r[xkey]))
        t = float(r["predicted_s"])
        if k not in best or t < best[k][0]:
            best[k] = (t, r)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for s in sorted({k[0] for k in best}):
        xs = sorted(x for (st, x) in best if st == s)
        ax.plot(xs, [best[(s, x)][0] for x in xs], marker="o", label=s)
    top = min(rows, key=lambda r: float(r["predicted_s"]))
    ax.plot([int(top[xkey])], [float(top["predicted_s"])], marker="*", markersize=18,
            color="black", linestyle="none",
            label="chosen: %s %s %s" % (top["infer"], top["placement"], top["strategy"]))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("inference GPUs" if xkey == "infer_gpus" else "inference TP")
    ax.set_ylabel("predicted refit time (s)")
    ax.set_title(sys.argv[3], fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)


if __name__ == "__main__":
    main()
