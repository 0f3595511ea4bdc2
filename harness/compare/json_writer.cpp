#include "harness/compare/json_writer.hpp"

#include <fmt/format.h>

#include <cmath>

#include "reference/core/errors.hpp"

namespace qsa {

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (std::isnan(v)) return "\"NaN\"";
  if (std::isinf(v)) return v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  return fmt::format("{}", v);  // shortest round-trip form ("0.1", "1e-20", "3")
}

void JsonWriter::newline_indent() {
  out_ += '\n';
  out_.append(2 * stack_.size(), ' ');
}

void JsonWriter::before_value() {
  if (done_) throw InternalError("JsonWriter: a second top-level value");
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.scope == Scope::kObject) {
    if (!key_pending_) throw InternalError("JsonWriter: a value inside an object needs a key first");
    key_pending_ = false;
    return;
  }
  if (!f.empty) out_ += ',';
  f.empty = false;
  newline_indent();
}

void JsonWriter::raw(std::string_view text) {
  before_value();
  out_ += text;
  if (stack_.empty()) done_ = true;
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (stack_.empty() || stack_.back().scope != Scope::kObject || key_pending_) {
    throw InternalError("JsonWriter: key '" + std::string(k) + "' outside an object or after another key");
  }
  Frame& f = stack_.back();
  if (!f.empty) out_ += ',';
  f.empty = false;
  newline_indent();
  out_ += json_quote(k) + ": ";
  key_pending_ = true;
  return *this;
}

JsonWriter& JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  stack_.push_back({Scope::kObject});
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  stack_.push_back({Scope::kArray});
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  if (stack_.empty() || stack_.back().scope != Scope::kObject || key_pending_) {
    throw InternalError("JsonWriter: end_object without a matching begin_object (or after a bare key)");
  }
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline_indent();
  out_ += '}';
  if (stack_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  if (stack_.empty() || stack_.back().scope != Scope::kArray) {
    throw InternalError("JsonWriter: end_array without a matching begin_array");
  }
  const bool empty = stack_.back().empty;
  stack_.pop_back();
  if (!empty) newline_indent();
  out_ += ']';
  if (stack_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
  raw(json_quote(s));
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  raw(json_number(v));
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  raw(std::to_string(v));
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t v) {
  raw(std::to_string(v));
  return *this;
}
JsonWriter& JsonWriter::value(bool v) {
  raw(v ? "true" : "false");
  return *this;
}
JsonWriter& JsonWriter::null() {
  raw("null");
  return *this;
}

std::string JsonWriter::str() const {
  if (!stack_.empty()) throw InternalError("JsonWriter: document still has an open object or array");
  return out_ + "\n";
}

}  // namespace qsa
