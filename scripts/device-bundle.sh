#!/bin/sh
# Pack a CUDA build of refit for a device machine that has a GPU, CUDA's driver and NCCL but
# none of refit's other dependencies (GLib, json-glib, SimGrid, OpenMPI) and no way to install
# them: the device tool's H200 image. The bundle holds
#   bin/refit, bin/test_real                   (debug sections stripped)
#   bin/mpirun1                                 (a one-rank launcher, below)
#   lib/                                        every shared library they load, except the C
#                                               library's own, libstdc++/libgcc_s and NCCL
#   openmpi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/
#                                               Open MPI's components whose libraries are all in
#                                               the bundle (found there through OPAL_PREFIX)
#   openmpi/share/openmpi/                      its help texts
#   env.sh                                      sourced on the device: LD_LIBRARY_PATH, OPAL_PREFIX,
#                                               NCCL found on the machine (a Python wheel's
#                                               nvidia/nccl/lib, or a system copy)
# Built here, against this machine's C library (glibc 2.36): it runs on a newer one.
# One-rank MPI runs use Open MPI's isolated singleton (no mpirun, no orted, no PMIx server):
# bin/mpirun1 takes mpirun's arguments as test_real.sh and device-check.sh pass them, refuses
# any -np other than 1, and runs the command itself. Runs of more ranks need a real launcher.
# Usage: sh scripts/device-bundle.sh BUILD_DIR [BUNDLE_DIR (default .devbundle)]
#   BUILD_DIR: a build with the CUDA backend, e.g. sh scripts/build.sh build-gpu -DREFIT_CUDA=ON
#   -DCMAKE_CUDA_ARCHITECTURES=90. Then: sh scripts/device-check.sh --bundle .devbundle (device).
set -eu
cd "$(dirname "$0")/.."
build=${1:?usage: device-bundle.sh BUILD_DIR [BUNDLE_DIR]}
b=${2:-.devbundle}
for f in "$build/cli/refit" "$build/tests/test_real"; do
  [ -x "$f" ] || { echo "device-bundle: $f missing: build $build first" >&2; exit 1; }
done
ldd "$build/cli/refit" | grep -q 'libnccl' ||
  { echo "device-bundle: $build/cli/refit has no CUDA backend (not linked to NCCL)" >&2; exit 1; }
ompi_pkglib=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
ompi_pkgdata=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
ompi_prefix=$(ompi_info --path prefix --parsable 2>/dev/null | sed -n 's/^path:prefix://p')
[ -d "$ompi_pkglib" ] && [ -n "$ompi_prefix" ] ||
  { echo "device-bundle: Open MPI's component folder not found (ompi_info)" >&2; exit 1; }

if [ -e "$b" ] && [ ! -f "$b/env.sh" ]; then
  echo "device-bundle: $b exists and is not a bundle (no env.sh): not replacing it" >&2
  exit 1
fi
rm -rf "$b"
mkdir -p "$b/bin" "$b/lib"
for f in refit test_real; do
  src=$build/cli/refit
  [ $f = test_real ] && src=$build/tests/test_real
  strip --strip-debug -o "$b/bin/$f" "$src"
done

# The libraries the device provides itself: the C library's, the C++ runtime (the device's is
# newer; NCCL may need it), CUDA's driver, and NCCL (found there by env.sh).
system_lib() {
  case $1 in
  linux-vdso.so* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | \
    libresolv.so* | libutil.so* | libstdc++.so* | libgcc_s.so* | libcuda.so* | libnccl.so*) return 0 ;;
  esac
  return 1
}
# add_deps FILE: copy every library FILE loads (ldd resolves the whole closure) into lib/
add_deps() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    system_lib "$name" || [ -e "$b/lib/$name" ] || cp -L "$path" "$b/lib/$name"
  done
}
add_deps "$build/cli/refit"
add_deps "$build/tests/test_real"

