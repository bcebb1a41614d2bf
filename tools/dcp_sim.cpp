// dcp-sim: every placement policy on the same workloads, judged by the simulator's truth model.
// With no flags it runs the default comparison on 4x8 H200: Llama-3-8B on Wikipedia lengths at
// 64K context, and STDiT3-XL on the OpenSora video mix, 50 steps each (docs/results.md).
// The program is dcp::tool::sim_main (dcp_sim_main.hpp).

#include <iostream>
#include <string_view>
#include <vector>

#include "dcp_sim_main.hpp"

int main(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return dcp::tool::sim_main(args, std::cout, std::cerr);
}
