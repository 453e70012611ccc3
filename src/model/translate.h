#pragma once
// Decoding an encoder-decoder: greedy and beam search, kept beside the model as generate() is.
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace normlab::model {

// The greedy translation of each source (token ids without EOS; EOS is appended here): the decoder starts from
// EOS and appends its most likely token until it predicts EOS or fills m.seq positions. Sources are decoded
// m.batch at a time by a decoding copy of m (build_decoding_model): the encoder runs once per batch of sources and
// the decoder one position per token, its self-attention's keys and values kept in a cache. A source longer than
// m.seq − 1 tokens is an error naming it. Returns the targets without EOS.
std::vector<std::vector<int32_t>> translate_greedy(Model& m, const std::vector<std::vector<int32_t>>& sources,
                                                   int32_t eos);

// Beam search (as fairseq's): each source keeps the `beam` best prefixes by Σ log p; every step extends each by every
// token and keeps the best `beam` that do not end, setting aside those that end in EOS; a source is done once `beam`
// hypotheses ended (or the target is full: then the live ones count too), and the answer is the ended hypothesis
// with the best Σ log p / (length + 1)^length_penalty (length without EOS). Each source takes `beam` rows of the
// model's batch (beam ≤ m.batch), and a hypothesis that continues moves its row's key-value caches along
// (Model::reorder_cache); beam 1 is greedy search. Returns the targets without EOS.
std::vector<std::vector<int32_t>> translate_beam(Model& m, const std::vector<std::vector<int32_t>>& sources,
                                                 int32_t eos, int beam, double length_penalty = 1.0);

// Greedy search for beam 1, beam search otherwise: what `normlab translate` and the trainer's final BLEU call.
std::vector<std::vector<int32_t>> translate(Model& m, const std::vector<std::vector<int32_t>>& sources, int32_t eos,
                                            int beam = 1, double length_penalty = 1.0);

}  // namespace normlab::model
