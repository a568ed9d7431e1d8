// The floodgate binary: parses the command line and runs the chosen subcommand.

#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  using namespace floodgate::cli;
  CLI::App app{"floodgate: a distributed rate limiter", "floodgate"};
  app.set_version_flag("--version", VersionText(kGitRevision));
  app.require_subcommand(1);
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
