#!/usr/bin/env python3
"""Sweep inference TP and NVLink domain size for one refit; CSV and a heatmap per strategy.

Every figure is refit's flow model (`refit sim --software-variant flows`: the plan as flows at
calibrated rates, no software cost; an ideal estimate, not refit run's executor, refit sim's
default, which would take minutes per cell); the CSV's predicted_by column says so.

Default: Qwen3-235B-A22B trained with TP4xPP8xEP16 (128 GPUs) on GB200 NVL72 links, served with
vLLM TP in {2, 4, 8, 16, 32} (DP = 128 / TP), NVLink domains of {4, 8, 18, 36, 72} GPUs
(--domain-size). Progress goes to stderr.

usage: /usr/bin/python3 experiments/sweep.py [--build DIR | --refit PATH] [--out experiments/results]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import ROOT, add_refit_args, pyplot, refit_path, sim, write_csv  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_refit_args(ap)
    ap.add_argument("--out", default=os.path.join(ROOT, "experiments", "results"))
    ap.add_argument("--model", default="qwen3-235b-a22b")
    ap.add_argument("--train", default="TP4xPP8xEP16")
    ap.add_argument("--gpus", type=int, default=128, help="inference GPUs (DP = GPUs / TP)")
    ap.add_argument("--topology", default="gb200-nvl72")
    ap.add_argument("--tp", default="2,4,8,16,32")
    ap.add_argument("--domains", default="4,8,18,36,72")
    ap.add_argument("--strategies", default="hybrid,m2n,gather-broadcast")
    a = ap.parse_args()
    a.refit = refit_path(a)
    os.makedirs(a.out, exist_ok=True)
    tps = [int(x) for x in a.tp.split(",")]
    doms = [int(x) for x in a.domains.split(",")]
    strats = a.strategies.split(",")
    rows, total, k, t0 = [], len(tps) * len(doms), 0, time.time()
    for d in doms:
        for tp in tps:
            k += 1
            infer = "TP%dxDP%d" % (tp, a.gpus // tp)
            res, wall = sim(a.refit, a.model, a.train, infer, a.topology, strats,
                            ["--domain-size", str(d), "--software-variant", "flows"])
            for s in strats:
                rows.append({"model": a.model, "train": a.train, "infer": infer, "tp": tp,
                             "domain": d, "topology": a.topology, "strategy": s,
                             "predicted_s": round(res[s]["predicted_s"], 4),
                             "lower_bound_s": round(res[s]["lower_bound_s"], 4),
                             "predicted_by": res[s]["predicted_by"]})
            el = time.time() - t0
            print("[%d/%d] domain %d, %s: %s  (%.0f s elapsed, ~%.0f s left)" % (
                k, total, d, infer, " ".join("%s %.3f s" % (s, res[s]["predicted_s"]) for s in strats),
                el, el / k * (total - k)), file=sys.stderr, flush=True)
    path = os.path.join(a.out, "sweep.csv")
    write_csv(path, rows)
    png = os.path.join(a.out, "sweep.png")
    if not plot(rows, tps, doms, strats, png, a):
        png = "(no PNG)"
    print("# wrote %s and %s" % (path, png))


def plot(rows, tps, doms, strats, png, a):
    plt = pyplot(png)
    if plt is None:
        return False
    fig, axes = plt.subplots(1, len(strats), figsize=(4.0 * len(strats) + 1.0, 4.0), squeeze=False,
                             constrained_layout=True)
    grids = {s: [[next(r["predicted_s"] for r in rows if r["strategy"] == s and r["tp"] == tp and
                       r["domain"] == d) for tp in tps] for d in doms] for s in strats}
    # one colour scale for every panel, so that a colour means the same time everywhere
    lo = min(v for g in grids.values() for line in g for v in line)
    hi = max(v for g in grids.values() for line in g for v in line)
    for ax, s in zip(axes[0], strats):
        grid = grids[s]
        im = ax.imshow(grid, origin="lower", cmap="viridis_r", aspect="auto", vmin=lo, vmax=hi)
        for i in range(len(doms)):
            for j in range(len(tps)):
                r, g, b, _ = im.cmap(im.norm(grid[i][j]))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # text that reads on the cell
                ax.text(j, i, "%.2f" % grid[i][j], ha="center", va="center", fontsize=7,
                        color="w" if dark else "k")
        ax.set_xticks(range(len(tps)))
        ax.set_xticklabels(tps)
        ax.set_yticks(range(len(doms)))
        ax.set_yticklabels(doms)
        ax.set_xlabel("inference TP")
        if ax is axes[0][0]:
            ax.set_ylabel("GPUs per NVLink domain")
        ax.set_title("%s (s)" % s)
    fig.colorbar(im, ax=list(axes[0]),
                 label="refit time (s), refit's flow model (an ideal estimate)")
    fig.suptitle("%s %s -> TPxDP on %d GPUs, %s links" % (a.model, a.train, a.gpus, a.topology))
    fig.savefig(png, dpi=110, bbox_inches="tight")
    return True


if __name__ == "__main__":
    main()
