#pragma once
// Shared by the translation units of the extension dcp._dcp: checked conversions from Python
// values (an int that does not fit is an error, never wrapped), the record binder that gives a
// C++ aggregate a Python class (keyword constructor, read/write fields, ==, repr, copy, pickle),
// and the batch conversion. Every file includes this first, so the opaque micro-step list is
// declared before any use.

#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <pybind11/operators.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl_bind.h>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/spec/sample.hpp"

// plan.micro_steps is a view of the plan's own vector, not a list copied on every access.
PYBIND11_MAKE_OPAQUE(std::vector<dcp::micro_step>)

namespace dcp::python {

namespace py = pybind11;

/// "int64", "int32", "uint64": how messages name the C++ type of a field.
template <class Int>
[[nodiscard]] std::string integer_name() {
  return std::string(std::is_signed_v<Int> ? "int" : "uint") + std::to_string(8 * sizeof(Int));
}

[[nodiscard]] inline std::string type_name(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

/// `value` (a Python int, or anything with __index__) as Int. A non-integer raises TypeError;
/// an integer outside Int's range raises dcp.Error (a ValueError) naming `what()`, the value
/// and the range.
template <class Int, class Describe>
[[nodiscard]] Int to_integer(py::handle value, const Describe& what) {
  PyObject* index = PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw py::type_error(what() + " must be an int, not " + type_name(value));
  }
  const auto owned = py::reinterpret_steal<py::object>(index);
  const auto out_of_range = [&] {
    return dcp::error(what() + " = " + std::string(py::str(owned)) + " does not fit " +
                      integer_name<Int>() + " (" + std::to_string(std::numeric_limits<Int>::min()) +
                      ".." + std::to_string(std::numeric_limits<Int>::max()) + ")");
  };
  if constexpr (std::is_signed_v<Int>) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    if (overflow == 0 && v == -1 && PyErr_Occurred()) throw py::error_already_set();
    if (overflow != 0 || v < std::numeric_limits<Int>::min() || v > std::numeric_limits<Int>::max())
      throw out_of_range();
    return static_cast<Int>(v);
  } else {
    const int negative = PyObject_RichCompareBool(index, py::int_(0).ptr(), Py_LT);
    if (negative < 0) throw py::error_already_set();
    if (negative == 1) throw out_of_range();
    const unsigned long long v = PyLong_AsUnsignedLongLong(index);
    if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
      PyErr_Clear();
      throw out_of_range();
    }
    if (v > std::numeric_limits<Int>::max()) throw out_of_range();
    return static_cast<Int>(v);
  }
}

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

/// `value` as a field of type D, for the record binder's setters and keyword constructors;
/// `what` names the field in errors ("ModelSpec.layers"). Integers are range checked, enums
/// also accept their member names as strings, lists of integers are checked item by item.
template <class D>
[[nodiscard]] D from_python(py::handle value, const std::string& what) {
  if constexpr (std::is_same_v<D, bool>) {
    if (!PyBool_Check(value.ptr()))
      throw py::type_error(what + " must be a bool, not " + type_name(value));
    return value.ptr() == Py_True;
  } else if constexpr (std::is_integral_v<D>) {
    return to_integer<D>(value, [&] { return what; });
  } else if constexpr (std::is_enum_v<D>) {
    if (py::isinstance<py::str>(value)) {
      const py::object members = py::type::of<D>().attr("__members__");
      if (members.contains(value)) return members[value].template cast<D>();
      std::string known;
      for (const auto item : members)
        known += (known.empty() ? "" : ", ") + std::string(py::str(item));
      throw dcp::error(what + " = '" + std::string(py::str(value)) + "', must be one of " + known);
    }
    if (!py::isinstance<D>(value))
      throw py::type_error(what + " must be a " +
                           std::string(py::str(py::type::of<D>().attr("__name__"))) +
                           " or its name, not " + type_name(value));
    return value.cast<D>();
  } else if constexpr (std::is_same_v<D, std::vector<std::uint64_t>>) {
    D out;
    std::size_t i = 0;
    for (const auto item : py::iter(value)) {
      out.push_back(
          to_integer<std::uint64_t>(item, [&] { return what + "[" + std::to_string(i) + "]"; }));
      ++i;
    }
    return out;
  } else if constexpr (std::is_same_v<D, std::vector<micro_step>>) {
    if (py::isinstance<D>(value)) return value.cast<D>();
    D out;
    for (const auto item : py::iter(value))
      out.push_back(from_python<micro_step>(item, what + " item"));
    return out;
  } else if constexpr (std::is_same_v<D, std::optional<video_shape>>) {
    if (value.is_none()) return std::nullopt;
    return from_python<video_shape>(value, what);
  } else {
    try {
      return value.cast<D>();
    } catch (const py::cast_error&) {
      std::string expected;
      if constexpr (std::is_floating_point_v<D>)
        expected = "a float";
      else if constexpr (std::is_same_v<D, std::string>)
        expected = "a str";
      else if constexpr (is_vector<D>::value)
        expected = "a list";
      else
        expected = "a " + std::string(py::str(py::type::of<D>().attr("__name__")));
      throw py::type_error(what + " must be " + expected + ", not " + type_name(value));
    }
  }
}

