#include "json_writer.hpp"

#include <cmath>
#include <cstdio>

namespace perf {

std::string json_escape(std::string_view s) {
  std::string o = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += ch;
        }
    }
  }
  return o + "\"";
}

void JsonWriter::before_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  first_.push_back(true);
}

void JsonWriter::end_object() {
  first_.pop_back();
  out_ += '}';
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  first_.push_back(true);
}

void JsonWriter::end_array() {
  first_.pop_back();
  out_ += ']';
}

void JsonWriter::key(std::string_view k) {
  before_value();
  out_ += json_escape(k);
  out_ += ':';
  after_key_ = true;
}

void JsonWriter::value(std::string_view s) {
  before_value();
  out_ += json_escape(s);
}

void JsonWriter::value(double d) {
  if (!std::isfinite(d)) {
    null();
    return;
  }
  before_value();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", d);
  out_ += buf;
}

void JsonWriter::value(int64_t i) {
  before_value();
  out_ += std::to_string(i);
}

void JsonWriter::value(uint64_t i) {
  before_value();
  out_ += std::to_string(i);
}

void JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
}

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

void JsonWriter::newline() { out_ += '\n'; }

}  // namespace perf
