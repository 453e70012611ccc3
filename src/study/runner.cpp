#include "study/runner.h"

#include "normlab_source_commit.h"  // generated at build time (cmake/source_commit.cmake)

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "dist/comm.h"
#include "io/atomic_file.h"
#include "io/folder_lock.h"
#include "train/checkpoint.h"
#include "train/outcome.h"
#include "train/records.h"
#include "train/train_config.h"

extern char** environ;

namespace normlab::study {

namespace fs = std::filesystem;

const char* status_name(RunStatus s) {
  switch (s) {
    case RunStatus::finished:
      return "finished";
    case RunStatus::diverged:
      return train::outcome_name(train::Outcome::diverged).data();
    case RunStatus::failed:
      return "failed";
  }
  return "?";
}

namespace {

// A JSON file's contents, or null if it is missing or unreadable.
Json read_json(const fs::path& file) {
  if (!fs::exists(file)) return Json();
  Json j = parse_json_or_discarded(io::read_file(file));
  return j.is_discarded() ? Json() : j;
}

// A string field of a record some process wrote, or `fallback` when it is missing or of another type.
std::string text_field(const Json& record, const char* key, const char* fallback) {
  return record.contains(key) && record[key].is_string() ? record[key].get<std::string>() : fallback;
}

// A number field of such a record (JSON writes NaN as null), or `fallback`.
double number_field(const Json& record, const char* key, double fallback) {
  return record.contains(key) && record[key].is_number() ? record[key].get<double>() : fallback;
}

// status.json marks a run as ended: {"status": ..., "message": ..., "seconds": ..., "normlab": ...}; runs kept from
// before "normlab" was written have none.
bool read_status(const fs::path& dir, RunOutcome& out) {
  const fs::path file = dir / "status.json";
  if (!fs::exists(file)) return false;
  const Json j = read_json(file);
  if (!j.is_object() || !j.contains("status") || !j["status"].is_string()) return false;
  const std::string s = j["status"].get<std::string>();
  out.status = s == "finished"                         ? RunStatus::finished
               : s == status_name(RunStatus::diverged) ? RunStatus::diverged
                                                       : RunStatus::failed;
  out.message = text_field(j, "message", "");
  out.seconds = number_field(j, "seconds", 0.0);
  out.made_by = text_field(j, "normlab", "not recorded");
  out.cpu = text_field(j, "cpu", "");
  out.threads = static_cast<int>(number_field(j, "threads", 0.0));
  return true;
}

std::string self_binary() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find the normlab binary through /proc/self/exe: {}", ec.message());
  return p.string();
}

// What a run's results depend on, stored as request.json and compared before a run is reused. The engine
// section is left out: it changes how fast a run goes, not its numbers (fused and unfused kernels agree bit for
// bit, tests/model/residual_fusion_test.cpp), so runs stored before it existed, or made with another setting,
// are reused.
Json stored_request(const RunOutcome& o) {
  Json config = o.config;
  config.erase("engine");
  return Json{{"kind", o.request.kind},
              {"analyses", o.request.analyses},
              {"probe_flags", o.request.probe_flags},
              {"corpus", corpus_checksum(o.config["data"]["dir"].get<std::string>())},
              {"config", config}};
}

// The first difference between a stored request and the plan's, e.g. "config/train/lr was 0.001, now 0.003".
std::string first_difference(const Json& stored, const Json& planned) {
  if (stored.is_null()) return "it has no readable request.json (made by an older normlab?)";
  const Json patch = Json::diff(stored, planned);
  if (patch.empty()) return "they are equal";
  const std::string path = patch[0]["path"].get<std::string>();
  const Json::json_pointer pointer(path);
  const auto value = [&](const Json& doc) {
    return doc.contains(pointer) ? doc.at(pointer).dump() : std::string("(absent)");
  };
  return fmt::format("{} was {}, now {}", path.substr(1), value(stored), value(planned));
}

// The trainer logs a "non_finite" record before it stops on a non-finite loss or gradient.
bool diverged(const fs::path& dir) { return train::read_non_finite(dir / "run").has_value(); }

std::string last_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

using Clock = std::chrono::steady_clock;

struct Running {
  size_t index;
  int rank;   // the rank whose process runs it (0 in a single process)
  pid_t pid;  // on this rank; 0 for another rank's
  Clock::time_point start;
};

// How a run's process ended: its exit code, or the signal that killed it.
struct Ended {
  size_t index = 0;
  int exit_code = 0, signal = 0;
};

// The shell's single-quoted form of a word.
std::string quoted(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The step checkpoint.json names, for a progress line ("?" if it names none).
std::string checkpoint_step_text(const fs::path& run) {
  const Json j = read_json(run / train::kCheckpointJson);
  return j.is_object() && j.contains("step") && j["step"].is_number_integer() ? j["step"].dump() : "?";
}

// A training that did not write its summary but left a checkpoint (it was killed, or killed after
// its final checkpoint) continues from that checkpoint: `normlab train --resume`.
bool resumes(const RunOutcome& o) {
  const fs::path run = o.dir / "run";
  return o.request.kind == "train" && !fs::exists(run / "summary.json") && fs::exists(run / train::kCheckpointFile);
}

// The command lines of a run after the binary: train (resumed if a checkpoint exists) and/or probe. A train
// run with analyses probes its final checkpoint afterwards; a finished training is not run again.
std::vector<std::vector<std::string>> stages(const RunOutcome& o) {
  const fs::path& dir = o.dir;
  std::vector<std::vector<std::string>> out;
  // A study reports on its runs itself: the probe's own report of each run would only fill the study's folder.
  const auto probe = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--out", dir.string(), "--analysis", o.request.analyses, "--no-report"});
    args.insert(args.end(), o.request.probe_flags.begin(), o.request.probe_flags.end());
    out.push_back(args);
  };
  if (o.request.kind == "probe") {
    probe({"probe", "--config", (dir / "config.json").string()});
    return out;
  }
  if (resumes(o)) out.push_back({"train", "--run", (dir / "run").string(), "--resume"});
  else if (!fs::exists(dir / "run" / "summary.json"))
    out.push_back({"train", "--run", (dir / "run").string(), "--config", (dir / "config.json").string()});
  if (!o.request.analyses.empty()) probe({"probe", "--run", (dir / "run").string()});
  return out;
}

// The path of `program`: itself if it names a folder, else the first executable of that name in PATH (empty if
// none is).
std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::istringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');)
    if (!folder.empty() && ::access((fs::path(folder) / program).c_str(), X_OK) == 0)
      return (fs::path(folder) / program).string();
  return {};
}

