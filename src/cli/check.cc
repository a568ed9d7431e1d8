// floodgate check: decide one request and print its Decision JSON; the exit code says which.
// floodgate check --policy POLICY [--store URL] [--cost N] KEY (docs/service.md, "check")
#include <floodgate/limiter.h>
#include <fmt/core.h>

#include <string>

#include "cli/commands.h"
#include "common/strings.h"

namespace floodgate::cli {

Command AddCheck(CLI::App& app) {
  struct Flags {
    std::string policy;
    std::string store = "memory://";
    std::int64_t cost = 1;
    std::string key;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("check",
                                     "Decide one request and print the Decision JSON "
                                     "(exit 0 allowed, 1 denied, 2 error)");
  cmd->add_option("--policy", flags->policy, "ALGORITHM:LIMIT/PERIOD[,burst=B][,refill=...]")
      ->required();
  cmd->add_option("--store", flags->store, "store URL")->capture_default_str();
  cmd->add_option("--cost", flags->cost, "units this request consumes (0 = peek)")
      ->capture_default_str();
  cmd->add_option("KEY", flags->key, "the key to limit")->required();

  return {cmd, [flags]() -> int {
            auto policy = Policy::Parse(flags->policy);
            if (!policy.ok()) {
              fmt::print(stderr, "floodgate check: {}\n", MessageOf(policy.status()));
              return kExitError;
            }
            auto limiter = Limiter::Open(flags->store);
            if (!limiter.ok()) {
              fmt::print(stderr, "floodgate check: {}\n", MessageOf(limiter.status()));
              return kExitError;
            }
            auto decision = limiter->Check(flags->key, *policy, flags->cost);
            if (!decision.ok()) {
              fmt::print(stderr, "floodgate check: {}\n", MessageOf(decision.status()));
              return kExitError;
            }
            fmt::print("{}\n", ToJson(*decision));
            return decision->allowed ? kExitAllowed : kExitDenied;
          }};
}

}  // namespace floodgate::cli
