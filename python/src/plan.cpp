// Micro-steps and step plans, their JSON form, plan validation, and the batch conversion.

#include <cstdio>

#include "dcp/plan/json.hpp"
#include "dcp/plan/json_reader.hpp"
#include "dcp/plan/step_plan.hpp"

#include "bindings.hpp"

namespace dcp::python {

std::vector<sample> to_batch(py::handle batch) {
  if (py::isinstance<py::str>(batch) || py::isinstance<py::bytes>(batch))
    throw py::type_error("batch must be a sequence of lengths (int) or Sample, not " +
                         type_name(batch));
  PyObject* fast =
      PySequence_Fast(batch.ptr(), "batch must be a sequence of lengths (int) or Sample");
  if (fast == nullptr) throw py::error_already_set();
  const auto owned = py::reinterpret_steal<py::object>(fast);
  const auto count = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(fast));
  PyObject** items = PySequence_Fast_ITEMS(fast);
  std::vector<sample> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const py::handle item(items[i]);
    if (py::isinstance<sample>(item)) {
      out.push_back(item.cast<sample>());
      continue;
    }
    if (!PyIndex_Check(item.ptr()))
      throw py::type_error("batch[" + std::to_string(i) +
                           "] must be a length (int) or a Sample, not " + type_name(item));
    const auto id = static_cast<std::uint64_t>(i);
    try {
      out.push_back(text_sample(id, to_integer<std::int64_t>(item, [&] {
                                  return "sample " + std::to_string(i) + " (index " +
                                         std::to_string(i) + "): tokens";
                                })));
    } catch (const invalid_sample&) {
      throw;
    } catch (const error& e) {
      throw invalid_sample(e.what());
    }
  }
  return out;
}

namespace {

/// Raises InvalidPlan where a micro-step's group lies outside ranks 0..gpus-1, so per-rank
/// tables over a hand-built plan are never indexed out of range.
void require_groups_inside(const step_plan& plan) {
  if (plan.gpus < 0 || plan.gpus > cluster_spec::max_gpus)
    throw invalid_plan("plan.gpus = " + std::to_string(plan.gpus) + ", must be in [0, " +
                       std::to_string(cluster_spec::max_gpus) + "]");
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    const auto& s = plan.micro_steps[n];
    if (s.config.degree < 1 || s.first_rank < 0 || s.last_rank() >= plan.gpus)
      throw invalid_plan("micro_steps[" + std::to_string(n) +
                         "]: first_rank = " + std::to_string(s.first_rank) + " with degree " +
                         std::to_string(s.config.degree) + " lies outside the plan's ranks 0.." +
                         std::to_string(plan.gpus - 1));
  }
}

std::string plan_repr(const step_plan& p) {
  char fingerprint[24];
  std::snprintf(fingerprint, sizeof fingerprint, "%016llx",
                static_cast<unsigned long long>(p.fingerprint));
  return "StepPlan(" + std::to_string(p.micro_steps.size()) + " micro-steps on " +
         std::to_string(p.gpus) +
         " GPUs, makespan_seconds=" + std::string(py::repr(py::float_(p.makespan_seconds))) +
         ", lower_bound_seconds=" + std::string(py::repr(py::float_(p.lower_bound_seconds))) +
         ", gap=" + std::string(py::repr(py::float_(p.gap()))) +
         ", policy=" + std::string(py::repr(py::str(p.policy))) + ", fingerprint=0x" + fingerprint +
         ")";
}

}  // namespace