// Starts a run's stages (argument lists after the binary) as one child process writing dir/log.txt, with
// `threads` OpenMP threads. The child is not part of an MPI job this process may belong to: the launcher's
// variables are left out of its environment, so it runs as a single process, or, given the words of a
// `data_parallel_launch` (a run over a group of ranks), its training stage runs data-parallel as a job of its own.
// The child dies with this process, even of kill -9 (its parent-death signal), and so do the normlab processes it
// starts in turn (end_with_study, through NORMLAB_STUDY_PID): a killed study leaves no trainer behind to write on
// beside the rerun's.
// The argument list of a run's process: its one stage, or a shell running its stages in order, stopping at the first
// failure. A training stage is preceded by `train_launch` (a data-parallel run's mpirun words).
std::vector<std::string> run_command(const std::vector<std::vector<std::string>>& commands,
                                     const std::vector<std::string>& train_launch, const std::string& binary) {
  std::vector<std::vector<std::string>> lines;
  for (const auto& command : commands) {
    std::vector<std::string> line = command.front() == "train" ? train_launch : std::vector<std::string>{};
    line.push_back(binary);
    line.insert(line.end(), command.begin(), command.end());
    lines.push_back(std::move(line));
  }
  if (lines.size() == 1) return lines[0];
  std::string script;
  for (const auto& line : lines) {
    if (!script.empty()) script += " && ";
    for (const std::string& word : line) script += quoted(word) + ' ';
  }
  return {"/bin/sh", "-c", script};
}

