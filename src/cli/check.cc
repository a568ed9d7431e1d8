// floodgate check: decide one request and print its Decision JSON; the exit code says which.
// floodgate check --policy POLICY [--store URL] [--cost N | --reset | --refund N |
//                 --penalize N] KEY (docs/service.md, "check")
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
    bool reset = false;
    std::int64_t refund = 0, penalize = 0;
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
  CLI::Option* reset = cmd->add_flag(
      "--reset", flags->reset, "forget the key's state (and block) instead; print the peek after");
  CLI::Option* refund =
      cmd->add_option("--refund", flags->refund, "give back N units instead; print the peek after");
  CLI::Option* penalize =
      cmd->add_option("--penalize", flags->penalize,
                      "charge N units, past the limit if need be; print the peek after");
  reset->excludes(refund)->excludes(penalize);
  refund->excludes(penalize);
  cmd->add_option("KEY", flags->key, "the key to limit")->required();

  return {cmd, [flags, refund, penalize]() -> int {
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
            // An operation answers the key's peek after it (docs/algorithms.md, "Operating a
            // key"): a peek is always allowed, so exit 0.
            auto decision =
                flags->reset            ? limiter->Reset(flags->key, *policy)
                : refund->count() > 0   ? limiter->Refund(flags->key, *policy, flags->refund)
                : penalize->count() > 0 ? limiter->Penalize(flags->key, *policy, flags->penalize)
                                        : limiter->Check(flags->key, *policy, flags->cost);
            if (!decision.ok()) {
              fmt::print(stderr, "floodgate check: {}\n", MessageOf(decision.status()));
              return kExitError;
            }
            fmt::print("{}\n", ToJson(*decision));
            return decision->allowed ? kExitAllowed : kExitDenied;
          }};
}

}  // namespace floodgate::cli
