#pragma once
// Umbrella header: the runtime a framework links against — the communicator concept and its
// in-process model, the aligned group cache, plan agreement, the executor concept with run_step,
// online calibration (run_calibrated_step), the profiler and the communicator conformance check.
// The backend adapters have their own targets and headers: dcp/mpi/communicator.hpp (dcp::mpi),
// dcp/nccl/communicator.hpp (dcp::nccl), dcp/cuda/*.hpp (dcp::cuda).

#include "dcp/runtime/calibrated_step.hpp"
#include "dcp/runtime/communicator.hpp"
#include "dcp/runtime/executor.hpp"
#include "dcp/runtime/group_cache.hpp"
#include "dcp/runtime/in_process.hpp"
#include "dcp/runtime/pipeline_step.hpp"
#include "dcp/runtime/plan_agreement.hpp"
#include "dcp/runtime/profiler.hpp"
#include "dcp/spec/execution_report.hpp"
#include "dcp/testing/communicator_conformance.hpp"
