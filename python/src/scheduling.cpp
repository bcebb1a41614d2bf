// The cost models (analytic, calibrated), the schedulers over them (the default
// DataCentricScheduler<>, its calibrated and static variants) and plan_observations.

#include <span>

#include "dcp/cost/analytic.hpp"
#include "dcp/cost/calibrated.hpp"
#include "dcp/default_scheduler.hpp"
#include "dcp/placement/static_layout.hpp"
#include "dcp/recompute/chosen.hpp"
#include "dcp/runtime/calibrated_step.hpp"

#include "bindings.hpp"

namespace dcp::python {

namespace {

using calibrated_model = calibrated<analytic_cost_model>;
using calibrated_scheduler = DataCentricScheduler<calibrated_model>;
/// Scheduler and StaticScheduler take the recompute strategy by name (recompute=
/// "selective-pyramid", the default's, "pyramid", "selective", "full" or "none"), so each is
/// one type over chosen_recompute.
using chosen_scheduler =
    DataCentricScheduler<analytic_cost_model, varlen_buckets, chosen_recompute>;
using static_scheduler =
    DataCentricScheduler<analytic_cost_model, varlen_buckets, chosen_recompute, static_placement>;

[[nodiscard]] chosen_recompute recompute_named(const std::string& name) {
  return chosen_recompute::from_name(name);
}

/// The balanced placement with an exact best static layout, as dcp-plan runs it: by default it
/// skips the static layouts that cannot beat its own plan and reports best_static_seconds 0
/// when none could, which reads in Python as a static layout of no time.
[[nodiscard]] balanced_placement reporting_placement() {
  balanced_placement placement;
  placement.exact_best_static = true;
  return placement;
}

[[nodiscard]] calibrated_scheduler calibrated_scheduler_of(calibrated_model cost) {
  return calibrated_scheduler(std::move(cost), varlen_buckets{}, selective_pyramid_recompute{},
                              reporting_placement());
}

template <std::size_t N>
[[nodiscard]] py::tuple names_of(const std::array<std::string_view, N>& names) {
  py::tuple out(N);
  for (std::size_t k = 0; k < N; ++k) out[k] = py::str(names[k].data(), names[k].size());
  return out;
}

/// plan, cost and set_cost of a DataCentricScheduler; plan converts the batch, then plans
/// without the GIL.
template <class Scheduler>
void bind_scheduler_members(py::class_<Scheduler>& cls) {
  cls.def(
         "plan",
         [](const Scheduler& s, py::handle batch) {
           const auto samples = to_batch(batch);
           py::gil_scoped_release release;
           return s.plan(samples);
         },
         py::arg("batch"),
         "The StepPlan of one training step: batch is a list of lengths (text samples with id = "
         "index) or of Sample. Raises InvalidSample / SampleDoesNotFit naming the sample.")
      .def("cost", &Scheduler::cost, py::return_value_policy::copy, "the cost model (a copy)")
      .def("set_cost", &Scheduler::set_cost, py::arg("cost"),
           "replace the cost model; plans made afterwards use it");
}

/// Observations from a Python Observation or a sequence of them.
[[nodiscard]] std::vector<observation> to_observations(py::handle value) {
  if (py::isinstance<observation>(value)) return {value.cast<observation>()};
  std::vector<observation> out;
  std::size_t i = 0;
  for (const auto item : py::iter(value)) {
    out.push_back(from_python<observation>(item, "observations[" + std::to_string(i) + "]"));
    ++i;
  }
  return out;
}

void bind_analytic(py::module_& m) {
  record<analytic_constants>(m, "AnalyticConstants",
                             "Efficiencies and fixed costs of the analytic cost model.")
      .field("dense_efficiency", &analytic_constants::dense_efficiency,
             "fraction of peak of large BF16 GEMMs")
      .field("attention_forward_efficiency", &analytic_constants::attention_forward_efficiency,
             "asymptotic fraction of peak of FlashAttention forward")
      .field("attention_backward_efficiency", &analytic_constants::attention_backward_efficiency,
             "asymptotic fraction of peak of FlashAttention backward")
      .field("attention_forward_half_rows", &analytic_constants::attention_forward_half_rows,
             "tokens per row at which FlashAttention forward reaches half its peak fraction")
      .field("attention_backward_half_rows", &analytic_constants::attention_backward_half_rows,
             "tokens per row at which FlashAttention backward reaches half its peak fraction")
      .field("hbm_efficiency", &analytic_constants::hbm_efficiency, "sustained HBM fraction")
      .field("kernel_launch_seconds", &analytic_constants::kernel_launch_seconds,
             "per kernel, seconds")
      .field("kernels_per_layer", &analytic_constants::kernels_per_layer,
             "forward + backward kernels of one block")
      .field("step_overhead_seconds", &analytic_constants::step_overhead_seconds,
             "framework work per micro-step, seconds")
      .field("logits_bytes_per_entry", &analytic_constants::logits_bytes_per_entry,
             "bytes per logit entry")
      .field("loss_chunk_tokens", &analytic_constants::loss_chunk_tokens,
             "tokens per chunk with chunked cross-entropy")
      .field("ring_forward_kernels_per_step", &analytic_constants::ring_forward_kernels_per_step,
             "ring attention kernels per layer and forward attention step")
      .field("ring_backward_kernels_per_step", &analytic_constants::ring_backward_kernels_per_step,
             "ring attention kernels per layer and backward attention step")
      .field("host_seconds_per_kernel", &analytic_constants::host_seconds_per_kernel,
             "host time to issue one kernel, seconds (0: launches never limit)")
      .finish()
      .def("validate", &analytic_constants::validate, "Raise InvalidSpec naming a bad constant.");

  using model = analytic_cost_model;
  py::class_<model> cls(m, "AnalyticCostModel",
                        "The planner's cost model: FLOPs, bytes and collectives over the hardware "
                        "(dcp::analytic_cost_model). Seconds and bytes per GPU.");
  cls.def(py::init<model_spec, cluster_spec, training_spec, analytic_constants>(), py::arg("model"),
          py::arg("cluster"), py::arg("training") = training_spec{},
          py::arg("constants") = analytic_constants{},
          "Validates the specs (InvalidSpec naming the field).");
  bind_cost_model_members(cls);
  cls.def("constants", &model::constants, py::return_value_policy::copy,
          "AnalyticConstants (a copy)")
      .def("overhead_seconds", &model::overhead_seconds, py::arg("config"),
           "fixed cost of a micro-step, seconds")
      .def("device_seconds", &model::device_seconds, py::arg("shape"), py::arg("config"),
           "the device's time of a micro-step, seconds (seconds is the longer of it and "
           "host_seconds)")
      .def("host_seconds", &model::host_seconds, py::arg("config"),
           "the host's time to issue a micro-step's kernels")
      .def("fixed_seconds", &model::fixed_seconds, py::arg("config"),
           "the device time of an empty micro-step")
      .def("gemm_half_tokens", &model::gemm_half_tokens,
           "tokens per GPU at which the GEMMs reach half their efficiency (0: SM count unknown)")
      .def("compute_seconds", &model::compute_seconds, py::arg("shape"), py::arg("config"),
           "dense, attention and recompute FLOPs over peak x efficiency, split over the group")
      .def("communication_seconds", &model::communication_seconds, py::arg("shape"),
           py::arg("config"), "sequence-parallel communication, seconds")
      .def("activation_bytes", &model::activation_bytes, py::arg("shape"), py::arg("config"),
           "activations, transients, logits and SP buffers per GPU, bytes")
      .def("state_bytes", &model::state_bytes,
           "parameters, gradients and optimizer state per GPU, bytes")
      .def("activation_bytes_per_token_layer", &model::activation_bytes_per_token_layer,
           "bytes kept per token per layer for backward")
      .def("saved_by_selective", &model::saved_by_selective,
           "bytes per token per layer that selective recomputation saves")
      .def("time_terms", &model::time_terms, py::arg("shape"), py::arg("config"),
           "seconds split into the terms named by time_term_names")
      .def("marginal_time_terms", &model::marginal_time_terms, py::arg("shape"), py::arg("config"),
           "marginal_seconds split into the terms named by time_term_names")
      .def("memory_terms", &model::memory_terms, py::arg("shape"), py::arg("config"),
           "peak bytes split into the terms named by memory_term_names")
      .def(py::self == py::self)
      .def("__repr__",
           [](const model& c) {
             return "AnalyticCostModel(model=" + std::string(py::repr(py::cast(c.model()))) +
                    ", cluster=" + std::string(py::repr(py::cast(c.cluster()))) +
                    ", training=" + std::string(py::repr(py::cast(c.training()))) + ")";
           })
      .def(py::pickle(
          [](const model& c) {
            return py::make_tuple(c.model(), c.cluster(), c.training(), c.constants());
          },
          [](const py::tuple& t) {
            return model(t[0].cast<model_spec>(), t[1].cast<cluster_spec>(),
                         t[2].cast<training_spec>(), t[3].cast<analytic_constants>());
          }));
  cls.attr("time_term_names") = names_of(model::time_term_names);
  cls.attr("time_term_priors") = py::cast(model::time_term_priors);
  cls.attr("memory_term_names") = names_of(model::memory_term_names);
}

void bind_calibration(py::module_& m) {
  record<calibration_options>(m, "CalibrationOptions",
                              "How Calibrated fits (dcp::calibration_options).")
      .field("window", &calibration_options::window, "most recent observations kept")
      .field("prior_strength", &calibration_options::prior_strength,
             "ridge pull toward the base model's weights")
      .field("robust_floor", &calibration_options::robust_floor,
             "relative residual with full weight (Huber)")
      .field("memory_margin", &calibration_options::memory_margin,
             "predicted peaks cover observed ones by this fraction")
      .field("oom_margin", &calibration_options::oom_margin,
             "a shape that ran out of memory is predicted this much above capacity")
      .field("measured_headroom_fraction", &calibration_options::measured_headroom_fraction,
             "fraction of capacity kept free once peaks have been measured")
      .finish();

  record<observation>(m, "Observation",
                      "One micro-batch the framework ran: what it was and what it measured.")
      .field("shape", &observation::shape, "MicroBatchShape of its samples")
      .field("config", &observation::config, "ExecutionConfig it ran with")
      .field("report", &observation::report,
             "ExecutionReport (seconds or peak_bytes of 0: not measured)")
      .finish();

  record<calibration_report>(m, "CalibrationReport",
                             "How well the current fit explains its observations.")
      .field("observations", &calibration_report::observations, "observations in the window")
      .field("time_rows", &calibration_report::time_rows, "with measured seconds")
      .field("memory_rows", &calibration_report::memory_rows, "with measured peak bytes")
      .field("out_of_memory", &calibration_report::out_of_memory,
             "out-of-memory reports ever observed")
      .field("time_rms_error", &calibration_report::time_rms_error,
             "RMS of predicted / measured - 1")
      .field("time_max_error", &calibration_report::time_max_error,
             "largest |predicted / measured - 1|")
      .field("memory_safety", &calibration_report::memory_safety,
             "factor that makes predicted peaks cover the measured")
      .finish();

  using model = calibrated_model;
  py::class_<model> cls(
      m, "Calibrated",
      "The analytic cost model refitted, term by term, from measured micro-batches "
      "(dcp::calibrated<analytic_cost_model>).");
  cls.def(py::init<analytic_cost_model, calibration_options>(), py::arg("base"),
          py::arg("options") = calibration_options{},
          "With no observations every prediction is the base model's.");
  bind_cost_model_members(cls);
  cls.def("base", &model::base, py::return_value_policy::copy,
          "the AnalyticCostModel it refits (a copy)")
      .def("options", &model::options, py::return_value_policy::copy, "CalibrationOptions (a copy)")
      .def(
          "observe",
          [](model& c, py::handle observations) { c.observe(to_observations(observations)); },
          py::arg("observations"),
          "Add one Observation or a list of them (in order) and refit. Raises InvalidSpec for a "
          "config that cannot run or a negative, infinite or NaN measurement.")
      .def("observations", &model::observations,
           "the measured observations the fit uses, oldest first")
      .def("time_weights", &model::time_weights, "current weight of each time term")
      .def_static("time_term_names", [] { return names_of(model::time_term_names()); })
      .def("memory_weights", &model::memory_weights, "current weight of each memory term")
      .def_static("memory_term_names", [] { return names_of(model::memory_term_names()); })
      .def("tightening_of", &model::tightening_of, py::arg("config"),
           "factor on activation memory of (degree, sp) from out-of-memory reports (1 when none)")
      .def("report", &model::report, "CalibrationReport of the current fit");
}

void bind_schedulers(py::module_& m) {
  py::class_<chosen_scheduler> plain(
      m, "Scheduler",
      "The data-centric scheduler (dcp::DataCentricScheduler<analytic_cost_model, varlen_buckets, "
      "chosen_recompute>): analytic cost model, varlen buckets, balanced placement, and the "
      "recompute strategy named by recompute= ('selective-pyramid', the default scheduler's; "
      "'pyramid', 'selective', 'full' or 'none'). Unknown names raise InvalidSpec listing the "
      "known ones. Its plans report the best static layout's makespan (best_static_seconds) "
      "whether or not it beats the plan, as dcp-plan does (balanced_placement's "
      "exact_best_static).");
  plain
      .def(py::init([](analytic_cost_model cost, const std::string& recompute) {
             return chosen_scheduler(std::move(cost), varlen_buckets{}, recompute_named(recompute),
                                     reporting_placement());
           }),
           py::arg("cost"), py::kw_only(), py::arg("recompute") = "selective-pyramid")
      .def(py::init([](model_spec model, cluster_spec cluster, training_spec training,
                       const std::string& recompute) {
             return chosen_scheduler(
                 analytic_cost_model(std::move(model), std::move(cluster), training),
                 varlen_buckets{}, recompute_named(recompute), reporting_placement());
           }),
           py::arg("model"), py::arg("cluster"), py::arg("training") = training_spec{},
           py::kw_only(), py::arg("recompute") = "selective-pyramid",
           "Scheduler(AnalyticCostModel(model, cluster, training))")
      .def_property_readonly(
          "recompute", [](const chosen_scheduler& s) { return std::string(s.recompute().name()); },
          "the recompute strategy's name");
  bind_scheduler_members(plain);

  py::class_<calibrated_scheduler> calibrating(
      m, "CalibratedScheduler",
      "The default scheduler over Calibrated "
      "(dcp::DataCentricScheduler<calibrated<analytic_cost_model>>): "
      "plan, run, observe the measurements, plan again. Its plans report best_static_seconds as "
      "Scheduler's do.");
  calibrating
      .def(py::init([](calibrated_model cost) { return calibrated_scheduler_of(std::move(cost)); }),
           py::arg("cost"))
      .def(py::init([](analytic_cost_model base, calibration_options options) {
             return calibrated_scheduler_of(calibrated_model(std::move(base), options));
           }),
           py::arg("base"), py::arg("options") = calibration_options{},
           "CalibratedScheduler(Calibrated(base, options))")
      .def(py::init([](model_spec model, cluster_spec cluster, training_spec training,
                       calibration_options options) {
             return calibrated_scheduler_of(calibrated_model(
                 analytic_cost_model(std::move(model), std::move(cluster), training), options));
           }),
           py::arg("model"), py::arg("cluster"), py::arg("training") = training_spec{},
           py::arg("options") = calibration_options{});
  bind_scheduler_members(calibrating);
  calibrating.def(
      "observe",
      [](calibrated_scheduler& s, py::handle observations) {
        auto cost = s.cost();
        cost.observe(to_observations(observations));
        s.set_cost(std::move(cost));
      },
      py::arg("observations"),
      "Shorthand for c = s.cost(); c.observe(observations); s.set_cost(c). Every rank must observe "
      "the same observations in the same order, so plans keep agreeing.");

  py::class_<static_scheduler> fixed(
      m, "StaticScheduler",
      "The static layout: every sample at one degree, groups side by side, same packing as "
      "Scheduler, recompute strategy by name as Scheduler's (DataCentricScheduler<..., "
      "static_placement>).");
  fixed
      .def(py::init([](analytic_cost_model cost, py::handle degree, const std::string& recompute) {
             return static_scheduler(
                 std::move(cost), varlen_buckets{}, recompute_named(recompute),
                 static_placement{from_python<std::int64_t>(degree, "StaticScheduler: degree")});
           }),
           py::arg("cost"), py::arg("degree"), py::kw_only(),
           py::arg("recompute") = "selective-pyramid",
           "Raises InvalidSpec (at plan) for a degree the model or cluster does not allow.")
      .def_property_readonly(
          "recompute", [](const static_scheduler& s) { return std::string(s.recompute().name()); },
          "the recompute strategy's name")
      .def_property_readonly(
          "degree", [](const static_scheduler& s) { return s.placement_policy().degree; },
          "the one sequence-parallel degree");
  bind_scheduler_members(fixed);

  m.def(
      "plan_observations",
      [](const step_plan& plan, py::handle batch) {
        const auto samples = to_batch(batch);
        return plan_observations(plan, samples);
      },
      py::arg("plan"), py::arg("batch"),
      "One Observation per micro-step of `plan` (indexed like plan.micro_steps): its config and "
      "the shape of its samples, with an empty report for the caller to fill.");
}

}  // namespace

void bind_scheduling(py::module_& m) {
  bind_analytic(m);
  bind_calibration(m);
  bind_schedulers(m);
}

}  // namespace dcp::python
