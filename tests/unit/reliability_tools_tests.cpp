// Reliability findings on the loaders and the command-line tools (06, 10, 11): each test case is
// named Finding.<NN>_<slug>.<what_it_checks>.

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include "dcp/error.hpp"
#include "dcp/workload/loaders.hpp"
#include "support/errors.hpp"

namespace w = dcp::workload;
using dcp::test::contains;
using dcp::test::message_of;

// ---- 06: linear-time loaders ----------------------------------------------------------------

TEST_CASE("Finding.06_linear_loaders.a_line_longer_than_the_block_is_read_whole") {
  // 1 MiB of blanks before the number: the line spans 16 blocks of 64 KiB.
  const std::string long_line = std::string(std::size_t{1} << 20, ' ') + "4096";
  std::istringstream in("7\n" + long_line + "\n# " + std::string(300000, 'x') + "\n12\n");
  const auto samples = w::read_lengths(in, "long.txt");
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].tokens == 7);
  CHECK(samples[1].tokens == 4096);
  CHECK(samples[2].tokens == 12);
  CHECK(samples[2].id == 2);
}

TEST_CASE("Finding.06_linear_loaders.errors_after_long_lines_name_the_right_line") {
  const std::string long_line = std::string(200000, ' ') + "5";
  {
    std::istringstream in("1\n" + long_line + "\n" + long_line + "\n2\nabc\n");
    const auto message = message_of([&] { (void)w::read_lengths(in, "long.txt"); });
    CAPTURE(message);
    CHECK(contains(message, "long.txt:5: 'abc' is not a positive integer"));
  }
  {
    // The long line itself is the bad one: named by its number, its text cut short.
    std::istringstream in("1\n" + std::string(300000, '9') + "\n");
    const auto message = message_of([&] { (void)w::read_lengths(in, "long.txt"); });
    CAPTURE(message.substr(0, 200));
    CHECK(contains(message, "long.txt:2: '9999"));
    CHECK(contains(message, "(300000 characters)"));
    CHECK(message.size() < 300);
  }
  {
    std::istringstream in("frames,height,width\n2,3,4\n" + std::string(150000, ' ') +
                          "5, 6 ,7\n1,2\n");
    const auto message = message_of([&] { (void)w::read_video_csv(in, "clips.csv"); });
    CAPTURE(message);
    CHECK(contains(message, "clips.csv:4: '1,2' has 2 fields"));
  }
}

TEST_CASE("Finding.06_linear_loaders.one_byte_blocks_give_the_same_lines") {
  // One byte per block: the long line is split across 1,000,000 blocks. (Searching the whole
  // pending line after every block, the old loop, makes this 5 x 10^11 byte comparisons;
  // searching only the new bytes, 10^6. The speed itself is measured by dcp_bench_loaders.)
  const std::string text = "3\n" + std::string(1'000'000, ' ') + "17\n\n8";
  std::istringstream in(text);
  std::vector<std::pair<std::int64_t, std::size_t>> lines;  // (number, length)
  w::detail::for_each_line(
      in, "tiny",
      [&](std::int64_t number, std::string_view line) { lines.emplace_back(number, line.size()); },
      1);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == std::pair<std::int64_t, std::size_t>{1, 1});
  CHECK(lines[1] == std::pair<std::int64_t, std::size_t>{2, 1'000'002});
  CHECK(lines[2] == std::pair<std::int64_t, std::size_t>{3, 0});
  CHECK(lines[3] == std::pair<std::int64_t, std::size_t>{4, 1});
}
