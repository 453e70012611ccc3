// Fuzz target: a token directory (normlab prepare's output) as load_tokens reads it. The input holds
// meta.json, train.bin and val.bin separated by "\n--8<--\n"; the tokenizer file is fixed
// ("tokenizer.model" holding "fuzz tokenizer", FNV-1a-64 ad8b382f370b9efd), so valid seeds reach the
// token files.
#include <cstdint>
#include <fstream>

#include "fuzz_util.h"
#include "io/corpus.h"

namespace {
void put(const std::filesystem::path& file, std::string_view bytes) {
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  const fs::path dir = normlab::fuzz::scratch_dir() / "tokens";
  fs::remove_all(dir);
  fs::create_directories(dir);
  put(dir / "tokenizer.model", "fuzz tokenizer");
  const auto parts = normlab::fuzz::split(normlab::fuzz::as_text(data, size), "\n--8<--\n");
  const char* names[] = {"meta.json", "train.bin", "val.bin"};
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i) put(dir / names[i], parts[i]);
  try {
    const auto tokens = normlab::io::load_tokens(dir);
    for (const auto id : tokens.train)
      if (id < 0 || id >= tokens.vocab_size) __builtin_trap();
  } catch (const normlab::Error&) {
  }
  return 0;
}
