#!/usr/bin/env bash
# Quick start on Debian/Ubuntu: install what is missing, build dcp-sim in build/ (Release) and print
# its default comparison (every policy on the built-in workloads, judged by the simulator), then
# build the rest of the tree for the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ doctest-dev libbenchmark-dev libopenmpi-dev openmpi-bin)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" 2>/dev/null | grep '^Status: install ok installed' >/dev/null ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  echo "Installing ${missing[*]}"
  "${sudo[@]}" apt-get update || echo "apt-get update failed; trying the current package lists"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
# dcp-sim first, so the comparison prints within minutes; then everything the tests run.
cmake --build build -j"$(nproc)" --target dcp-sim
./build/tools/dcp-sim
echo "Building the tests, benchmarks and examples for: ctest --test-dir build --output-on-failure -j2"
cmake --build build -j"$(nproc)"