// The run's environment: this process's, less an MPI launcher's variables (the run is not part of this job), with
// its OpenMP threads and the study's pid (end_with_study).
std::vector<std::string> run_environment(int threads) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string_view var(*e);
    // The user's permission to run mpirun as root is not the launcher's: a data-parallel run needs it.
    const bool launcher = (var.starts_with("OMPI_") && !var.starts_with("OMPI_ALLOW_RUN_AS_ROOT")) ||
                          var.starts_with("PMIX_") || var.starts_with("PMI_");
    const bool ours = var.starts_with("OMP_NUM_THREADS=") || var.starts_with(std::string(io::kStudyPidVariable) + "=");
    if (!launcher && !ours) env_strings.emplace_back(*e);
  }
  env_strings.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  env_strings.push_back(fmt::format("{}={}", io::kStudyPidVariable, ::getpid()));
  return env_strings;
}

std::vector<char*> pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& w : words) out.push_back(w.data());
  out.push_back(nullptr);
  return out;
}

// The run's log, opened here, not by the child: O_NOFOLLOW refuses a symbolic link planted at its path (like the
// other writers), and the failure is reported with the path instead of a silent child.
int open_run_log(const fs::path& dir) {
  const std::string log = (dir / "log.txt").string();
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (log_fd >= 0) return log_fd;
  const int error = errno;
  if (error == ELOOP)
    fail("cannot open the run log {}: it is a symbolic link; remove it (runs write only inside their folder)", log);
  fail("cannot open the run log {}: {}", log, std::strerror(error));
}

