#!/bin/sh
# The main job: the reported table reproduced by the simulator with the default calibration
# (reported, predicted, error, full m2n, network lower bound), written to experiments/results/.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
# Debian's python3 has matplotlib; a python3 earlier on PATH may not.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" experiments/reproduce.py --refit "$BUILD/cli/refit"