# Open MPI's components, relocated under openmpi/ (OPAL_PREFIX): those whose libraries are all
# bundled already or the system's; the others (UCX, libfabric, PSM, verbs, PMIx, munge) are left
# out, and Open MPI does without them on one node.
rel=${ompi_pkglib#"$ompi_prefix"/}
mkdir -p "$b/openmpi/$rel"
kept=0
skipped=""
for c in "$ompi_pkglib"/*.so; do
  ok=1
  for name in $(ldd "$c" | awk '$2 == "=>" {print $1}'); do
    case $name in libmca_common_*) ;; *)
      system_lib "$name" || [ -e "$b/lib/$name" ] || { ok=0; break; } ;;
    esac
  done
  # a component that needs one of Open MPI's common libraries takes it along
  if [ $ok = 1 ]; then
    for name in $(ldd "$c" | awk '$2 == "=>" && $1 ~ /^libmca_common_/ {print $1}'); do
      p=$(ldd "$c" | awk -v n="$name" '$1 == n {print $3}')
      for d in $(ldd "$p" | awk '$2 == "=>" {print $1}'); do
        system_lib "$d" || [ -e "$b/lib/$d" ] || [ "$d" = "$name" ] || { ok=0; break; }
      done
      [ $ok = 1 ] && cp -L "$p" "$b/lib/$name"
    done
  fi
  if [ $ok = 1 ]; then
    cp "$c" "$b/openmpi/$rel/"
    kept=$((kept + 1))
  else
    skipped="$skipped $(basename "$c" .so)"
  fi
done
if [ -d "$ompi_pkgdata" ]; then
  mkdir -p "$b/openmpi/${ompi_pkgdata#"$ompi_prefix"/}"
  cp -r "$ompi_pkgdata/." "$b/openmpi/${ompi_pkgdata#"$ompi_prefix"/}/"
fi

cat >"$b/bin/mpirun1" <<'EOF'
#!/bin/sh
# One-rank launcher for a machine without Open MPI's launcher: takes mpirun's arguments, refuses
# any -np other than 1, and runs the command as an isolated MPI singleton (a world of one rank).
np=1
while [ $# -gt 0 ]; do
  case $1 in
  --allow-run-as-root | --oversubscribe) shift ;;
  -np | -n) np=$2; shift 2 ;;
  *) break ;;
  esac
done
if [ "$np" != 1 ]; then
  echo "mpirun1: $np ranks asked for; this launcher runs one (an isolated MPI singleton)" >&2
  exit 2
fi
OMPI_MCA_ess_singleton_isolated=1 exec "$@"
EOF
chmod +x "$b/bin/mpirun1"

cat >"$b/env.sh" <<'EOF'
# Sourced (sh) on the device machine: the bundle's libraries and Open MPI, and NCCL where the
# machine has it. Needs REFIT_BUNDLE (the bundle's absolute path); sets REFIT_BUNDLE_NCCL (empty
# when no NCCL was found).
REFIT_BUNDLE_NCCL=$(ls /usr/lib/x86_64-linux-gnu/libnccl.so.2 /usr/local/cuda/lib/libnccl.so.2 \
  /usr/local/cuda/lib64/libnccl.so.2 2>/dev/null | head -1)
if [ -z "$REFIT_BUNDLE_NCCL" ]; then
  for py in python3 /opt/torch/.venv/bin/python3; do
    d=$("$py" -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) &&
      [ -e "$d/lib/libnccl.so.2" ] && { REFIT_BUNDLE_NCCL=$d/lib/libnccl.so.2; break; }
  done
fi
[ -n "$REFIT_BUNDLE_NCCL" ] || REFIT_BUNDLE_NCCL=$(find /usr /opt -xdev -name libnccl.so.2 2>/dev/null | head -1)
unset d py
LD_LIBRARY_PATH=$REFIT_BUNDLE/lib${REFIT_BUNDLE_NCCL:+:$(dirname "$REFIT_BUNDLE_NCCL")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OPAL_PREFIX=$REFIT_BUNDLE/openmpi
OMPI_MCA_mca_base_component_show_load_errors=0
PATH=$REFIT_BUNDLE/bin:$PATH
export LD_LIBRARY_PATH OPAL_PREFIX OMPI_MCA_mca_base_component_show_load_errors PATH REFIT_BUNDLE_NCCL
EOF

echo "built from $(git describe --always --dirty 2>/dev/null || echo '?'):" \
  "$(grep -h 'CUDA backend' "$build.cmake.log" 2>/dev/null | sed 's/^-- //' | head -1)" >"$b/info.txt"
echo "device-bundle: $b: $(du -sh "$b" | cut -f1), $(ls "$b/lib" | wc -l) libraries, $kept Open MPI components"
echo "device-bundle: components left out (libraries not bundled):$skipped"
