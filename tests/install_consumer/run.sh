#!/usr/bin/env bash
# Installs qfx into a temporary prefix and builds a user's project against it
# with find_package(qfx). Args: BUILD_DIR SOURCE_DIR FIXTURE
set -euo pipefail
build=$1; src=$2; fixture=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
# The libtorch qfx was built against (a user passes theirs the same way).
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
cmake -S "$src/tests/install_consumer" -B "$tmp/b" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DTorch_DIR="$torch_dir" \
  ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} > /dev/null
cmake --build "$tmp/b" > /dev/null
"$tmp/b/consumer" "$fixture"
