// Plans across the scenario space, pinned to golden fingerprints: a change to the planner that
// is meant to keep its plans (a restructuring, a faster data structure) must leave every one of
// them bit for bit. The golden values were recorded from the planner as of 500efcc. Where a
// change is meant to change plans, run with DCP_PRINT_FINGERPRINTS=1 to print the new table.

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"
#include "dcp/workload/batch.hpp"
#include "dcp/workload/empirical_profile.hpp"
#include "dcp/workload/presets.hpp"
#include "dcp/workload/video_mix.hpp"

#include "../support/batches.hpp"

using namespace dcp;

namespace fingerprint_scenarios {

struct pinned {
  std::uint64_t fingerprint;  // step_plan::fingerprint (what ranks all-gather)
  std::uint64_t timing;       // predicted times and peaks, which the fingerprint leaves out
};

// The predicted times of a plan (makespan, each micro-step's start, length and peak bytes), the
// best static layout and the policy's text: what the fingerprint does not hash. The lower
// bound is left out: its arithmetic may change without changing any plan.
std::uint64_t timing_hash(const step_plan& plan) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over 64-bit words
  const auto mix = [&h](std::uint64_t word) { h = (h ^ word) * 0x100000001b3ULL; };
  const auto real = [&mix](double x) { mix(std::bit_cast<std::uint64_t>(x)); };
  real(plan.makespan_seconds);
  real(plan.best_static_seconds);
  mix(static_cast<std::uint64_t>(plan.best_static_degree));
  for (const char c : plan.policy) mix(static_cast<unsigned char>(c));
  for (const auto& m : plan.micro_steps) {
    real(m.start_seconds);
    real(m.seconds);
    real(m.peak_bytes);
  }
  return h;
}

struct setting {
  std::string name;
  model_spec model;
  std::int64_t nodes;
  sequence_parallel sp;
  int zero_stage;
};

// Llama-3-8B on H100 and STDiT3-XL on H200; 1, 4 and 32 nodes of 8; every style; ZeRO-1 and,
// for text, ZeRO-3.
std::vector<setting> settings() {
  std::vector<setting> out;
  const sequence_parallel styles[] = {sequence_parallel::ulysses, sequence_parallel::ring,
                                      sequence_parallel::hybrid, sequence_parallel::automatic};
  for (const std::int64_t nodes : {1, 4, 32})
    for (const auto sp : styles) {
      for (const int zero : {1, 3})
        out.push_back({"llama3-8b/" + std::to_string(8 * nodes) + "/" + std::string(to_string(sp)) +
                           "/z" + std::to_string(zero),
                       models::llama3_8b(), nodes, sp, zero});
      out.push_back(
          {"stdit3-xl/" + std::to_string(8 * nodes) + "/" + std::string(to_string(sp)) + "/z1",
           models::stdit3_xl(), nodes, sp, 1});
    }
  return out;
}

analytic_cost_model cost_of(const setting& s) {
  training_spec training;
  training.sp = s.sp;
  training.zero_stage = s.zero_stage;
  const bool video = s.model.name == models::stdit3_xl().name;
  // The fingerprints were recorded with the Grace host's issue time; pinning it keeps them a
  // guard on the planner, not on the default constants.
  analytic_constants constants;
  constants.host_seconds_per_kernel = grace_host.seconds_per_kernel;
  return analytic_cost_model(s.model,
                             hgx_cluster(s.nodes, video ? gpus::h200_sxm() : gpus::h100_sxm()),
                             training, constants);
}

