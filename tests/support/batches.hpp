#pragma once
// Seeded heavy-tailed batches and scenarios for the property tests, and the Wikipedia lengths
// when the shared data folder is beside the checkout.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::test {

/// splitmix64: tiny, seedable, identical on every platform.
class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::int64_t below(std::int64_t n) {
    return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n));
  }

 private:
  std::uint64_t state_;
};

/// Lognormal body (median ~350) with a Pareto tail (alpha 1.6 above 4K), capped at `cap`.
inline std::int64_t heavy_tailed_length(rng& r, std::int64_t cap) {
  double length;
  if (r.uniform() < 0.95) {
    const double u1 = std::max(r.uniform(), 1e-300);
    const double u2 = r.uniform();
    const double normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    length = std::exp(5.85 + 1.2 * normal);
  } else {
    length = 4096.0 * std::pow(std::max(1.0 - r.uniform(), 1e-12), -1.0 / 1.6);
  }
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(length), 1, cap);
}

/// `count` text samples with ids from a scrambled range (so id order != length order).
inline std::vector<sample> heavy_tailed_batch(std::uint64_t seed, std::size_t count,
                                              std::int64_t cap) {
  rng r(seed);
  std::vector<sample> batch;
  for (std::size_t i = 0; i < count; ++i)
    batch.push_back(text_sample(i * 7919 + seed % 13, heavy_tailed_length(r, cap)));
  return batch;
}

/// The batch in an order drawn from `seed` (Fisher-Yates): a plan must not depend on it.
inline std::vector<sample> shuffled(std::vector<sample> batch, std::uint64_t seed) {
  rng r(seed);
  for (std::size_t i = batch.size(); i > 1; --i)
    std::swap(batch[i - 1], batch[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(i)))]);
  return batch;
}

/// A model trained on a cluster: one setting of a property test.
struct scenario {
  model_spec model;
  cluster_spec cluster;
  training_spec training;
};

inline std::string wikipedia_path() {
  return std::string(DCP_SHARED_DATA_DIR) + "/wikipedia-lengths.txt";
}

/// The 1,000,000 Wikipedia document lengths, or empty when the shared data is absent.
inline const std::vector<std::int64_t>& wikipedia_lengths() {
  static const std::vector<std::int64_t> lengths = [] {
    std::vector<std::int64_t> out;
    std::ifstream in(wikipedia_path());
    std::int64_t value = 0;
    while (in >> value) out.push_back(value);
    return out;
  }();
  return lengths;
}

/// About `tokens` tokens of Wikipedia documents drawn with replacement, split into chunks of at
/// most `context` tokens as pretraining does.
inline std::vector<sample> wikipedia_batch(std::uint64_t seed, std::int64_t tokens,
                                           std::int64_t context) {
  const auto& all = wikipedia_lengths();
  rng r(seed);
  std::vector<sample> batch;
  std::int64_t total = 0;
  std::uint64_t id = 0;
  while (total < tokens) {
    auto length = all[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(all.size())))];
    while (length > 0) {
      const auto chunk = std::min(length, context);
      batch.push_back(text_sample(id++, chunk));
      total += chunk;
      length -= chunk;
    }
  }
  return batch;
}

inline bool skip_without_wikipedia() {
  if (!wikipedia_lengths().empty()) return false;
  std::cout << "DCP_TEST_SKIPPED: " << wikipedia_path() << " not found\n";
  return true;
}

}  // namespace dcp::test
