// normlab: a laboratory for normalization placement in Transformers.
#include <iostream>

#include "cli/commands.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{
      "normlab: train decoder-only Transformers with any normalization placement and watch why they behave "
      "as they do"};
  app.require_subcommand(1);
  normlab::cli::add_prepare(app);
  normlab::cli::add_train(app);
  normlab::cli::add_eval(app);
  normlab::cli::add_generate(app);
  normlab::cli::add_variants(app);
  normlab::cli::add_init_report(app);
  normlab::cli::add_probe(app);
  normlab::cli::add_study(app);
  normlab::cli::add_sweep(app);
  normlab::cli::add_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const normlab::Error& e) {
    std::cerr << "normlab: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "normlab: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