// Named batches for a setting: Wikipedia-like documents split at a 64K context and seeded
// long-tailed lengths for text, the VideoSys clip mix for video.
std::vector<std::pair<std::string, std::vector<sample>>> batches_for(const setting& s) {
  const std::int64_t gpus = 8 * s.nodes;
  if (s.model.name == models::stdit3_xl().name)
    return {{"videosys", workload::draw_batch(workload::opensora_video_mix::videosys_benchmark(),
                                              gpus * 125'000, 11)}};
  return {
      {"wikipedia", workload::split_to_context(
                        workload::draw_batch(workload::wikipedia(), gpus * 32'768, 7), 65'536)
                        .samples},
      {"long-tail", test::heavy_tailed_batch(13, static_cast<std::size_t>(gpus) * 40, 131'072)}};
}

// Non-default placement knobs, each tried on the 32-GPU settings.
std::vector<std::pair<std::string, balanced_placement>> option_variants() {
  balanced_placement unshared;
  unshared.share_micro_batches = false;
  balanced_placement exact;
  exact.exact_best_static = true;
  exact.cross_nodes_when_faster = false;
  balanced_placement wide;
  wide.long_fraction = 0.5;
  wide.full_candidates = 3;
  wide.ranked_candidates = 16;
  return {{"unshared", unshared}, {"exact-static", exact}, {"wide", wide}};
}

// Recorded from 500efcc (DCP_PRINT_FINGERPRINTS=1).
const std::map<std::string, pinned>& golden() {
  static const std::map<std::string, pinned> table{
      {"llama3-8b/8/ulysses/z1/wikipedia", {0x5e32925b76336e3aULL, 0x5c54b96223b31279ULL}},
      {"llama3-8b/8/ulysses/z1/long-tail", {0x21060770597fd6a3ULL, 0x532068a7eeadf35eULL}},
      {"llama3-8b/8/ulysses/z3/wikipedia", {0xd41029b588eade55ULL, 0x6dc66d517e78419dULL}},
      {"llama3-8b/8/ulysses/z3/long-tail", {0xdc5bfa19fff6cb7fULL, 0xcb1e5e261b86d676ULL}},
      {"stdit3-xl/8/ulysses/z1/videosys", {0x4a81b1bd58ac6d9cULL, 0xe39512adc9570fa5ULL}},
      {"llama3-8b/8/ring/z1/wikipedia", {0xeaf9b926b7a54d0dULL, 0x887e1638ef531399ULL}},
      {"llama3-8b/8/ring/z1/long-tail", {0x9042873dc9f6c170ULL, 0x217e9595895e8911ULL}},
      {"llama3-8b/8/ring/z3/wikipedia", {0x2f062862e77303c1ULL, 0x6dc66d517e78419dULL}},
      {"llama3-8b/8/ring/z3/long-tail", {0x94a2ff270600690eULL, 0x9fdd69cc78820ce2ULL}},
      {"stdit3-xl/8/ring/z1/videosys", {0x0ff10de7d030399fULL, 0x2bd7a6099790d766ULL}},
      {"llama3-8b/8/hybrid/z1/wikipedia", {0x5e32925b76336e3aULL, 0x5c54b96223b31279ULL}},
      {"llama3-8b/8/hybrid/z1/long-tail", {0x21060770597fd6a3ULL, 0x532068a7eeadf35eULL}},
      {"llama3-8b/8/hybrid/z3/wikipedia", {0x94322b9c3ee0f73bULL, 0x6dc66d517e78419dULL}},
      {"llama3-8b/8/hybrid/z3/long-tail", {0xdc5bfa19fff6cb7fULL, 0xcb1e5e261b86d676ULL}},
      {"stdit3-xl/8/hybrid/z1/videosys", {0x4a81b1bd58ac6d9cULL, 0xe39512adc9570fa5ULL}},
      {"llama3-8b/8/auto/z1/wikipedia", {0x0c8377830638c4bbULL, 0x8d5840401ccb4eccULL}},
      {"llama3-8b/8/auto/z1/long-tail", {0xc572e0c3c3aab855ULL, 0xda24fdd054bd4f4fULL}},
      {"llama3-8b/8/auto/z3/wikipedia", {0xd41029b588eade55ULL, 0x6dc66d517e78419dULL}},
      {"llama3-8b/8/auto/z3/long-tail", {0x72702fde5e02cdb9ULL, 0xce066c460692b2b9ULL}},
      {"stdit3-xl/8/auto/z1/videosys", {0xe2aa0cdd92549ddeULL, 0x2bd7a6099790d766ULL}},
      {"llama3-8b/32/ulysses/z1/wikipedia", {0x7f078564e37b0282ULL, 0xf45d5fb5ab32beebULL}},
      {"llama3-8b/32/ulysses/z1/wikipedia/unshared",
       {0xe688068e49b982ffULL, 0x460eaa6c5cdc39f1ULL}},
      {"llama3-8b/32/ulysses/z1/wikipedia/exact-static",
       {0x7f078564e37b0282ULL, 0x41d55c8815a905a2ULL}},
      {"llama3-8b/32/ulysses/z1/wikipedia/wide", {0x60c8fb1b7cfe8e92ULL, 0xbe4275b1a4cac3b7ULL}},
      {"llama3-8b/32/ulysses/z1/long-tail", {0x58271f5c0ef5fd78ULL, 0xee59bc6d0cb3f6b9ULL}},
      {"llama3-8b/32/ulysses/z1/long-tail/unshared",
       {0xb4b8b8638b668c7eULL, 0x94c60b8c6c9e847cULL}},
      {"llama3-8b/32/ulysses/z1/long-tail/exact-static",
       {0x58271f5c0ef5fd78ULL, 0x304f611fb7b88a61ULL}},
      {"llama3-8b/32/ulysses/z1/long-tail/wide", {0x58271f5c0ef5fd78ULL, 0xee59bc6d0cb3f6b9ULL}},
      {"llama3-8b/32/ulysses/z3/wikipedia", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/ulysses/z3/wikipedia/unshared",
       {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/ulysses/z3/wikipedia/exact-static",
       {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/ulysses/z3/wikipedia/wide", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/ulysses/z3/long-tail", {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/ulysses/z3/long-tail/unshared",
       {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/ulysses/z3/long-tail/exact-static",
       {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/ulysses/z3/long-tail/wide", {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"stdit3-xl/32/ulysses/z1/videosys", {0x57d4d4aefcd6b31eULL, 0x9875f1d6e23ddb20ULL}},
      {"stdit3-xl/32/ulysses/z1/videosys/unshared", {0x57d4d4aefcd6b31eULL, 0x9875f1d6e23ddb20ULL}},
      {"stdit3-xl/32/ulysses/z1/videosys/exact-static",
       {0x57d4d4aefcd6b31eULL, 0x9fa0fbb7a5ea5716ULL}},
      {"stdit3-xl/32/ulysses/z1/videosys/wide", {0x4c3da618c25397baULL, 0x01405ae8e0e220f4ULL}},
      {"llama3-8b/32/ring/z1/wikipedia", {0x351751cfe71d6492ULL, 0x01806b743deb9c96ULL}},
      {"llama3-8b/32/ring/z1/wikipedia/unshared", {0xcd15679603f8d017ULL, 0xed65ad6546af4422ULL}},
      {"llama3-8b/32/ring/z1/wikipedia/exact-static",
       {0x351751cfe71d6492ULL, 0x3411237ca5bc5044ULL}},
      {"llama3-8b/32/ring/z1/wikipedia/wide", {0x351751cfe71d6492ULL, 0x01806b743deb9c96ULL}},
      {"llama3-8b/32/ring/z1/long-tail", {0x709b7038cce45452ULL, 0x1a16d01595cf6170ULL}},
      {"llama3-8b/32/ring/z1/long-tail/unshared", {0x009090b0f5874199ULL, 0xc54e71e95bbb4b39ULL}},
      {"llama3-8b/32/ring/z1/long-tail/exact-static",
       {0x709b7038cce45452ULL, 0xc14a77cd08bcf245ULL}},
      {"llama3-8b/32/ring/z1/long-tail/wide", {0x709b7038cce45452ULL, 0x1a16d01595cf6170ULL}},
      {"llama3-8b/32/ring/z3/wikipedia", {0x61da8697a78e4f28ULL, 0x9a8b3dd1dae25531ULL}},
      {"llama3-8b/32/ring/z3/wikipedia/unshared", {0xbe170226d1957c6aULL, 0x46e84871cbcd79eeULL}},
      {"llama3-8b/32/ring/z3/wikipedia/exact-static",
       {0x61da8697a78e4f28ULL, 0x9a8b3dd1dae25531ULL}},
      {"llama3-8b/32/ring/z3/wikipedia/wide", {0xc8419386a6e96f9dULL, 0x198062dc09dd43dfULL}},
      {"llama3-8b/32/ring/z3/long-tail", {0x7d20b9e8bfd1a56dULL, 0x4acf5ac98e99126eULL}},
      {"llama3-8b/32/ring/z3/long-tail/unshared", {0x7d20b9e8bfd1a56dULL, 0x4acf5ac98e99126eULL}},
      {"llama3-8b/32/ring/z3/long-tail/exact-static",
       {0x7d20b9e8bfd1a56dULL, 0x4acf5ac98e99126eULL}},
      {"llama3-8b/32/ring/z3/long-tail/wide", {0x7d20b9e8bfd1a56dULL, 0x4acf5ac98e99126eULL}},
      {"stdit3-xl/32/ring/z1/videosys", {0x2b8ef0712822086eULL, 0xaeffa90f94ef059eULL}},
      {"stdit3-xl/32/ring/z1/videosys/unshared", {0x2b8ef0712822086eULL, 0xaeffa90f94ef059eULL}},
      {"stdit3-xl/32/ring/z1/videosys/exact-static",
       {0x2b8ef0712822086eULL, 0xff10f8a5746030fcULL}},
      {"stdit3-xl/32/ring/z1/videosys/wide", {0xbf337a9620b3fd64ULL, 0x54ca911328d1508fULL}},
      {"llama3-8b/32/hybrid/z1/wikipedia", {0x23e1d09f29b9b9e9ULL, 0xf5373c2c091595f5ULL}},
      {"llama3-8b/32/hybrid/z1/wikipedia/unshared", {0x1803d3674962e42dULL, 0xc53804a5baf89605ULL}},
      {"llama3-8b/32/hybrid/z1/wikipedia/exact-static",
       {0x23e1d09f29b9b9e9ULL, 0x48b0439c7e1c627aULL}},
      {"llama3-8b/32/hybrid/z1/wikipedia/wide", {0x60c8fb1b7cfe8e92ULL, 0xbe4275b1a4cac3b7ULL}},
      {"llama3-8b/32/hybrid/z1/long-tail", {0x58271f5c0ef5fd78ULL, 0xee59bc6d0cb3f6b9ULL}},
      {"llama3-8b/32/hybrid/z1/long-tail/unshared", {0xb4b8b8638b668c7eULL, 0x94c60b8c6c9e847cULL}},
      {"llama3-8b/32/hybrid/z1/long-tail/exact-static",
       {0x58271f5c0ef5fd78ULL, 0x304f611fb7b88a61ULL}},
      {"llama3-8b/32/hybrid/z1/long-tail/wide", {0x58271f5c0ef5fd78ULL, 0xee59bc6d0cb3f6b9ULL}},
      {"llama3-8b/32/hybrid/z3/wikipedia", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/hybrid/z3/wikipedia/unshared", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/hybrid/z3/wikipedia/exact-static",
       {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/hybrid/z3/wikipedia/wide", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/hybrid/z3/long-tail", {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/hybrid/z3/long-tail/unshared", {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/hybrid/z3/long-tail/exact-static",
       {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"llama3-8b/32/hybrid/z3/long-tail/wide", {0x5c618ee979366371ULL, 0x930b273584d51ccfULL}},
      {"stdit3-xl/32/hybrid/z1/videosys", {0x57d4d4aefcd6b31eULL, 0x9875f1d6e23ddb20ULL}},
      {"stdit3-xl/32/hybrid/z1/videosys/unshared", {0x57d4d4aefcd6b31eULL, 0x9875f1d6e23ddb20ULL}},
      {"stdit3-xl/32/hybrid/z1/videosys/exact-static",
       {0x57d4d4aefcd6b31eULL, 0x9fa0fbb7a5ea5716ULL}},
      {"stdit3-xl/32/hybrid/z1/videosys/wide", {0x4c3da618c25397baULL, 0x01405ae8e0e220f4ULL}},
      {"llama3-8b/32/auto/z1/wikipedia", {0xeb5e41a93a6100a5ULL, 0xa923999d6a0737c2ULL}},
      {"llama3-8b/32/auto/z1/wikipedia/unshared", {0x219d778c7c4edd8eULL, 0x3dd1fb4cccd467edULL}},
      {"llama3-8b/32/auto/z1/wikipedia/exact-static",
       {0xeb5e41a93a6100a5ULL, 0x04ce324180c10e9bULL}},
      {"llama3-8b/32/auto/z1/wikipedia/wide", {0x16246f6ec0c22526ULL, 0xd6b8d2a4d7604a58ULL}},
      {"llama3-8b/32/auto/z1/long-tail", {0xe164c2378c143696ULL, 0x64bd9098e0ab2ae6ULL}},
      {"llama3-8b/32/auto/z1/long-tail/unshared", {0xad38fec2cc259b39ULL, 0x6651a9a3c6d0700fULL}},
      {"llama3-8b/32/auto/z1/long-tail/exact-static",
       {0xe164c2378c143696ULL, 0xaeb5c852cc66b7eeULL}},
      {"llama3-8b/32/auto/z1/long-tail/wide", {0xe164c2378c143696ULL, 0x64bd9098e0ab2ae6ULL}},
      {"llama3-8b/32/auto/z3/wikipedia", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/auto/z3/wikipedia/unshared", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/auto/z3/wikipedia/exact-static",
       {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/auto/z3/wikipedia/wide", {0x286b97bc6b064029ULL, 0xf171d05bafb75d41ULL}},
      {"llama3-8b/32/auto/z3/long-tail", {0x038f695a47e651a3ULL, 0x58c3ea315c53cc34ULL}},
      {"llama3-8b/32/auto/z3/long-tail/unshared", {0x038f695a47e651a3ULL, 0x58c3ea315c53cc34ULL}},
      {"llama3-8b/32/auto/z3/long-tail/exact-static",
       {0x038f695a47e651a3ULL, 0x58c3ea315c53cc34ULL}},
      {"llama3-8b/32/auto/z3/long-tail/wide", {0x038f695a47e651a3ULL, 0x58c3ea315c53cc34ULL}},
      {"stdit3-xl/32/auto/z1/videosys", {0x98a89b49ab477a56ULL, 0xaeffa90f94ef059eULL}},
      {"stdit3-xl/32/auto/z1/videosys/unshared", {0x98a89b49ab477a56ULL, 0xaeffa90f94ef059eULL}},
      {"stdit3-xl/32/auto/z1/videosys/exact-static",
       {0x98a89b49ab477a56ULL, 0xff10f8a5746030fcULL}},
      {"stdit3-xl/32/auto/z1/videosys/wide", {0xa5ca86d8ba5b9017ULL, 0x565a6344c98d65ceULL}},
      {"llama3-8b/256/ulysses/z1/wikipedia", {0xfb278407cb2ef112ULL, 0x32c95cee436c6553ULL}},
      {"llama3-8b/256/ulysses/z1/long-tail", {0x63672b05ec61bd3aULL, 0x9427163e807bc756ULL}},
      {"llama3-8b/256/ulysses/z3/wikipedia", {0xe13285901b651854ULL, 0xe43f37e4981f3ab9ULL}},
      {"llama3-8b/256/ulysses/z3/long-tail", {0xe31934588566db4aULL, 0xd52e75e6cdc8042dULL}},
      {"stdit3-xl/256/ulysses/z1/videosys", {0x6bf1dad366590e03ULL, 0xc22da4e282060de8ULL}},
      {"llama3-8b/256/ring/z1/wikipedia", {0xe40ed873a88d5917ULL, 0xd6002e39888db655ULL}},
      {"llama3-8b/256/ring/z1/long-tail", {0x54f8176411e9320bULL, 0xc03a5213982afcceULL}},
      {"llama3-8b/256/ring/z3/wikipedia", {0x8f6cd692d0b30f98ULL, 0xd2bef4d24b5fe79cULL}},
      {"llama3-8b/256/ring/z3/long-tail", {0x63f632412d6ebff9ULL, 0x16b8461afc3cd14fULL}},
      {"stdit3-xl/256/ring/z1/videosys", {0xd2aba8f3beb96fd4ULL, 0x81788cb0aacff26fULL}},
      {"llama3-8b/256/hybrid/z1/wikipedia", {0xfb278407cb2ef112ULL, 0x32c95cee436c6553ULL}},
      {"llama3-8b/256/hybrid/z1/long-tail", {0x36b26160b2800f10ULL, 0x800998d4ff7748faULL}},
      {"llama3-8b/256/hybrid/z3/wikipedia", {0xfa1abbad2448aafaULL, 0x836a640c1d6e58b3ULL}},
      {"llama3-8b/256/hybrid/z3/long-tail", {0xe316be9238918733ULL, 0x77b8d6d76b35e734ULL}},
      {"stdit3-xl/256/hybrid/z1/videosys", {0x6bf1dad366590e03ULL, 0xc22da4e282060de8ULL}},
      {"llama3-8b/256/auto/z1/wikipedia", {0xf5498299aa7d1a14ULL, 0x0f4cce23a064530eULL}},
      {"llama3-8b/256/auto/z1/long-tail", {0x615c04ce2af18ff8ULL, 0x3836be5887bb744fULL}},
      {"llama3-8b/256/auto/z3/wikipedia", {0x4b03ba02fb7d4984ULL, 0x63b8a504c4bfdb53ULL}},
      {"llama3-8b/256/auto/z3/long-tail", {0x110e0bd9b16c660bULL, 0xbca342824fb01652ULL}},
      {"stdit3-xl/256/auto/z1/videosys", {0x7cbcec3aeda4a13cULL, 0x52cd28c16a5b294bULL}},
      {"llama3-8b/256/auto/z3/kept-arrays/first", {0xdd207715821beb73ULL, 0x459ee5ca70e6545aULL}},
      {"llama3-8b/256/auto/z3/kept-arrays/again", {0xdd207715821beb73ULL, 0x459ee5ca70e6545aULL}},
  };
  return table;
}

// Prints the plan's line of the golden table (`print`), else checks it against the table.
void print_or_check(const std::string& name, const step_plan& plan, bool print,
                    std::map<std::string, pinned>& seen) {
  const pinned got{plan.fingerprint, timing_hash(plan)};
  seen[name] = got;
  if (print) {
    std::printf("      {\"%s\", {0x%016llxULL, 0x%016llxULL}},\n", name.c_str(),
                static_cast<unsigned long long>(got.fingerprint),
                static_cast<unsigned long long>(got.timing));
    return;
  }
  CAPTURE(name);
  const auto at = golden().find(name);
  REQUIRE(at != golden().end());
  CHECK(got.fingerprint == at->second.fingerprint);
  CHECK(got.timing == at->second.timing);
}

}  // namespace fingerprint_scenarios

TEST_CASE("Planner.Fingerprints.scenario_plans_are_unchanged") {
  using namespace fingerprint_scenarios;
  const bool print = std::getenv("DCP_PRINT_FINGERPRINTS") != nullptr;
  std::map<std::string, pinned> seen;
  for (const auto& s : settings()) {
    const auto cost = cost_of(s);
    const DataCentricScheduler<> ours(cost);
    for (const auto& [batch_name, batch] : batches_for(s)) {
      const std::string name = s.name + "/" + batch_name;
      print_or_check(name, ours.plan(batch), print, seen);
      if (s.nodes != 4) continue;
      for (const auto& [option_name, options] : option_variants()) {
        const DataCentricScheduler<> other(cost, {}, {}, options);
        print_or_check(name + "/" + option_name, other.plan(batch), print, seen);
      }
    }
  }
  // A batch large enough for the scheduler's kept arrays (detail::plan_workspace), planned twice
  // by one scheduler: the second plan reuses the first one's memory.
  const setting large{"llama3-8b/256/auto/z3", models::llama3_8b(), 32,
                      sequence_parallel::automatic, 3};
  const DataCentricScheduler<> kept(cost_of(large));
  const auto batch =
      test::heavy_tailed_batch(17, dcp::detail::plan_workspace::from_samples + 4096, 131'072);
  for (const char* pass : {"first", "again"})
    print_or_check(large.name + "/kept-arrays/" + pass, kept.plan(batch), print, seen);
  if (print) return;
  CHECK(seen.size() == golden().size());
  // A regression test only if a knob shows: some non-default option changes some plan.
  int differing = 0;
  for (const auto& [name, got] : seen)
    for (const auto& [option_name, options] : option_variants())
      if (name.ends_with("/" + option_name))
        differing += seen.at(name.substr(0, name.rfind('/'))).fingerprint != got.fingerprint;
  CHECK(differing > 0);
}
