// The `ratelimit` command: floodgate started as envoyproxy/ratelimit's /bin/ratelimit.
//
// No arguments (upstream reads none: they are ignored), every setting from upstream's environment
// with upstream's defaults (docs/envoy.md, "Two ways to run it"). The start is upstream's: the
// settings, Redis answering PING (retried as REDIS_STARTUP_* say), the config files loaded, and
// only then the debug, gRPC and HTTP ports. SIGTERM fails /healthcheck (500) while gRPC calls in
// flight finish; SIGINT and SIGHUP stop the same way (upstream exits on SIGHUP too).
#include <absl/synchronization/mutex.h>
#include <floodgate/redis_store.h>
#include <floodgate/store.h>
#include <floodgate/version.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <random>
#include <thread>

#include "cli/commands.h"
#include "cli/process_guard.h"
#include "cli/upstream_log.h"
#include "common/strings.h"
#include "server/config.h"
#include "server/http_server.h"
#include "server/rls/config.h"
#include "server/rls/debug_service.h"
#include "server/rls/grpc_server.h"
#include "server/rls/loader.h"
#include "server/rls/prometheus_sink.h"
#include "server/rls/serve_engine.h"
#include "server/rls/stats_sinks.h"
#include "server/rls/upstream_mode.h"
#include "server/rls/upstream_settings.h"
#include "server/rls/upstream_stats.h"
#include "server/service.h"

