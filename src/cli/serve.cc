// floodgate serve: the HTTP service and, with --grpc-listen, Envoy's rate limit service.
//
// floodgate serve [--config FILE] [--listen HOST:PORT] [--grpc-listen HOST:PORT]
// [--store URL] [--threads N] (docs/service.md, "serve"; config keys in "Config file";
// Envoy's rate limit service over gRPC: docs/envoy.md).
#include <absl/synchronization/mutex.h>
#include <floodgate/redis_store.h>
#include <floodgate/store.h>
#include <floodgate/version.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/process_guard.h"
#include "common/strings.h"
#include "core/zone_names.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/rls/grpc_server.h"
#include "server/rls/serve_engine.h"
#include "server/rls/upstream_settings.h"
#include "server/service.h"

namespace floodgate::cli {

namespace {

struct ServeFlags {
  std::string config;
  std::string listen;
  std::string grpc_listen;
  std::string store;
  int threads = 0;
};

// The config file (or the defaults), with flags on top and the environment filling
// what both leave unset.
absl::StatusOr<server::ServerConfig> Effective(const ServeFlags& flags) {
  server::ServerConfig config;
  if (!flags.config.empty()) {
    auto loaded = server::LoadConfig(flags.config);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  } else {
    config.source = "defaults";
  }
  const auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value == nullptr ? "" : value;
  };
  if (!flags.listen.empty()) {
    config.listen = flags.listen;
  } else if (!config.listen_given && !env("FLOODGATE_LISTEN").empty()) {
    config.listen = env("FLOODGATE_LISTEN");
  }
  if (!flags.grpc_listen.empty()) {
    config.grpc_listen = flags.grpc_listen;
  } else if (!config.grpc_listen_given && !env("FLOODGATE_GRPC_LISTEN").empty()) {
    config.grpc_listen = env("FLOODGATE_GRPC_LISTEN");
  } else if (!config.grpc_listen_given &&
             (!env("GRPC_HOST").empty() || !env("GRPC_PORT").empty())) {
    // envoyproxy/ratelimit's own variables, with its defaults for the one not given.
    const std::string host = env("GRPC_HOST").empty() ? "0.0.0.0" : env("GRPC_HOST");
    std::uint16_t port = 8081;
    if (!env("GRPC_PORT").empty() && !ParseDecimal(std::string_view(env("GRPC_PORT")), port)) {
      return absl::InvalidArgumentError(
          fmt::format("GRPC_PORT must be a port number, got \"{}\"", env("GRPC_PORT")));
    }
    config.grpc_listen = HostPort(host, port);
  }
  // Upstream's Redis variables describe the store only when nothing else does: beside a store
  // that --store, the config or FLOODGATE_STORE gives they would be ignored, and a packaged
  // config's memory:// would count alone on each replica. So the start stops, naming both.
  const std::string pinned =
      !flags.store.empty()              ? "--store " + flags.store
      : config.store_url_given          ? config.source + "'s store.url " + config.store.url
      : !env("FLOODGATE_STORE").empty() ? "FLOODGATE_STORE=" + env("FLOODGATE_STORE")
                                        : "";
  if (!pinned.empty()) {
    for (const server::rls::UpstreamVariable& row : server::rls::UpstreamVariables()) {
      if (!row.name.starts_with("REDIS_") ||
          std::getenv(std::string(row.name).c_str()) == nullptr) {
        continue;
      }
      return absl::InvalidArgumentError(fmt::format(
          "{} is set (envoyproxy/ratelimit's Redis settings) but the store is {}: serve would "
          "ignore it. Run upstream's mode (/bin/ratelimit, docs/envoy.md) or unset {}",
          row.name, pinned, row.name));
    }
  }
  if (!flags.store.empty()) {
    config.store.url = flags.store;
  } else if (!config.store_url_given) {
    if (!env("FLOODGATE_STORE").empty()) {
      config.store.url = env("FLOODGATE_STORE");
    } else {
      // REDIS_URL as floodgate's URL, or upstream's REDIS_* settings mapped onto one.
      auto upstream = server::StoreUrlFromUpstreamRedisEnv(
          [](const char* name) -> const char* { return std::getenv(name); });
      if (!upstream.ok()) return upstream.status();
      if (upstream->has_value()) config.store.url = **upstream;
    }
  }
  if (auto listen = server::ParseListen(config.listen); !listen.ok()) return listen.status();
  if (!config.grpc_listen.empty()) {
    if (auto listen = server::ParseListen(config.grpc_listen); !listen.ok()) {
      return absl::InvalidArgumentError(fmt::format("grpc_listen: {}", MessageOf(listen.status())));
    }
  }
  return config;
}

std::string_view OnErrorName(OnError on_error) {
  switch (on_error) {
    case OnError::kFailOpen:
      return "fail_open";
    case OnError::kFailClosed:
      return "fail_closed";
    case OnError::kLocal:
      break;
  }
  return "local";
}

// While a Redis store has no Redis (serve opens it with lazy_connect: it starts, and
// keeps connecting, without one), says so with the reason at most once a second, and
// once when Redis answers again.
class StoreWatch {
 public:
  // `on_change(healthy)` hears every change of the store's health (gRPC health follows it).
  StoreWatch(boost::asio::io_context& io, RedisStore& store, std::function<void(bool)> on_change)
      : timer_(io), store_(store), on_change_(std::move(on_change)) {}

