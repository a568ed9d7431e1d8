// Upstream's stat names and tags, and the flushes of the RLS counters to a sink.

#include "server/rls/upstream_stats.h"

#include <re2/re2.h>

#include <algorithm>

namespace floodgate::server::rls {

namespace {

using Tags = std::vector<std::pair<std::string, std::string>>;

// One counter by its upstream name and its value so far.
using Snapshot = std::vector<std::pair<std::string, std::uint64_t>>;

// The counters upstream has (degraded is floodgate's own: on /metrics only).
constexpr std::array kUpstreamCounters = {
    RlsMetrics::kTotalHits,     RlsMetrics::kOverLimit,  RlsMetrics::kNearLimit,
    RlsMetrics::kWithinLimit,   RlsMetrics::kShadowMode, RlsMetrics::kOverLimitWithLocalCache,
    RlsMetrics::kDomainNotFound};

constexpr std::string_view kRateLimitScope = "ratelimit.service.rate_limit.";
constexpr std::string_view kResponseTime = "ratelimit_server.ShouldRateLimit.response_time";

Snapshot Take(const RlsMetrics& metrics, const Engine::ConfigLoads& loads, const Tags& tags) {
  Snapshot out;
  metrics.ForEach([&](std::string_view key, const RlsMetrics::Values& values) {
    const std::string prefix = std::string(kRateLimitScope) + SanitizeStatName(key) + ".";
    for (const RlsMetrics::Counter counter : kUpstreamCounters) {
      out.emplace_back(SerializeTags(prefix + std::string(RlsMetrics::CounterName(counter)), tags),
                       values[counter]);
    }
  });
  const auto add = [&](std::string_view name, std::uint64_t value) {
    out.emplace_back(SerializeTags(name, tags), value);
  };
  add("ratelimit.service.config_load_success", loads.success);
  add("ratelimit.service.config_load_error", loads.error);
  add("ratelimit.service.global_shadow_mode", metrics.service(RlsMetrics::kGlobalShadow));
  add("ratelimit.service.call.should_rate_limit.redis_error",
      metrics.service(RlsMetrics::kRedisError));
  add("ratelimit.service.call.should_rate_limit.service_error",
      metrics.service(RlsMetrics::kServiceError));
  add("ratelimit_server.ShouldRateLimit.total_requests",
      metrics.service(RlsMetrics::kGrpcRequests));
  return out;
}

// The most timer samples one flush sends: upstream sends one line per call, and drops what
// does not fit its 4 MiB of buffers; past this the samples of a flush are dropped here.
constexpr std::uint64_t kMaxTimerSamples = 65'536;

}  // namespace

std::string SanitizeStatName(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == ':' || c == '|') c = '_';
  }
  // utils.go's ipv4Regex, with Go's (RE2's) leftmost-first matching.
  static const re2::RE2 kIpv4(R"((\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}))");
  re2::StringPiece input(out);
  re2::StringPiece match;
  while (re2::RE2::FindAndConsume(&input, kIpv4, &match)) {
    const std::size_t at = static_cast<std::size_t>(match.data() - out.data());
    std::replace(out.begin() + static_cast<std::ptrdiff_t>(at),
                 out.begin() + static_cast<std::ptrdiff_t>(at + match.size()), '.', '_');
  }
  return out;
}

std::string SerializeTags(std::string_view name, const Tags& tags) {
  std::vector<std::pair<std::string_view, std::string_view>> valid;
  for (const auto& [key, value] : tags) {
    if (!key.empty() && !value.empty()) valid.emplace_back(key, value);
  }
  // A key given twice keeps its last value (a Go map from envconfig's split).
  std::stable_sort(valid.begin(), valid.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out(name);
  for (std::size_t i = 0; i < valid.size(); ++i) {
    if (i + 1 < valid.size() && valid[i + 1].first == valid[i].first) continue;
    out += ".__";
    out += valid[i].first;
    out += '=';
    for (char c : valid[i].second) out += (c == '.' || c == ':' || c == '|') ? '_' : c;
  }
  return out;
}

UpstreamStats::UpstreamStats(const StatsSettings& settings, RlsMetrics& metrics, Loads loads,
                             std::unique_ptr<StatsSink> sink)
    : interval_(settings.flush_interval),
      tags_(settings.tags),
      metrics_(metrics),
      loads_(std::move(loads)),
      sink_(std::move(sink)) {}

UpstreamStats::~UpstreamStats() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void UpstreamStats::Start() {
  thread_ = std::thread([this] { Run(); });
}

void UpstreamStats::Run() {
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    // time.Ticker's period; a non-positive one is refused before this (Go's NewTicker panics).
    stop_cv_.wait_for(lock, interval_, [this] { return stopping_; });
    lock.unlock();
    FlushNow();
    lock.lock();
  }
}

void UpstreamStats::FlushNow() {
  std::lock_guard lock(flush_mu_);
  if (sink_ == nullptr) return;
  for (auto& [name, value] : Take(metrics_, loads_ ? loads_() : Engine::ConfigLoads{}, tags_)) {
    // gostats' latch: the delta since the last flush, sent when not zero.
    std::uint64_t& sent = sent_[name];
    if (value != sent) {
      sink_->Counter(name, value - sent);
      sent = value;
    }
  }
  const std::string timer = SerializeTags(kResponseTime, tags_);
  std::uint64_t samples = 0;
  metrics_.DrainResponseTimes([&](std::uint64_t ms, std::uint64_t n) {
    for (std::uint64_t i = 0; i < n && samples < kMaxTimerSamples; ++i, ++samples) {
      sink_->Timer(timer, static_cast<double>(ms));
    }
  });
  sink_->Flush();
}

std::string UpstreamStats::StatsPage(const RlsMetrics& metrics, const Engine::ConfigLoads& loads,
                                     const Tags& tags) {
  Snapshot all = Take(metrics, loads, tags);
  std::sort(all.begin(), all.end());
  std::string out;
  for (const auto& [name, value] : all) {
    out += name;
    out += ": ";
    out += std::to_string(value);
    out += '\n';
  }
  return out;
}

void GrpcCallStats::ShouldRateLimit(const pb::RateLimitRequest& request,
                                    pb::RateLimitResponse* response, RlsDone done) {
  metrics_.CountService(RlsMetrics::kGrpcRequests);
  const auto start = std::chrono::steady_clock::now();
  engine_.ShouldRateLimit(request, response,
                          [this, start, done = std::move(done)](absl::Status status) mutable {
                            metrics_.CountResponseTime(std::chrono::steady_clock::now() - start);
                            done(std::move(status));
                          });
}

}  // namespace floodgate::server::rls
