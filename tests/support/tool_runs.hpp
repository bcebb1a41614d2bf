#pragma once
// The command-line tools run in-process: their exit status and what they wrote.

#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../../tools/dcp_plan_main.hpp"
#include "../../tools/dcp_sim_main.hpp"

namespace dcp::test {

/// What a tool run in-process returned and wrote.
struct tool_run {
  int status = -1;
  std::string out;
  std::string err;
};

/// dcp-sim with these arguments.
inline tool_run run_sim(std::initializer_list<std::string_view> args) {
  std::ostringstream out, err;
  const std::vector<std::string_view> list(args);
  const int status = dcp::tool::sim_main(list, out, err);
  return {status, out.str(), err.str()};
}

/// dcp-plan with these arguments, reading `input` as its standard input.
inline tool_run run_plan(std::initializer_list<std::string_view> args,
                         const std::string& input = "") {
  std::istringstream in(input);
  std::ostringstream out, err;
  const std::vector<std::string_view> list(args);
  const int status = dcp::tool::plan_main(list, in, out, err);
  return {status, out.str(), err.str()};
}

}  // namespace dcp::test
