// The RLS engine `serve` runs: its environment, its config directory, its store.
//
// Upstream's environment with the `rls:` section on top, the config directory loaded once (a bad
// one refuses to start) and watched for changes, decisions by RlsEngine on the serve's store (see
// serve_engine.h).
#include "server/rls/serve_engine.h"

#include <fmt/format.h>

#include <cstdlib>

#include "server/rls/loader.h"
#include "server/rls/rls_engine.h"

namespace floodgate::server::rls {

namespace {

void AppendLoadCounters(const LoaderCounters& loads, std::string& out);

// What both engines below own for as long as they answer, and forward to: the store, the
// metrics, the RlsEngine. Destroyed after the servers that call them.
class OwningEngine : public Engine {
 public:
  void ShouldRateLimit(const pb::RateLimitRequest& request, pb::RateLimitResponse* response,
                       RlsDone done) override {
    engine_.ShouldRateLimit(request, response, std::move(done));
  }
  std::shared_ptr<const RlsConfig> CurrentConfig() const override { return engine_.config(); }
  RlsMetrics* metrics() override { return &metrics_; }

 protected:
  // `per_second`: REDIS_PERSECOND's store for SECOND limits, or nullptr.
  OwningEngine(std::shared_ptr<Store> store, std::shared_ptr<Store> per_second,
               const RlsSettings& settings, std::shared_ptr<const RlsConfig> config)
      : store_(std::move(store)),
        per_second_(std::move(per_second)),
        metrics_(settings.near_limit_ratio),
        engine_(*store_, settings, std::move(config), metrics_, {}, per_second_.get()) {}

  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> per_second_;
  RlsMetrics metrics_;
  RlsEngine engine_;
};

// The config from the runtime directory, watched.
class ServeEngine final : public OwningEngine {
 public:
  ServeEngine(std::shared_ptr<Store> store, std::shared_ptr<Store> per_second,
              RlsSettings settings, std::shared_ptr<const RlsConfig> config)
      : OwningEngine(std::move(store), std::move(per_second), settings, std::move(config)),
        watcher_(settings, std::chrono::seconds(1),
                 [this](std::shared_ptr<const RlsConfig> next) { engine_.SetConfig(next); }) {}

  ConfigLoads config_loads() const override {
    // The first load is the one before the engine existed: it succeeded, or there is no engine.
    const LoaderCounters& loads = watcher_.counters();
    return {.success = 1 + loads.load_success.load(std::memory_order_relaxed),
            .error = loads.load_error.load(std::memory_order_relaxed)};
  }

  void AppendMetrics(std::string& out) const override {
    out += metrics_.Render();
    AppendLoadCounters(watcher_.counters(), out);
  }

 private:
  ConfigWatcher watcher_;  // stops before the engine it feeds goes
};

// LoaderCounters' families, for the file watcher's reloads and the xDS client's updates alike.
void AppendLoadCounters(const LoaderCounters& loads, std::string& out) {
  out += fmt::format(
      "# HELP floodgate_rls_config_load_total Reloads of the RLS config, by result.\n"
      "# TYPE floodgate_rls_config_load_total counter\n"
      "floodgate_rls_config_load_total{{result=\"success\"}} {}\n"
      "floodgate_rls_config_load_total{{result=\"error\"}} {}\n",
      loads.load_success.load(std::memory_order_relaxed),
      loads.load_error.load(std::memory_order_relaxed));
}

// As ServeEngine, its config from an xDS server instead of a directory.
class XdsEngine final : public OwningEngine {
 public:
  XdsEngine(std::shared_ptr<Store> store, std::shared_ptr<Store> per_second,
            RlsSettings settings, XdsSettings xds, XdsTlsFiles tls,
            absl::AnyInvocable<void()> on_update)
      : OwningEngine(std::move(store), std::move(per_second), settings, nullptr),
        on_update_(std::move(on_update)),
        client_(std::move(xds), std::move(tls),
                [this](absl::StatusOr<std::shared_ptr<const RlsConfig>> config) {
                  if (config.ok()) {
                    engine_.SetConfig(*std::move(config));
                    loads_.load_success.fetch_add(1, std::memory_order_relaxed);
                  } else {
                    loads_.load_error.fetch_add(1, std::memory_order_relaxed);
                  }
                  if (on_update_) on_update_();
                }) {}

  ConfigLoads config_loads() const override {
    // Every config comes in an update, the first too (upstream's xDS provider counts each).
    return {.success = loads_.load_success.load(std::memory_order_relaxed),
            .error = loads_.load_error.load(std::memory_order_relaxed)};
  }
  void AppendMetrics(std::string& out) const override {
    out += metrics_.Render();
    AppendLoadCounters(loads_, out);
    const XdsCounters& xds = client_.counters();
    out += fmt::format(
        "# HELP floodgate_rls_xds_responses_total xDS responses, by what was answered.\n"
        "# TYPE floodgate_rls_xds_responses_total counter\n"
        "floodgate_rls_xds_responses_total{{answer=\"ack\"}} {}\n"
        "floodgate_rls_xds_responses_total{{answer=\"nack\"}} {}\n"
        "# HELP floodgate_rls_xds_streams_total xDS streams opened (the first, then each "
        "reconnect).\n"
        "# TYPE floodgate_rls_xds_streams_total counter\n"
        "floodgate_rls_xds_streams_total {}\n",
        xds.acks.load(std::memory_order_relaxed), xds.nacks.load(std::memory_order_relaxed),
        xds.streams.load(std::memory_order_relaxed));
  }

 private:
  LoaderCounters loads_;
  absl::AnyInvocable<void()> on_update_;
  XdsConfigClient client_;  // last: stops before what it feeds goes
};

}  // namespace

absl::StatusOr<RlsSettings> ServeSettings(const server::RlsSection& section) {
  auto settings =
      FromEnvironment([](const char* name) -> const char* { return std::getenv(name); });
  if (!settings.ok()) return settings.status();
  if (!section.runtime_root.empty()) settings->runtime_root = section.runtime_root;
  if (!section.runtime_subdirectory.empty()) {
    settings->runtime_subdirectory = section.runtime_subdirectory;
  }
  if (section.ignore_dotfiles) settings->ignore_dotfiles = true;
  if (section.unavailable_on_store_error) settings->unavailable_on_store_error = true;
  return settings;
}

absl::StatusOr<std::unique_ptr<Engine>> MakeServeEngine(const server::RlsSection& section,
                                                        std::shared_ptr<Store> store) {
  auto settings = ServeSettings(section);
  if (!settings.ok()) return settings.status();
  return MakeEngine(*std::move(settings), std::move(store));
}

absl::StatusOr<std::unique_ptr<Engine>> MakeEngine(RlsSettings settings,
                                                   std::shared_ptr<Store> store,
                                                   std::shared_ptr<Store> per_second) {
  auto config = LoadRlsConfig(settings);
  if (!config.ok()) return config.status();
  return std::make_unique<ServeEngine>(std::move(store), std::move(per_second),
                                       std::move(settings), *std::move(config));
}

}  // namespace floodgate::server::rls

namespace floodgate::server::rls {

absl::StatusOr<std::unique_ptr<Engine>> MakeXdsEngine(RlsSettings settings,
                                                      std::shared_ptr<Store> store,
                                                      XdsSettings xds, XdsTlsFiles tls,
                                                      absl::AnyInvocable<void()> on_update,
                                                      std::shared_ptr<Store> per_second) {
  return std::make_unique<XdsEngine>(std::move(store), std::move(per_second), std::move(settings),
                                     std::move(xds), std::move(tls), std::move(on_update));
}

}  // namespace floodgate::server::rls
