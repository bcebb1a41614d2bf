#!/usr/bin/env bash
# The one script to run on a lent GPU machine (an H200): from the repository root, configure a
# fresh build folder, build the GPU tests and dcp-gpu-roofline, run the GPU tests (a second time
# with every GPU hidden, for the no-GPU paths against a real driver), then the roofline. What it
# prints and measures goes to $OUT (or build-gpu-check-out/ without $OUT):
#   gpu_check.log    everything below, with the machine's nvidia-smi, compiler and toolkit
#   gpu_tests.xml    the CTest results (JUnit) of `ctest -L gpu`
#   hidden_gpu.log   the GPU test program with CUDA_VISIBLE_DEVICES=-1
#   roofline.md      dcp-gpu-roofline's report;  roofline.csv  its CSV
#
# The GPU machine has no Debian packages and no network, so doctest travels with the
# tree. Once, on the developer's machine (which has them installed):
#   bash tools/gpu_check.sh --pack-deps      # copies them into build-gpu-deps/ (git-ignored)
# then on the GPU machine, naming that folder in the device tool's `carry`:
#   bash tools/gpu_check.sh                  # about 1-3 minutes on 16 cores
# NCCL is taken from the CUDA toolkit, NCCL_ROOT, or the nvidia-nccl wheel of the machine's
# python3; without it only the CUDA tests and the roofline run (the log says so).
set -euo pipefail
cd "$(dirname "$0")/.."

deps=build-gpu-deps

if [ "${1:-}" = --pack-deps ]; then
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/lib/cmake"
  cp -a /usr/include/doctest "$deps/include/"
  cp -a /usr/lib/cmake/doctest "$deps/lib/cmake/"
  # Debian's doctest export names /usr as its prefix; make it relative to where it now lies.
  sed -i 's|^set(_IMPORT_PREFIX "/usr")$|get_filename_component(_IMPORT_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)|' \
    "$deps/lib/cmake/doctest/doctestTargets.cmake"
  grep -q 'CMAKE_CURRENT_LIST_DIR}/../../..' "$deps/lib/cmake/doctest/doctestTargets.cmake"
  du -sh "$deps"
  exit 0
fi

out=${OUT:-$PWD/build-gpu-check-out}
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
build=build-gpu-check
start=$SECONDS
step() { echo "::: $* ($((SECONDS - start)) s)"; }

step machine
nvidia-smi || echo "nvidia-smi failed"
c++ --version | head -1 || true
cmake --version | head -1
command -v nvcc >/dev/null && nvcc --version | tail -2 || echo "no nvcc on PATH"

# Configure options: the carried dependencies, and NCCL from python3's wheel when the toolkit has
# no nccl.h. Warnings stay warnings here (CI checks them); this run measures.
options=(-DCMAKE_BUILD_TYPE=Release -DDCP_BUILD_BENCH=OFF -DDCP_BUILD_EXAMPLES=OFF -DDCP_ENABLE_MPI=OFF
         -DDCP_VERIFY_HEADERS=OFF -DDCP_INSTALL=OFF -DDCP_ENABLE_CUDA=ON -DCMAKE_COMPILE_WARNING_AS_ERROR=OFF)
[ -d "$deps" ] && options+=("-DCMAKE_PREFIX_PATH=$PWD/$deps")
command -v ninja >/dev/null && options+=(-G Ninja)
if [ -z "${NCCL_ROOT:-}" ] && [ ! -e /usr/local/cuda/include/nccl.h ] && [ ! -e /usr/include/nccl.h ]; then
  wheel=$(python3 -c 'import nvidia, sys; print("\n".join(nvidia.__path__))' 2>/dev/null |
          while read -r dir; do find "$dir" -name nccl.h -path '*include*' 2>/dev/null; done | head -1 || true)
  if [ -n "$wheel" ]; then
    export NCCL_ROOT=$(dirname "$(dirname "$wheel")")
    echo "NCCL from python3's wheel: $NCCL_ROOT"
  fi
fi
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # Debian's doctest export, under CMake 4

step configure
rm -rf "$build"
cmake -S . -B "$build" "${options[@]}"
targets=(dcp_gpu_tests dcp-gpu-roofline)
step build "${targets[@]}"
cmake --build "$build" --target "${targets[@]}" -j"$(nproc)"
grep -q 'DCP_ENABLE_NCCL:BOOL=ON' "$build/CMakeCache.txt" && echo "NCCL tests: built" ||
  echo "NCCL tests: NOT built (NCCL not found; set NCCL_ROOT)"

status=0
step "GPU tests"
ctest --test-dir "$build" -L gpu --output-on-failure --output-junit "$out/gpu_tests.xml" || status=1
step "GPU tests with every GPU hidden (CUDA_VISIBLE_DEVICES=-1)"
CUDA_VISIBLE_DEVICES=-1 "$build/tests/dcp_gpu_tests" >"$out/hidden_gpu.log" 2>&1 || status=1
tail -3 "$out/hidden_gpu.log"

step roofline
"$build/tools/dcp-gpu-roofline" --csv "$out/roofline.csv" >"$out/roofline.md" || status=1
cat "$out/roofline.md"

step "done, status $status"
exit $status
