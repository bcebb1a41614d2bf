#!/usr/bin/env bash
# Compile time of a translation unit that includes <dcp/dcp.hpp> and calls plan(), with the
# planner instantiated in it (the default) and with dcp/default_scheduler.hpp's extern template
# (the planner compiled once, in src/default_scheduler.cpp). CPU seconds (user + system) of the
# compiler, the least of REPEAT runs of each, alternating, so that load on a shared machine
# hurts both alike. Also checks that both programs print the same plan.
#   bash bench/compile_time.sh [compiler] [flags...]     (default: g++ -O2; REPEAT=3)
set -euo pipefail
cd "$(dirname "$0")/.."
cxx=${1:-g++}
shift || true
flags=("$@")
((${#flags[@]})) || flags=(-O2)
repeat=${REPEAT:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(-std=c++20 -Iinclude "${flags[@]}")
tu=bench/compile_time/plan_one_batch.cpp

# CPU seconds of one command, from bash's `time` (no dependency on /usr/bin/time).
cpu_seconds() {
  local TIMEFORMAT='%3U %3S'
  local out
  out=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk '{printf "%.2f", $1 + $2}' <<<"$out"
}
least() { printf '%s\n' "$@" | sort -g | head -1; }

implicit=() extern=()
for ((run = 0; run < repeat; ++run)); do
  implicit+=("$(cpu_seconds "$cxx" "${common[@]}" -c "$tu" -o "$work/implicit.o")")
  extern+=("$(cpu_seconds "$cxx" "${common[@]}" -DDCP_BENCH_EXTERN -c "$tu" -o "$work/extern.o")")
done
once=$(cpu_seconds "$cxx" "${common[@]}" -c src/default_scheduler.cpp -o "$work/instance.o")

"$cxx" "$work/implicit.o" -o "$work/implicit"
"$cxx" "$work/extern.o" "$work/instance.o" -o "$work/extern"
[ "$("$work/implicit")" = "$("$work/extern")" ] || { echo "the two programs plan differently" >&2; exit 1; }

t_implicit=$(least "${implicit[@]}")
t_extern=$(least "${extern[@]}")
echo "compiler: $("$cxx" --version | head -1); flags: ${flags[*]}; least of $repeat runs (CPU s)"
echo "| translation unit that includes dcp.hpp and calls plan() | CPU seconds |"
echo "|---|---|"
echo "| planner instantiated in it (default) | $t_implicit |"
echo "| with dcp/default_scheduler.hpp (extern template) | $t_extern |"
echo "| src/default_scheduler.cpp, compiled once per program | $once |"
awk -v a="$t_implicit" -v b="$t_extern" 'BEGIN {printf "saving per translation unit: %.2f s (%.0f %%)\n", a - b, 100 * (a - b) / a}'
