#include "model/translate.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace normlab::model {

namespace {
// The most likely token of one row of logits (fp32 or fp64 graph).
int32_t argmax_row(const Model& m, int64_t row) {
  const int64_t vocab = m.config.vocab_size;
  int32_t best = 0;
  engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const T* z = m.graph.data<T>(m.logits) + row * vocab;
    best = static_cast<int32_t>(std::max_element(z, z + vocab) - z);
  });
  return best;
}

struct Hypothesis {
  std::vector<int32_t> tokens;  // without the leading EOS
  double score = 0;             // Σ log p
};
// log softmax(z)[v] for one row of logits, into out.
void log_softmax_row(const Model& m, int64_t row, std::vector<double>& out) {
  const int64_t vocab = m.config.vocab_size;
  out.resize(static_cast<size_t>(vocab));
  engine::dispatch_float(m.graph.float_type(), [&]<typename T>() {
    const T* z = m.graph.data<T>(m.logits) + row * vocab;
    const double max = *std::max_element(z, z + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(z[v]) - max);
    const double lse = max + std::log(sum);
    for (int64_t v = 0; v < vocab; ++v) out[static_cast<size_t>(v)] = double(z[v]) - lse;
  });
}
// Feeds sources[first ..] to the encoder and runs it, `per_source` rows each (a beam's rows share their source),
// `count` sources; spare rows repeat the last one so that every row has a valid length. A source longer than T − 1 is
// an error.
void set_sources(Model& m, const std::vector<std::vector<int32_t>>& sources, int64_t first, int count, int per_source,
                 int32_t eos, std::vector<int32_t>& source, std::vector<int32_t>& lengths) {
  const int T = m.source_seq;
  std::fill(source.begin(), source.end(), eos);
  for (int b = 0; b < m.batch; ++b) {
    const int64_t i = first + std::min(b / per_source, count - 1);
    const auto& s = sources[static_cast<size_t>(i)];
    if (static_cast<int>(s.size()) + 1 > T)
      fail("source {} has {} tokens; this model reads at most {} (train.seq_len − 1): shorten it", i, s.size(), T - 1);
    std::copy(s.begin(), s.end(), source.begin() + static_cast<std::ptrdiff_t>(b) * T);
    lengths[static_cast<size_t>(b)] = static_cast<int32_t>(s.size() + 1);
  }
  m.set_source(source.data(), lengths.data());
  m.encode();
}

// The decoding copy of a trained encoder-decoder: its batch, a key-value cache of its whole window (the source is
// as long), one target position a pass.
std::unique_ptr<Model> decoding_copy(const Model& m) {
  if (!m.config.encoder_decoder()) fail("translation needs an encoder-decoder (model.shape = encoder_decoder)");
  return build_decoding_model(m.config, m.batch, m.seq, 1, m.graph.float_type(), &m);
}

// One decoder pass at target position t: row b reads tokens[b]; its next-token logits are then row b of m.logits.
void step(Model& m, int t, const std::vector<int32_t>& tokens, const std::vector<int32_t>& no_targets) {
  m.set_position(t);
  m.set_batch(tokens.data(), no_targets.data());
  m.step();
}
}  // namespace

std::vector<std::vector<int32_t>> translate(Model& m, const std::vector<std::vector<int32_t>>& sources, int32_t eos,
                                            int beam, double length_penalty) {
  return beam == 1 ? translate_greedy(m, sources, eos) : translate_beam(m, sources, eos, beam, length_penalty);
}

std::vector<std::vector<int32_t>> translate_greedy(Model& trained, const std::vector<std::vector<int32_t>>& sources,
                                                   int32_t eos) {
  const auto decoder = decoding_copy(trained);
  Model& m = *decoder;
  const int B = m.batch, T = m.source_seq;
  const auto n = static_cast<int64_t>(sources.size());
  std::vector<std::vector<int32_t>> out(sources.size());
  std::vector<int32_t> source(static_cast<size_t>(B * T)), lengths(static_cast<size_t>(B));
  std::vector<int32_t> tokens(static_cast<size_t>(B), eos), no_targets(static_cast<size_t>(B), -1);
  for (int64_t first = 0; first < n; first += B) {
    const int rows = static_cast<int>(std::min<int64_t>(B, n - first));
    set_sources(m, sources, first, rows, 1, eos, source, lengths);
    std::fill(tokens.begin(), tokens.end(), eos);
    std::vector<bool> done(static_cast<size_t>(B), false);
    std::fill(done.begin() + rows, done.end(), true);  // spare rows
    for (int t = 0; t < T && !std::all_of(done.begin(), done.end(), [](bool d) { return d; }); ++t) {
      step(m, t, tokens, no_targets);
      for (int b = 0; b < rows; ++b) {
        if (done[static_cast<size_t>(b)]) continue;
        const int32_t next = argmax_row(m, b);
        if (next == eos) {
          done[static_cast<size_t>(b)] = true;
          continue;
        }
        out[static_cast<size_t>(first + b)].push_back(next);
        tokens[static_cast<size_t>(b)] = next;
      }
    }
  }
  return out;
}