/// A field's value as a plain Python object (copies; the micro-step list as a list), for
/// pickling and repr.
template <class D>
[[nodiscard]] py::object to_state(const D& value) {
  if constexpr (std::is_same_v<D, std::vector<micro_step>>) {
    py::list out;
    for (const auto& m : value) out.append(py::cast(m, py::return_value_policy::copy));
    return out;
  } else {
    return py::cast(value, py::return_value_policy::copy);
  }
}

/// Binds the aggregate T as a Python class whose fields are listed with field(): each a
/// read/write property (class-type fields by reference, so `cluster.gpu.name = ...` changes the
/// cluster); then finish() adds __init__(*args, **kwargs) taking the fields in order or by
/// name (missing ones keep T's defaults), ==, __repr__, __copy__, __deepcopy__ and pickling.
template <class T>
class record {
 public:
  record(py::handle scope, const char* name, const char* doc)
      : name_(name),
        cls_(scope, name, doc),
        fields_(std::make_shared<std::vector<field_entry>>()) {}

  template <class D>
  record& field(const char* name, D T::*member, const char* doc) {
    const std::string what = name_ + "." + name;
    fields_->push_back(field_entry{
        name, [member, what](T& t, py::handle v) { t.*member = from_python<D>(v, what); },
        [member](const T& t) { return to_state(t.*member); }});
    py::cpp_function get([member](const T& t) -> const D& { return t.*member; },
                         py::is_method(cls_));
    py::cpp_function set(
        [member, what](T& t, py::handle v) { t.*member = from_python<D>(v, what); },
        py::is_method(cls_));
    cls_.def_property(name, get, set, py::return_value_policy::reference_internal, doc);
    return *this;
  }