// Starts a run's stages (argument lists after the binary) as one child process writing dir/log.txt, with
// `threads` OpenMP threads. The child is not part of an MPI job this process may belong to: the launcher's
// variables are left out of its environment, so it runs as a single process, or, given the words of a
// `data_parallel_launch` (a run over a group of ranks), its training stage runs data-parallel as a job of its own.
// The child dies with this process, even of kill -9 (its parent-death signal), and so do the normlab processes it
// starts in turn (end_with_study, through NORMLAB_STUDY_PID): a killed study leaves no trainer behind to write on
// beside the rerun's.
pid_t launch(const std::vector<std::vector<std::string>>& commands, const fs::path& dir, int threads,
             const std::vector<std::string>& train_launch, const std::string& binary = self_binary()) {
  std::vector<std::string> args = run_command(commands, train_launch, binary);
  const std::string program = find_program(args[0]);
  if (program.empty()) fail("cannot start {}: it is not on PATH", args[0]);
  std::vector<std::string> env_strings = run_environment(threads);
  const std::vector<char*> argv = pointers(args), envp = pointers(env_strings);
  const int log_fd = open_run_log(dir);
  // The child reports a failed exec through this pipe (closed unwritten by a successful one).
  int exec_error[2];
  if (::pipe2(exec_error, O_CLOEXEC) != 0) {
    const int error = errno;
    ::close(log_fd);
    fail("cannot start {}: pipe: {}", args[0], std::strerror(error));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec (this process may have other threads). The parent-death signal
    // comes when the thread that forked ends: the study's main thread, which runs the grid to its end. A parent
    // that ended before it was set is caught by getppid().
    int error = 0;
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(127);
    if (::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) error = errno;
    if (error == 0) ::execve(program.c_str(), argv.data(), envp.data());
    error = error ? error : errno;
    [[maybe_unused]] const ssize_t reported = ::write(exec_error[1], &error, sizeof error);
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(log_fd);
  ::close(exec_error[1]);
  if (pid < 0) {
    ::close(exec_error[0]);
    fail("cannot start {}: fork: {}", args[0], std::strerror(fork_error));
  }
  int error = 0;
  ssize_t n = 0;
  while ((n = ::read(exec_error[0], &error, sizeof error)) < 0 && errno == EINTR) {
  }
  ::close(exec_error[0]);
  if (n > 0) {
    ::waitpid(pid, nullptr, 0);
    fail("cannot start {}: {}", program, std::strerror(error));
  }
  return pid;
}

// A child that ended: its pid and how (blocks until one has when `block`; pid 0 when none has).
std::pair<pid_t, Ended> reap(bool block) {
  int wstatus = 0;
  const pid_t pid = waitpid(-1, &wstatus, block ? 0 : WNOHANG);
  if (pid < 0 && errno == ECHILD && !block) return {0, {}};  // this rank runs none now: the others do
  if (pid < 0) fail("study: waiting for a run failed: {}", std::strerror(errno));
  Ended e;
  if (pid > 0 && WIFSIGNALED(wstatus)) e.signal = WTERMSIG(wstatus);
  else if (pid > 0) e.exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
  return {pid, e};
}

// Between polls of an MPI rank's children and messages: short beside any run, long beside a poll.
void nap() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

// The ranks each run trains on (--ranks-per-run), checked before anything runs.
int ranks_per_run(const RunnerOptions& options) {
  check_runner_options(options);
  const int k = options.ranks_per_run, ranks = dist::world().size();
  if (k == 1) return 1;
  if (!dist::built_with_mpi())
    fail(
        "--ranks-per-run {} trains each run with mpirun, but this normlab was built without MPI: install "
        "libopenmpi-dev (scripts/setup.sh does) and rebuild",
        k);
  if (find_program("mpirun").empty())
    fail(
        "--ranks-per-run {} starts each run with mpirun, which is not on PATH: install openmpi-bin (scripts/setup.sh "
        "does)",
        k);
  if (ranks > 1 && ranks % k != 0)
    fail(
        "--ranks-per-run {} cannot split the job's {} ranks into groups of {}: start mpirun with a multiple of {} "
        "processes",
        k, ranks, k, k);
  return k;
}

// The words that start a data-parallel training over the `group` ranks from `leader` on (none for a run of one
// process): the run is a job of its own, launched by mpirun like any data-parallel `normlab train`, on the hosts
// of those ranks (--host "a:2" or "a:1,b:1"; in a world of one, all on this host). Each process gets the OpenMP
// threads of this one's children (-x passes them to other hosts); no binding, because other runs share the
// cores; -q keeps mpirun's advice out of the run's log, whose last line is the run's error when it fails.
std::vector<std::string> data_parallel_launch(int leader, int group) {
  if (group == 1) return {};
  const dist::World& world = dist::world();
  std::vector<std::pair<std::string, int>> counts;  // host → processes, in rank order
  for (int r = 0; r < group; ++r) {
    const std::string& host = world.host(world.distributed() ? leader + r : 0);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == host; });
    if (it == counts.end()) counts.push_back({host, 1});
    else ++it->second;
  }
  std::string hosts;
  for (const auto& [host, n] : counts) hosts += fmt::format("{}{}:{}", hosts.empty() ? "" : ",", host, n);
  return {"mpirun", "-q", "-np", std::to_string(group), "--host", hosts, "--bind-to", "none", "-x", "OMP_NUM_THREADS"};
}

// The coordinator's messages to a worker rank, and the worker's reply when the run ends.
Json run_message(size_t index, const RunOutcome& o, int threads, const std::vector<std::string>& train_launch) {
  return {{"run", index},
          {"dir", o.dir.string()},
          {"commands", stages(o)},
          {"threads", threads},
          {"train_launch", train_launch}};
}
Json ended_message(const Ended& e) { return {{"run", e.index}, {"exit", e.exit_code}, {"signal", e.signal}}; }

}  // namespace

void check_runner_options(const RunnerOptions& options) {
  if (options.jobs < 1) fail("--jobs {}: give the number of runs at once, 1 or more", options.jobs);
  if (options.threads < 1) fail("--threads {}: give the number of cores the runs share, 1 or more", options.threads);
  if (options.ranks_per_run < 1)
    fail("--ranks-per-run {}: give 1 (each run is one process) or more (each run is data-parallel)",
         options.ranks_per_run);
}

