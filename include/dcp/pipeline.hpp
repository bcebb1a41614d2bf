#pragma once
// dcp inside a tensor x pipeline grid: the grid (spec/model_parallel.hpp), the per-chunk cost
// model (pipeline/stage_cost.hpp), Megatron-LM's schedules, their executor and the pipeline
// lower bound (pipeline/schedule.hpp), and the planner (pipeline/planner.hpp). docs/pipeline.md.

#include "dcp/pipeline/planner.hpp"
#include "dcp/pipeline/schedule.hpp"
#include "dcp/pipeline/stage_cost.hpp"
#include "dcp/spec/model_parallel.hpp"
