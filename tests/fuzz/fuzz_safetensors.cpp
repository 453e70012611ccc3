// Fuzz target: the safetensors reader (checkpoints, fixtures) on arbitrary bytes.
#include <cstdint>

#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using normlab::io::Dtype;
  try {
    auto file = normlab::io::SafetensorsFile::parse(std::string(normlab::fuzz::as_text(data, size)), "fuzz.safetensors",
                                                    "checkpoint");
    for (const auto& e : file.entries()) {
      (void)e.numel();
      if (e.dtype == Dtype::F32 || e.dtype == Dtype::F64) (void)e.to_f32_vector();
      if (e.dtype == Dtype::I64) (void)e.copy_as<std::int64_t>();
      (void)file.at(e.name);
    }
    (void)file.names();
    (void)file.find("step");
  } catch (const normlab::Error&) {
  }
  return 0;
}
