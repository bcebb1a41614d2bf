#pragma once
// The peers' policies, each a dcp::placement_policy in namespace dcp::baselines, planned with
// the same cost model as DataCentricScheduler's own placement, and the static layouts users
// configure (user_static.hpp; docs/baselines.md).

#include "dcp/baselines/flexsp_like.hpp"
#include "dcp/baselines/megatron_dp_balanced.hpp"
#include "dcp/baselines/megatron_dynamic_cp.hpp"
#include "dcp/baselines/paper_baseline.hpp"
#include "dcp/baselines/user_static.hpp"
#include "dcp/baselines/user_static_rules.hpp"
#include "dcp/baselines/verl_balanced_dp.hpp"
#include "dcp/baselines/videosys_dcp.hpp"
#include "dcp/baselines/wlb_llm.hpp"
#include "dcp/baselines/wlb_outlier_delay.hpp"
