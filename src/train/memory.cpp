#include "train/memory.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <utility>

#include "common/error.h"

namespace normlab::train {

namespace fs = std::filesystem;
namespace eng = normlab::engine;

namespace {

size_t add(size_t a, size_t b) { return b > SIZE_MAX - a ? SIZE_MAX : a + b; }
size_t times(size_t a, size_t b) { return a != 0 && b > SIZE_MAX / a ? SIZE_MAX : a * b; }

std::optional<std::string> read_small(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The leading decimal number of `text` (after blanks); nullopt for anything else, "max" included.
std::optional<size_t> leading_number(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos || text[begin] < '0' || text[begin] > '9') return std::nullopt;
  size_t n = 0;
  for (size_t i = begin; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    n = add(times(n, 10), static_cast<size_t>(text[i] - '0'));
  return n;
}

// The number after `key` on the line that starts with it ("MemAvailable:  123 kB", "inactive_file 45").
std::optional<size_t> field(std::string_view text, std::string_view key) {
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    if (line.starts_with(key) && line.size() > key.size() && (line[key.size()] == ':' || line[key.size()] == ' '))
      return leading_number(line.substr(key.size() + 1));
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<size_t> kb_field(std::string_view text, std::string_view key) {
  auto kb = field(text, key);
  return kb ? std::optional<size_t>(times(*kb, 1024)) : std::nullopt;
}

std::optional<size_t> number_in(const fs::path& file) {
  auto text = read_small(file);
  return text ? leading_number(*text) : std::nullopt;
}

// The room under one cgroup's memory limit: limit − (usage − inactive file cache, which the kernel
// reclaims before it refuses memory).
struct CgroupFiles {
  const char *limit, *usage, *inactive_file;
};
constexpr CgroupFiles kCgroupV2{"memory.max", "memory.current", "inactive_file"};
constexpr CgroupFiles kCgroupV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"};
// v1 reports "no limit" as a huge number (LONG_MAX rounded down to a page); anything above 2^60 is that.
constexpr size_t kNoLimit = size_t{1} << 60;

void lower_to_cgroup(const fs::path& dir, const CgroupFiles& files, AvailableMemory& available) {
  const auto limit = number_in(dir / files.limit);
  if (!limit || *limit >= kNoLimit) return;
  size_t used = number_in(dir / files.usage).value_or(0);
  if (auto stat = read_small(dir / "memory.stat"))
    used -= std::min(used, field(*stat, files.inactive_file).value_or(0));
  const size_t room = *limit - std::min(*limit, used);
  if (room < available.bytes)
    available = {room, fmt::format("the cgroup limit {} = {} with {} in use", (dir / files.limit).string(),
                                   human_bytes(*limit), human_bytes(used))};
}

// The cgroup `relative` (a path from /proc/self/cgroup) under `root`, and every cgroup above it.
void lower_to_cgroups(const fs::path& root, std::string_view relative, const CgroupFiles& files,
                      AvailableMemory& available) {
  fs::path dir = root / fs::path(relative).relative_path();
  for (;;) {
    lower_to_cgroup(dir, files, available);
    if (dir == root || !dir.has_relative_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
}

}  // namespace

size_t MemoryEstimate::to_allocate() const {
  size_t total = 0;
  for (size_t part : {weights, gradients, optimizer, activations, activation_gradients, workspace, widened, probes,
                      checkpoint_read, extra_models})
    total = add(total, part);
  return total;
}

size_t MemoryEstimate::peak() const { return add(resident, to_allocate()); }

std::string MemoryEstimate::breakdown() const {
  const std::pair<const char*, size_t> parts[] = {
      {"in use now", resident},         {"weights", weights},
      {"gradients", gradients},         {"AdamW moments", optimizer},
      {"activations", activations},     {"activation gradients", activation_gradients},
      {"workspace", workspace},         {"bf16 weights widened", widened},
      {"probe copies", probes},         {"checkpoint read", checkpoint_read},
      {"analysis models", extra_models}};
  std::string out;
  for (const auto& [name, bytes] : parts)
    if (bytes > 0) out += fmt::format("{}{} {}", out.empty() ? "" : " + ", name, human_bytes(bytes));
  return out;
}

MemoryEstimate estimate_memory(model::Model& unplanned, const MemoryNeeds& needs) {
  eng::Graph& g = unplanned.graph;
  const eng::ArenaSizes arenas = g.lay_out();
  MemoryEstimate e;
  size_t largest = 0, largest_converted = 0;  // elements of the largest parameter, and of the largest not kept bf16
  for (eng::TensorId id : g.parameters()) {
    const auto n = static_cast<size_t>(g.shape(id).numel());
    e.parameter_count = add(e.parameter_count, n);
    largest = std::max(largest, n);
    if (g.spec(id).dtype != eng::DType::bf16) largest_converted = std::max(largest_converted, n);
  }
  if (auto status = read_small("/proc/self/status")) e.resident = kb_field(*status, "VmRSS").value_or(0);
  // plan() allocates (and zeroes) the gradient arenas unless the graph is inference-only (Graph::set_gradients).
  e.weights = arenas.parameters;
  e.gradients = arenas.parameter_grads;
  e.activations = arenas.activations;
  e.activation_gradients = arenas.activation_grads;
  e.workspace = arenas.workspace;
  e.widened = arenas.widened;
  // m and v in the graph's float type (adamw.h)
  if (needs.optimizer) e.optimizer = times(2 * engine::dtype_size(g.float_type()), e.parameter_count);
  if (needs.probes) {
    // Parameters before the update, a scratch copy of the largest parameter or the logits, and the
    // reference logits, all fp64 (training_probe.h).
    const auto logits = static_cast<size_t>(g.shape(unplanned.logits).numel());
    e.probes = times(sizeof(double), add(e.parameter_count, add(std::max(largest, logits), logits)));
  }
  // The checkpoint is memory-mapped (its pages are file cache the kernel can drop), and its tensors are converted
  // to fp64 one at a time; a weight kept in bf16 is copied as it is.
  if (needs.checkpoint_file > 0) e.checkpoint_read = times(sizeof(double), largest_converted);
  if (needs.extra_models > 0 || needs.extra_inference_models > 0 || needs.extra_sharing_models > 0) {
    // Each copy counts its own gradients or none, whatever the run's model keeps; its own weights are in the float
    // type (it is built from the config), a sharing copy's are the run's.
    const bool gradients = g.has_gradients();
    const auto copy = [&](bool with_gradients, bool own_weights) {
      g.set_gradients(with_gradients);
      const eng::ArenaSizes a = g.lay_out();
      size_t one = own_weights ? a.parameters_in_float_type : a.widened;
      for (size_t part : {a.parameter_grads, a.activations, a.activation_grads, a.workspace}) one = add(one, part);
      return one;
    };
    e.extra_models = add(add(times(static_cast<size_t>(needs.extra_models), copy(true, true)),
                             times(static_cast<size_t>(needs.extra_inference_models), copy(false, true))),
                         times(static_cast<size_t>(needs.extra_sharing_models), copy(false, false)));
    g.set_gradients(gradients);
  }
  return e;
}

AvailableMemory available_memory(const fs::path& proc, const fs::path& cgroup) {
  AvailableMemory available;
  if (auto meminfo = read_small(proc / "meminfo"))
    if (auto bytes = kb_field(*meminfo, "MemAvailable")) available = {*bytes, "MemAvailable in /proc/meminfo"};
  // Lines of /proc/self/cgroup: "0::/path" (v2) or "4:memory:/path" (v1).
  std::string self = read_small(proc / "self/cgroup").value_or("0::/\n");
  for (size_t at = 0; at < self.size();) {
    const size_t end = std::min(self.find('\n', at), self.size());
    const std::string_view line = std::string_view(self).substr(at, end - at);
    at = end + 1;
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
    if (line.substr(0, first) == "0" && controllers.empty()) lower_to_cgroups(cgroup, path, kCgroupV2, available);
    else if (controllers == "memory" || controllers.find("memory,") != std::string_view::npos ||
             controllers.ends_with(",memory"))
      lower_to_cgroups(cgroup / "memory", path, kCgroupV1, available);
  }
  return available;
}

void check_memory(const MemoryEstimate& estimate, const AvailableMemory& available) {
  if (estimate.to_allocate() <= available.bytes) return;
  fail(
      "this run needs an estimated {} of memory ({}), {} more than it holds now, but only {} is available ({}): "
      "reduce model.d_model, model.n_layers, model.d_ff, train.batch_size or train.seq_len (normlab train --dry-run "
      "prints the estimate)",
      human_bytes(estimate.peak()), estimate.breakdown(), human_bytes(estimate.to_allocate()),
      human_bytes(available.bytes), available.source);
}

std::string human_bytes(size_t bytes) {
  if (bytes == SIZE_MAX) return "more than 16 EiB";
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace normlab::train
