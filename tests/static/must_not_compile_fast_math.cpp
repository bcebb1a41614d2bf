// Compiled by CTest with -ffast-math (and with -ffinite-math-only): dcp must refuse it with an
// #error naming the flag (Finding 13). Not part of any target.
#include "dcp/spec/sample.hpp"

int main() { return 0; }
