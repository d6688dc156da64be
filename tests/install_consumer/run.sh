#!/usr/bin/env bash
# Installs qfx into a temporary prefix and builds a user's project against it
# with find_package(qfx). Args: BUILD_DIR SOURCE_DIR FIXTURE
# The installed configs are found from the prefix (not the source tree): a backend
# YAML that exists only in the prefix resolves by name, in the user's program and in
# the installed qfx. Then, with the source and build trees hidden (a private mount
# namespace puts empty folders over them and over the virtual environment, all but
# the torch wheel and its nvidia libraries), the user's program and the installed
# `qfx ptq` default job run from the prefix.
set -euo pipefail
build=$1; src=$2; fixture=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
sed 's/^name: onednn$/name: installed_only/' "$tmp/prefix/share/qfx/configs/backends/onednn.yaml" \
  > "$tmp/prefix/share/qfx/configs/backends/installed_only.yaml"
grep -q '^name: installed_only$' "$tmp/prefix/share/qfx/configs/backends/installed_only.yaml"
# The libtorch qfx was built against (a user passes theirs the same way).
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
cmake -S "$src/tests/install_consumer" -B "$tmp/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DTorch_DIR="$torch_dir" \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} > /dev/null
cmake --build "$tmp/b" > /dev/null
# Every qfx:: target the docs' CMake blocks link is one find_package(qfx) defines.
docs_targets=$(awk '/^```cmake/{c=1;next} /^```/{c=0} c' "$src"/README.md "$src"/docs/*.md \
  | grep -o 'qfx::[A-Za-z0-9_]*' | sort -u)
mkdir -p "$tmp/docs_targets"
{ echo 'cmake_minimum_required(VERSION 3.22)'; echo 'project(docs_targets CXX)'; echo 'find_package(qfx REQUIRED)'
  for t in $docs_targets; do echo "if(NOT TARGET $t)
  message(FATAL_ERROR \"the docs link $t, which find_package(qfx) does not define\")
endif()"; done; } > "$tmp/docs_targets/CMakeLists.txt"
cmake -S "$tmp/docs_targets" -B "$tmp/docs_targets/b" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DTorch_DIR="$torch_dir" \
  > "$tmp/docs_targets.log" 2>&1 || { cat "$tmp/docs_targets.log"; exit 1; }
echo "docs' CMake targets defined: $(echo $docs_targets)"
out=$("$tmp/b/consumer" "$fixture" installed_only)
echo "$out"
grep -q '^backend: installed_only$' <<<"$out"
# The installed CLI: its version line, and the prefix's backend among those it lists.
env -u QFX_CONFIG_DIR "$tmp/prefix/bin/qfx" --version
msg=$(env -u QFX_CONFIG_DIR "$tmp/prefix/bin/qfx" ptq --set backend=no_such_backend 2>&1 || true)
echo "$msg"
grep -q "unknown backend 'no_such_backend' (available: .*installed_only" <<<"$msg"

# The source and build trees out of view: what the prefix holds must be enough.
venv=$(dirname "$(dirname "$torch_dir")")  # .../share/cmake/Torch -> the torch package's folder
venv=$(cd "$venv/../../../../.." && pwd)   # <venv>/lib/pythonX/site-packages/torch -> <venv>
userns=""; [ "$(id -u)" -ne 0 ] && userns="-r"
hidden=$(unshare $userns -m bash -s "$src" "$build" "$venv" "$tmp" "$fixture" <<'EOS'
set -e
src=$1; build=$2; venv=$3; tmp=$4; fixture=$5
# Of the virtual environment only the user's torch stays: the torch package and
# the wheels its libraries load (nvidia/*); everything else there (oneDNN's wheel) is hidden.
site=$(ls -d "$venv"/lib/python3*/site-packages | head -n 1)
kept=()
for pkg in torch nvidia; do
  [ -d "$site/$pkg" ] || continue
  mkdir -p "$tmp/keep/$pkg"; mount --bind "$site/$pkg" "$tmp/keep/$pkg"; kept+=("$pkg")
done
cp "$fixture" "$tmp/model.pt"
for d in "$build" "$src" "$venv"; do [ -d "$d" ] && mount -t tmpfs none "$d"; done
for pkg in "${kept[@]}"; do mkdir -p "$site/$pkg"; mount --bind "$tmp/keep/$pkg" "$site/$pkg"; done
[ ! -e "$src/CMakeLists.txt" ] && [ ! -e "$build/CMakeCache.txt" ] || { echo "source or build tree still visible"; exit 1; }
! ls "$venv"/lib/libdnnl* > /dev/null 2>&1 || { echo "the environment's oneDNN is still visible"; exit 1; }
if missing=$(ldd "$tmp/prefix/bin/qfx" | grep "not found"); then echo "qfx misses: $missing"; exit 1; fi
"$tmp/b/consumer" "$tmp/model.pt" installed_only | grep -q '^backend: installed_only$'
env -u QFX_CONFIG_DIR -u QFX_FIXTURES "$tmp/prefix/bin/qfx" ptq --set calibration.num_samples=64 \
  --set evaluation.num_samples=200 --set evaluation.sqnr_samples=0 --set evaluation.reference_check=0 \
  --set output.dir="$tmp/ptq_out" > "$tmp/ptq.log" 2>&1 || { cat "$tmp/ptq.log"; exit 1; }
[ -f "$tmp/ptq_out/model_int8.onnx" ] && grep -q "prefix/share/qfx/configs/ptq/default.yaml" "$tmp/ptq.log"
echo "ran from the prefix alone"
EOS
) || { echo "$hidden"; exit 1; }
echo "$hidden"
grep -q '^ran from the prefix alone$' <<<"$hidden"
