// Finding 36d: plans must not depend on fused multiply-adds. Built three times (tests/
// CMakeLists.txt): for plain x86-64, for x86-64-v3 (FMA) through dcp::dcp (-ffp-contract=off),
// and for x86-64-v3 with contraction on. The first two print the same plans; the third must
// refuse to build a scheduler. Prints DCP_TEST_SKIPPED where this CPU has no FMA.

#include <cstdint>
#include <cstdio>
#include <vector>

#include "dcp/dcp.hpp"

namespace {

// A deterministic spread of lengths: mostly short, a few long (no <random>: its distributions
// are the library's own choice and the point is the planner's arithmetic).
std::vector<dcp::sample> batch_of(std::uint64_t seed, std::int64_t count) {
  std::vector<dcp::sample> out;
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::int64_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const auto r = state >> 40;  // 24 bits
    const std::int64_t tokens = (r % 16 == 0) ? 8192 + static_cast<std::int64_t>(r % 120000)
                                              : 16 + static_cast<std::int64_t>(r % 3000);
    out.push_back(dcp::text_sample(static_cast<std::uint64_t>(i), tokens));
  }
  return out;
}

}  // namespace

int main() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("fma") || !__builtin_cpu_supports("avx2")) {
    std::puts("DCP_TEST_SKIPPED: this CPU has no FMA");
    return 0;
  }
#endif
  using namespace dcp;
  const std::vector<model_spec> models{models::llama3_8b(), models::llama3_70b(),
                                       models::qwen25_7b()};
  int planned = 0;
  for (std::size_t m = 0; m < models.size(); ++m)
    for (const std::int64_t nodes : {1, 4, 32})
      for (const auto sp :
           {sequence_parallel::ulysses, sequence_parallel::ring, sequence_parallel::hybrid}) {
        training_spec training;
        training.sp = sp;
        training.zero_stage = nodes == 1 ? 1 : 3;
        try {
          const DataCentricScheduler<> scheduler(
              analytic_cost_model(models[m], hgx_cluster(nodes, gpus::h100_sxm()), training));
          for (std::uint64_t seed = 1; seed <= 3; ++seed) {
            const auto plan = scheduler.plan(batch_of(seed + 10 * m, 64 * nodes + 40));
            std::printf("%zu %lld %d %llu %016llx %a %a\n", m, static_cast<long long>(nodes),
                        static_cast<int>(sp), static_cast<unsigned long long>(seed),
                        static_cast<unsigned long long>(plan.fingerprint), plan.makespan_seconds,
                        plan.lower_bound_seconds);
            ++planned;
          }
        } catch (const sample_does_not_fit&) {
          std::printf("%zu %lld %d does not fit\n", m, static_cast<long long>(nodes),
                      static_cast<int>(sp));
        } catch (const invalid_spec& e) {
          std::printf("refused: %s\n", e.what());
          return 0;
        }
      }
  std::printf("planned %d\n", planned);
  return 0;
}
