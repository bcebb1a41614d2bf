#pragma once
// Every text length distribution of dcp::workload in one include: the empirical (quantile
// table) sampler with its Wikipedia preset, the lognormal and Pareto samplers, mixtures, and
// the named presets of the peers' workloads. Video: video_mix.hpp. Batches: batch.hpp.

#include "dcp/workload/distribution.hpp"       // IWYU pragma: export
#include "dcp/workload/empirical_profile.hpp"  // IWYU pragma: export
#include "dcp/workload/mixture.hpp"            // IWYU pragma: export
#include "dcp/workload/parametric.hpp"         // IWYU pragma: export
#include "dcp/workload/presets.hpp"            // IWYU pragma: export
#include "dcp/workload/random.hpp"             // IWYU pragma: export
