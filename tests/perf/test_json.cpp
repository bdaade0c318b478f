#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "results.hpp"

namespace perf {
namespace {

// A strict recursive-descent JSON recognizer (RFC 8259 grammar), enough to prove the
// writer's output parses.
class JsonChecker {
 public:
  explicit JsonChecker(const std::string& s) : s_(s) {}
  bool valid() {
    ws();
    if (!value()) return false;
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  bool lit(const char* w) {
    const std::string word(w);
    if (s_.compare(i_, word.size(), word) != 0) return false;
    i_ += word.size();
    return true;
  }
  bool value() {
    if (i_ >= s_.size()) return false;
    switch (s_[i_]) {
      case '{': return object();
      case '[': return array();
      case '"': return string();
      case 't': return lit("true");
      case 'f': return lit("false");
      case 'n': return lit("null");
      default: return number();
    }
  }
  bool object() {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
    while (true) {
      ws();
      if (!string()) return false;
      ws();
      if (i_ >= s_.size() || s_[i_++] != ':') return false;
      ws();
      if (!value()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') { ++i_; continue; }
      if (s_[i_] == '}') return ++i_, true;
      return false;
    }
  }
  bool array() {
    ++i_;
    ws();
    if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
    while (true) {
      ws();
      if (!value()) return false;
      ws();
      if (i_ >= s_.size()) return false;
      if (s_[i_] == ',') { ++i_; continue; }
      if (s_[i_] == ']') return ++i_, true;
      return false;
    }
  }
  bool string() {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    for (++i_; i_ < s_.size(); ++i_) {
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        if (s_[i_] == 'u') {
          for (int k = 0; k < 4; ++k)
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
        } else if (std::string("\"\\/bfnrt").find(s_[i_]) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool digits() {
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool number() {
    if (i_ < s_.size() && s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return false;
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (!digits()) return false;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) return false;
    }
    return true;
  }
  const std::string& s_;
  size_t i_ = 0;
};

RunSummary sample() {
  RunSummary s;
  s.tool = "strata-perf";
  s.version = "0.1.0";
  s.backend = "strata";
  s.collective = "all_gather";
  s.ranks = 4;
  RowRecord r;
  r.collective = "all_gather";
  r.key = {4096, 256, "float", "none", -1};
  r.ranks = 4;
  r.out_of_place = {12.5, 0.33, 0.25, true, 0};
  r.in_place = {13.0, 0.31, 0.23, false, 0};
  s.rows = {r, r};
  s.rows[1].out_of_place.wrong = 7;
  s.avg_busbw = 0.24;
  return s;
}

TEST(Json, CheckerSelfTest) {
  EXPECT_TRUE(JsonChecker(R"({"a":[1,-2.5e3,true,null,"x\n"]})").valid());
  EXPECT_FALSE(JsonChecker(R"({"a":[1,]})").valid());
  EXPECT_FALSE(JsonChecker(R"({"a":01})").valid());
  EXPECT_FALSE(JsonChecker(R"({"a":nan})").valid());
  EXPECT_FALSE(JsonChecker("{\"a\":\"tab\there\"}").valid());
}

TEST(Json, StringsAreEscapedAndNonFiniteNumbersAreNull) {
  RunSummary s = sample();
  s.backend = "quote\" back\\ nl\n ctl\x01";
  s.rows[0].out_of_place.time_us = 1.0 / 0.0;
  s.avg_busbw = std::nan("");
  const std::string text = results_json(s);
  EXPECT_TRUE(JsonChecker(text).valid()) << text;
  EXPECT_NE(text.find(R"("backend":"quote\" back\\ nl\n ctl\u0001")"), std::string::npos) << text;
  EXPECT_NE(text.find("\"oop_time_us\":null"), std::string::npos) << text;
  EXPECT_NE(text.find("\"avg_busbw\":null"), std::string::npos) << text;
}

TEST(Json, KeysInOrderOneResultALine) {
  RunSummary s = sample();
  s.options.step_factor = 4;
  s.rows[1].in_place.skipped = true;
  const std::string text = results_json(s);
  size_t at = 0;
  for (const char* key : {"\"tool\"", "\"version\"", "\"backend\"", "\"collective\"", "\"ranks\"", "\"config\"",
                          "\"minbytes\"", "\"maxbytes\"", "\"stepfactor\"", "\"iters\"", "\"warmup_iters\"",
                          "\"check\"", "\"average\"", "\"blocking\"", "\"in_place\"", "\"results\"",
                          "\"collective\"", "\"size\"", "\"count\"", "\"type\"", "\"op\"", "\"root\"",
                          "\"ranks\"", "\"oop_time_us\"", "\"oop_algbw\"", "\"oop_busbw\"", "\"oop_wrong\"",
                          "\"oop_barrier_us\"", "\"ip_time_us\"", "\"ip_algbw\"", "\"ip_busbw\"", "\"ip_wrong\"",
                          "\"ip_barrier_us\"", "\"out_of_bounds\"",
                          "\"avg_busbw\""}) {
    const size_t next = text.find(key, at);
    ASSERT_NE(next, std::string::npos) << key << " after " << at << "\n" << text;
    at = next;
  }
  EXPECT_EQ(text.find("stepbytes"), std::string::npos);
  EXPECT_NE(text.find(R"("ip_time_us":null,"ip_algbw":null,"ip_busbw":null,"ip_wrong":null)"), std::string::npos);
  // The header, each result, and the footer on lines of their own.
  size_t lines = 0;
  for (char c : text) lines += c == '\n';
  EXPECT_EQ(lines, 4u) << text;
  EXPECT_EQ(text.find("\n{\"collective\""), text.find("\n"));
  EXPECT_EQ(text.back(), '\n');
}

TEST(Json, ResultsFileParses) {
  const std::string text = results_json(sample());
  EXPECT_TRUE(JsonChecker(text).valid()) << text;
  for (const char* key : {"\"collective\":\"all_gather\"", "\"size\":4096", "\"count\":256", "\"type\":\"float\"",
                          "\"op\":\"none\"", "\"root\":-1", "\"ranks\":4", "\"oop_time_us\":12.5",
                          "\"oop_algbw\":0.33", "\"oop_busbw\":0.25", "\"oop_wrong\":0", "\"ip_wrong\":null",
                          "\"oop_wrong\":7", "\"avg_busbw\":0.24", "\"out_of_bounds\":0"})
    EXPECT_NE(text.find(key), std::string::npos) << key << "\n" << text;
}

TEST(Json, ResultsFileParsesWithPython) {
#ifndef PERF_TEST_PYTHON3
  GTEST_SKIP() << "python3 not found at configure time";
#else
  const std::string path = ::testing::TempDir() + "perf_results.json";
  {
    std::ofstream f(path);
    f << results_json(sample());
  }
  const std::string cmd = std::string(PERF_TEST_PYTHON3) +
                          " -c \"import json,sys; d=json.load(open(sys.argv[1])); "
                          "assert len(d['results'])==2 and d['results'][1]['oop_wrong']==7 "
                          "and d['results'][0]['ip_wrong'] is None and d['avg_busbw']==0.24\" " + path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::remove(path.c_str());
#endif
}

}  // namespace
}  // namespace perf
