// libFuzzer target: the workload loaders (dcp/workload/loaders.hpp). The input is read as a
// lengths file (read_lengths) and as a video CSV (read_video_csv, factorised and full attention).
// A dcp::error is an expected outcome of bad input; any other exception, a crash, a sanitizer
// report, a leak, a hang or a sample that breaks the loaders' promises (ids 0..n-1 in order,
// tokens >= 1, tokens = frames x height x width) is a bug.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/workload/loaders.hpp"

namespace {

[[noreturn]] void bug(const char* what, const char* detail) {
  std::fprintf(stderr, "fuzz_loaders: %s: %s\n", what, detail);
  std::abort();
}

void check_samples(const std::vector<dcp::sample>& samples, bool video) {
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.id != i) bug("a sample's id is not its index", video ? "read_video_csv" : "read_lengths");
    if (s.tokens < 1)
      bug("a sample has fewer than 1 token", video ? "read_video_csv" : "read_lengths");
    if (video != s.video.has_value())
      bug("a sample is of the wrong kind", video ? "read_video_csv" : "read_lengths");
    if (video && (s.video->frames < 1 || s.video->height < 1 || s.video->width < 1 ||
                  s.video->tokens() != s.tokens))
      bug("a video sample's shape does not give its tokens", "read_video_csv");
  }
}

template <class Load>
void run(Load&& load, bool video) {
  try {
    check_samples(load(), video);
  } catch (const dcp::error&) {
    // Bad input, reported as it should be.
  } catch (const std::exception& e) {
    bug("an exception that is not a dcp::error", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  run(
      [&] {
        std::istringstream input(text);
        return dcp::workload::read_lengths(input, "fuzz.txt");
      },
      false);
  for (const auto attention : {dcp::attention_kind::factorised, dcp::attention_kind::full}) {
    run(
        [&] {
          std::istringstream input(text);
          return dcp::workload::read_video_csv(input, "fuzz.csv", attention);
        },
        true);
  }
  return 0;
}