void serve_runs() {
  const dist::World& world = dist::world();
  std::map<pid_t, size_t> running;  // child → the run index it runs
  bool stopping = false;
  while (!stopping || !running.empty()) {
    bool idle = true;
    if (std::optional<dist::World::Message> m = world.try_receive()) {
      idle = false;
      const Json j = Json::parse(m->text);
      if (j.contains("stop")) {
        stopping = true;
      } else {
        const pid_t pid =
            launch(j["commands"].get<std::vector<std::vector<std::string>>>(), j["dir"].get<std::string>(),
                   j["threads"].get<int>(), j["train_launch"].get<std::vector<std::string>>());
        running[pid] = j["run"].get<size_t>();
      }
    }
    if (!running.empty()) {
      auto [pid, ended] = reap(false);
      if (auto it = running.find(pid); pid > 0 && it != running.end()) {
        idle = false;
        ended.index = it->second;
        world.send(0, ended_message(ended).dump());
        running.erase(it);
      }
    }
    if (idle) nap();
  }
}

void end_with_study() {
  const char* text = std::getenv(io::kStudyPidVariable);
  const long study = text ? std::atol(text) : 0;
  // SIGKILL when the parent ends: the study, or the shell or mpirun between them (themselves set to die with it).
  if (study <= 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return;
  if (!io::process_alive(study)) std::_Exit(1);  // it ended before the signal was set: nothing would send it
}

void release_workers() {
  const dist::World& world = dist::world();
  if (world.rank() != 0) return;
  for (int rank = 1; rank < world.size(); ++rank) world.send(rank, Json{{"stop", true}}.dump());
}

Json resolve_config(const Json& config, const std::string& where) {
  Json c = config;
  c["train"]["threads"] = 0;  // the runner sets OMP_NUM_THREADS per process
  return train::to_json(train::read_run_config(c, where));
}

std::string corpus_checksum(const fs::path& data_dir) {
  const fs::path meta = data_dir / "meta.json";
  if (!fs::exists(meta)) return "missing";
  return fmt::format("{:016x}", io::fnv1a64(io::read_file(meta, "token metadata")));
}

std::string source_version() { return NORMLAB_SOURCE_COMMIT; }

std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string model = "unknown CPU", flags;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name") model = value;
    if (key == "flags") flags = " " + value + " ";
    if (!flags.empty() && model != "unknown CPU") break;
  }
  const bool bf16 = flags.find(" avx512_bf16 ") != std::string::npos,
             amx = flags.find(" amx_bf16 ") != std::string::npos;
  return fmt::format("{} ({}, {})", model, bf16 ? "avx512_bf16" : "no avx512_bf16", amx ? "AMX" : "no AMX");
}

std::string runs_made_by(const std::vector<RunOutcome>& runs) {
  std::map<std::string, int> makers;
  for (const RunOutcome& r : runs) ++makers[r.made_by.empty() ? "not recorded" : r.made_by];
  std::vector<std::string> made;
  for (const auto& [version, n] : makers) made.push_back(fmt::format("{} ({} run{})", version, n, n == 1 ? "" : "s"));
  return fmt::format("runs made by (status.json): {}", fmt::join(made, ", "));
}

int jobs_per_core(const RunnerOptions& options) {
  return std::max(1, options.threads / std::max(1, options.ranks_per_run));
}

int threads_per_process(const RunnerOptions& options) {
  const int processes = std::max(1, options.jobs) * (dist::world().distributed() ? 1 : options.ranks_per_run);
  return std::max(1, options.threads / std::max(1, processes));
}

