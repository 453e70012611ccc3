#pragma once
// The grid runner: one directory per run. A run that finished (or diverged) is reused only if its
// stored request (request.json: the full resolved config, the corpus, the analyses) equals the new
// plan's; a different one stops the grid before anything runs (--fresh reruns everything). An
// interrupted training run is resumed from its checkpoint, a failed one is run again, and up to
// `jobs` runs go in parallel as separate `normlab` processes with the cores shared between them (on each
// rank, under mpirun: serve_runs below).
#include <filesystem>
#include <string>
#include <vector>

#include "common/config_reader.h"

namespace normlab::study {

struct RunRequest {
  std::string id;                             // directory name under <study>/runs/
  Json config;                                // a full run config (model / data / train)
  std::string kind = "train";                 // train | probe (normlab probe --analysis <analyses> on the fresh init)
  std::string analyses;                       // probe: the analyses of the fresh init; train: of the trained checkpoint
  std::vector<std::string> probe_flags = {};  // more `normlab probe` options, e.g. {"--lr", "1e-5"}
  // A timed run: it starts only when no other run is running and nothing starts beside it (it keeps
  // the threads every run gets, --threads / --jobs, so its timing compares with its peers' whatever
  // the machine's load). Exclusive runs keep their plan order, so a plan listing forms A B C A B C
  // times them alternated, each alone. It does not enter request.json (it changes no number but the
  // wall time).
  bool exclusive = false;
};

enum class RunStatus { finished, diverged, failed };

struct RunOutcome {
  RunRequest request;
  std::filesystem::path dir;
  RunStatus status = RunStatus::failed;
  std::string message;  // the error line of a diverged or failed run
  double seconds = 0;
  Json config;          // the full config the run used (resolve_config of the request's)
  std::string made_by;  // the normlab that ran it, as status.json records it (source_version of the study's binary)
  std::string cpu;      // the CPU it ran on (cpu_description), "" where status.json predates the field
  int threads = 0;      // its processes' OpenMP threads; 0 where status.json predates the field
};

struct RunnerOptions {
  int jobs = 1;     // runs at once
  int threads = 2;  // cores shared by the jobs (each gets max(1, threads / jobs))
  bool quiet = false;
  bool fresh = false;  // discard every stored run of the grid and run it again
  // Processes per run: above 1 each run trains data-parallel, as `mpirun -np ranks_per_run normlab train`, on this
  // host or, under mpirun, over a group of that many consecutive ranks (the job's ranks must divide into groups).
  int ranks_per_run = 1;
  // The normlab each run starts (on this rank); empty: this process's own executable. A test that drives the
  // runner from its own binary names the normlab it built.
  std::string binary = "";
};

// A run config as the strict reader resolves it (every default filled in, threads left to the
// runner); fails, naming `where` and the field, on an unknown key or a bad value.
Json resolve_config(const Json& config, const std::string& where);
// What identifies a corpus: the fnv1a64 of its meta.json, which records its sources' and tokenizer's
// checksums and token counts ("missing" when it has none).
std::string corpus_checksum(const std::filesystem::path& data_dir);

// The commit the running binary was built from, embedded at build time: its full hash, with "-dirty" when tracked
// files differed from it, or "unknown" when it was built outside a git checkout. A copy of the binary names it too.
std::string source_version();

// This machine's CPU for the record: its model name and whether it multiplies bf16 in hardware, e.g.
// "AMD EPYC 9R14 96-Core Processor (avx512_bf16, no AMX)".
std::string cpu_description();

// "runs made by (status.json): V (n runs), ...": runs kept from earlier calls (a study run in pieces, results/) may
// have been made by other binaries than the one that reports them.
std::string runs_made_by(const std::vector<RunOutcome>& runs);

// The OpenMP threads of each run's process: a rank's --threads shared by its --jobs runs, and in a world of one by
// every process of those runs too (--ranks-per-run).
int threads_per_process(const RunnerOptions& options);

// --jobs when it is left out: one run per core, --threads ÷ --ranks-per-run (at least 1), so each process gets one
// thread. A d-64 run on 2 threads is about 1.7× as fast as on 1 (docs/performance.md), so two runs side by side beat
// one run on both cores.
int jobs_per_core(const RunnerOptions& options);

// Refuses --jobs, --threads or --ranks-per-run below 1, naming the option.
void check_runner_options(const RunnerOptions& options);

// Checks every request's config, then runs every request not yet done, in plan order (up to `jobs`
// at once, exclusive runs alone); returns the outcome of all of them (done earlier or now).
std::vector<RunOutcome> run_grid(const std::filesystem::path& study_dir, const std::vector<RunRequest>& requests,
                                 const RunnerOptions& options);
const char* status_name(RunStatus s);
// The outcomes of a plan's runs as they are stored under study_dir/runs, running and writing nothing: a run without
// a readable status.json is failed ("not run"). Judging kept runs again (results/) needs exactly this. With
// `same_requests`, a stored run made from another request than the plan's (request.json) stops it, as run_grid does.
std::vector<RunOutcome> stored_outcomes(const std::filesystem::path& study_dir, const std::vector<RunRequest>& requests,
                                        bool same_requests = true);

// Under mpirun, run_grid on rank 0 hands runs out to every rank as their slots free up (runs differ in
// cost), each rank running its share as its own normlab processes; the study folder must be on a
// filesystem every rank sees (docs/scaling.md). The other ranks call serve_runs(), which runs what rank 0
// sends until rank 0 calls release_workers() (after its last grid: a study may run several).
void serve_runs();
void release_workers();

// A normlab process that a study started (directly, or through the shell or mpirun that runs its stages) ends when
// the study does, even of kill -9: main() calls this first. Nothing happens in a process no study started.
void end_with_study();

// Writes summary.csv: id, kind, status, seconds, final train loss, val loss, and the config overrides.
void write_summary_csv(const std::filesystem::path& file, const std::vector<RunOutcome>& outcomes);

}  // namespace normlab::study
