#pragma once
// Named text workloads from the peers' papers and benchmarks (docs/workloads.md),
// each with its source. The Wikipedia profile is empirical_profile::wikipedia().

#include <cstdint>

#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/mixture.hpp"
#include "dcp/workload/parametric.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::workload {

/// Megatron-LM's dynamic-context-parallel benchmark mock (examples/dynamic_context_parallel,
/// MockVarlenLowLevelDataset): lognormal with mean_seq_len 1024 and lognormal_sigma 1.5, i.e.
/// mu = ln 1024 - 1.5^2/2 (median ~332), then np.clip to [128, 8192] and astype(int). "Mean
/// 1024" is the mean of the unclipped lognormal; the clip puts ~26% of samples at exactly 128
/// and ~1.6% at 8192, and the clipped mean is ~905.
[[nodiscard]] inline lognormal_lengths megatron_mock() {
  return lognormal_lengths({.mean_tokens = 1024,  // mean_seq_len, benchmark_dcp.sh
                            .log_sigma = 1.5,     // lognormal_sigma, benchmark_dcp.sh
                            .min_tokens = 128,    // min_seq_len, benchmark_dcp.sh
                            .max_tokens = 8192,   // max_seq_len, benchmark_dcp.sh
                            .bounds = bound_policy::clip});
}

using long_sft_distribution = mixture<lognormal_lengths, lognormal_lengths>;

/// Bimodal long-context SFT as Skrull quotes Llama 3's mix: 99.89% short samples with mean ~1K
/// and 0.11% long samples with mean ~37K. The shapes are not published; both modes are
/// lognormal (means of the unbounded lognormals below), bounded to Llama 3's 128K context.
[[nodiscard]] inline long_sft_distribution llama3_long_sft() {
  constexpr std::int64_t context = 131072;  // Llama 3.1 context window, 128K tokens
  return long_sft_distribution(
      {0.9989, 0.0011},                        // sample shares, Skrull quoting Llama 3
      lognormal_lengths({.mean_tokens = 1000,  // "mean ~1K", Skrull
                         .log_sigma = 1.0,     // our choice: median ~607, p99 ~6.2K
                         .max_tokens = context}),
      lognormal_lengths({.mean_tokens = 37000,  // "mean ~37K", Skrull
                         .log_sigma = 0.5,      // our choice: 95% within ~12K-87K
                         .max_tokens = context}));
}

using long_context_distribution = mixture<lognormal_lengths, pareto_lengths, pareto_lengths>;

/// A long-context pretraining corpus calibrated to ByteScale's production data (Byted, Fig. 4
/// text): ~80% of samples <= 4K, 1% >= 128K carrying ~44.3% of the tokens,
/// 0.05% >= 2M carrying ~12.1%, ~37% of tokens in samples > 256K. Three parts whose sample
/// shares are the published ones (80% / 19% / 1%):
///   short  <= 4K       lognormal, mean 1024, sigma 1.0, resampled into [1, 4096];
///   middle 4K..128K    truncated Pareto, alpha 0.11 (close to log-uniform);
///   long   128K..4.5M  truncated Pareto, alpha 0.83.
/// The long part's alpha and cap solve P(>= 2M | long) = 5% and 12.1% / 44.3% of its tokens
/// >= 2M; the middle alpha then brings the long part's token share to 44.3%. This gives
/// ~37.6% of tokens above 256K (published 37%) and a mean of ~12.5K tokens. The cap 4.5M is a
/// fit, not a published maximum.
[[nodiscard]] inline long_context_distribution long_context_corpus() {
  return long_context_distribution(
      {0.80, 0.19, 0.01},  // samples <= 4K, in 4K..128K, >= 128K (ByteScale Fig. 4)
      lognormal_lengths({.mean_tokens = 1024, .log_sigma = 1.0, .max_tokens = 4096}),
      pareto_lengths({.alpha = 0.11, .min_tokens = 4097, .max_tokens = 131071}),
      pareto_lengths({.alpha = 0.83, .min_tokens = 131072, .max_tokens = 4'500'000}));
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE::workload
