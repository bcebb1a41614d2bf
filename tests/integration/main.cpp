// The consumer program shared by the integration projects: include the umbrella header and use
// one preset, so a missing header, include path or link dependency fails the build.
#include <dcp/dcp.hpp>

#include <iostream>

int main() {
  const auto params = dcp::models::llama3_8b().total_params();
  std::cout << "Llama-3 8B parameters: " << params << '\n';
  return params > 0 ? 0 : 1;
}
