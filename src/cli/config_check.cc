// floodgate config check: validate a config file, and the RLS config directory it points
// at, the way `serve` loads them, without opening a port or a store.
//
// floodgate config check [FILE] [--runtime-root DIR] (docs/service.md, "config check").
#include <fmt/core.h>

#include <cstdlib>
#include <string>

#include "cli/commands.h"
#include "common/strings.h"
#include "server/config.h"
#include "server/rls/loader.h"
#include "server/rls/serve_engine.h"

namespace floodgate::cli {

namespace {

struct ConfigCheckFlags {
  std::string file;
  std::string runtime_root;
};

int Refuse(const absl::Status& status) {
  fmt::print(stderr, "floodgate config check: {}\n", MessageOf(status));
  return kExitError;
}

}  // namespace

Command AddConfig(CLI::App& app) {
  auto flags = std::make_shared<ConfigCheckFlags>();
  CLI::App* config = app.add_subcommand("config", "Work with config files");
  config->require_subcommand(1);
  CLI::App* cmd = config->add_subcommand(
      "check",
      "Validate a config file (and the RLS config directory: its rls: section, RUNTIME_ROOT "
      "or --runtime-root) without starting anything; exit 2 with file:line on an error");
  cmd->add_option("FILE", flags->file, "YAML config file, as serve --config takes it");
  cmd->add_option("--runtime-root", flags->runtime_root,
                  "envoyproxy/ratelimit's RUNTIME_ROOT to check (overrides the file's and "
                  "the environment's)");

  return {config, [flags]() -> int {
            if (flags->file.empty() && flags->runtime_root.empty()) {
              return Refuse(absl::InvalidArgumentError("give a FILE, --runtime-root DIR or both"));
            }
            server::ServerConfig config;
            if (!flags->file.empty()) {
              auto loaded = server::LoadConfig(flags->file);
              if (!loaded.ok()) return Refuse(loaded.status());
              config = *std::move(loaded);
              fmt::print("{}: ok ({} rule{})\n", flags->file, config.rules.size(),
                         config.rules.size() == 1 ? "" : "s");
            }
            // The RLS directory is what serve loads once gRPC is on; checked whenever the
            // file or the environment says where it is, so that a typo in either shows here.
            const bool rls_named = !flags->runtime_root.empty() || !config.grpc_listen.empty() ||
                                   !config.rls.runtime_root.empty() ||
                                   std::getenv("RUNTIME_ROOT") != nullptr;
            if (!rls_named) return kExitAllowed;
            auto settings = server::rls::ServeSettings(config.rls);
            if (!settings.ok()) return Refuse(settings.status());
            if (!flags->runtime_root.empty()) settings->runtime_root = flags->runtime_root;
            auto rls = server::rls::LoadRlsConfig(*settings);
            if (!rls.ok()) return Refuse(rls.status());
            const std::size_t domains = (*rls)->domain_count();
            fmt::print("{}: ok ({} domain{})\n", server::rls::ConfigDirectory(*settings).string(),
                       domains, domains == 1 ? "" : "s");
            return kExitAllowed;
          }};
}

}  // namespace floodgate::cli
