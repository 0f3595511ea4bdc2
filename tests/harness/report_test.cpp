// Replay reports and the JSON writer: the text table's verdicts, repro lines
// and summary (with and without colour), JSON that parses and escapes, and
// an HTML page that escapes what it shows.
#include <gtest/gtest.h>

#include <cctype>
#include <limits>

#include "harness/compare/json_writer.hpp"
#include "harness/compare/report.hpp"
#include "reference/core/rng.hpp"
#include "tests/tolerances.hpp"
#include "tests/test_support.hpp"

namespace qsa {
namespace {

constexpr uint64_t kSeed = 0x4e9047ULL;

// A strict JSON syntax check (RFC 8259 grammar, no extensions): enough to
// prove the writer's output is a valid document.
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
  bool value() {
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') return container('}', true);
    if (c == '[') return container(']', false);
    if (c == '"') return string();
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return number();
    return literal("true") || literal("false") || literal("null");
  }
  bool container(char close, bool object) {
    ++i_;
    ws();
    if (peek(close)) return ++i_, true;
    for (;;) {
      if (object) {
        if (!string()) return false;
        ws();
        if (!peek(':')) return false;
        ++i_;
        ws();
      }
      if (!value()) return false;
      ws();
      if (peek(close)) return ++i_, true;
      if (!peek(',')) return false;
      ++i_;
      ws();
    }
  }
  bool string() {
    if (!peek('"')) return false;
    for (++i_; i_ < s_.size(); ++i_) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') return ++i_, true;
      if (c < 0x20) return false;
      if (c == '\\') {
        if (++i_ >= s_.size()) return false;
        const char e = s_[i_];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (++i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_]))) return false;
          }
        } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
          return false;
        }
      }
    }
    return false;
  }
  bool number() {
    if (peek('-')) ++i_;
    if (peek('0')) {
      ++i_;
    } else if (!digits()) {
      return false;
    }
    if (peek('.') && (++i_, !digits())) return false;
    if (peek('e') || peek('E')) {
      ++i_;
      if (peek('+') || peek('-')) ++i_;
      if (!digits()) return false;
    }
    return true;
  }
  bool digits() {
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ > start;
  }
  bool literal(const char* word) {
    const std::string w(word);
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  void ws() {
    while (i_ < s_.size() && std::string(" \t\n\r").find(s_[i_]) != std::string::npos) ++i_;
  }
  const std::string& s_;
  size_t i_ = 0;
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TensorD random_tensor(const Shape& shape, const char* name) { return test::random_normal(shape, kSeed, name); }

// One passing and one failing tensor stage (the failing one with a NaN mask
// disagreement), a passing tie-flipped selection, a failing selection and a
// passing token index, from real comparisons.
ReplayReport sample_report(const std::string& failing_stage) {
  ReplayReport r;
  r.trace_path = "x.h5";
  r.backend = "reference";
  r.mode = "isolated";
  r.seed = kSeed;
  r.repro_base = "qsa replay x.h5 --mode isolated";
  Tolerance tol;
  tol.abs = tol::kCompareTestAbs;
  tol.rel = tol::kCompareTestRel;
  tol.rel_l2 = -1.0;
  tol.why = "unit test";
  const TensorD e = random_tensor({3, 2, 4}, "report");
  TensorD a = e;
  r.tensors.push_back(compare_tensors("k", e, a, tol, {"row", "head", "dim"}));
  r.tensors.back().step = 0;
  a.at(1, 0, 3) = std::numeric_limits<double>::quiet_NaN();
  r.tensors.push_back(compare_tensors(failing_stage, e, a, tol, {"row", "head", "dim"}));
  r.tensors.back().step = 3;

  SelectionDiff tie;
  tie.step = 3;
  tie.rows = 4;
  tie.tie_flips = 2;
  tie.tie_tol = tol::kCompareTestTieTol;
  r.selections.push_back(tie);
  SelectionDiff bad = tie;
  bad.step = 4;
  bad.real_mismatches = 1;
  bad.pass = false;
  bad.worst_row = 2;
  r.selections.push_back(bad);
  TokenIndexDiff tokens;
  tokens.step = 3;
  tokens.rows = 4;
  r.token_indices.push_back(tokens);
  r.notes.push_back("recorded by \"hf\"\nsecond line");
  return r;
}

TEST(ReportText, VerdictsReproLinesAndSummaryWithoutColour) {
  SCOPED_TRACE(testing::Message() << "seed " << kSeed);
  const ReplayReport r = sample_report("q");
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.compared(), 5);
  EXPECT_EQ(r.failed(), 2);
  const std::string text = format_text(r, false);
  EXPECT_TRUE(contains(text, "PASS")) << text;
  EXPECT_TRUE(contains(text, "FAIL")) << text;
  EXPECT_TRUE(contains(text, "TIE")) << text;
  EXPECT_TRUE(contains(text, "repro: qsa replay x.h5 --mode isolated --step 3 --stage q\n")) << text;
  EXPECT_TRUE(contains(text, "repro: qsa replay x.h5 --mode isolated --step 4 --stage block_ids\n")) << text;
  EXPECT_FALSE(contains(text, "--stage k\n")) << text;  // passing stages get no repro
  EXPECT_TRUE(contains(text, "[row=1, head=0, dim=3]")) << text;
  EXPECT_TRUE(contains(text, "5 stages compared, 2 failed")) << text;
  EXPECT_FALSE(contains(text, "\x1b")) << text;
}

