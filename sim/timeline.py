#!/usr/bin/env python3
"""Timeline of the simulated stages (written by `refit sim --timeline FILE.png`).

usage: timeline.py STAGES.csv OUT.png [TITLE]
  (CSV columns: strategy,stage,start_s,end_s,bytes; TITLE names the model, layouts, topology
  and strategies, as refit sim passes it)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"export": "#4c72b0", "broadcast": "#dd8452", "inject": "#55a868",
          "forward": "#c44e52", "fanout": "#8172b3"}


# refit sim --software: one bar per group of steps; the generation streams (one PP stage's
# reshard calls in series), the misc broadcast after the bulk, vLLM's finalize
STREAM_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                 "#8c8c8c"]


def color(stage):
    if stage in COLORS:
        return COLORS[stage]
    if stage.startswith("stream"):
        try:
            return STREAM_COLORS[int(stage[6:].split()[0]) % len(STREAM_COLORS)]
        except ValueError:
            pass
    if stage.startswith("misc"):
        return "#ccb974"
    return "#999999"


def main(src, out, title):
    rows = list(csv.DictReader(open(src)))
    strategies = []
    for r in rows:
        if r["strategy"] not in strategies:
            strategies.append(r["strategy"])
    lanes = []
    for s in strategies:
        for r in rows:
            if r["strategy"] == s:
                lanes.append((s, r))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(lanes) + 1.2))
    labels = []
    for i, (s, r) in enumerate(lanes):
        a, b = float(r["start_s"]), float(r["end_s"])
        ax.barh(i, max(b - a, 1e-9), left=a, color=color(r["stage"]))
        ax.text(b, i, " %.4g s" % b, va="center", fontsize=8)
        labels.append("%s: %s" % (s, r["stage"]))
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (s)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2],
         sys.argv[3] if len(sys.argv) == 4 else "refit sim: stage timeline")