namespace {

// Every request checked (a safe, unique id; a config the strict reader takes), as an outcome not yet run, with the
// request.json it must match.
std::vector<RunOutcome> planned_outcomes(const fs::path& study_dir, const std::vector<RunRequest>& requests,
                                         std::vector<Json>& planned) {
  std::vector<RunOutcome> outcomes;
  std::set<std::string> ids;
  for (const RunRequest& r : requests) {
    // A run id names a folder under study_dir/runs: it must not lead anywhere else.
    const bool unsafe = r.id.empty() || r.id.front() == '.' ||
                        std::any_of(r.id.begin(), r.id.end(),
                                    [](unsigned char c) { return c == '/' || c == '\\' || c < 0x20 || c == 0x7f; });
    if (unsafe)
      fail("run id '{}' cannot name a folder under {}: use letters, digits and . _ + = - (not starting with '.')",
           printable(r.id), (study_dir / "runs").string());
    if (!ids.insert(r.id).second)
      fail("two runs of the plan have the same id '{}': give their grid values distinct names", r.id);
    RunOutcome o{r, study_dir / "runs" / r.id};
    o.config = resolve_config(r.config, "run " + r.id);
    planned.push_back(stored_request(o));
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

// Which runs still have to run (a stored run that finished or diverged from the same request is reused), and which
// stored partial runs belong to another request (removed: nothing to resume). A finished run of another request
// stops the grid before anything runs or is removed.
std::vector<size_t> runs_to_run(std::vector<RunOutcome>& outcomes, const std::vector<Json>& planned,
                                const fs::path& study_dir, bool fresh, std::vector<size_t>& stale) {
  std::vector<size_t> pending;
  std::vector<std::string> mismatched;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    RunOutcome& o = outcomes[i];
    if (fresh) {
      pending.push_back(i), stale.push_back(i);
      continue;
    }
    const Json stored = read_json(o.dir / "request.json");
    const bool same = stored == planned[i];
    if (read_status(o.dir, o) && o.status != RunStatus::failed) {
      if (!same) mismatched.push_back(fmt::format("{} ({})", o.request.id, first_difference(stored, planned[i])));
      continue;
    }
    if (!same) stale.push_back(i);
    pending.push_back(i);
  }
  if (!mismatched.empty())
    fail(
        "{} of the runs stored in {} were made from another request than this plan's, e.g. {}: rerun with --fresh to "
        "discard the stored runs and run them again, or give another --out",
        mismatched.size(), (study_dir / "runs").string(), mismatched.front());
  return pending;
}

// A pending run's folder, ready to run: its config and request written, a failed run's status removed.
void prepare_run(RunOutcome& o, const Json& planned) {
  o.status = RunStatus::failed, o.message.clear();
  fs::create_directories(o.dir);
  fs::remove(o.dir / "status.json");  // a failed run runs again
  io::write_file_atomic(o.dir / "config.json", o.config.dump(2) + "\n");
  io::write_file_atomic(o.dir / "request.json", planned.dump(2) + "\n");
}

// The runs of one grid call in flight: up to `jobs` per rank, exclusive runs alone and on rank 0.
class Scheduler {
 public:
  Scheduler(std::vector<RunOutcome>& outcomes, std::vector<size_t> pending, const RunnerOptions& options, int group)
      : outcomes_(outcomes),
        pending_(std::move(pending)),
        options_(options),
        group_(group),
        threads_(threads_per_process(options)),
        free_slots_(static_cast<size_t>(dist::world().size()), 0) {
    // Every rank runs up to `jobs` runs at once, rank 0 among them. With runs over groups of ranks, the first rank of
    // each group starts its runs and the others lend their cores.
    for (int leader = 0; leader < dist::world().size(); leader += group)
      free_slots_[static_cast<size_t>(leader)] = std::max(1, options.jobs);
  }
  bool done() const { return next_ == pending_.size() && running_.empty(); }
  void start_ready_runs();
  // Waits for the next run to end: this process's child, or another rank's report.
  std::pair<Running, Ended> next_end();
  void free(const Running& r) { ++free_slots_[static_cast<size_t>(r.rank)]; }
  int threads() const { return threads_; }
  // " on rank 3", " on ranks 4-7", or nothing in a single process.
  std::string where(int rank) const;

 private:
  std::vector<RunOutcome>& outcomes_;
  std::vector<size_t> pending_;
  const RunnerOptions& options_;
  int group_, threads_;
  std::vector<int> free_slots_;
  std::vector<Running> running_;
  size_t next_ = 0;
};

void Scheduler::start_ready_runs() {
  while (next_ < pending_.size()) {
    const size_t i = pending_[next_];
    const bool alone = outcomes_[i].request.exclusive;
    // An exclusive run waits until no other run of the study is running, and nothing starts beside one.
    const bool beside_exclusive = std::any_of(running_.begin(), running_.end(),
                                              [&](const Running& r) { return outcomes_[r.index].request.exclusive; });
    if (beside_exclusive || (alone && !running_.empty())) return;
    // The rank with the most free slots (the lowest such rank on a tie).
    const int rank =
        alone ? 0 : static_cast<int>(std::max_element(free_slots_.begin(), free_slots_.end()) - free_slots_.begin());
    if (free_slots_[static_cast<size_t>(rank)] == 0) return;
    ++next_;
    if (!options_.quiet && resumes(outcomes_[i]))
      std::cerr << fmt::format("study: {} resumes from its checkpoint at step {}\n", outcomes_[i].request.id,
                               checkpoint_step_text(outcomes_[i].dir / "run"));
    pid_t pid = 0;
    if (rank == 0)
      pid = launch(stages(outcomes_[i]), outcomes_[i].dir, threads_, data_parallel_launch(0, group_),
                   options_.binary.empty() ? self_binary() : options_.binary);
    else dist::world().send(rank, run_message(i, outcomes_[i], threads_, data_parallel_launch(rank, group_)).dump());
    --free_slots_[static_cast<size_t>(rank)];
    running_.push_back({i, rank, pid, Clock::now()});
    if (alone) return;
  }
}

std::pair<Running, Ended> Scheduler::next_end() {
  const dist::World& world = dist::world();
  while (true) {  // a child that is not a run of ours matches nothing: wait on
    std::vector<Running>::iterator it = running_.end();
    Ended ended;
    const std::pair<pid_t, Ended> child = reap(!world.distributed());
    if (child.first > 0) {
      it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.pid == child.first; });
      ended = child.second;
    } else if (const auto m = world.try_receive()) {
      const Json j = Json::parse(m->text);
      ended = {j["run"].get<size_t>(), j["exit"].get<int>(), j["signal"].get<int>()};
      it = std::find_if(running_.begin(), running_.end(), [&](const Running& r) { return r.index == ended.index; });
    } else {
      nap();
    }
    if (it == running_.end()) continue;
    const Running r = *it;
    running_.erase(it);
    return {r, ended};
  }
}

