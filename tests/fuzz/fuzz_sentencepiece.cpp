// Fuzz target: a SentencePiece model file (tokenizer.model) as normlab loads it, then used the way
// prepare, generate and the reports use it.
#include <cstdint>

#include "fuzz_util.h"
#include "io/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto tok = normlab::io::Tokenizer::from_bytes(normlab::fuzz::as_text(data, size), "fuzz.model");
    const int n = tok.vocab_size();
    (void)tok.bos_id();
    (void)tok.eos_id();
    (void)tok.unk_id();
    const auto ids = tok.encode("And God said, Let there be light: and there was light.");
    for (const auto id : ids)
      if (id < 0 || id >= n) __builtin_trap();
    (void)tok.decode(ids);
    for (int i = 0; i < n && i < 64; ++i) (void)tok.piece(i);
    const std::int32_t bad[] = {n};
    try {
      (void)tok.decode(bad);
      __builtin_trap();  // an id outside the vocabulary must be refused
    } catch (const normlab::Error&) {
    }
  } catch (const normlab::Error&) {
  }
  return 0;
}