  /// `repr` replaces the generic "Name(field=value, ...)" (for records with long lists).
  py::class_<T>& finish(std::string (*repr)(const T&) = nullptr) {
    auto fields = fields_;
    const std::string name = name_;
    std::string doc = name + "(";
    for (std::size_t i = 0; i < fields->size(); ++i) doc += (i > 0 ? ", " : "") + (*fields)[i].name;
    doc += "): the fields in this order, by position or keyword; missing ones keep their defaults.";
    cls_.def(py::init([fields, name](const py::args& args, const py::kwargs& kwargs) {
               if (args.size() > fields->size())
                 throw py::type_error(name + "() takes at most " + std::to_string(fields->size()) +
                                      " positional arguments (" + std::to_string(args.size()) +
                                      " given)");
               T t{};
               for (std::size_t i = 0; i < args.size(); ++i) (*fields)[i].set(t, args[i]);
               for (const auto& [key, value] : kwargs) {
                 const std::string k = py::str(key);
                 std::size_t i = 0;
                 while (i < fields->size() && (*fields)[i].name != k) ++i;
                 if (i == fields->size())
                   throw py::type_error(name + "() got an unexpected keyword argument '" + k + "'");
                 if (i < args.size())
                   throw py::type_error(name + "() got multiple values for argument '" + k + "'");
                 (*fields)[i].set(t, value);
               }
               return t;
             }),
             doc.c_str());
    if constexpr (std::equality_comparable<T>) cls_.def(py::self == py::self);
    if (repr != nullptr) {
      cls_.def("__repr__", repr);
    } else {
      cls_.def("__repr__", [fields, name](const T& t) {
        std::string out = name + "(";
        for (std::size_t i = 0; i < fields->size(); ++i) {
          if (i > 0) out += ", ";
          out += (*fields)[i].name + "=" + std::string(py::repr((*fields)[i].get(t)));
        }
        return out + ")";
      });
    }
    cls_.def("__copy__", [](const T& t) { return T(t); });
    cls_.def(
        "__deepcopy__", [](const T& t, const py::dict&) { return T(t); }, py::arg("memo"));
    cls_.def(py::pickle(
        [fields](const T& t) {
          py::dict state;
          for (const auto& f : *fields) state[py::str(f.name)] = f.get(t);
          return state;
        },
        [fields](const py::dict& state) {
          T t{};
          for (const auto& f : *fields)
            if (state.contains(f.name)) f.set(t, state[py::str(f.name)]);
          return t;
        }));
    return cls_;
  }

  [[nodiscard]] py::class_<T>& cls() noexcept { return cls_; }

 private:
  struct field_entry {
    std::string name;
    std::function<void(T&, py::handle)> set;
    std::function<py::object(const T&)> get;
  };
  std::string name_;
  py::class_<T> cls_;
  std::shared_ptr<std::vector<field_entry>> fields_;
};

/// What every cost model shares: its specs and its predictions (seconds, bytes).
template <class Model, class... Options>
void bind_cost_model_members(py::class_<Model, Options...>& cls) {
  cls.def("model", &Model::model, py::return_value_policy::copy, "ModelSpec (a copy)")
      .def("cluster", &Model::cluster, py::return_value_policy::copy, "ClusterSpec (a copy)")
      .def("training", &Model::training, py::return_value_policy::copy, "TrainingSpec (a copy)")
      .def("memory_budget", &Model::memory_budget,
           "bytes a micro-batch may use at its peak per GPU")
      .def("seconds", &Model::seconds, py::arg("shape"), py::arg("config"),
           "predicted seconds of a micro-batch of `shape` under `config`")
      .def("marginal_seconds", &Model::marginal_seconds, py::arg("shape"), py::arg("config"),
           "a floor on the seconds `shape` adds to any micro-batch under `config`")
      .def("peak_bytes", &Model::peak_bytes, py::arg("shape"), py::arg("config"),
           "predicted peak bytes per GPU of the group")
      .def("gradient_sync_seconds", py::overload_cast<>(&Model::gradient_sync_seconds, py::const_),
           "predicted gradient synchronisation after the last micro-step, seconds")
      .def("__copy__", [](const Model& c) { return Model(c); })
      .def(
          "__deepcopy__", [](const Model& c, const py::dict&) { return Model(c); },
          py::arg("memo"));
}

/// A batch from Python: a sequence whose items are lengths (ints: text samples with id = the
/// index in the sequence) or Sample objects. A length that does not fit int64 raises dcp.Error
/// naming the sample; the rest is validate_batch's job (in plan, simulate, ...).
[[nodiscard]] std::vector<sample> to_batch(py::handle batch);

void bind_specs(py::module_& m);
void bind_plan(py::module_& m);
void bind_scheduling(py::module_& m);
void bind_simulator(py::module_& m);

}  // namespace dcp::python
