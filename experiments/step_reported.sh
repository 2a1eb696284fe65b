#!/bin/sh
# `refit step` on the four reported configurations (experiments/reported-refit.csv: baseline =
# gather-broadcast, reshard = hybrid, refit times as published). Nobody publishes the rollout and
# training times of these runs, so the step is swept over the baseline refit's share S of a
# synchronous step: R + T = F_baseline (1 - S) / S, with the ASSUMPTION R = T (rollout as long as
# training); other trainer work O = 0. Usage: experiments/step_reported.sh [path/to/refit]
set -eu
REFIT=${1:-build/cli/refit}
printf '%-12s %-18s %6s %6s  %-14s %9s %9s %9s\n' platform model share R=T mode step_gb step_hyb speedup
grep -v '^#' "$(dirname "$0")/reported-refit.csv" | tail -n +2 | while IFS=, read -r plat model _ _ _ base resh; do
  for share in 0.05 0.10 0.20 0.40; do
    rt=$(awk -v f="$base" -v s="$share" 'BEGIN { printf "%.6g", f * (1 - s) / s / 2 }')
    "$REFIT" step --rollout-s "$rt" --train-s "$rt" --refit "gather-broadcast=$base,hybrid=$resh" --json |
      /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
rows = {(r["mode"], r["strategy"]): r for r in d["rows"]}
for mode in ("sync", "async", "async-overlap"):
    gb, hy = rows[(mode, "gather-broadcast")], rows[(mode, "hybrid")]
    print("%-12s %-18s %6s %6s  %-14s %9.2f %9.2f %9.3f" % (sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], mode, gb["step_s"], hy["step_s"], hy["speedup"]))
' "$plat" "$model" "$share" "$rt"
  done
done
