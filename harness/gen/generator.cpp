#include "harness/gen/generator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "harness/gen/planted.hpp"
#include "harness/step_builder.hpp"
#include "reference/core/float_formats.hpp"
#include "reference/core/rng.hpp"
#include "reference/step_driver.hpp"

namespace qsa {

namespace {

struct RequestPlan {
  int64_t prompt = 0;
  int64_t total = 0;  // prompt + generated tokens
  TensorD hidden;     // [total, hidden]: every token this request will ever feed
  TensorI64 rope;     // [3, total]
};

// Background AR(1) plus the planted directions of planted.hpp.
RequestPlan plan_request(const QsaConfig& c, const GenOptions& o, int req, int64_t prompt, int64_t total) {
  RequestPlan plan;
  plan.prompt = prompt;
  plan.total = total;
  const int hid = c.hidden_size;
  plan.hidden = TensorD({total, hid});
  const CounterRng noise(o.seed, fmt::format("gen.hidden.req{}", req));
  const double rho = std::clamp(o.locality, 0.0, 0.999);
  const double fresh = std::sqrt(1 - rho * rho);
  const auto u_query = gen::unit_vector(o.seed, gen::kQuery, hid);
  const auto u_sink = gen::unit_vector(o.seed, gen::kSink, hid);
  const auto u_ask = gen::unit_vector(o.seed, gen::kAsk, hid);
  const auto u_needle = gen::unit_vector(o.seed, gen::kNeedle, hid);
  std::vector<int64_t> needles;
  for (double f : o.needle_fractions) needles.push_back(static_cast<int64_t>(f * static_cast<double>(prompt)));
  const int64_t ask_from = prompt - std::max<int64_t>(1, prompt / 10);
  std::vector<double> background(static_cast<size_t>(hid), 0.0);
  for (int64_t p = 0; p < total; ++p) {
    for (int j = 0; j < hid; ++j) {
      const double n = noise.normal(static_cast<uint64_t>(p * hid + j));
      background[static_cast<size_t>(j)] = p == 0 ? n : rho * background[static_cast<size_t>(j)] + fresh * n;
    }
    const bool sink = p < o.sinks;
    const bool needle = std::find(needles.begin(), needles.end(), p) != needles.end();
    const bool ask = p >= ask_from;
    for (int j = 0; j < hid; ++j) {
      // Planted amplitudes are in units of |h| ~ sqrt(hidden).
      const double amp = std::sqrt(static_cast<double>(hid));
      double x = background[static_cast<size_t>(j)] + amp * u_query[static_cast<size_t>(j)];
      if (sink) x += amp * o.sink_strength * u_sink[static_cast<size_t>(j)];
      if (needle) x += amp * o.needle_strength * u_needle[static_cast<size_t>(j)];
      if (ask) x += amp * u_ask[static_cast<size_t>(j)];
      plan.hidden.at(p, j) = round_bf16(x);
    }
  }
  // Positions: equal rows, except an image-like 4x4 span under --mrope
  // whose h and w rows walk a grid from the span's first position.
  plan.rope = TensorI64({3, total});
  const int64_t span0 = prompt / 4;
  for (int64_t p = 0; p < total; ++p) {
    int64_t t = p, h = p, w = p;
    if (o.mrope && p >= span0 && p < span0 + 16 && span0 + 16 <= prompt) {
      const int64_t i = p - span0;
      t = span0;
      h = span0 + i / 4;
      w = span0 + i % 4;
    }
    plan.rope.at(0, p) = t;
    plan.rope.at(1, p) = h;
    plan.rope.at(2, p) = w;
  }
  return plan;
}

std::vector<int64_t> default_prompts(const QsaConfig& c) {
  if (c.hidden_size <= 256) return {61, 37, 94};
  return {3000, 1200};
}

// Appends one step: the chunks' hidden rows and positions, plus padding.
TraceStep make_step(const QsaConfig& c, StepBuilder& b, const std::vector<RequestPlan>& plans,
                    const std::vector<StepBuilder::Chunk>& chunks, int64_t padding, bool reuse, std::string name,
                    bool mrope) {
  std::vector<int64_t> starts;
  for (const auto& ch : chunks) starts.push_back(b.cached(ch.req));
  TraceStep s;
  s.name = std::move(name);
  s.meta = b.next(chunks, padding, reuse);
  const int64_t T = s.meta.positions.numel();
  s.hidden = TensorD({T, c.hidden_size});
  TensorI64 rope({3, T}, -1);
  int64_t row = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const RequestPlan& plan = plans[static_cast<size_t>(chunks[i].req)];
    for (int32_t o = 0; o < chunks[i].tokens; ++o, ++row) {
      const int64_t p = starts[i] + o;
      std::copy_n(plan.hidden.row(p), c.hidden_size, s.hidden.row(row));
      for (int a = 0; a < 3; ++a) rope.at(a, row) = plan.rope.at(a, p);
    }
  }
  if (mrope) s.meta.positions = rope;
  return s;
}

}  // namespace

