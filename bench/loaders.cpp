// Speed of the lengths and CSV loaders (sim/include/dcp/workload/loaders.hpp), in bytes/s.
//
//   BM_ReadLengths/<lines>       one token count per line (Wikipedia-like, 1..6 digits)
//   BM_ReadVideoCsv/<lines>      frames,height,width per line
//   BM_OneLongLine/<bytes>       one line of <bytes> bytes (blanks, then a count): the case that
//                                was quadratic when every block re-searched the unfinished line
//   BM_OneLongLineTinyBlocks/<bytes>  the same line read 64 bytes per block
//
// Each reports bytes/s and the complexity fit over its argument (O(N) expected).
// ./build-tools/bench/dcp_bench_loaders --benchmark_filter=BM_OneLongLine

#include "dcp/workload/loaders.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

namespace {

namespace w = dcp::workload;

std::string lengths_text(std::int64_t lines) {
  std::string text;
  std::uint64_t state = 12345;
  for (std::int64_t i = 0; i < lines; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    text += std::to_string(1 + (state >> 33) % 200000);
    text += '\n';
  }
  return text;
}

std::string video_text(std::int64_t lines) {
  std::string text = "frames,height,width\n";
  for (std::int64_t i = 0; i < lines; ++i)
    text += std::to_string(1 + i % 32) + "," + std::to_string(16 + i % 48) + "," +
            std::to_string(16 + i % 80) + "\n";
  return text;
}

void BM_ReadLengths(benchmark::State& state) {
  const std::string text = lengths_text(state.range(0));
  std::size_t samples = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    samples = w::read_lengths(in, "bench").size();
    benchmark::DoNotOptimize(samples);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
  state.SetComplexityN(static_cast<std::int64_t>(text.size()));
  state.counters["samples"] = static_cast<double>(samples);
}
BENCHMARK(BM_ReadLengths)
    ->RangeMultiplier(8)
    ->Range(1 << 12, 1 << 21)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

void BM_ReadVideoCsv(benchmark::State& state) {
  const std::string text = video_text(state.range(0));
  std::size_t samples = 0;
  for (auto _ : state) {
    std::istringstream in(text);
    samples = w::read_video_csv(in, "bench").size();
    benchmark::DoNotOptimize(samples);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
  state.SetComplexityN(static_cast<std::int64_t>(text.size()));
  state.counters["samples"] = static_cast<double>(samples);
}
BENCHMARK(BM_ReadVideoCsv)
    ->RangeMultiplier(8)
    ->Range(1 << 12, 1 << 21)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

/// One line of `bytes` bytes that reads as one sample: blanks, then "4096".
std::string long_line(std::int64_t bytes) {
  return std::string(static_cast<std::size_t>(bytes - 5), ' ') + "4096\n";
}

void BM_OneLongLine(benchmark::State& state) {
  const std::string text = long_line(state.range(0));
  for (auto _ : state) {
    std::istringstream in(text);
    auto samples = w::read_lengths(in, "bench");
    benchmark::DoNotOptimize(samples.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
  state.SetComplexityN(static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_OneLongLine)
    ->RangeMultiplier(4)
    ->Range(1 << 20, 1 << 28)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

void BM_OneLongLineTinyBlocks(benchmark::State& state) {
  const std::string text = long_line(state.range(0));
  for (auto _ : state) {
    std::istringstream in(text);
    std::size_t longest = 0;
    w::detail::for_each_line(
        in, "bench",
        [&](std::int64_t, std::string_view line) { longest = std::max(longest, line.size()); }, 64);
    benchmark::DoNotOptimize(longest);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
  state.SetComplexityN(static_cast<std::int64_t>(text.size()));
}
BENCHMARK(BM_OneLongLineTinyBlocks)
    ->RangeMultiplier(4)
    ->Range(1 << 16, 1 << 24)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oN);

}  // namespace
