// The floodgate binary: parses the command line and runs the chosen subcommand.

#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  using namespace floodgate::cli;
  // envoyproxy/ratelimit's mode (docs/envoy.md): started as its binary (/bin/ratelimit, a link
  // in the image), or given it as the command (`floodgate ratelimit`; `floodgate /bin/ratelimit`
  // is what upstream's `command: /bin/ratelimit` makes of the image's entrypoint).
  const auto is_ratelimit = [](const char* arg) {
    return std::filesystem::path(arg).filename() == "ratelimit";
  };
  if ((argc > 0 && is_ratelimit(argv[0])) || (argc > 1 && is_ratelimit(argv[1]))) {
    return RunRatelimit();
  }
  CLI::App app{"floodgate: a distributed rate limiter", "floodgate"};
  app.set_version_flag("--version", VersionText(kGitRevision));
  app.require_subcommand(1);
  app.footer(
      "Started as `ratelimit` (or `floodgate ratelimit`): envoyproxy/ratelimit's mode, configured "
      "by its environment variables alone (docs/envoy.md).");
  const std::vector<Command> commands = {AddServe(app), AddCheck(app), AddReplay(app),
                                         AddBench(app), AddConfig(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitError;
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  return kExitError;
}
