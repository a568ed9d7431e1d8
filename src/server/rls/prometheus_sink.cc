// Upstream's default statsd_exporter mapping, its registry of Prometheus series, and the scrape.

#include "server/rls/prometheus_sink.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace floodgate::server::rls {

namespace {

// The counters default_mapper.yaml names per limit, in its order.
constexpr std::array<std::string_view, 5> kLimitCounters = {
    "near_limit", "over_limit", "total_hits", "within_limit", "shadow_mode"};

// prometheus.DefBuckets, statsd_exporter's default histogram buckets (seconds).
constexpr std::array<double, 11> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                             0.5,   1,    2.5,   5,    10};

std::vector<std::string_view> Components(std::string_view name) {
  std::vector<std::string_view> parts;
  for (std::size_t at = name.find('.');; at = name.find('.')) {
    parts.push_back(name.substr(0, at));
    if (at == std::string_view::npos) return parts;
    name.remove_prefix(at + 1);
  }
}

// A glob of the mapper: anchored, '*' one component of any dot-free text.
bool Glob(std::string_view pattern, std::string_view name, std::vector<std::string_view>& stars) {
  const auto want = Components(pattern);
  const auto have = Components(name);
  if (want.size() != have.size()) return false;
  stars.clear();
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] == "*") {
      stars.push_back(have[i]);
    } else if (want[i] != have[i]) {
      return false;
    }
  }
  return true;
}

// mapper.EscapeMetricName: every byte outside [a-zA-Z0-9_] as '_', a leading digit prefixed.
std::string Escape(std::string_view name) {
  std::string out;
  if (!name.empty() && name[0] >= '0' && name[0] <= '9') out += '_';
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out += ok ? c : '_';
  }
  return out;
}

// Go's strconv.FormatFloat(v, 'g', -1, 64), as client_golang writes values.
std::string GoFloat(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  if (value == 0) return "0";
  // fmt's shortest round-trip form (fixed or with an exponent) read into digits and exponent.
  const std::string shortest = fmt::format("{}", value);
  std::string mantissa;
  int exponent = 0;
  bool negative = false;
  {
    std::string_view s = shortest;
    if (!s.empty() && s[0] == '-') {
      negative = true;
      s.remove_prefix(1);
    }
    const std::size_t e = s.find_first_of("eE");
    std::string_view body = s.substr(0, e);
    int exp10 = e == std::string_view::npos ? 0 : std::stoi(std::string(s.substr(e + 1)));
    const std::size_t dot = body.find('.');
    std::string whole(body.substr(0, dot));
    std::string frac(dot == std::string_view::npos ? "" : body.substr(dot + 1));
    std::string all = whole + frac;
    int point = static_cast<int>(whole.size()) + exp10;  // digits before the decimal point
    const std::size_t first = all.find_first_not_of('0');
    point -= static_cast<int>(first);
    all.erase(0, first);
    while (!all.empty() && all.back() == '0') all.pop_back();
    mantissa = all;
    exponent = point - 1;
  }
  // strconv's 'g' with the shortest digits sets the exponent's threshold (eprec) to 6, so
  // 123456 but 1e+06 and 1.234567e+06.
  constexpr int kEprec = 6;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= kEprec) {
    out += mantissa.substr(0, 1);
    if (mantissa.size() > 1) out += "." + mantissa.substr(1);
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
  }
  if (exponent < 0) {
    out += "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + mantissa;
    return out;
  }
  const auto point = static_cast<std::size_t>(exponent + 1);
  if (mantissa.size() <= point) {
    out += mantissa + std::string(point - mantissa.size(), '0');
  } else {
    out += mantissa.substr(0, point) + "." + mantissa.substr(point);
  }
  return out;
}

class PrometheusSink final : public StatsSink {
 public:
  explicit PrometheusSink(PrometheusRegistry& registry) : registry_(registry) {}
  void Counter(std::string_view name, std::uint64_t delta) override {
    registry_.Counter(name, delta);
  }
  void Gauge(std::string_view name, std::uint64_t value) override { registry_.Gauge(name, value); }
  void Timer(std::string_view name, double ms) override { registry_.Timer(name, ms); }

 private:
  PrometheusRegistry& registry_;
};

}  // namespace

