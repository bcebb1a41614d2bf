// The lab's simulator for notebooks: the truth model, simulate(plan, batch, truth) and its
// result, and the truth-model lower bound.

#include <sstream>

#include "dcp/cost/analytic.hpp"
#include "dcp/sim/simulator.hpp"
#include "dcp/sim/truth_bound.hpp"
#include "dcp/sim/truth_model.hpp"

#include "bindings.hpp"

namespace dcp::python {

namespace {

using sim::truth_model;

/// The truth model for the specs of `source`: a TruthModel as it is, or an AnalyticCostModel
/// Calibrated or scheduler's specs under the truth model's default constants.
[[nodiscard]] truth_model truth_of(py::handle source) {
  if (py::isinstance<truth_model>(source)) return source.cast<truth_model>();
  if (py::isinstance<analytic_cost_model>(source)) {
    const auto& cost = source.cast<const analytic_cost_model&>();
    return truth_model(cost.model(), cost.cluster(), cost.training());
  }
  if (py::hasattr(source, "cost")) return truth_of(source.attr("cost")());  // a scheduler
  if (py::hasattr(source, "base")) return truth_of(source.attr("base")());  // Calibrated
  throw py::type_error("truth must be a TruthModel, a cost model or a scheduler, not " +
                       type_name(source));
}

}  // namespace

void bind_simulator(py::module_& m) {
  py::class_<truth_model> truth(
      m, "TruthModel",
      "The simulator's model of the hardware (dcp::sim::truth_model, default "
      "constants): separate from the planner's, to judge plans on.");
  truth.def(py::init([](model_spec model, cluster_spec cluster, training_spec training) {
              return truth_model(std::move(model), std::move(cluster), training);
            }),
            py::arg("model"), py::arg("cluster"), py::arg("training") = training_spec{},
            "Validates the specs (InvalidSpec naming the field).");
  bind_cost_model_members(truth);
  truth.def("capacity_bytes", &truth_model::capacity_bytes, "physical HBM per GPU, bytes");

  record<sim::sim_options>(m, "SimOptions", "How simulate runs (dcp::sim::sim_options).")
      .field("seed", &sim::sim_options::seed, "seed of the noise")
      .field("noise_sigma", &sim::sim_options::noise_sigma,
             "sigma of each micro-step's lognormal duration multiplier (mean 1); 0: no noise")
      .field("record_timelines", &sim::sim_options::record_timelines, "fill StepResult.timelines")
      .field("require_every_sample", &sim::sim_options::require_every_sample,
             "require the plan to hold every sample of the batch exactly once")
      .finish();

  record<sim::rank_interval>(m, "RankInterval", "What one GPU did in one micro-step (seconds).")
      .field("start", &sim::rank_interval::start, "seconds")
      .field("end", &sim::rank_interval::end, "seconds")
      .field("sequence", &sim::rank_interval::sequence, "the micro-step's sequence number")
      .field("degree", &sim::rank_interval::degree, "its degree")
      .field("recompute", &sim::rank_interval::recompute, "its RecomputeSetting")
      .field("oom", &sim::rank_interval::oom, "its true peak exceeded the GPU's capacity")
      .field("step", &sim::rank_interval::step, "index into plan.micro_steps")
      .finish();

  record<sim::simulated_micro_step>(m, "SimulatedMicroStep",
                                    "One micro-step as simulated (indexed like plan.micro_steps).")
      .field("start_seconds", &sim::simulated_micro_step::start_seconds, "seconds")
      .field("end_seconds", &sim::simulated_micro_step::end_seconds, "seconds")
      .field("alone_seconds", &sim::simulated_micro_step::alone_seconds,
             "truth time with the NICs to itself, noise included")
      .field("peak_bytes", &sim::simulated_micro_step::peak_bytes, "true peak per GPU of the group")
      .field("noise", &sim::simulated_micro_step::noise, "the duration multiplier drawn for it")
      .field("crosses_nodes", &sim::simulated_micro_step::crosses_nodes, "its group spans nodes")
      .field("oom", &sim::simulated_micro_step::oom, "its true peak exceeded capacity")
      .finish()
      .def_property_readonly("seconds", &sim::simulated_micro_step::seconds,
                             "end_seconds - start_seconds");

  using sim::step_result;
  record<step_result>(m, "StepResult",
                      "The simulator's judgement of one plan (dcp::sim::step_result).")
      .field("step_seconds", &step_result::step_seconds,
             "makespan + gradient synchronisation, seconds")
      .field("makespan_seconds", &step_result::makespan_seconds, "until the last micro-step ends")
      .field("gradient_sync_seconds", &step_result::gradient_sync_seconds, "seconds")
      .field("idle_fraction", &step_result::idle_fraction, "GPU time idle before the makespan")
      .field("peak_bytes", &step_result::peak_bytes, "max over ranks of the true peak, bytes")
      .field("oom_events", &step_result::oom_events, "micro-steps whose true peak exceeds capacity")
      .field("oom_gpu_events", &step_result::oom_gpu_events,
             "the same counted once per GPU of the group")
      .field("capacity_bytes", &step_result::capacity_bytes, "HBM per GPU, bytes")
      .field("nic_contention_seconds", &step_result::nic_contention_seconds,
             "seconds micro-steps lost to NIC sharing")
      .field("tokens", &step_result::tokens, "tokens of the batch")
      .field("timelines", &step_result::timelines, "per rank, its RankIntervals in execution order")
      .field("rank_busy_seconds", &step_result::rank_busy_seconds, "per rank, seconds")
      .field("rank_peak_bytes", &step_result::rank_peak_bytes, "per rank, bytes")
      .field("micro_steps", &step_result::micro_steps, "SimulatedMicroStep per plan micro-step")
      .finish(+[](const step_result& r) {
        std::ostringstream os;
        os << r;
        return os.str();
      })
      .def("tokens_per_second", &step_result::tokens_per_second, "tokens / step_seconds");

  m.def(
      "simulate",
      [](const step_plan& plan, py::handle batch, py::handle truth,
         const sim::sim_options& options) {
        const auto samples = to_batch(batch);
        const auto model = truth_of(truth);
        py::gil_scoped_release release;
        return sim::simulate(plan, samples, model, options);
      },
      py::arg("plan"), py::arg("batch"), py::arg("truth"), py::arg("options") = sim::sim_options{},
      "Execute `plan` for `batch` on the truth model (a TruthModel, or the specs of an "
      "AnalyticCostModel or Scheduler) and return the StepResult. Raises dcp.Error naming the "
      "micro-step or sample for a plan that cannot run the batch.");
  m.def(
      "truth_lower_bound_seconds",
      [](py::handle batch, py::handle truth) {
        const auto samples = to_batch(batch);
        const auto model = truth_of(truth);
        py::gil_scoped_release release;
        return sim::truth_lower_bound_seconds(std::span<const sample>(samples), model);
      },
      py::arg("batch"), py::arg("truth"),
      "No plan that fits the GPUs' capacity under the truth model finishes the batch's "
      "micro-steps sooner than this, seconds.");
}

}  // namespace dcp::python
