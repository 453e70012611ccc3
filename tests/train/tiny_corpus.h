#pragma once
// Shared helpers for the training and CLI tests: scratch directories, a small generated corpus
// prepared once per test process, a tiny run config, metrics readers and a CLI runner.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/corpus.h"
#include "train/checkpoint.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace normlab::train::testing {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "train") {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("normlab_" + std::string(tag) + "_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void spit(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Deterministic varied pseudo-English, `lines` lines of 4..15 words drawn Zipf-like from 150 words.
inline std::string tiny_corpus_text(int lines = 400, std::uint64_t seed = 11) {
  static const char* const kSyllables[] = {"the", "an", "lo",  "ra", "mi", "ke", "sto", "ver", "un",  "der", "ing",
                                           "al",  "po", "tes", "qu", "is", "ba", "or",  "ne",  "ath", "w",   "y"};
  constexpr std::uint64_t kSyl = sizeof(kSyllables) / sizeof(kSyllables[0]);
  std::uint64_t state = seed;
  auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::vector<std::string> words;
  for (int i = 0; i < 150; ++i) {
    std::string w;
    for (std::uint64_t s = 0, n = 1 + next(3); s < n; ++s) w += kSyllables[next(kSyl)];
    words.push_back(w);
  }
  std::string text;
  for (int line = 0; line < lines; ++line) {
    const auto n = 4 + next(12);
    for (std::uint64_t i = 0; i < n; ++i) {
      if (i) text += ' ';
      if (i == 0 && line % 4 == 0) text += "And ";
      text += words[next(1 + next(words.size()))];
    }
    text += line % 3 == 0 ? ".\n" : (line % 3 == 1 ? ",\n" : ";\n");
  }
  return text;
}

inline constexpr int kTinyVocab = 120;

// A token directory prepared once per test process from tiny_corpus_text() (vocab kTinyVocab),
// removed at exit.
inline const fs::path& tiny_data_dir() {
  static const std::unique_ptr<TempDir> dir = [] {
    auto d = std::make_unique<TempDir>("train_data");
    spit(*d / "corpus.txt", tiny_corpus_text());
    io::PrepareOptions o;
    o.inputs = {(*d / "corpus.txt").string()};
    o.out_dir = (*d / "tokens").string();
    o.vocab_size = kTinyVocab;
    o.val_fraction = 0.1;
    io::prepare_corpus(o);
    return d;
  }();
  static const fs::path tokens = dir->path() / "tokens";
  return tokens;
}

