#!/bin/sh
# refit plan --strategy all on the four reported configurations (shared/reference/reported-refit.csv).
set -eu
REFIT=${1:-build}/cli/refit
while IFS=, read -r platform model _ train infer _; do
  case "$platform" in \#*|platform) continue ;; esac
  echo
  "$REFIT" plan --model "$model" --train "$train" --infer "$infer" --topology "$platform" --strategy all
done <<CSV
$(grep -v '^#' "$(dirname "$0")/reported-refit.csv")
CSV