Trace generate_trace(const QsaConfig& c, const GenOptions& o) {
  validate_config(c);
  const std::vector<int64_t> prompts = o.prompt_lens.empty() ? default_prompts(c) : o.prompt_lens;
  const int R = static_cast<int>(prompts.size());
  if (R == 0) throw ConfigError("qsa gen needs at least one request");
  for (int64_t p : prompts)
    if (p < 1) throw ConfigError(fmt::format("prompt length {} must be at least 1", p));
  if (o.decode_steps < 0 || o.mtp_drafts < 0 || o.chunk < 0 || o.padding < 0 || o.sinks < 0)
    throw ConfigError("decode steps, MTP drafts, chunk, padding and sinks must be >= 0");
  const int64_t generated = o.decode_steps + o.mtp_drafts;
  std::vector<int64_t> max_lens;
  std::vector<RequestPlan> plans;
  for (int i = 0; i < R; ++i) {
    max_lens.push_back(prompts[static_cast<size_t>(i)] + generated);
    plans.push_back(plan_request(c, o, i, prompts[static_cast<size_t>(i)], max_lens.back()));
  }
  StepBuilder b(c, max_lens);

  Trace t;
  t.producer = "qsa gen";
  t.producer_version = "qsa 0.1.0";
  t.seed = o.seed;
  t.description = describe_gen_options(o);
  t.config = c;
  t.geometry = b.geometry();
  t.weights = structured_weights(c, o);

  // Chunked prefill; requests that finished their prompt decode one token
  // per step meanwhile (mixed batches, decodes first as vLLM orders them).
  std::vector<int64_t> done(static_cast<size_t>(R), 0);
  std::vector<int64_t> decoded(static_cast<size_t>(R), 0);
  auto prefilling = [&] {
    for (int i = 0; i < R; ++i)
      if (done[static_cast<size_t>(i)] < prompts[static_cast<size_t>(i)]) return true;
    return false;
  };
  while (prefilling()) {
    std::vector<StepBuilder::Chunk> decodes, prefills;
    for (int i = 0; i < R; ++i) {
      const auto u = static_cast<size_t>(i);
      const int64_t left = prompts[u] - done[u];
      if (left > 0) {
        const int64_t n = o.chunk > 0 ? std::min(o.chunk, left) : left;
        prefills.push_back({i, static_cast<int32_t>(n)});
        done[u] += n;
      } else if (decoded[u] < o.decode_steps) {
        decodes.push_back({i, 1});
        ++decoded[u];
      }
    }
    decodes.insert(decodes.end(), prefills.begin(), prefills.end());
    t.steps.push_back(make_step(c, b, plans, decodes, 0, false,
                                fmt::format("prefill step {} ({} chunks)", t.steps.size(), prefills.size()), o.mrope));
  }
  for (int s = 0;; ++s) {
    std::vector<StepBuilder::Chunk> decodes;
    for (int i = 0; i < R; ++i)
      if (decoded[static_cast<size_t>(i)] < o.decode_steps) {
        decodes.push_back({i, 1});
        ++decoded[static_cast<size_t>(i)];
      }
    if (decodes.empty()) break;
    t.steps.push_back(make_step(c, b, plans, decodes, o.padding, false, fmt::format("decode {}", s), o.mrope));
  }
  for (int d = 0; d < o.mtp_drafts; ++d) {
    std::vector<StepBuilder::Chunk> drafts;
    for (int i = 0; i < R; ++i) drafts.push_back({i, 1});
    t.steps.push_back(make_step(c, b, plans, drafts, 0, d > 0,
                                d == 0 ? std::string("MTP draft 0 (selects)") : fmt::format("MTP draft {} (reuses)", d),
                                o.mrope));
  }

  if (!o.inputs_only) {
    StepDriver driver(c, t.weights, t.geometry);
    for (TraceStep& s : t.steps) {
      StepOutputs out = driver.run(s.meta, s.hidden);
      StageRecord& r = s.recorded;
      r.index_q = std::move(out.index_q);
      r.raw_keys = std::move(out.raw_keys);
      r.comp_tokens = TensorI32({static_cast<int64_t>(out.compressed.token.size())});
      r.comp_tokens.data = out.compressed.token;
      r.comp_blocks = TensorI64({static_cast<int64_t>(out.compressed.block.size())});
      r.comp_blocks.data = out.compressed.block;
      r.comp_slots = TensorI64({static_cast<int64_t>(out.compressed.slot.size())});
      r.comp_slots.data = out.compressed.slot;
      r.comp_keys = std::move(out.compressed.keys);
      r.block_ids = std::move(out.block_ids);
      r.block_scores = std::move(out.block_scores);
      r.token_idx = std::move(out.token_idx);
      r.q = std::move(out.q);
      r.k = std::move(out.k);
      r.v = std::move(out.v);
      r.gate = std::move(out.gate);
      r.attn = std::move(out.attn);
      r.gated = std::move(out.gated);
      r.out = std::move(out.out);
    }
  }
  return t;
}

std::string describe_gen_options(const GenOptions& o) {
  std::string prompts;
  for (int64_t p : o.prompt_lens) prompts += (prompts.empty() ? "" : ",") + std::to_string(p);
  std::string needles;
  for (double f : o.needle_fractions) needles += (needles.empty() ? "" : ",") + fmt::format("{}", f);
  return fmt::format(
      "qsa gen: seed {}, prompts [{}], chunk {}, decode {}, mtp drafts {}, sinks {}, needles at [{}], "
      "sink strength {}, needle strength {}, locality {}, qk tie {}, indexer alignment {}, mrope {}",
      o.seed, prompts.empty() ? "default" : prompts, o.chunk, o.decode_steps, o.mtp_drafts, o.sinks, needles,
      o.sink_strength, o.needle_strength, o.locality, o.qk_tie, o.indexer_alignment, o.mrope);
}

}  // namespace qsa
