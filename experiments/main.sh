#!/bin/sh
# The main job: plans of every strategy for the four reported configurations.
set -eu
cd "$(dirname "$0")/.."
exec sh experiments/plan_reported.sh "${1:-build}"
