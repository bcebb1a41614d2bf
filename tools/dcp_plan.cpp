// dcp-plan: plans one training step for a batch of sample lengths and prints a summary, or the
// plan as JSON (docs/plan-format.md). `dcp-plan --help` lists the options. The program is
// dcp::tool::plan_main (dcp_plan_main.hpp).
//
// Exit status: 0 planned; 1 the library rejected the input (a dcp::error: a malformed lengths
// line, a sample that fits nowhere, an impossible cluster) or standard output could not be
// written; 2 a bad command line.

#include <iostream>
#include <string_view>
#include <vector>

#include "dcp_plan_main.hpp"

int main(int argc, char** argv) {
  std::vector<std::string_view> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return dcp::tool::plan_main(args, std::cin, std::cout, std::cerr);
}