namespace {

// One source's candidates at one step, kept between steps so that the search allocates once.
struct BeamScratch {
  struct Candidate {
    double score;
    int from;
    int32_t token;
  };
  std::vector<Candidate> candidates;
  std::vector<double> logp;
};

// One step of source g's beam (rows g·beam ...): every live hypothesis extended by every token, the best 2·beam
// extensions kept in order until `beam` continue; those ending in eos join `done`. A continuing hypothesis takes the
// next row of its source, and parent_row says whose caches that row inherits. The source is finished once `beam`
// hypotheses ended (fairseq's rule) or the target is full (`last` step: the live ones end too).
void extend_beam(const Model& m, int g, int beam, bool last, int32_t eos, std::vector<Hypothesis>& alive,
                 std::vector<Hypothesis>& done, std::vector<int>& parent_row, BeamScratch& scratch) {
  if (alive.empty()) return;
  auto& candidates = scratch.candidates;
  candidates.clear();
  for (size_t j = 0; j < alive.size(); ++j) {
    log_softmax_row(m, g * beam + static_cast<int>(j), scratch.logp);
    for (size_t v = 0; v < scratch.logp.size(); ++v)
      candidates.push_back({alive[j].score + scratch.logp[v], static_cast<int>(j), static_cast<int32_t>(v)});
  }
  // The 2·beam best extensions: enough that `beam` of them continue even if up to `beam` end here.
  const size_t keep = std::min(candidates.size(), static_cast<size_t>(2 * beam));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep), candidates.end(),
                    [](const auto& a, const auto& b) { return a.score > b.score; });
  std::vector<Hypothesis> next;
  for (size_t c = 0; c < keep && static_cast<int>(next.size()) < beam; ++c) {
    Hypothesis h{alive[static_cast<size_t>(candidates[c].from)].tokens, candidates[c].score};
    if (candidates[c].token == eos) {
      done.push_back(std::move(h));
    } else {
      parent_row[static_cast<size_t>(g * beam) + next.size()] = g * beam + candidates[c].from;
      h.tokens.push_back(candidates[c].token), next.push_back(std::move(h));
    }
  }
  if (static_cast<int>(done.size()) >= beam || last) {
    if (last) done.insert(done.end(), next.begin(), next.end());
    next.clear();
  }
  alive = std::move(next);
}

}  // namespace

std::vector<std::vector<int32_t>> translate_beam(Model& trained, const std::vector<std::vector<int32_t>>& sources,
                                                 int32_t eos, int beam, double length_penalty) {
  if (beam < 1 || beam > trained.batch)
    fail("beam size {} must be between 1 and the model's batch of {} rows", beam, trained.batch);
  const auto decoder = decoding_copy(trained);
  Model& m = *decoder;
  const int B = m.batch, T = m.source_seq, per_pass = B / beam;  // sources decoded at once, `beam` rows each
  const auto n = static_cast<int64_t>(sources.size());
  const auto normalized = [&](const Hypothesis& h) {
    return h.score / std::pow(static_cast<double>(h.tokens.size() + 1), length_penalty);
  };
  std::vector<std::vector<int32_t>> out(sources.size());
  std::vector<int32_t> source(static_cast<size_t>(B * T)), lengths(static_cast<size_t>(B));
  std::vector<int32_t> tokens(static_cast<size_t>(B), eos), no_targets(static_cast<size_t>(B), -1);
  std::vector<int> parent_row(static_cast<size_t>(B));
  BeamScratch scratch;
  for (int64_t first = 0; first < n; first += per_pass) {
    const int count = static_cast<int>(std::min<int64_t>(per_pass, n - first));
    set_sources(m, sources, first, count, beam, eos, source, lengths);
    // Per source: its live hypotheses (at most `beam`, all of length t; hypothesis j on row g·beam + j, whose caches
    // hold its tokens) and the finished ones.
    std::vector<std::vector<Hypothesis>> live(static_cast<size_t>(count), std::vector<Hypothesis>(1));
    std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(count));
    for (int t = 0; t < T; ++t) {
      bool any = false;
      std::fill(tokens.begin(), tokens.end(), eos);
      for (int g = 0; g < count; ++g)
        for (size_t j = 0; j < live[static_cast<size_t>(g)].size(); ++j) {
          const auto& h = live[static_cast<size_t>(g)][j].tokens;
          if (!h.empty()) tokens[static_cast<size_t>(g * beam) + j] = h.back();
          any = true;
        }
      if (!any) break;
      step(m, t, tokens, no_targets);
      for (int b = 0; b < B; ++b) parent_row[static_cast<size_t>(b)] = b;
      for (int g = 0; g < count; ++g) {
        extend_beam(m, g, beam, t + 1 == T, eos, live[static_cast<size_t>(g)], finished[static_cast<size_t>(g)],
                    parent_row, scratch);
      }
      m.reorder_cache(parent_row);
    }
    for (int g = 0; g < count; ++g) {
      const auto& done = finished[static_cast<size_t>(g)];
      const auto best = std::max_element(done.begin(), done.end(), [&](const Hypothesis& a, const Hypothesis& b) {
        return normalized(a) < normalized(b);
      });
      if (best != done.end()) out[static_cast<size_t>(first + g)] = best->tokens;
    }
  }
  return out;
}

}  // namespace normlab::model
