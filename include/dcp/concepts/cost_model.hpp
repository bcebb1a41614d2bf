#pragma once
// dcp::cost_model — what the planner asks of a cost model.

#include <concepts>

#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/training.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A cost model answers, for one micro-batch under one execution config, its time on the group
/// and its peak bytes on each GPU of the group.
///
/// Requirements on `const M& m`, `micro_batch_shape s`, `execution_config c`:
///  1. `m.seconds(s, c)` -> convertible to double: predicted time of the micro-step (forward,
///     backward, recomputation, sequence-parallel communication, fixed overhead), finite, >= 0.
///  2. `m.peak_bytes(s, c)` -> convertible to double: predicted peak bytes on each GPU of the
///     group, model states included.
///  3. `m.memory_budget()` -> convertible to double: bytes a micro-step may peak at.
///  4. `m.model()`, `m.cluster()`, `m.training()` give the specs it was built for.
///  5. Semantics: pure and deterministic; `peak_bytes` never decreases when samples are added
///     and never increases when more layers are recomputed; `seconds` never decreases when
///     samples are added. The marginal time of b — `m.marginal_seconds(b, c)` if the model has
///     that optional member, else seconds(b) - seconds({}) — is a floor on what b adds to any
///     micro-batch: seconds(a + b) >= seconds(a) + marginal(b) (the lower bound relies on it);
///     for a fixed recompute setting, degree * marginal does not decrease with the degree
///     (parallelism is never super-linear).
/// Models: analytic_cost_model.
template <class M>
concept cost_model =
    std::copy_constructible<M> &&
    requires(const M& m, const micro_batch_shape& s, const execution_config& c) {
      { m.seconds(s, c) } -> std::convertible_to<double>;
      { m.peak_bytes(s, c) } -> std::convertible_to<double>;
      { m.memory_budget() } -> std::convertible_to<double>;
      { m.model() } -> std::convertible_to<const model_spec&>;
      { m.cluster() } -> std::convertible_to<const cluster_spec&>;
      { m.training() } -> std::convertible_to<const training_spec&>;
    };

}  // namespace dcp