// A toy parallel corpus: 2-6 English number words; the target is their Spanish names in reverse order, so a model
// must attend across the source rather than copy position by position. "reference<TAB>source<TAB>target" lines.
inline std::string toy_pairs(int count, uint64_t seed) {
  static const char* const en[] = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"};
  static const char* const es[] = {"uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve", "diez"};
  uint64_t state = seed;
  auto next = [&state] {  // splitmix64: the corpus is the same on every machine
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  std::string text;
  for (int i = 0; i < count; ++i) {
    std::vector<int> words(2 + next() % 5);
    for (int& w : words) w = static_cast<int>(next() % 10);
    std::string source, target;
    for (int w : words) source += std::string(source.empty() ? "" : " ") + en[w];
    for (auto it = words.rbegin(); it != words.rend(); ++it) target += std::string(target.empty() ? "" : " ") + es[*it];
    text += "pair " + std::to_string(i) + "\t" + source + "\t" + target + "\n";
  }
  return text;
}

// A token directory of 3000 toy pairs (word-level tokenizer: each word one token, 23 pieces; 300 val pairs),
// prepared once per test process.
inline const fs::path& tiny_pairs_dir() {
  static const std::unique_ptr<TempDir> dir = [] {
    auto d = std::make_unique<TempDir>("pairs");
    spit(*d / "pairs.tsv", toy_pairs(3000, 5));
    io::PrepareOptions o;
    o.inputs = {(*d / "pairs.tsv").string()};
    o.out_dir = (*d / "tokens").string();
    o.pairs = true;
    o.model_type = "word";
    o.vocab_size = 23;  // 20 words, <unk>, <s>, </s>
    o.max_length_ratio = 3;
    o.val_fraction = 0.1;
    io::prepare_corpus(o);
    return d;
  }();
  static const fs::path tokens = dir->path() / "tokens";
  return tokens;
}

// d_model 32, 2 layers, 2 heads, d_ff 64, seq 16, batch 4; logs every step; evaluates and
// checkpoints only at the end; 2 threads. As a JSON run config (what --config takes).
inline Json tiny_config_doc(int steps, const fs::path& data_dir = tiny_data_dir()) {
  return Json{{"model", {{"d_model", 32}, {"n_layers", 2}, {"n_heads", 2}, {"d_ff", 64}, {"max_seq_len", 16}}},
              {"data", {{"dir", data_dir.string()}}},
              {"train",
               {{"batch_size", 4},
                {"seq_len", 16},
                {"steps", steps},
                {"lr", 3e-3},
                {"warmup", 3},
                {"eval_every", 0},
                {"eval_batches", 2},
                {"checkpoint_every", 0},
                {"log_every", 1},
                {"threads", 2}}}};
}

// The same, read through the strict reader (so placement defaults and options are resolved).
inline RunConfig tiny_config(int steps, const fs::path& data_dir = tiny_data_dir()) {
  return read_run_config(tiny_config_doc(steps, data_dir), "tiny test config");
}

// One parsed metrics.jsonl line per element.
inline std::vector<nlohmann::json> read_metrics(const fs::path& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

struct TrainRecord {
  int step;
  double loss, lr, grad_norm;
};

inline std::vector<TrainRecord> train_records(const fs::path& run_dir) {
  std::vector<TrainRecord> out;
  for (const auto& j : read_metrics(run_dir))
    if (j.at("type") == "train")
      out.push_back({j.at("step").get<int>(), j.at("loss").get<double>(), j.at("lr").get<double>(),
                     j.at("grad_norm").get<double>()});
  return out;
}

// Bit-identical comparison of two runs' train records (JSON numbers round-trip doubles exactly).
inline void expect_identical_records(const std::vector<TrainRecord>& a, const std::vector<TrainRecord>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].step, b[i].step);
    EXPECT_EQ(a[i].loss, b[i].loss) << "loss differs at step " << a[i].step;
    EXPECT_EQ(a[i].lr, b[i].lr) << "lr differs at step " << a[i].step;
    EXPECT_EQ(a[i].grad_norm, b[i].grad_norm) << "grad_norm differs at step " << a[i].step;
  }
}

// The temporary files of write_file_atomic() left in `dir` (a write that did not finish): none, after any run.
inline std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos) out.push_back(e.path().filename().string());
  return out;
}

// --- the CLI binary ---

// Trains `c` straight into dir/straight, and into dir/split stopped at step 4 and resumed from its config.json:
// the logged records and the final checkpoint must be identical.
inline void expect_resume_is_exact(const RunConfig& c, const fs::path& dir) {
  Trainer(c, dir / "straight", {}).run();
  Trainer(c, dir / "split", {false, 4, nullptr}).run();
  const Json doc = Json::parse(slurp(dir / "split/config.json"));
  Trainer(read_run_config(doc, "split/config.json"), dir / "split", {true, -1, nullptr}).run();
  expect_identical_records(train_records(dir / "straight"), train_records(dir / "split"));
  EXPECT_TRUE(slurp(dir / "straight" / kCheckpointFile) == slurp(dir / "split" / kCheckpointFile));
}

inline std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

struct CliResult {
  int exit_code = -1;  // the shell's status: 128 + n when the binary died of signal n
  std::string out, err;
};

// Runs a shell command line with stdin from /dev/null, capturing stdout and stderr through files in `scratch`.
inline CliResult run_captured(std::string command, const fs::path& scratch) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  const fs::path out = scratch / ("cli_" + std::to_string(n) + ".out");
  const fs::path err = scratch / ("cli_" + std::to_string(n) + ".err");
  command.append(" >").append(shell_quote(out.string()));
  command.append(" 2>").append(shell_quote(err.string()));
  command.append(" </dev/null");
  const int status = std::system(command.c_str());
  CliResult r;
  r.exit_code = status == -1 ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  r.out = slurp(out);
  r.err = slurp(err);
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  return r;
}

