#pragma once

// Upstream's Prometheus sink (USE_PROMETHEUS): the stats mapped as its statsd_exporter mapper
// maps them, served on PROMETHEUS_ADDR + PROMETHEUS_PATH.
//
// docs/envoy.md, "Stats". Upstream feeds each flush's deltas to statsd_exporter v0.26.1 with its
// default_mapper.yaml (src/stats/prom/ at f2fb15770f7f); the rules are here in code, matched as
// the exporter matches them: the globs first (anchored, `*` one dot-free component), then the
// regular expressions in order (RE2, unanchored, as Go's regexp), `match_metric_type` honoured.
// A name no rule maps is escaped (`[^a-zA-Z0-9_]` to `_`). As the exporter, a name keeps the label
// names it was first seen with; a later event with other label names is dropped.

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_message.h"
#include "server/rls/upstream_stats.h"

namespace floodgate::server::rls {

// A statsd name as the default mapper maps it.
struct MappedMetric {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // sorted by label name
};
enum class StatsdType { kCounter, kGauge, kTimer };
MappedMetric MapStatsdName(std::string_view name, StatsdType type);

// The registry the flushes fill and the scrapes read; thread-safe. Bounded by the stats it is fed
// (RlsMetrics' series bound).
class PrometheusRegistry {
 public:
  explicit PrometheusRegistry(bool response_time_as_ms)
      : response_time_as_ms_(response_time_as_ms) {}
  void Counter(std::string_view name, std::uint64_t delta);
  void Gauge(std::string_view name, std::uint64_t value);
  void Timer(std::string_view name, double milliseconds);
  // The exposition text, families sorted by name and series by labels, as client_golang.
  std::string Render() const;

 private:
  struct Family {
    StatsdType type = StatsdType::kCounter;
    std::vector<std::string> label_names;
    // Labels' values -> value (counters, gauges) or histogram buckets, sum, count.
    struct Series {
      double value = 0;
      std::vector<std::uint64_t> buckets;
      double sum = 0;
      std::uint64_t count = 0;
    };
    std::map<std::vector<std::string>, Series> series;
  };
  Family::Series* SeriesOf(const MappedMetric& metric, StatsdType type);

  const bool response_time_as_ms_;
  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// The sink feeding a registry.
std::unique_ptr<StatsSink> MakePrometheusSink(PrometheusRegistry& registry);

// PROMETHEUS_PATH answered with the registry's text, any method; other paths 404, as Go's mux.
class PrometheusService final : public HttpHandler {
 public:
  PrometheusService(const PrometheusRegistry& registry, std::string path)
      : registry_(registry), path_(std::move(path)) {}
  void Handle(const Request& request, const boost::asio::ip::address& peer,
              Respond respond) override;

 private:
  const PrometheusRegistry& registry_;
  const std::string path_;
};

}  // namespace floodgate::server::rls
