#!/usr/bin/env python3
"""refit's executor model against refit run on one GPU, one rank.

scripts/device-check.sh (step 4c) ran the same 256 MiB (32 bf16 tensors of 2048 x 2048, rank 0
to rank 0: every transfer a self-send through NCCL) on one H200 at staging bounds of 32, 8, 2, 1
and 0.25 MiB (2 to 256 groups, `--one-comm --slots 1`); its summaries are
experiments/results/device-h200-2026-12-04-call*.txt. This script reads the measured times from
them and predicts each run with `refit sim --spec` (refit's executor, the default model, on
dgx-h100 with the H200's HBM and memory, and dgx-h100's calibration: the host's costs per group
and copy of [executor]), writing
experiments/results/gpu-one-rank.csv (one row per call and staging bound: measured, predicted,
measured / predicted) and gpu-one-rank.txt.

Rows of call 2 are marked excluded: its copy lists ran through CUB's batched memcpy, code that
was dropped after that call (docs/real.md, "First runs on a GPU"); calls 3-8 ran refit's own
copy kernel (settings varied in calls 3-5: a 1 MiB list of one copy, these runs' only kind,
moves alike under all of them). So is call 8's second run at 0.25 MiB: blocking communicators
(REFIT_NCCL_BLOCKING=1, a measurement hook), not what refit run does. Calls 10-13 (the second
session) ran the kernel with shifted vectors and the batch's byte and shifted passes, which leave
a 1 MiB aligned copy as it was; call 11's byte pass faulted in the copy-bandwidth lists and the
single-GPU refits, not in these runs (each a process of its own, every element checked: 0 wrong).

usage: /usr/bin/python3 experiments/gpu_one_rank.py [--build DIR | --refit PATH] [--out DIR]
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LINE = re.compile(r"--one-comm --slots 1 --staging-mib ([0-9.]+): (\d+) groups, total ([0-9.]+) s, "
                  r"# wrong elements: 0")


def spec_file(path):
    tensors = [{"name": "w%d" % t, "shape": [2048, 2048], "dtype": "bf16",
                "src": {"mesh": [1], "ranks": [0], "placements": ["R"]},
                "dst": {"mesh": [1], "ranks": [0], "placements": ["R"]}} for t in range(32)]
    with open(path, "w") as f:
        json.dump({"tensors": tensors}, f)


# The GPU the runs had: an H200 SXM, HBM3e 4.8 TB/s and 141 GB (NVIDIA H200 datasheet), in place of
# dgx-h100's H100 (3.35 TB/s, 80 GB); one rank's self-sends use no link, so the rest of dgx-h100
# (NVLink, NICs) does not enter. The calibration stays dgx-h100's: the host's costs per group,
# kernel launch and stream wait of [executor] were measured on this H200, and efficiency.hbm is
# the H100's copy figure (the H200's measured memcpy, 2.07 TB/s of payload, is 0.86 of its peak
# as bandwidthTest counts a copy: the same).
H200 = {"name": "dgx-h200", "hbm_GBps": "4800", "memory_GB": "141"}


def topology_file(path):
    out = []
    for line in open(os.path.join(ROOT, "topologies", "dgx-h100.topo")):
        key = line.split("=", 1)[0].strip()
        out.append("%s=%s\n" % (key, H200[key]) if "=" in line and key in H200 else line)
    with open(path, "w") as f:
        f.writelines(out)


def predict(refit, spec, topo, mib):
    out = subprocess.run([refit, "sim", "--spec", spec, "-T", topo, "-c",
                          os.path.join(ROOT, "sim", "calibration", "dgx-h100.cal"), "-s", "p2p",
                          "--staging-mib", mib, "--one-comm", "--slots", "1"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^\s*predicted ([0-9.e+-]+) s", out, re.M)
    if not m:
        sys.exit("gpu_one_rank: no prediction in refit sim's output:\n" + out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--refit")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    refit = a.refit or os.path.join(a.build, "cli", "refit")
    if not os.access(refit, os.X_OK):
        sys.exit("gpu_one_rank: %s not found: build first (sh scripts/build.sh)" % refit)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec = os.path.join(tmp, "one-rank-256mib.json")
        spec_file(spec)
        topo = os.path.join(tmp, "dgx-h200.topo")
        topology_file(topo)
        cache = {}
        for path in sorted(glob.glob(os.path.join(a.out, "device-h200-2026-12-04-call*.txt"))):
            call = int(re.search(r"call(\d+)", path).group(1))
            seen = set()
            for line in open(path):
                m = LINE.search(line)
                if not m:
                    continue
                mib, groups, measured = m.group(1), int(m.group(2)), float(m.group(3))
                # the sweep's run of a bound comes first; a later one of the same bound in the call
                # is the blocking-communicator run (REFIT_NCCL_BLOCKING=1, a measurement hook: not
                # what refit run does), unlabelled in call 8's summary, labelled since
                blocking = "REFIT_NCCL_BLOCKING" in line or mib in seen
                seen.add(mib)
                if mib not in cache:
                    cache[mib] = predict(refit, spec, topo, mib)
                rows.append({"call": call, "staging_mib": mib, "groups": groups,
                             "measured_s": measured, "predicted_s": cache[mib],
                             "ratio": measured / cache[mib],
                             "excluded": "CUB copies (dropped code)" if call == 2 else
                             "blocking communicators (REFIT_NCCL_BLOCKING=1)" if blocking else ""})
    if not rows:
        sys.exit("gpu_one_rank: no sweep lines in %s/device-h200-*-call*.txt" % a.out)
    with open(os.path.join(a.out, "gpu-one-rank.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("%.6g" % v if isinstance(v, float) else v) for k, v in r.items()})
    kept = [r for r in rows if not r["excluded"]]
    lines = ["# refit's executor model (refit sim --spec, dgx-h100 with the H200's 4.8 TB/s HBM, "
             "dgx-h100 calibration) against refit run on one H200, one rank, 256 MiB of "
             "self-sends",
             "%-5s %8s %7s %12s %12s %8s  %s" % ("call", "staging", "groups", "measured(s)",
                                                 "predicted(s)", "ratio", "excluded")]
    for r in rows:
        lines.append("%-5d %8s %7d %12.6f %12.6f %8.3f  %s" % (
            r["call"], r["staging_mib"], r["groups"], r["measured_s"], r["predicted_s"], r["ratio"],
            r["excluded"]))
    by = {}
    for r in kept:
        by.setdefault(r["groups"], []).append(r["ratio"])
    for g in sorted(by):
        lines.append("# %d groups: measured / predicted %.2f-%.2f over %d calls" % (
            g, min(by[g]), max(by[g]), len(by[g])))
    with open(os.path.join(a.out, "gpu-one-rank.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
