#!/usr/bin/env bash
# One prepared measurement run for one NVIDIA H200 (docs/gpu-results.md says what it measures):
# host cost of kernel launches, attention by length, BF16 GEMMs by tokens, a Llama-3-8B-shaped
# stack on Wikipedia-like micro-batches next to dcp's prediction, STDiT's long cross-attention,
# and the timer / one-rank NCCL checks. Within 6 minutes, the build of dcp's Python bindings
# included (it runs in the background while the GPU measures). Writes to $OUT (default
# build-gpu-evidence-out/): one CSV per section, results.json, prediction.json, gpu-results.md.
#
#   bash tools/gpu_evidence.sh                 # on the GPU machine, from the checkout alone
#   bash tools/gpu_evidence.sh --cpu-smoke     # anywhere: tiny shapes on the CPU, no build
#   python3 tools/gpu_evidence/render.py --docs OUT   # then: docs/gpu-results.md from a GPU run
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'USAGE'
usage: bash tools/gpu_evidence.sh [--cpu-smoke] [--budget SECONDS] [--sections LETTERS]
                                  [--no-build] [--dcp-python DIR]
  --cpu-smoke        tiny shapes on the CPU (torch without CUDA will do); does not build
  --budget SECONDS   wall time for the whole run, 60 to 3600 (default 330; 60 with --cpu-smoke)
  --sections LETTERS which of a,b,c,d,e,f to run (default all), e.g. a,c,f
  --no-build         do not build dcp's bindings (predictions only if `import dcp` works)
  --dcp-python DIR   use the dcp package built in DIR (e.g. build/python) instead of building
Environment: OUT (output folder), PYTHON (interpreter; default python3, /usr/bin/python3 with
--cpu-smoke where it exists).
USAGE
}

fail() { echo "gpu_evidence.sh: $*" >&2; exit 2; }

command_line="bash tools/gpu_evidence.sh${*:+ $*}"
smoke=0 budget="" sections=abcdef build=1 dcp_python=""
while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-smoke) smoke=1 ;;
    --budget) [ $# -ge 2 ] || fail "--budget needs a value: whole seconds from 60 to 3600"
      budget=$2; shift
      [[ "$budget" =~ ^[0-9]+$ ]] && [ "$budget" -ge 60 ] && [ "$budget" -le 3600 ] ||
        fail "--budget '$budget': not allowed; give whole seconds from 60 to 3600" ;;
    --sections) [ $# -ge 2 ] || fail "--sections needs a value: letters of abcdef, e.g. a,c,f"
      sections=$2; shift
      [[ "$sections" =~ ^[a-f](,?[a-f])*$ ]] ||
        fail "--sections '$sections': not allowed; give letters of abcdef, e.g. a,c,f" ;;
    --no-build) build=0 ;;
    --dcp-python) [ $# -ge 2 ] || fail "--dcp-python needs a folder holding the built dcp package"
      dcp_python=$2; shift
      [ -d "$dcp_python/dcp" ] || fail "--dcp-python '$dcp_python': no dcp package there (expected $dcp_python/dcp/)" ;;
    -h|--help) usage; exit 0 ;;
    *) fail "unknown argument '$1'; allowed: --cpu-smoke, --budget SECONDS, --sections LETTERS, --no-build, --dcp-python DIR, --help" ;;
  esac
  shift
done

if [ $smoke = 1 ]; then
  budget=${budget:-60}
  build=0
  default_python=python3
  [ -x /usr/bin/python3 ] && default_python=/usr/bin/python3  # Debian's, the one with torch here
else
  budget=${budget:-330}
  default_python=python3