std::string Scheduler::where(int rank) const {
  if (!dist::world().distributed()) return "";
  return group_ == 1 ? fmt::format(" on rank {}", rank) : fmt::format(" on ranks {}-{}", rank, rank + group_ - 1);
}

// A run that ended: killed (resumed by the next call), or finished, diverged or failed, recorded in status.json.
// Returns whether it ended rather than being killed.
bool record_end(RunOutcome& o, const Ended& ended, const Running& r, const Scheduler& scheduler,
                const std::string& version, const std::string& cpu) {
  o.seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
  if (ended.signal) {  // killed (e.g. the study was interrupted): not ended, resumed by the next call
    o.message = fmt::format("killed by signal {}{} before it ended; rerun the study to resume it", ended.signal,
                            scheduler.where(r.rank));
    return false;
  }
  const bool ok = ended.exit_code == 0;
  o.message = ok ? "" : last_line(o.dir / "log.txt");
  o.status = ok ? RunStatus::finished : diverged(o.dir) ? RunStatus::diverged : RunStatus::failed;
  o.made_by = version, o.cpu = cpu, o.threads = scheduler.threads();
  io::write_file_atomic(o.dir / "status.json", Json{{"status", status_name(o.status)},
                                                    {"message", o.message},
                                                    {"seconds", o.seconds},
                                                    {"normlab", o.made_by},
                                                    {"cpu", o.cpu},
                                                    {"threads", o.threads}}
                                                       .dump() +
                                                   "\n");
  return true;
}

}  // namespace