void bind_plan(py::module_& m) {
  record<micro_step>(m, "MicroStep",
                     "One micro-batch run by one group of GPUs, ranks [first_rank, first_rank + "
                     "degree) (dcp::micro_step).")
      .field("sequence", &micro_step::sequence,
             "global sequence number; each rank runs its steps in increasing order")
      .field("first_rank", &micro_step::first_rank, "first rank of the group")
      .field("config", &micro_step::config, "ExecutionConfig: degree, sp, recompute")
      .field("sample_ids", &micro_step::sample_ids,
             "ids of the samples (a list copied on read; assign a new list to change)")
      .field("tokens", &micro_step::tokens, "tokens of the micro-batch")
      .field("loss_units", &micro_step::loss_units,
             "tokens or samples counted by the loss normalisation")
      .field("loss_scale", &micro_step::loss_scale, "multiply this micro-batch's mean loss by it")
      .field("start_seconds", &micro_step::start_seconds,
             "predicted start within the step, seconds")
      .field("seconds", &micro_step::seconds, "predicted duration, seconds")
      .field("peak_bytes", &micro_step::peak_bytes, "predicted peak bytes on each GPU of the group")
      .finish()
      .def_property_readonly("degree", &micro_step::degree, "GPUs in the group (config.degree)")
      .def_property_readonly("last_rank", &micro_step::last_rank, "first_rank + degree - 1")
      .def_property_readonly("end_seconds", &micro_step::end_seconds, "start_seconds + seconds")
      .def_property_readonly(
          "recompute", [](const micro_step& s) { return s.config.recompute; },
          "config.recompute (a copy)")
      .def("includes", &micro_step::includes, py::arg("rank"), "whether rank is in the group");

  py::bind_vector<std::vector<micro_step>>(
      m, "MicroStepList", "The micro-steps of a plan: a view of the plan's own list.");

  record<step_plan>(m, "StepPlan",
                    "Every micro-step of one training step, the predicted makespan, the lower "
                    "bound and the fingerprint (dcp::step_plan).")
      .field("micro_steps", &step_plan::micro_steps,
             "MicroStepList ordered by sequence number (a view)")
      .field("gpus", &step_plan::gpus, "GPUs (ranks) of the plan")
      .field("gpus_per_node", &step_plan::gpus_per_node, "GPUs per node")
      .field("makespan_seconds", &step_plan::makespan_seconds,
             "predicted time until the last micro-step ends")
      .field("lower_bound_seconds", &step_plan::lower_bound_seconds,
             "no plan can finish the micro-steps sooner")
      .field("memory_budget_bytes", &step_plan::memory_budget_bytes,
             "per-GPU budget the plan respects")
      .field("gradient_sync_seconds", &step_plan::gradient_sync_seconds,
             "predicted tail after the last micro-step")
      .field("best_static_seconds", &step_plan::best_static_seconds,
             "makespan of the best static layout (one degree for every sample; in lockstep rounds "
             "when the plan is in lockstep); Scheduler, CalibratedScheduler and "
             "StaticScheduler fill it in for every non-empty batch some one degree runs, 0 "
             "otherwise")
      .field("best_static_degree", &step_plan::best_static_degree, "its degree")
      .field("barriers", &step_plan::barriers,
             "world barriers as sequence numbers: no micro-step numbered >= b starts before all "
             "below b ended")
      .field("hybrid_ulysses_degree", &step_plan::hybrid_ulysses_degree,
             "Ulysses degree inside each hybrid micro-step's group (0: none is hybrid)")
      .field("policy", &step_plan::policy, "the placement that produced the plan")
      .field("fingerprint", &step_plan::fingerprint,
             "64-bit hash ranks compare to prove they agree")
      .field("lockstep", &step_plan::lockstep,
             "every rank runs the same number of micro-steps, one per round; a rank without work "
             "in a round runs an empty micro-step (no sample_ids, loss_scale 0)")
      .finish(&plan_repr)
      .def_property_readonly("gap", &step_plan::gap,
                             "makespan_seconds / lower_bound_seconds - 1 (0 if empty)")
      .def_property_readonly("step_seconds", &step_plan::step_seconds,
                             "makespan_seconds + gradient_sync_seconds")
      .def_property_readonly(
          "idle_fraction",
          [](const step_plan& p) {
            require_groups_inside(p);
            return p.idle_fraction();
          },
          "fraction of GPU time idle before the makespan")
      .def_property_readonly("total_tokens", &step_plan::total_tokens,
                             "tokens over all micro-steps")
      .def(
          "steps_of",
          [](const step_plan& p, py::handle rank) {
            const auto r = from_python<std::int64_t>(rank, "steps_of: rank");
            // A rank outside the plan runs nothing; an empty list would read as an idle rank.
            if (r < 0 || r >= p.gpus)
              throw dcp::error("steps_of: rank = " + std::to_string(r) + " is outside the plan's " +
                               std::to_string(p.gpus) + " GPUs (ranks 0.." +
                               std::to_string(p.gpus - 1) + ")");
            return p.steps_of(r);
          },
          py::arg("rank"),
          "indices into micro_steps of the steps `rank` runs, in execution order; raises Error "
          "for a rank outside [0, gpus)")
      .def(
          "busy_seconds",
          [](const step_plan& p) {
            require_groups_inside(p);
            return p.busy_seconds();
          },
          "predicted busy seconds of each rank")
      .def(
          "to_json",
          [](const step_plan& p, bool ranks, bool pretty) {
            return to_json(p, json_options{ranks, pretty});
          },
          py::kw_only(), py::arg("ranks") = false, py::arg("pretty") = true,
          "The plan as a 'dcp.step_plan/1' JSON document (docs/plan-format.md); ranks=True adds "
          "each rank's sequence numbers.")
      .def_static(
          "from_json",
          [](std::string_view text, std::string_view source) {
            return read_plan_json(text, source);
          },
          py::arg("text"), py::arg("source") = "<plan>",
          "Read a 'dcp.step_plan/1' document (the strict reader); raises InvalidPlan naming the "
          "line, column and field. The fingerprint is recomputed.");

  m.def("compute_fingerprint", &compute_fingerprint, py::arg("plan"),
        "The hash of what ranks must agree on: order, groups, samples, settings, loss scales.");
  m.def(
      "validate_plan",
      [](step_plan& plan, py::handle batch, py::handle gpus) {
        const auto samples = to_batch(batch);
        validate_plan(plan, samples, from_python<std::int64_t>(gpus, "validate_plan: gpus"));
      },
      py::arg("plan"), py::arg("batch"), py::arg("gpus"),
      "Raise InvalidPlan unless `plan` can run `batch` on `gpus` ranks (every sample once, aligned "
      "power-of-two groups, ...); fills in each micro-step's tokens from the batch.");
}

}  // namespace dcp::python
