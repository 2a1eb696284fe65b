#!/bin/sh
# The main job on a fresh machine: install what is missing, build, reproduce the reported table.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
sh scripts/build.sh build
exec sh experiments/main.sh build