std::vector<RunOutcome> run_grid(const fs::path& study_dir, const std::vector<RunRequest>& requests,
                                 const RunnerOptions& options) {
  // Every config is checked, and every stored run compared, before anything runs or is removed.
  const int group = ranks_per_run(options);
  std::vector<Json> planned;
  std::vector<RunOutcome> outcomes = planned_outcomes(study_dir, requests, planned);
  // One process writes a study folder; and no run of it may still be written by a process of an earlier call (a
  // killed study's trainer, or a `normlab train` started by hand), which would write on beside this one's.
  const io::FolderLock lock(study_dir, "study folder");
  for (const RunOutcome& o : outcomes)
    if (fs::exists(o.dir / "run")) io::FolderLock(o.dir / "run", "run folder");
  std::vector<size_t> stale;  // a partial run of another request, nothing to resume
  const std::vector<size_t> pending = runs_to_run(outcomes, planned, study_dir, options.fresh, stale);
  for (size_t i : stale) fs::remove_all(outcomes[i].dir);
  for (size_t i : pending) prepare_run(outcomes[i], planned[i]);
  const size_t skipped = outcomes.size() - pending.size();
  if (!options.quiet && skipped > 0)
    std::cerr << fmt::format("study: {} of {} runs already done\n", skipped, outcomes.size());

  const std::string version = source_version(), cpu = cpu_description();
  Scheduler scheduler(outcomes, pending, options, group);
  size_t done = skipped;
  while (!scheduler.done()) {
    scheduler.start_ready_runs();
    const auto [running, ended] = scheduler.next_end();
    scheduler.free(running);
    RunOutcome& o = outcomes[running.index];
    if (!record_end(o, ended, running, scheduler, version, cpu)) continue;
    ++done;
    if (!options.quiet)
      std::cerr << fmt::format("study: [{}/{}] {} {} ({:.0f}s{}){}\n", done, outcomes.size(), o.request.id,
                               status_name(o.status), o.seconds, scheduler.where(running.rank),
                               o.message.empty() ? "" : ": " + o.message);
  }
  return outcomes;
}

std::vector<RunOutcome> stored_outcomes(const fs::path& study_dir, const std::vector<RunRequest>& requests,
                                        bool same_requests) {
  std::vector<RunOutcome> outcomes;
  for (const RunRequest& r : requests) {
    RunOutcome o{r, study_dir / "runs" / r.id};
    o.config = resolve_config(r.config, "run " + r.id);
    if (!read_status(o.dir, o)) o.status = RunStatus::failed, o.message = "not run (no status.json)";
    const Json stored = read_json(o.dir / "request.json"), planned = same_requests ? stored_request(o) : stored;
    if (o.status != RunStatus::failed && stored != planned)
      fail(
          "the run stored in {} was made from another request than this plan's ({}): judge it with the command that "
          "made it",
          o.dir.string(), first_difference(stored, planned));
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

void write_summary_csv(const fs::path& file, const std::vector<RunOutcome>& outcomes) {
  std::string csv =
      fmt::format("id,kind,status,seconds,{},{},config\n", train::field::train_loss, train::field::val_loss);
  for (const RunOutcome& o : outcomes) {
    const train::RunSummary s = train::read_run_summary(o.dir / "run").value_or(train::RunSummary{});
    const double train = s.train_loss, val = s.val_loss;
    std::string config = o.request.config.dump();
    for (char& c : config)
      if (c == '"') c = '\'';
    csv += fmt::format("{},{},{},{:.1f},{},{},\"{}\"\n", o.request.id, o.request.kind, status_name(o.status), o.seconds,
                       train, val, config);
  }
  io::write_file_atomic(file, csv);
}

}  // namespace normlab::study
