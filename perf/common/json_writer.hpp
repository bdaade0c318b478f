// A small streaming JSON writer (objects, arrays, strings, numbers, null), enough for the
// --json results file. Commas and nesting are tracked; output is compact, one record a line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace perf {

class JsonWriter {
 public:
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();
  void key(std::string_view k);  // inside an object, before each value
  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }
  void value(double d);  // non-finite numbers are written as null
  void value(int64_t i);
  void value(uint64_t i);
  void value(int i) { value(static_cast<int64_t>(i)); }
  void value(bool b);
  void null();
  void newline();  // cosmetic line break between records

  const std::string& str() const { return out_; }

 private:
  void before_value();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

std::string json_escape(std::string_view s);  // with the quotes

}  // namespace perf