  void Start() { Check(); }
  void Stop() { timer_.cancel(); }

 private:
  void Check() {
    const absl::Status health = store_.Health();
    if (!health.ok()) {
      spdlog::warn("floodgate: {}; decisions are answered by on_error={} until it answers",
                   MessageOf(health), OnErrorName(store_.options().on_error));
    } else if (!healthy_) {
      spdlog::info("floodgate: {} answers: decisions go to it again", store_.Describe());
    }
    if (health.ok() != healthy_ && on_change_) on_change_(health.ok());
    healthy_ = health.ok();
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Check();
    });
  }

  boost::asio::steady_timer timer_;
  RedisStore& store_;
  std::function<void(bool)> on_change_;
  bool healthy_ = true;
};

// How long requests in flight may take to finish after SIGTERM (HTTP and gRPC alike).
constexpr std::chrono::seconds kGrace{10};

}  // namespace

Command AddServe(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the HTTP service: decision API, reverse-proxy endpoint, metrics, demo page");
  cmd->add_option("--config", flags->config, "YAML config file (SIGHUP reloads it)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT (default 127.0.0.1:8080)");
  cmd->add_option("--grpc-listen", flags->grpc_listen,
                  "HOST:PORT of Envoy's rate limit service, gRPC (RLS v3; default: off)");
  cmd->add_option("--store", flags->store, "store URL (default memory://)");
  cmd->add_option("--threads", flags->threads, "I/O threads (default: one per core)")
      ->check(CLI::Range(0, 1024));

  return {
      cmd, [flags]() -> int {
        // spdlog builds its registry and default logger on first use; that first use
        // must come before the store's and the server's threads start, or their
        // first log line races with the construction (ThreadSanitizer saw it).
        spdlog::set_level(spdlog::level::info);
        // absl::Mutex (under gRPC) tracks every lock order to report deadlocks when
        // abseil is built without NDEBUG, as Debian's is: a debugging aid that took 2-4% of
        // the gRPC server's CPU in perf profiles. Set before any thread starts.
        absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
        // Destroyed last: it watches the destructors of what follows too.
        std::jthread watchdog;
        RaiseDescriptorLimit();
        // The zone list is read now, not by the first request that names a zone.
        if (absl::Status zones = core::SystemZoneNamesError(); !zones.ok()) {
          spdlog::warn("floodgate: {}; tz= takes only UTC", MessageOf(zones));
        }
        auto config = Effective(*flags);
        if (!config.ok()) {
          fmt::print(stderr, "floodgate serve: {}\n", MessageOf(config.status()));
          return kExitError;
        }
        auto opened = OpenStore(config->store.EffectiveUrl());
        if (!opened.ok()) {
          fmt::print(stderr, "floodgate serve: {}\n", MessageOf(opened.status()));
          return kExitError;
        }
        std::shared_ptr<Store> store = *std::move(opened);
        // Envoy's rate limit service, when a gRPC address is given: the engine
        // outlives the gRPC server and the HTTP service that call it.
        std::unique_ptr<server::rls::Engine> rls_engine;
        if (!config->grpc_listen.empty()) {
          auto made = server::rls::MakeServeEngine(config->rls, store);
          if (!made.ok()) {
            fmt::print(stderr, "floodgate serve: {}\n", MessageOf(made.status()));
            return kExitError;
          }
          rls_engine = *std::move(made);
        }
        auto shared = std::make_shared<const server::ServerConfig>(*config);
        server::Service service(store, shared);
        if (rls_engine) service.AttachRls(rls_engine.get());
        const auto [host, port] = *server::ParseListen(config->listen);
        server::HttpOptions options;
        options.host = host;
        options.port = port;
        options.threads = flags->threads;
        // Signals are caught from before the first port opens: a SIGTERM that comes
        // as soon as a client sees the port stops the service cleanly (asio queues it
        // until the wait below), where the default action would kill it.
        boost::asio::io_context signals_io;
        boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM, SIGHUP);
        server::HttpServer http(service, options);
        if (absl::Status status = http.Start(); !status.ok()) {
          fmt::print(stderr, "floodgate serve: {}\n", MessageOf(status));
          return kExitError;
        }
        std::optional<server::rls::GrpcServer> grpc;
        if (rls_engine) {
          const auto [grpc_host, grpc_port] = *server::ParseListen(config->grpc_listen);
          grpc.emplace(*rls_engine, server::rls::GrpcOptions{grpc_host, grpc_port, flags->threads});
          if (absl::Status status = grpc->Start(); !status.ok()) {
            fmt::print(stderr, "floodgate serve: {}\n", MessageOf(status));
            http.Shutdown(std::chrono::milliseconds(0));
            return kExitError;
          }
          spdlog::info("floodgate: Envoy rate limit service (RLS v3) on grpc://{}",
                       HostPort(grpc_host, grpc->port()));
        }
        spdlog::info("floodgate {} listening on http://{} (store {}, {} rules, config {})",
                     kVersion, HostPort(host, http.port()), store->Describe(), config->rules.size(),
                     config->source);

        std::optional<StoreWatch> watch;
        if (auto* redis = dynamic_cast<RedisStore*>(store.get())) {
          watch.emplace(signals_io, *redis, [&grpc](bool healthy) {
            if (grpc) grpc->SetServing(healthy);
          });
          watch->Start();
        }
        // gRPC's shutdown blocks until calls in flight finish; they may wait on the
        // store, which store->Close() below answers: so it runs beside, joined last.
        std::jthread grpc_stopping;
        std::function<void(const boost::system::error_code&, int)> on_signal =
            [&](const boost::system::error_code& ec, int signal) {
              if (ec) return;
              if (signal != SIGHUP) {
                spdlog::info("floodgate: {} received, finishing requests in flight",
                             signal == SIGINT ? "SIGINT" : "SIGTERM");
                watchdog = ExitUnlessStoppedWithin(kGrace + kStuckAfterGrace, kExitError);
                if (grpc) {
                  grpc_stopping = std::jthread([&grpc] { grpc->Shutdown(kGrace); });
                }
                http.Shutdown(kGrace);
                if (watch) watch->Stop();
                return;
              }
              auto reloaded = Effective(*flags);
              if (!reloaded.ok()) {
                spdlog::error("floodgate: reload refused, keeping the running config: {}",
                              MessageOf(reloaded.status()));
              } else {
                if (reloaded->store != service.config()->store ||
                    reloaded->listen != service.config()->listen) {
                  spdlog::warn("floodgate: listen and store changes take effect on restart");
                }
                service.Reload(std::make_shared<const server::ServerConfig>(*reloaded));
                spdlog::info("floodgate: config reloaded ({} rules)", reloaded->rules.size());
              }
              signals.async_wait(on_signal);
            };
        signals.async_wait(on_signal);
        signals_io.run();
        // Requests still waiting on the store past the grace get their answers now,
        // while the server and the service they call back into still exist.
        store->Close();
        if (grpc_stopping.joinable()) grpc_stopping.join();
        spdlog::info("floodgate: stopped");
        return kExitAllowed;
      }};
}

}  // namespace floodgate::cli
