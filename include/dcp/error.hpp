#pragma once
// dcp::error and its subclasses: every invalid spec or impossible sample throws one of these.
// Messages name the field or sample, the value and the limit.

#include <stdexcept>
#include <string>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// Base of every exception the library throws on bad input.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A specification (model, GPU, cluster, training, execution config) is inconsistent.
class invalid_spec : public error {
 public:
  using error::error;
};

/// A sample of the batch is malformed (non-positive tokens, duplicate id, bad video shape).
class invalid_sample : public error {
 public:
  using error::error;
};

/// A sample cannot be placed on the cluster under any allowed configuration.
class sample_does_not_fit : public error {
 public:
  using error::error;
};

/// A plan that is not valid: a document that is not valid JSON or not a valid
/// `dcp.step_plan/1`, a plan that cannot run its batch (validate_plan), or one that says it is in
/// lockstep and is not (check_lockstep).
class invalid_plan : public error {
 public:
  using error::error;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE
