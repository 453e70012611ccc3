// normlab: a laboratory for normalization placement in Transformers.
#include <iostream>
#include <string>

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

}  // namespace

int main(int argc, char** argv) {
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
