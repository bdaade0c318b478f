#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "table.hpp"

namespace perf {
namespace {

// End columns of the whitespace-separated fields of a line.
std::vector<size_t> field_ends(const std::string& line) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < line.size(); ++i)
    if (line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ')) ends.push_back(i);
  return ends;
}

std::string full_row(const RowKey& k, const SideResult& a, const SideResult& b) {
  return row_key(k) + row_side(a) + row_side(b);
}

TEST(Table, HeaderMatchesNcclTests) {
  const auto h = header_lines(false);
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0], "#");
  EXPECT_EQ(h[2],
            "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   "
            "algbw   busbw  #wrong ");
  EXPECT_EQ(h[3],
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  "
            "(GB/s)  (GB/s)         ");
  EXPECT_NE(header_lines(true)[2].find("cputime"), std::string::npos);
}

TEST(Table, RowColumnsLineUpWithHeader) {
  const std::string header = header_lines(false)[2];
  const std::vector<size_t> want = field_ends(header);
  ASSERT_EQ(want.size(), 14u);  // '#' plus 13 column names
  const std::vector<size_t> columns(want.begin() + 1, want.end());

  RowKey k{67108864, 16777216, "bfloat16", "sum", -1};
  SideResult a{96809.0, 0.69, 0.69, true, 0};
  SideResult b{1.5, 1234.5, 99999.0, true, 12};
  SideResult na{0.49, 0.02, 0.02, false, 0};
  SideResult skipped{0, 0, 0, false, 0, true};
  for (const std::string& row : {full_row(k, a, b), full_row({8, 2, "float", "none", 0}, na, na),
                                 full_row(k, a, skipped),
                                 full_row({0, 0, "int8", "avg", 3}, b, a)}) {
    EXPECT_EQ(row.size(), header.size() - 1) << row;  // header has one trailing blank
    EXPECT_EQ(field_ends(row), columns) << row;
  }
}

TEST(Table, RowFieldsAndNumberStyle) {
  const std::string row = full_row({8, 2, "float", "sum", -1}, {0.49, 0.02, 0.02, true, 0},
                                   {15757.5, 1.06, 1.06, false, 0});
  EXPECT_EQ(row,
            "           8             2     float     sum      -1     0.49    0.02    0.02       0  "
            "15757.5    1.06    1.06     N/A");
  EXPECT_EQ(row_side({1, 2, 3, true, 0, true}), "      N/A     N/A     N/A     N/A");
  EXPECT_EQ(format_number(0.5, 7), "   0.50");
  EXPECT_EQ(format_number(9999.994, 7), "9999.99");
  EXPECT_EQ(format_number(12345.67, 7), "12345.7");
  EXPECT_EQ(format_number(123456.7, 7), " 123457");
  EXPECT_EQ(format_number(1234567.0, 7), "1234567");
  EXPECT_EQ(format_number(12345678.0, 7), "1.2e+07");
  EXPECT_EQ(format_number(123.456, 6), "123.46");
  EXPECT_EQ(format_number(1234.5, 6), "1234.5");
  EXPECT_EQ(format_number(12345.0, 6), " 12345");
}

TEST(Table, FooterMatchesNcclTests) {
  const auto ok = footer_lines(0, 1.5, "all_reduce");
  EXPECT_EQ(ok[0], "# Out of bounds values : 0 OK");
  EXPECT_EQ(ok[1], "# Avg bus bandwidth    : 1.5 ");
  const auto bad = footer_lines(3, 0.25, "all_reduce");
  EXPECT_EQ(bad[0], "# Out of bounds values : 3 FAILED");
}

TEST(Table, Preamble) {
  Preamble p;
  p.tool = "strata-perf";
  p.version = "0.1.0";
  p.backend = "strata";
  p.collective = "all_reduce";
  p.min_bytes = 8;
  p.max_bytes = 64;
  p.step_factor = 2;
  p.warmup_iters = 5;
  p.iters = 20;
  p.check = 1;
  p.nranks = 2;
  const auto lines = preamble_lines(p);
  EXPECT_EQ(lines[2],
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
            "validation: 1 graph: 0");
}

}  // namespace
}  // namespace perf
