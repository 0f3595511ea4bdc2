#include "harness/sweep/sweep_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "reference/core/errors.hpp"

namespace qsa {

namespace {

struct PolicyName {
  SweepPolicy policy;
  const char* name;
};
constexpr PolicyName kPolicyNames[] = {{SweepPolicy::kIndexer, "indexer"},
                                       {SweepPolicy::kOracleMax, "oracle_max"},
                                       {SweepPolicy::kOracleSum, "oracle_sum"},
                                       {SweepPolicy::kWindow, "window"},
                                       {SweepPolicy::kRandom, "random"}};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

// The whole string must be the number: "0.5x" or "" are errors, not 0.5 or 0.
double parse_fraction(const std::string& text, std::string_view spec) {
  char* end = nullptr;
  errno = 0;
  const double f = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !(f >= 0.0 && f <= 1.0))
    throw ConfigError(fmt::format("--rows '{}': '{}' is not a fraction in [0, 1]", spec, text));
  return f;
}

int64_t parse_every(const std::string& text, std::string_view spec) {
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || n < 1)
    throw ConfigError(fmt::format("--rows '{}': every:N needs a whole number N >= 1, got '{}'", spec, text));
  return n;
}

template <class T, class Name>
void reject_duplicates(const std::vector<T>& v, const char* what, Name name) {
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (v[i] == v[j]) throw ConfigError(fmt::format("{} lists '{}' twice", what, name(v[i])));
}

template <class T, class Name>
std::string join(const std::vector<T>& v, Name name) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + name(v[i]);
  return out;
}

}  // namespace

std::string to_string(SweepPolicy p) {
  for (const auto& n : kPolicyNames)
    if (n.policy == p) return n.name;
  throw InternalError("unnamed sweep policy");
}

SweepPolicy parse_sweep_policy(std::string_view s) {
  for (const auto& n : kPolicyNames)
    if (s == n.name) return n.policy;
  throw ConfigError(fmt::format("unknown policy '{}' (accepted: indexer, oracle_max, oracle_sum, window, random)", s));
}

std::vector<SweepPolicy> all_sweep_policies() {
  std::vector<SweepPolicy> out;
  for (const auto& n : kPolicyNames) out.push_back(n.policy);
  return out;
}

RowSpec parse_row_spec(std::string_view s) {
  RowSpec r;
  if (s == "all") return r;
  const size_t colon = s.find(':');
  const std::string_view kind = s.substr(0, colon);
  const std::string arg = colon == std::string_view::npos ? std::string() : std::string(s.substr(colon + 1));
  if (kind == "every" && colon != std::string_view::npos) {
    r.mode = RowMode::kEvery;
    r.every = parse_every(arg, s);
    return r;
  }
  if (kind == "fractions" && colon != std::string_view::npos) {
    r.mode = RowMode::kFractions;
    for (const std::string& f : split(arg, ',')) r.fractions.push_back(parse_fraction(f, s));
    std::sort(r.fractions.begin(), r.fractions.end());
    r.fractions.erase(std::unique(r.fractions.begin(), r.fractions.end()), r.fractions.end());
    return r;
  }
  throw ConfigError(
      fmt::format("--rows '{}' is not understood (accepted: all, every:N, fractions:F,F,... with F "
                  "in [0, 1], e.g. fractions:0.25,0.5,1)",
                  s));
}

std::string to_string(const RowSpec& r) {
  switch (r.mode) {
    case RowMode::kAll:
      return "all";
    case RowMode::kEvery:
      return fmt::format("every:{}", r.every);
    case RowMode::kFractions:
      return "fractions:" + join(r.fractions, [](double f) { return fmt::format("{}", f); });
  }
  return "all";
}

void canonicalize_sweep_settings(SweepSettings& s) {
  SweepAxes& a = s.axes;
  auto require = [](bool ok, const char* what) {
    if (!ok) throw ConfigError(fmt::format("{} is empty: give at least one value", what));
  };
  require(!a.budgets.empty(), "--budgets");
  require(!a.ratios.empty(), "--ratios");
  require(!a.kv_dtypes.empty(), "--kv-dtypes");
  require(!a.indexer_dtypes.empty(), "--indexer-dtypes");
  require(!a.policies.empty(), "--policies");
  for (int b : a.budgets)
    if (b < 1) throw ConfigError(fmt::format("--budgets: budget {} must be a positive number of tokens", b));
  for (int r : a.ratios)
    if (r < 1) throw ConfigError(fmt::format("--ratios: compress ratio {} must be >= 1", r));
  auto self = [](int v) { return std::to_string(v); };
  reject_duplicates(a.budgets, "--budgets", self);
  reject_duplicates(a.ratios, "--ratios", self);
  reject_duplicates(a.kv_dtypes, "--kv-dtypes", [](KvDtype d) { return to_string(d); });
  reject_duplicates(a.indexer_dtypes, "--indexer-dtypes", [](IndexerDtype d) { return to_string(d); });
  reject_duplicates(a.policies, "--policies", [](SweepPolicy p) { return to_string(p); });
  std::sort(a.budgets.begin(), a.budgets.end());
  std::sort(a.ratios.begin(), a.ratios.end());
  if (s.rows.mode == RowMode::kEvery && s.rows.every < 1)
    throw ConfigError(fmt::format("--rows every:{} needs N >= 1", s.rows.every));
  if (s.rows.mode == RowMode::kFractions && s.rows.fractions.empty())
    throw ConfigError("--rows fractions: needs at least one fraction");
  if (s.window_sinks < 0) throw ConfigError(fmt::format("--window-sinks {} must be >= 0", s.window_sinks));
  if (s.octave_window < -1 || s.octave_sinks < -1)
    throw ConfigError(
        fmt::format("--octave-window {} and --octave-sinks {} must be >= 0", s.octave_window, s.octave_sinks));
}

std::vector<std::pair<std::string, std::string>> describe_sweep_settings(const SweepSettings& s) {
  const SweepAxes& a = s.axes;
  auto self = [](int v) { return std::to_string(v); };
  auto or_trace = [](int v) { return v < 0 ? std::string("trace") : std::to_string(v); };
  return {
      {"budgets", join(a.budgets, self)},
      {"ratios", join(a.ratios, self)},
      {"kv_dtypes", join(a.kv_dtypes, [](KvDtype d) { return to_string(d); })},
      {"indexer_dtypes", join(a.indexer_dtypes, [](IndexerDtype d) { return to_string(d); })},
      {"policies", join(a.policies, [](SweepPolicy p) { return to_string(p); })},
      {"rows", to_string(s.rows)},
      {"seed", std::to_string(s.seed)},
      {"window_sinks", std::to_string(s.window_sinks)},
      {"octave_window", or_trace(s.octave_window)},
      {"octave_sinks", or_trace(s.octave_sinks)},
      {"per_row", s.per_row ? "yes" : "no"},
  };
}

}  // namespace qsa