MappedMetric MapStatsdName(std::string_view name, StatsdType type) {
  std::vector<std::string_view> stars;
  const auto labelled = [](std::string metric,
                           std::vector<std::pair<std::string, std::string>> labels) {
    std::sort(labels.begin(), labels.end());
    return MappedMetric{std::move(metric), std::move(labels)};
  };
  // The globs: per limit (domain and one key), the call errors, the gRPC server, the loads.
  for (const std::string_view counter : kLimitCounters) {
    if (Glob(fmt::format("ratelimit.service.rate_limit.*.*.{}", counter), name, stars)) {
      return labelled(fmt::format("ratelimit_service_rate_limit_{}", counter),
                      {{"domain", std::string(stars[0])}, {"key1", std::string(stars[1])}});
    }
  }
  if (type == StatsdType::kCounter &&
      Glob("ratelimit.service.call.should_rate_limit.*", name, stars)) {
    return labelled("ratelimit_service_should_rate_limit_error",
                    {{"err_type", std::string(stars[0])}});
  }
  if (type == StatsdType::kCounter && Glob("ratelimit_server.*.total_requests", name, stars)) {
    return labelled("ratelimit_service_total_requests", {{"grpc_method", std::string(stars[0])}});
  }
  if (Glob("ratelimit_server.*.response_time", name, stars)) {
    return labelled("ratelimit_service_response_time_seconds",
                    {{"grpc_method", std::string(stars[0])}});
  }
  if (type == StatsdType::kCounter) {
    if (name == "ratelimit.service.config_load_success") {
      return {"ratelimit_service_config_load_success", {}};
    }
    if (name == "ratelimit.service.config_load_error") {
      return {"ratelimit_service_config_load_error", {}};
    }
  }
  // The regular expressions, in the file's order: domain and two keys, more keys ignored.
  static const std::array<std::unique_ptr<re2::RE2>, kLimitCounters.size()> kRegexes = [] {
    std::array<std::unique_ptr<re2::RE2>, kLimitCounters.size()> all;
    for (std::size_t i = 0; i < all.size(); ++i) {
      all[i] = std::make_unique<re2::RE2>(
          fmt::format(R"(ratelimit\.service\.rate_limit\.([^\.]*)\.([^\.]*)\.([^\.]*)(\..*)?\.{})",
                      kLimitCounters[i]));
    }
    return all;
  }();
  for (std::size_t i = 0; i < kLimitCounters.size(); ++i) {
    const std::string_view counter = kLimitCounters[i];
    std::string domain, key1, key2;
    if (re2::RE2::PartialMatch(name, *kRegexes[i], &domain, &key1, &key2)) {
      return labelled(fmt::format("ratelimit_service_rate_limit_{}", counter),
                      {{"domain", domain}, {"key1", key1}, {"key2", key2}});
    }
  }
  return {Escape(name), {}};
}

PrometheusRegistry::Family::Series* PrometheusRegistry::SeriesOf(const MappedMetric& metric,
                                                                 StatsdType type) {
  std::vector<std::string> names, values;
  for (const auto& [label, value] : metric.labels) {
    names.push_back(label);
    values.push_back(value);
  }
  auto [it, fresh] = families_.try_emplace(metric.name);
  Family& family = it->second;
  if (fresh) {
    family.type = type;
    family.label_names = names;
  } else if (family.type != type || family.label_names != names) {
    return nullptr;  // the exporter's conflict: dropped
  }
  Family::Series& series = family.series[values];
  if (type == StatsdType::kTimer && series.buckets.empty()) series.buckets.resize(kBuckets.size());
  return &series;
}

void PrometheusRegistry::Counter(std::string_view name, std::uint64_t delta) {
  std::lock_guard lock(mu_);
  if (auto* series = SeriesOf(MapStatsdName(name, StatsdType::kCounter), StatsdType::kCounter)) {
    series->value += static_cast<double>(delta);
  }
}

void PrometheusRegistry::Gauge(std::string_view name, std::uint64_t value) {
  std::lock_guard lock(mu_);
  if (auto* series = SeriesOf(MapStatsdName(name, StatsdType::kGauge), StatsdType::kGauge)) {
    series->value = static_cast<double>(value);
  }
}

void PrometheusRegistry::Timer(std::string_view name, double milliseconds) {
  const MappedMetric metric = MapStatsdName(name, StatsdType::kTimer);
  // The mapping's `scale: 0.001` (milliseconds to seconds), which
  // PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS removes; unmapped timers are not scaled.
  const bool scaled = metric.name == "ratelimit_service_response_time_seconds";
  const double value = scaled && !response_time_as_ms_ ? milliseconds * 0.001 : milliseconds;
  std::lock_guard lock(mu_);
  if (auto* series = SeriesOf(metric, StatsdType::kTimer)) {
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      if (value <= kBuckets[i]) ++series->buckets[i];
    }
    series->sum += value;
    ++series->count;
  }
}

std::string PrometheusRegistry::Render() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    const std::string_view type = family.type == StatsdType::kCounter ? "counter"
                                  : family.type == StatsdType::kGauge ? "gauge"
                                                                      : "histogram";
    out += fmt::format("# HELP {} Metric autogenerated by statsd_exporter.\n# TYPE {} {}\n", name,
                       name, type);
    for (const auto& [values, series] : family.series) {
      std::string labels;
      for (std::size_t i = 0; i < values.size(); ++i) {
        labels += fmt::format("{}{}=\"{}\"", i == 0 ? "" : ",", family.label_names[i],
                              PrometheusLabelValue(values[i]));
      }
      if (family.type != StatsdType::kTimer) {
        out += labels.empty() ? fmt::format("{} {}\n", name, GoFloat(series.value))
                              : fmt::format("{}{{{}}} {}\n", name, labels, GoFloat(series.value));
        continue;
      }
      const std::string sep = labels.empty() ? "" : ",";
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        out += fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep,
                           GoFloat(kBuckets[i]), series.buckets[i]);
      }
      out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, series.count);
      const std::string braces = labels.empty() ? "" : "{" + labels + "}";
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, GoFloat(series.sum), name,
                         braces, series.count);
    }
  }
  return out;
}

std::unique_ptr<StatsSink> MakePrometheusSink(PrometheusRegistry& registry) {
  return std::make_unique<PrometheusSink>(registry);
}

void PrometheusService::Handle(const Request& request, const boost::asio::ip::address& peer,
                               Respond respond) {
  (void)peer;
  if (PathOf(TargetOf(request)) != path_) {
    respond(MakeResponse(request, http::status::not_found, "404 page not found\n",
                         "text/plain; charset=utf-8"));
    return;
  }
  respond(MakeResponse(request, http::status::ok, registry_.Render(),
                       "text/plain; version=0.0.4; charset=utf-8"));
}

}  // namespace floodgate::server::rls
