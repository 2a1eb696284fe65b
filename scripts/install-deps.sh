#!/bin/sh
# Install what refit needs from Debian's packages, skipping what is already there (run as root).
set -eu
PKGS="build-essential cmake pkg-config libglib2.0-dev libjson-glib-dev libsimgrid-dev \
libopenmpi-dev openmpi-bin python3-matplotlib valgrind clang-format clang shellcheck"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "# installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing
else
  echo "# all dependencies present"
fi