// Runs `normlab <args>` with OMP_NUM_THREADS=2 and the `env` assignments ("NAME=value"), capturing
// stdout and stderr through files in `scratch`.
inline CliResult run_cli(const std::vector<std::string>& args, const fs::path& scratch,
                         const std::vector<std::string>& env = {}) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on `"literal" + std::string`.
  std::string command = "OMP_NUM_THREADS=2 ";
  for (const auto& assignment : env) {  // NAME='value': a quoted name would not be an assignment
    const size_t eq = assignment.find('=');
    command.append(assignment.substr(0, eq + 1)).append(shell_quote(assignment.substr(eq + 1))).append(" ");
  }
  command.append(shell_quote(NORMLAB_BINARY));
  for (const auto& a : args) command.append(" ").append(shell_quote(a));
  return run_captured(command, scratch);
}

// The PyTorch oracles (tools/to_torch.py, tools/make_hf_checkpoints.py) need Debian's python3-torch; without it their
// tests fail and say so, so that no run of the suite passes without them.
inline bool torch_available() { return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0; }
inline constexpr const char* kNoTorch =
    "python3-torch is not installed, so /usr/bin/python3 cannot import torch: install it with "
    "scripts/setup.sh --with-torch (scripts/test.sh does)";

inline std::string describe(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

// The command failed cleanly: exit status 1, no crash, and stderr's last line is the one
// "normlab: error: ..." line, which contains every fragment.
inline void expect_cli_error(const CliResult& r, std::initializer_list<std::string_view> fragments) {
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  for (std::string_view crash : {"terminate", "Segmentation", "Aborted", "core dumped", "what():"})
    EXPECT_EQ(r.err.find(crash), std::string::npos) << "crash marker '" << crash << "'\n" << describe(r);
  std::vector<std::string> lines;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  ASSERT_FALSE(lines.empty()) << describe(r);
  int error_lines = 0;
  for (const auto& l : lines) error_lines += l.starts_with("normlab: error: ");
  EXPECT_EQ(error_lines, 1) << describe(r);
  const std::string& message = lines.back();
  EXPECT_TRUE(message.starts_with("normlab: error: ")) << describe(r);
  for (std::string_view f : fragments)
    EXPECT_NE(message.find(f), std::string::npos) << "message lacks \"" << f << "\": " << message;
}

// Starts `normlab args...` in the background in its own process group (so a kill reaches the children of
// a study too), with stdout and stderr appended to `log` (empty: the test's own); returns its pid. For kill
// tests.
inline pid_t start_cli(const std::vector<std::string>& args, const fs::path& log = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int fd = log.empty() ? -1 : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    std::vector<char*> argv{const_cast<char*>(NORMLAB_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(NORMLAB_BINARY, argv.data());
    _exit(127);
  }
  return pid;
}

// Whether the background command has exited (reaped); `status` gets its wait status.
inline bool cli_exited(pid_t pid, int* status = nullptr) {
  int s = 0;
  const bool done = waitpid(pid, &s, WNOHANG) == pid;
  if (done && status) *status = s;
  return done;
}

// SIGKILLs the command's whole process group without warning and reaps it.
inline void kill_cli(pid_t pid) {
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// SIGKILLs the command alone (not its group: its children are left to fend for themselves, as when the OOM killer
// or a kill -9 of its PID ends a study) and reaps it.
inline void kill_alone(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// A process as /proc shows it: its PID and start time (the PID may be reused later by another process).
struct ProcessId {
  pid_t pid = 0;
  unsigned long long start = 0;
};

// /proc/PID/stat's fields after the command name (which may hold spaces): state, ppid, ... (empty if none).
inline std::vector<std::string> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(stat.substr(close + 1));
  for (std::string field; rest >> field;) fields.push_back(field);
  return fields;
}

// Every process below `pid` now (children, their children ...).
inline std::vector<ProcessId> descendants(pid_t pid) {
  std::vector<std::pair<ProcessId, pid_t>> all;  // process, parent
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto fields = proc_stat(std::stoi(name));
    if (fields.size() > 19) all.push_back({{std::stoi(name), std::stoull(fields[19])}, std::stoi(fields[1])});
  }
  std::vector<ProcessId> out;
  std::vector<pid_t> parents = {pid};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    for (const auto& [process, its_parent] : all)
      if (its_parent == parent) out.push_back(process), parents.push_back(process.pid);
  }
  return out;
}

// Whether the process has ended (gone, or a zombie its new parent has yet to reap).
inline bool ended(const ProcessId& p) {
  const auto fields = proc_stat(p.pid);
  return fields.size() <= 19 || std::stoull(fields[19]) != p.start || fields[0] == "Z" || fields[0] == "X";
}

}  // namespace normlab::train::testing
