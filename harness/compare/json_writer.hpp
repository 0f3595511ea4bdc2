// A tiny streaming JSON writer for reports: objects, arrays, strings, numbers
// and bools, pretty-printed with two-space indentation. JSON has no NaN or
// infinity, so non-finite numbers are written as the strings "NaN",
// "Infinity" and "-Infinity" (what Python's json module and JavaScript's
// Number() read back). Misuse (a value where a key is due, unbalanced
// end_*) throws InternalError: it is a bug in the caller, never user input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qsa {

// `s` as a quoted JSON string: quotes, backslashes and control characters
// escaped; other bytes (UTF-8) pass through.
std::string json_quote(std::string_view s);

// A finite double in the shortest form that reads back exactly; non-finite
// ones as the quoted strings above.
std::string json_number(double v);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);

  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(double v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(bool v);
  JsonWriter& null();

  // key(k).value(v) in one call.
  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k);
    return value(v);
  }

  // The document; InternalError while an object or array is still open.
  std::string str() const;

 private:
  enum class Scope { kObject, kArray };
  struct Frame {
    Scope scope;
    bool empty = true;
  };
  void before_value();
  void raw(std::string_view text);
  void newline_indent();

  std::string out_;
  std::vector<Frame> stack_;
  bool key_pending_ = false;
  bool done_ = false;
};

}  // namespace qsa