namespace floodgate::cli {

namespace {

namespace rls = server::rls;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// Upstream's exit codes: a settings error panics (Go exits 2), a port that cannot be bound is
// logrus' Fatal (1).
constexpr int kExitSettings = 2;
constexpr int kExitListen = 1;

// SIGTERM's graces, as upstream's: gRPC calls in flight finish (GracefulStop), then the HTTP
// port's requests.
constexpr std::chrono::seconds kGrpcGrace{10};
constexpr std::chrono::seconds kHttpGrace{1};

enum class Waited { kAnswered, kTimedOut, kStopped };

// Waits for Redis to answer PING, as upstream's start does (driver_impl.go): tries, then waits
// REDIS_STARTUP_*'s backoff, running `signals` meanwhile so that a signal ends the wait.
Waited WaitForRedis(Store& store, const rls::StartupBackoff& backoff,
                    boost::asio::io_context& signals, const std::atomic<bool>& stopped) {
  auto* redis = dynamic_cast<RedisStore*>(&store);
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int attempt = 0;; ++attempt) {
    if (store.Ping()) return Waited::kAnswered;
    const auto elapsed = duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    const std::string why = redis != nullptr ? std::string(redis->Health().message()) : "no PONG";
    if (backoff.max_elapsed.count() > 0 && elapsed >= backoff.max_elapsed) {
      spdlog::critical("timed out waiting for Redis connection to {} after {}: {}",
                       store.Describe(), elapsed, why);
      return Waited::kTimedOut;
    }
    const auto wait = duration_cast<milliseconds>(backoff.Wait(attempt, uniform(random)));
    spdlog::warn("Retrying Redis connection to {} in {} (elapsed: {}): {}", store.Describe(), wait,
                 elapsed, why);
    signals.restart();
    signals.run_for(wait);
    if (stopped.load()) return Waited::kStopped;
  }
}

// The wall clock in seconds, for the logging sink's `ts`.
double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int RunRatelimit() {
  // As serve: spdlog's registry before any thread, and abseil's deadlock detection off.
  spdlog::set_level(spdlog::level::warn);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // As serve: destroyed last, it watches the destructors of what follows too; and as many
  // descriptors as the hard limit allows (gRPC stops accepting for good after an EMFILE).
  std::jthread watchdog;
  RaiseDescriptorLimit();
  auto env = rls::UpstreamEnv::Read(rls::ProcessEnvironment(), rls::UpstreamVariables());
  if (!env.ok()) {
    fmt::print(stderr, "ratelimit: {}\n", MessageOf(env.status()));
    return kExitSettings;
  }
  auto mode = rls::UpstreamModeFrom(*env);
  if (!mode.ok()) {
    fmt::print(stderr, "ratelimit: {}\n", MessageOf(mode.status()));
    return kExitSettings;
  }
  UseUpstreamLogging(mode->log_level, mode->log_format);
  // As upstream's start (its key pair loads or it panics), before Redis is waited for.
  if (mode->grpc_serving.tls) {
    if (absl::Status status = rls::CheckGrpcTlsFiles(*mode->grpc_serving.tls); !status.ok()) {
      fmt::print(stderr, "ratelimit: GRPC_SERVER_USE_TLS: {}\n", MessageOf(status));
      return kExitSettings;
    }
  }

  server::ServerConfig config;
  config.source = "upstream's environment";
  config.demo = false;
  // Upstream's HTTP port offers /json and /healthcheck; floodgate's /v1/* decide only rules
  // named in a config, and this mode has none: no client brings a policy of its own to Redis.
  config.inline_policies = false;
  config.store.url = mode->store_url;
  config.listen = HostPort(mode->http.host, mode->http.port);
  auto opened = OpenStore(config.store.EffectiveUrl());
  if (!opened.ok()) {
    spdlog::critical("{}", MessageOf(opened.status()));
    return kExitSettings;
  }
  std::shared_ptr<Store> store = *std::move(opened);
  // REDIS_PERSECOND: SECOND limits count on their own Redis, as upstream's perSecondClient.
  std::shared_ptr<Store> per_second;
  if (!mode->per_second_store_url.empty()) {
    auto second = OpenStore(mode->per_second_store_url);
    if (!second.ok()) {
      spdlog::critical("REDIS_PERSECOND: {}", MessageOf(second.status()));
      store->Close();
      return kExitSettings;
    }
    per_second = *std::move(second);
  }
  const auto close_stores = [&] {
    store->Close();
    if (per_second) per_second->Close();
  };

  // Upstream's stats sink, made before Redis is waited for, as runner.go makes it; the
  // Prometheus port opens now too (as upstream's sink opens it; a failure is logged).
  const rls::StatsSettings& stats_settings = mode->stats;
  rls::PrometheusRegistry prometheus(stats_settings.response_time_as_ms);
  rls::PrometheusService prometheus_service(prometheus, stats_settings.prometheus_path);
  server::HttpServer prometheus_http(prometheus_service, {.host = stats_settings.prometheus_host,
                                                          .port = stats_settings.prometheus_port,
                                                          .threads = 1});
  std::unique_ptr<rls::StatsSink> sink;
  switch (stats_settings.sink) {
    case rls::StatsSinkKind::kLogging:
      sink = rls::MakeLoggingSink(stderr, NowSeconds);
      break;
    case rls::StatsSinkKind::kPrometheus:
      sink = rls::MakePrometheusSink(prometheus);
      if (absl::Status status = prometheus_http.Start(); !status.ok()) {
        spdlog::error("prometheus sink on {}: {}",
                      HostPort(stats_settings.prometheus_host, stats_settings.prometheus_port),
                      MessageOf(status));
      }
      break;
    default: {
      auto network = rls::MakeNetworkSink(stats_settings);
      if (!network.ok()) {
        spdlog::critical("{}", MessageOf(network.status()));
        return kExitSettings;
      }
      sink = *std::move(network);
    }
  }

  // Signals are caught from here on; before the ports open one simply ends the start.
  boost::asio::io_context signals_io;
  boost::asio::signal_set signals(signals_io, SIGINT, SIGTERM, SIGHUP);
  std::atomic<bool> stopping{false};
  int stop_signal = 0;
  signals.async_wait([&](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    stop_signal = signal;
    stopping.store(true);
    signals_io.stop();
  });

  for (Store* redis : {store.get(), per_second.get()}) {
    if (redis == nullptr) continue;
    switch (WaitForRedis(*redis, mode->redis_startup, signals_io, stopping)) {
      case Waited::kAnswered:
        break;
      case Waited::kTimedOut:
        close_stores();
        return kExitSettings;
      case Waited::kStopped:
        spdlog::warn("Received signal {}, stopped before Redis answered", stop_signal);
        close_stores();
        return 0;
    }
  }
  std::atomic<bool> first_handled{false};  // before the engine, whose xDS thread sets it
  absl::StatusOr<std::unique_ptr<rls::Engine>> engine;
  if (mode->config_source == rls::ConfigSource::kXds) {
    auto tls = rls::XdsTlsFiles::Read(mode->xds);
    if (!tls.ok()) {
      spdlog::critical("{}", MessageOf(tls.status()));
      close_stores();
      return kExitSettings;
    }
    // As upstream's NewService: the ports open once the first response was handled (good or
    // bad: a bad first config leaves none, and requests are answered as errors), unless
    // FORCE_START_WITHOUT_INITIAL_CONFIG. The wait runs the signals, so SIGTERM ends it.
    const bool wait_for_config = !mode->force_start_without_config;
    engine = rls::MakeXdsEngine(mode->rls, store, mode->xds, *std::move(tls), [&, wait_for_config] {
      if (wait_for_config && !first_handled.exchange(true)) {
        boost::asio::post(signals_io, [&] { signals_io.stop(); });
      }
    }, per_second);
    if (engine.ok() && wait_for_config) {
      spdlog::info("Waiting for initial ratelimit config update event");
      signals_io.restart();
      signals_io.run();
      if (stopping.load()) {
        spdlog::warn("Received signal {}, stopped before the first xDS response", stop_signal);
        engine->reset();
        close_stores();
        return 0;
      }
      spdlog::info("Successfully loaded the initial ratelimit configs");
    }
  } else {
    engine = rls::MakeEngine(mode->rls, store, per_second);
  }
  if (!engine.ok()) {
    spdlog::critical("{}", MessageOf(engine.status()));
    close_stores();
    return kExitSettings;
  }

  // Upstream's health components: not draining, a domain loaded (HEALTHY_WITH_AT_LEAST_ONE_
  // CONFIG_LOADED), Redis connected (REDIS_HEALTH_CHECK_ACTIVE_CONNECTION).
  auto* redis = dynamic_cast<RedisStore*>(store.get());
  const rls::Engine& rls_engine = **engine;
  const auto healthy = [&, needs_domain = mode->config_health == rls::ConfigHealth::kNeedsADomain,
                        needs_redis = mode->redis_health == rls::RedisHealth::kNeedsAConnection] {
    if (stopping.load()) return false;
    if (needs_domain) {
      const auto current = rls_engine.CurrentConfig();
      if (current == nullptr || current->domain_count() == 0) return false;
    }
    return !(needs_redis && redis != nullptr && !redis->Health().ok());
  };

  // The engine's counters flushed to the sink every STATS_FLUSH_INTERVAL; gRPC calls counted
  // and timed as upstream's interceptor does.
  rls::Engine& counted = **engine;
  rls::RlsMetrics spare;  // for an engine that keeps no counters: stats of the calls alone
  rls::RlsMetrics& metrics = counted.metrics() != nullptr ? *counted.metrics() : spare;
  rls::UpstreamStats stats(
      stats_settings, metrics, [&counted] { return counted.config_loads(); }, std::move(sink));
  stats.Start();
  rls::GrpcCallStats grpc_engine(counted, metrics);

  server::Service service(store, std::make_shared<const server::ServerConfig>(config));
  service.AttachRls(engine->get());
  service.SetHealthCheck(healthy);
  rls::DebugService debug(rls_engine, [&] {
    return rls::UpstreamStats::StatsPage(metrics, counted.config_loads(), stats_settings.tags);
  });
  server::HttpServer debug_http(debug,
                                {.host = mode->debug.host, .port = mode->debug.port, .threads = 1});
  server::HttpServer http(service, {.host = mode->http.host, .port = mode->http.port});
  const rls::UpstreamGrpc& grpc_serving = mode->grpc_serving;
  rls::GrpcServer grpc(grpc_engine,
                       {.host = mode->grpc.host,
                        .port = mode->grpc.port,
                        .unix_socket = grpc_serving.unix_socket,
                        .tls = grpc_serving.tls,
                        .max_connection_age = grpc_serving.max_connection_age,
                        .max_connection_age_grace = grpc_serving.max_connection_age_grace});
  // As upstream: the debug port is optional (a failure is logged), gRPC and HTTP are not.
  if (absl::Status status = debug_http.Start(); !status.ok()) {
    spdlog::error("debug listener on {}: {}", HostPort(mode->debug.host, mode->debug.port),
                  MessageOf(status));
  }
  if (absl::Status status = grpc.Start(); !status.ok()) {
    spdlog::critical("gRPC listener: {}", MessageOf(status));
    close_stores();
    return kExitListen;
  }
  if (absl::Status status = http.Start(); !status.ok()) {
    spdlog::critical("HTTP listener: {}", MessageOf(status));
    grpc.Shutdown(milliseconds(0));
    close_stores();
    return kExitListen;
  }
  spdlog::info(
      "floodgate {} as envoyproxy/ratelimit: HTTP on {}, gRPC on {}, debug on {}, store {}, "
      "config {}",
      kVersion, HostPort(mode->http.host, http.port()), grpc.address(),
      HostPort(mode->debug.host, debug_http.port()),
      per_second ? fmt::format("{} (SECOND limits: {})", store->Describe(), per_second->Describe())
                 : store->Describe(),
      mode->config_source == rls::ConfigSource::kXds
          ? fmt::format("from xDS server {} (node {})", mode->xds.server_url, mode->xds.node_id)
          : rls::ConfigDirectory(mode->rls).string());

  // gRPC health for "ratelimit" follows /healthcheck's components, checked each second.
  boost::asio::steady_timer health_timer(signals_io);
  bool serving = true;
  std::function<void()> follow_health = [&] {
    if (const bool now = healthy(); now != serving) {
      serving = now;
      grpc.SetServing(now);
    }
    health_timer.expires_after(std::chrono::seconds(1));
    health_timer.async_wait([&](const boost::system::error_code& ec) {
      if (!ec) follow_health();
    });
  };
  follow_health();
  signals_io.restart();
  signals_io.run();  // until the first signal stops it
  health_timer.cancel();
  spdlog::info("Received signal {}, initiating shutdown", stop_signal);
  watchdog = ExitUnlessStoppedWithin(kGrpcGrace + kHttpGrace + kStuckAfterGrace, kExitError);
  // /healthcheck answers 500 from here while gRPC calls in flight finish, as upstream's
  // GracefulStop; then the HTTP and debug ports close.
  grpc.SetServing(false);
  grpc.Shutdown(kGrpcGrace);
  http.Shutdown(kHttpGrace);
  debug_http.Shutdown(milliseconds(0));
  prometheus_http.Shutdown(milliseconds(0));
  close_stores();
  return 0;
}

}  // namespace floodgate::cli
