// Compile-only tests of the runtime concepts: the in-process communicator and a minimal type
// model dcp::communicator; near-miss types, each missing or breaking one requirement, do not.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/in_process.hpp"
#include "dcp/scheduler.hpp"

namespace {

// ---- communicator ------------------------------------------------------------------------------
struct minimal_group {  // what a split may return: a different type with the operations
  int rank() const { return 0; }
  int size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<minimal_group> split(int, int) { return std::nullopt; }
};
struct minimal_communicator {
  long rank() const { return 0; }
  long size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<minimal_group> split(std::int64_t, std::int64_t) { return std::nullopt; }
};
struct communicator_without_split {
  int rank() const { return 0; }
  int size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
};
struct communicator_gathering_ints {  // all_gather returns the wrong type
  int rank() const { return 0; }
  int size() const { return 1; }
  std::vector<int> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<communicator_gathering_ints> split(int, int) { return std::nullopt; }
};
struct communicator_splitting_to_pointer {  // split must return std::optional
  int rank() const { return 0; }
  int size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  communicator_splitting_to_pointer* split(int, int) { return nullptr; }
};
struct communicator_with_mutable_rank {  // rank() not callable on const
  int rank() { return 0; }
  int size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<minimal_group> split(int, int) { return std::nullopt; }
};
struct communicator_with_double_size {
  int rank() const { return 0; }
  double size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<minimal_group> split(int, int) { return std::nullopt; }
};
struct communicator_splitting_to_non_communicator {  // the split's result lacks all_gather
  struct half {
    int rank() const { return 0; }
    int size() const { return 1; }
  };
  int rank() const { return 0; }
  int size() const { return 1; }
  std::vector<std::int64_t> all_gather(std::span<const std::int64_t>) { return {}; }
  std::optional<half> split(int, int) { return std::nullopt; }
};

static_assert(dcp::communicator<dcp::in_process_communicator>);
static_assert(dcp::communicator<minimal_communicator>);
static_assert(dcp::communicator<minimal_group>);
static_assert(!dcp::communicator<communicator_without_split>);
static_assert(!dcp::communicator<communicator_gathering_ints>);
static_assert(!dcp::communicator<communicator_splitting_to_pointer>);
static_assert(!dcp::communicator<communicator_with_mutable_rank>);
static_assert(!dcp::communicator<communicator_with_double_size>);
static_assert(!dcp::communicator<communicator_splitting_to_non_communicator>);
static_assert(!dcp::communicator<int>);
static_assert(std::same_as<dcp::group_cache<minimal_communicator>::group_type, minimal_group>);

// ---- micro_batch_executor ----------------------------------------------------------------------
struct minimal_executor {
  dcp::execution_report run(const dcp::micro_step&, minimal_group&, dcp::recompute_setting,
                            double) {
    return {};
  }
};
struct executor_returning_seconds {
  double run(const dcp::micro_step&, minimal_group&, dcp::recompute_setting, double) { return 0; }
};
struct executor_for_another_group {
  dcp::execution_report run(const dcp::micro_step&, dcp::in_process_communicator&,
                            dcp::recompute_setting, double) {
    return {};
  }
};
struct executor_without_loss_scale {
  dcp::execution_report run(const dcp::micro_step&, minimal_group&, dcp::recompute_setting) {
    return {};
  }
};
static_assert(dcp::micro_batch_executor<minimal_executor, minimal_group>);
static_assert(!dcp::micro_batch_executor<executor_returning_seconds, minimal_group>);
static_assert(!dcp::micro_batch_executor<executor_for_another_group, minimal_group>);
static_assert(dcp::micro_batch_executor<executor_for_another_group, dcp::in_process_communicator>);
static_assert(!dcp::micro_batch_executor<executor_without_loss_scale, minimal_group>);

}  // namespace

// ---- calibrating_scheduler ---------------------------------------------------------------------
static_assert(dcp::calibrating_scheduler<
              dcp::DataCentricScheduler<dcp::calibrated<dcp::analytic_cost_model>>>);
// A scheduler over a plain cost model cannot refit, so run_calibrated_step does not take it.
static_assert(!dcp::calibrating_scheduler<dcp::DataCentricScheduler<>>);
