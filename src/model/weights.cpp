#include "model/weights.h"

#include <cstring>
#include <set>

#include "common/error.h"

namespace normlab::model {

namespace eng = normlab::engine;

namespace {
std::vector<int64_t> dims(const eng::Shape& s) { return {s.dims.begin(), s.dims.begin() + s.rank}; }
io::Dtype io_dtype(eng::DType t) {
  return t == eng::DType::f64 ? io::Dtype::F64 : t == eng::DType::bf16 ? io::Dtype::BF16 : io::Dtype::F32;
}

bool ignored(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes)
    if (name.starts_with(p)) return true;
  return false;
}
}  // namespace

void load_weights(Model& m, const io::SafetensorsFile& file, const std::vector<std::string>& ignore_prefixes) {
  std::set<std::string> wanted;
  for (eng::TensorId id : m.graph.parameters()) {
    const eng::TensorSpec& p = m.graph.spec(id);
    wanted.insert(p.name);
    const io::SafetensorsFile::Entry* e = file.find(p.name);
    if (!e)
      fail("{}: has no tensor '{}', which this model config needs; was it saved from a different config?", file.path(),
           p.name);
    if (e->shape != dims(p.shape)) {
      eng::Shape got;
      for (int64_t d : e->shape) got.dims[static_cast<size_t>(got.rank++)] = d;
      fail("{}: tensor '{}' has shape {} but the model config needs {}", file.path(), p.name, got.str(), p.shape.str());
    }
    if (p.dtype == eng::DType::bf16) {  // keep_bf16_weights chose it for a BF16 tensor
      std::memcpy(p.data, e->data.data(), e->data.size());
      continue;
    }
    eng::dispatch_float(m.graph.float_type(), [&]<typename T>() {
      T* dst = m.graph.data<T>(id);
      if (e->dtype == io::Dtype::F64) {
        auto v = e->to_f64_vector();
        for (size_t i = 0; i < v.size(); ++i) dst[i] = static_cast<T>(v[i]);
      } else {
        auto v = e->to_f32_vector();
        for (size_t i = 0; i < v.size(); ++i) dst[i] = static_cast<T>(v[i]);
      }
    });
  }
  for (const std::string& name : file.names())
    if (!wanted.contains(name) && !ignored(name, ignore_prefixes) && name.find('.') != std::string::npos)
      fail("{}: tensor '{}' is not a parameter of this model config; was it saved from a different config?",
           file.path(), name);
}

int keep_bf16_weights(Model& unplanned, const io::SafetensorsFile& file) {
  eng::Graph& g = unplanned.graph;
  if (g.has_gradients() || g.float_type() != eng::DType::f32) return 0;
  int kept = 0;
  for (eng::TensorId id : g.parameters()) {
    const io::SafetensorsFile::Entry* e = file.find(g.spec(id).name);
    if (!e || e->dtype != io::Dtype::BF16 || e->shape != dims(g.shape(id))) continue;
    g.store_as_bf16(id);
    ++kept;
  }
  return kept;
}

std::vector<io::TensorToWrite> weight_entries(const Model& m, const std::string& prefix) {
  std::vector<io::TensorToWrite> out;
  for (eng::TensorId id : m.graph.parameters()) {
    const eng::TensorSpec& p = m.graph.spec(id);
    out.push_back({prefix + p.name, io_dtype(p.dtype), dims(p.shape), p.data});
  }
  return out;
}

std::vector<io::TensorToWrite> gradient_entries(const Model& m, const std::string& prefix) {
  std::vector<io::TensorToWrite> out;
  for (eng::TensorId id : m.graph.parameters()) {
    const eng::TensorSpec& p = m.graph.spec(id);
    out.push_back({prefix + p.name, io_dtype(m.graph.float_type()), dims(p.shape), p.grad});
  }
  return out;
}

}  // namespace normlab::model