fi
python=${PYTHON:-$default_python}
command -v "$python" >/dev/null || fail "PYTHON '$python': not found; give an interpreter that can import torch"
[ -n "$dcp_python" ] && build=0
out=${OUT:-$PWD/build-gpu-evidence-out}
mkdir -p "$out"
rm -f "$out"/*.csv "$out"/results.json "$out"/prediction.json "$out"/build.status "$out"/gpu-results.md
exec > >(tee "$out/gpu_evidence.log") 2>&1
export PYTHONDONTWRITEBYTECODE=1
start=$SECONDS
step() { echo "::: $* ($((SECONDS - start)) s)"; }

# dcp's bindings for section d's predictions: built in the background while the GPU measures,
# with a time limit that leaves the measurements their budget. build.status says how it ended.
build_dir=build-gpu-evidence
build_pid=""
[ $build = 0 ] && echo "not built in this run${dcp_python:+; predictions from the dcp package in $dcp_python}" >"$out/build.status"
if [ $build = 1 ]; then
  step "building dcp's Python bindings in $build_dir (log: $out/build.log)"
  options=(-DCMAKE_BUILD_TYPE=Release -DDCP_BUILD_TESTS=OFF -DDCP_BUILD_TOOLS=OFF -DDCP_BUILD_EXAMPLES=OFF
           -DDCP_BUILD_BENCH=OFF -DDCP_INSTALL=OFF -DDCP_VERIFY_HEADERS=OFF -DDCP_ENABLE_MPI=OFF
           -DDCP_ENABLE_CUDA=OFF -DDCP_ENABLE_TORCH=OFF -DDCP_ENABLE_PYTHON=ON
           -DCMAKE_COMPILE_WARNING_AS_ERROR=OFF "-DDCP_PYTHON_EXECUTABLE=$(command -v "$python")")
  pybind11_dir=$("$python" -m pybind11 --cmakedir 2>/dev/null || true)
  [ -n "$pybind11_dir" ] && options+=("-Dpybind11_DIR=$pybind11_dir")
  command -v ninja >/dev/null && options+=(-G Ninja)
  [ -f "$build_dir/CMakeCache.txt" ] && ! grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$build_dir/CMakeCache.txt" &&
    command -v ninja >/dev/null && rm -rf "$build_dir"
  # Configure and build together end by then, so that waiting for them keeps the run in budget.
  build_limit=$((budget - 45))
  (
    export CMAKE_POLICY_VERSION_MINIMUM=3.5  # an older pybind11 package config, under CMake 4
    began=$SECONDS
    left() { echo $((build_limit - (SECONDS - began))); }
    if timeout -k 5 "$(left)" cmake -S . -B "$build_dir" "${options[@]}" >"$out/build.log" 2>&1 &&
       [ "$(left)" -gt 0 ] &&
       timeout -k 5 "$(left)" cmake --build "$build_dir" --target dcp_python -j"$(nproc)" >>"$out/build.log" 2>&1; then
      echo "built in $((SECONDS - began)) s" >"$out/build.status"
    else
      echo "failed or timed out after $((SECONDS - began)) s (see build.log)" >"$out/build.status"
    fi
  ) &
  build_pid=$!
fi

step "measuring (budget $budget s)"
measure_args=(--out "$out" --sections "$sections" --budget $((budget - 30))
              --command "$command_line")
[ $smoke = 1 ] && measure_args+=(--cpu-smoke)
[ -n "$build_pid" ] && measure_args+=(--build-status "$out/build.status")
status=0
"$python" tools/gpu_evidence/measure.py "${measure_args[@]}" || status=$?

if [ -n "$build_pid" ]; then
  step "waiting for the bindings' build"
  wait "$build_pid" || true
  cat "$out/build.status"
  grep -q '^built' "$out/build.status" && dcp_python=$build_dir/python
fi

step "dcp's predictions"
"$python" tools/gpu_evidence/predict.py --out "$out" ${dcp_python:+--dcp-python "$dcp_python"} || status=1
step "rendering $out/gpu-results.md"
"$python" tools/gpu_evidence/render.py "$out" || status=1
step "done, status $status"
exit $status
