// normlab serve: a local web view of runs and studies while they train (src/serve/server.h).
#include <fmt/core.h>

#include <iostream>

#include "cli/commands.h"
#include "serve/server.h"

namespace normlab::cli {

void add_serve(CLI::App& app) {
  auto options = std::make_shared<serve::ServeOptions>();
  CLI::App* cmd = app.add_subcommand("serve",
                                     "watch runs and studies live in a browser: an index, live charts per run, "
                                     "runs overlaid; local and read-only");
  cmd->add_option("dir", options->dir, "the folder of runs and studies")->capture_default_str();
  cmd->add_option("--host", options->host, "address to bind; anything but 127.0.0.1 exposes your runs to the network")
      ->capture_default_str();
  cmd->add_option("--port", options->port, "port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->callback([options] {
    serve::Server server(*options);
    std::cout << fmt::format("serving {} at {} (read-only; Ctrl-C stops)\n", options->dir.string(), server.url())
              << std::flush;
    server.run();
  });
}

}  // namespace normlab::cli
