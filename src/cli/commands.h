#pragma once

// The CLI's subcommands, each added to the top-level app, and the exit codes they share.

#include <CLI/CLI.hpp>
#include <functional>

namespace floodgate::cli {

// A subcommand registered on the top-level app, and what runs it once parsing succeeded;
// run's result is the process exit code.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command AddCheck(CLI::App& app);
Command AddReplay(CLI::App& app);
Command AddBench(CLI::App& app);
Command AddServe(CLI::App& app);
// `config check FILE`: the command is `config`, run once its `check` was parsed.
Command AddConfig(CLI::App& app);

// The `ratelimit` command: the binary started under that name (envoyproxy/ratelimit's
// /bin/ratelimit), arguments ignored, everything from upstream's environment (ratelimit.cc).
int RunRatelimit();

// Exit codes shared by every subcommand (docs/service.md, "Command line").
inline constexpr int kExitAllowed = 0;
inline constexpr int kExitDenied = 1;
inline constexpr int kExitError = 2;

}  // namespace floodgate::cli
