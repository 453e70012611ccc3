#pragma once
// Decoding an encoder-decoder: greedy search, kept beside the model as generate() is.
#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace normlab::model {

// The greedy translation of each source (token ids without EOS; EOS is appended here): the decoder starts from
// EOS and appends its most likely token until it predicts EOS or fills m.seq positions. Sources are decoded
// m.batch at a time; each step reruns the whole graph (no key-value cache yet), so a batch costs up to m.seq
// forward passes. A source longer than m.seq − 1 tokens is an error naming it. Returns the targets without EOS.
std::vector<std::vector<int32_t>> translate_greedy(Model& m, const std::vector<std::vector<int32_t>>& sources,
                                                   int32_t eos);

}  // namespace normlab::model
