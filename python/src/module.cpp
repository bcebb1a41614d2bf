// The extension module dcp._dcp: dcp's exceptions as Python exceptions, the version, and the
// bindings of each part (specs, plan, scheduling, simulator). The package dcp re-exports it.

#include "dcp/plan/json_reader.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/version.hpp"

#include "bindings.hpp"

namespace {

namespace py = pybind11;

// New references kept for the life of the process (never released: the translator may run
// while the interpreter shuts down).
PyObject* error_type = nullptr;
PyObject* invalid_spec_type = nullptr;
PyObject* invalid_sample_type = nullptr;
PyObject* sample_does_not_fit_type = nullptr;
PyObject* invalid_plan_type = nullptr;
PyObject* comm_error_type = nullptr;

PyObject* new_exception(py::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string qualified = std::string("dcp.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::reinterpret_borrow<py::object>(type);
  return type;
}

void register_exceptions(py::module_& m) {
  error_type = new_exception(m, "Error", PyExc_ValueError,
                             "Base of dcp's bad-input errors (dcp::error); a ValueError.");
  invalid_spec_type =
      new_exception(m, "InvalidSpec", error_type,
                    "A model, GPU, cluster, training spec or config is inconsistent.");
  invalid_sample_type =
      new_exception(m, "InvalidSample", error_type,
                    "A sample of the batch is malformed (tokens, id, video grid).");
  sample_does_not_fit_type =
      new_exception(m, "SampleDoesNotFit", error_type,
                    "A sample fits the cluster under no allowed configuration.");
  invalid_plan_type = new_exception(m, "InvalidPlan", error_type,
                                    "A plan document is not valid JSON or not a valid plan.");
  comm_error_type = new_exception(m, "CommError", PyExc_RuntimeError,
                                  "A communicator backend call failed (dcp::comm_error).");
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const dcp::comm_error& e) {
      PyErr_SetString(comm_error_type, e.what());
    } catch (const dcp::invalid_spec& e) {
      PyErr_SetString(invalid_spec_type, e.what());
    } catch (const dcp::invalid_sample& e) {
      PyErr_SetString(invalid_sample_type, e.what());
    } catch (const dcp::sample_does_not_fit& e) {
      PyErr_SetString(sample_does_not_fit_type, e.what());
    } catch (const dcp::invalid_plan& e) {
      PyErr_SetString(invalid_plan_type, e.what());
    } catch (const dcp::error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_dcp, m) {
  m.doc() = "dcp's C++ bindings; import the package dcp instead.";
  m.attr("__version__") = DCP_VERSION_STRING;
  register_exceptions(m);
  dcp::python::bind_specs(m);
  dcp::python::bind_plan(m);
  dcp::python::bind_scheduling(m);
  dcp::python::bind_simulator(m);
}
