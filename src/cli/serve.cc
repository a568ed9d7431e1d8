// floodgate serve [--config FILE] [--listen HOST:PORT] [--store URL] [--threads N]
// (service.md, "Command line"; config keys in "Config file").
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

#include "cli/commands.h"
#include "common/strings.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/service.h"

namespace floodgate::cli {

namespace {

struct ServeFlags {
  std::string config;
  std::string listen;
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
  if (!flags.store.empty()) {
    config.store.url = flags.store;
  } else if (!config.store_url_given) {
    if (!env("FLOODGATE_STORE").empty()) {
      config.store.url = env("FLOODGATE_STORE");
    } else if (!env("REDIS_URL").empty()) {
      config.store.url = env("REDIS_URL");
    }
  }
  if (auto listen = server::ParseListen(config.listen); !listen.ok()) return listen.status();
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
  StoreWatch(boost::asio::io_context& io, RedisStore& store) : timer_(io), store_(store) {}

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
    healthy_ = health.ok();
    timer_.expires_after(std::chrono::seconds(1));
    timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) Check();
    });
  }

  boost::asio::steady_timer timer_;
  RedisStore& store_;
  bool healthy_ = true;
};

}  // namespace

Command AddServe(CLI::App& app) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the HTTP service: decision API, reverse-proxy endpoint, metrics, demo page");
  cmd->add_option("--config", flags->config, "YAML config file (SIGHUP reloads it)");
  cmd->add_option("--listen", flags->listen, "HOST:PORT (default 127.0.0.1:8080)");
  cmd->add_option("--store", flags->store, "store URL (default memory://)");
  cmd->add_option("--threads", flags->threads, "I/O threads (default: one per core)")
      ->check(CLI::Range(0, 1024));

  return {cmd, [flags]() -> int {
            // spdlog builds its registry and default logger on first use; that first use
            // must come before the store's and the server's threads start, or their
            // first log line races with the construction (ThreadSanitizer saw it).
            spdlog::set_level(spdlog::level::info);
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
            auto shared = std::make_shared<const server::ServerConfig>(*config);
            server::Service service(store, shared);
            const auto [host, port] = *server::ParseListen(config->listen);
            server::HttpOptions options;
            options.host = host;
            options.port = port;
            options.threads = flags->threads;
            server::HttpServer http(service, options);
            if (absl::Status status = http.Start(); !status.ok()) {
              fmt::print(stderr, "floodgate serve: {}\n", MessageOf(status));
              return kExitError;
            }
            spdlog::info("floodgate {} listening on http://{} (store {}, {} rules, config {})",
                         kVersion, HostPort(host, http.port()), store->Describe(),
                         config->rules.size(), config->source);

            boost::asio::io_context signals_io;
            std::optional<StoreWatch> watch;
            if (auto* redis = dynamic_cast<RedisStore*>(store.get())) {
              watch.emplace(signals_io, *redis);
              watch->Start();
            }
            boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM, SIGHUP);
            std::function<void(const boost::system::error_code&, int)> on_signal =
                [&](const boost::system::error_code& ec, int signal) {
                  if (ec) return;
                  if (signal != SIGHUP) {
                    spdlog::info("floodgate: {} received, finishing requests in flight",
                                 signal == SIGINT ? "SIGINT" : "SIGTERM");
                    http.Shutdown();
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
            spdlog::info("floodgate: stopped");
            return kExitAllowed;
          }};
}

}  // namespace floodgate::cli