TEST(ReportText, ColourOnlyWhenAsked) {
  const std::string text = format_text(sample_report("q"), true);
  EXPECT_TRUE(contains(text, "\x1b[32mPASS\x1b[0m")) << text;
  EXPECT_TRUE(contains(text, "\x1b[31mFAIL\x1b[0m")) << text;
  EXPECT_TRUE(contains(text, "\x1b[33mTIE\x1b[0m")) << text;
}

TEST(ReportText, ReproQuotesStagesAndBuildsTheBaseWhenMissing) {
  ReplayReport r;
  r.trace_path = "my trace.h5";
  r.mode = "chained";
  EXPECT_EQ(repro_command(r, 2, "q"), "qsa replay 'my trace.h5' --mode chained --step 2 --stage q");
  EXPECT_EQ(repro_command(r, -1, "it's"), "qsa replay 'my trace.h5' --mode chained --stage 'it'\\''s'");
  EXPECT_TRUE(contains(format_text(r, false), "0 stages compared, 0 failed"));
}

TEST(ReportJson, ValidStructureEscapingAndNonFiniteNumbers) {
  const std::string json = to_json(sample_report("q"));
  EXPECT_TRUE(JsonChecker(json).valid()) << json;
  EXPECT_TRUE(contains(json, "\"tensors\": [")) << json;
  EXPECT_TRUE(contains(json, "\"selections\": [")) << json;
  EXPECT_TRUE(contains(json, "\"token_indices\": [")) << json;
  EXPECT_TRUE(contains(json, "\"stage\": \"q\"")) << json;
  EXPECT_TRUE(contains(json, "\"verdict\": \"TIE\"")) << json;
  EXPECT_TRUE(contains(json, "\"pass\": false")) << json;
  EXPECT_TRUE(contains(json, "\"actual\": \"NaN\"")) << json;
  EXPECT_TRUE(contains(json, "\"abs_err\": \"Infinity\"")) << json;
  EXPECT_TRUE(contains(json, "\"coords\": [\n")) << json;
  EXPECT_TRUE(contains(json, "\"repro\": \"qsa replay x.h5 --mode isolated --step 3 --stage q\"")) << json;
  EXPECT_TRUE(contains(json, "recorded by \\\"hf\\\"\\nsecond line")) << json;
  EXPECT_TRUE(contains(json, "\"seed\": " + std::to_string(kSeed))) << json;
}

TEST(JsonWriter, NumbersStringsAndMisuse) {
  EXPECT_EQ(json_number(0.1), "0.1");
  EXPECT_EQ(json_number(-3.0), "-3");
  EXPECT_EQ(json_number(std::numeric_limits<double>::infinity()), "\"Infinity\"");
  EXPECT_EQ(json_number(-std::numeric_limits<double>::infinity()), "\"-Infinity\"");
  EXPECT_EQ(json_number(std::numeric_limits<double>::quiet_NaN()), "\"NaN\"");
  EXPECT_EQ(json_quote("a\"b\\c\n\t\x01"), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  EXPECT_EQ(json_quote("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // UTF-8 passes through

  JsonWriter w;
  w.begin_object().field("a", 1).key("empty").begin_array().end_array().key("o").begin_object().end_object();
  w.field("big", std::numeric_limits<int64_t>::max()).field("u", std::numeric_limits<uint64_t>::max());
  w.end_object();
  const std::string doc = w.str();
  EXPECT_TRUE(JsonChecker(doc).valid()) << doc;
  EXPECT_TRUE(contains(doc, "\"empty\": []")) << doc;
  EXPECT_TRUE(contains(doc, "\"o\": {}")) << doc;
  EXPECT_TRUE(contains(doc, "18446744073709551615")) << doc;

  JsonWriter bad;
  bad.begin_object();
  EXPECT_THROW(bad.value(1), InternalError);  // a value without a key
  EXPECT_THROW(bad.end_array(), InternalError);
  EXPECT_THROW(bad.str(), InternalError);     // still open
}

TEST(ReportHtml, SelfContainedTablesWithEscapedText) {
  const std::string html = to_html(sample_report("q<bad>&"));
  EXPECT_TRUE(contains(html, "<!DOCTYPE html>")) << html;
  EXPECT_TRUE(contains(html, "<table>")) << html;
  EXPECT_TRUE(contains(html, "q&lt;bad&gt;&amp;")) << html;
  EXPECT_FALSE(contains(html, "q<bad>")) << html;
  EXPECT_TRUE(contains(html, "class=\"fail\"")) << html;
  EXPECT_TRUE(contains(html, "class=\"tie\"")) << html;
  EXPECT_TRUE(contains(html, "class=\"pass\"")) << html;
  EXPECT_TRUE(contains(html, "recorded by &quot;hf&quot;")) << html;
  EXPECT_FALSE(contains(html, "<script")) << html;
  EXPECT_FALSE(contains(html, "http")) << html;  // nothing fetched from the network
}

}  // namespace
}  // namespace qsa
