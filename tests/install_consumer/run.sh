#!/usr/bin/env bash
# Installs qfx into a temporary prefix and builds a user's project against it
# with find_package(qfx). Args: BUILD_DIR SOURCE_DIR FIXTURE
# The installed configs are found from the prefix (not the source tree): a backend
# YAML that exists only in the prefix resolves by name, in the user's program and in
# the installed qfx.
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
out=$("$tmp/b/consumer" "$fixture" installed_only)
echo "$out"
grep -q '^backend: installed_only$' <<<"$out"
# The installed CLI: its version line, and the prefix's backend among those it lists.
env -u QFX_CONFIG_DIR "$tmp/prefix/bin/qfx" --version
msg=$(env -u QFX_CONFIG_DIR "$tmp/prefix/bin/qfx" ptq --set backend=no_such_backend 2>&1 || true)
echo "$msg"
grep -q "unknown backend 'no_such_backend' (available: .*installed_only" <<<"$msg"
