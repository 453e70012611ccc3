// normlab: a laboratory for normalization placement in Transformers.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "cli/commands.h"
#include "common/error.h"
#include "dist/comm.h"
#include "study/runner.h"

namespace {

// An error ends the command; in an MPI job it ends every rank, and the message names the one that failed.
int report(const char* what) {
  const normlab::dist::World& world = normlab::dist::world();
  if (!world.distributed()) {
    std::cerr << "normlab: error: " << what << "\n";
    normlab::dist::finalize();
    return 1;
  }
  // One write, so the ranks' messages do not interleave.
  std::cerr << fmt::format("normlab: error ({}; ending the job): {}\n", world.where(), what) << std::flush;
  normlab::dist::abort_job(1);
}

// The message for a first word that names no command (empty when it names one, or is an option such as --help):
// CLI11 itself would say only that a subcommand is required.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return {};
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == word) return {};
    names.push_back(sub->get_name());
  }
  return fmt::format("unknown command '{}': the commands are {} (normlab --help says what each does)",
                     normlab::printable(word, 40), fmt::join(names, ", "));
}

}  // namespace

int main(int argc, char** argv) {
  // A file grown past the size limit (ulimit -f) would kill the process with SIGXFSZ, mid-write, with no message and
  // a temporary file left. Ignored, the write fails with EFBIG instead and is reported like a full disk (the file,
  // the error, what is intact); a study's runs inherit this and set it again themselves.
  std::signal(SIGXFSZ, SIG_IGN);
  normlab::study::end_with_study();
  try {
    normlab::dist::init(&argc, &argv);
  } catch (const normlab::Error& e) {
    return report(e.what());
  }
  CLI::App app{
      "normlab: train decoder-only Transformers with any normalization placement and watch why they behave "
      "as they do"};
  app.footer("Processes: " + normlab::dist::mpi_description() + " (docs/scaling.md).");
  app.require_subcommand(1);
  normlab::cli::add_prepare(app);
  normlab::cli::add_train(app);
  normlab::cli::add_eval(app);
  normlab::cli::add_generate(app);
  normlab::cli::add_translate(app);
  normlab::cli::add_export(app);
  normlab::cli::add_import(app);
  normlab::cli::add_variants(app);
  normlab::cli::add_presets(app);
  normlab::cli::add_init_report(app);
  normlab::cli::add_probe(app);
  normlab::cli::add_study(app);
  normlab::cli::add_sweep(app);
  normlab::cli::add_serve(app);
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) return report(unknown.c_str());
  // train, study and sweep share their work over the ranks; any other command would only run N times.
  if (normlab::dist::world().distributed() && argc > 1) {
    const std::string command = argv[1];
    if (command != "train" && command != "study" && command != "sweep" && !command.starts_with("-"))
      return report(("normlab " + command +
                     " runs in one process: start it without mpirun (train, study and sweep use the ranks)")
                        .c_str());
  }
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const normlab::Error& e) {
    return report(e.what());
  } catch (const std::exception& e) {
    return report(e.what());
  }
  normlab::dist::finalize();
  return code;
}
