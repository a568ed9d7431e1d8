// RlsEngine: descriptors to store keys, upstream's limits decided, upstream's answers built.

#include <absl/status/status.h>
#include <fmt/format.h>
#include <openssl/sha.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/strings.h"
#include "server/headers.h"
#include "server/rls/metadata.h"
#include "server/rls/rls_engine.h"
#include "server/rls/upstream_counter.h"

namespace floodgate::server::rls {

namespace {

namespace ext = ::envoy::extensions::common::ratelimit::v3;
using Response = pb::RateLimitResponse;
using RateLimit = Response::RateLimit;

constexpr std::uint32_t kMaxRemaining = std::numeric_limits<std::uint32_t>::max();

// Store keys: "rls|<domain>|<key>=<value>|...|@<algorithm>/<period µs>" with '%', '|',
// '=', '{' and '}' escaped as %XX, so no two descriptors share a key (binary-safe: other
// bytes pass through) and a value can never make a Redis Cluster {hash tag}. Without a
// tag every descriptor hashes on its whole key, so one domain's descriptors spread over
// the cluster's nodes instead of piling onto the slot of one tag; an all_or_nothing
// request across slots is the store's multi-decision, which spans slots (docs/multi.md).
// The algorithm and period end the key, as upstream's window start ends its keys: a
// config reload or a `limit` override that changes them starts a new counter instead of
// reading another algorithm's state; a changed requests_per_unit keeps the count.
void AppendEscaped(std::string& out, std::string_view text) {
  for (char c : text) {
    if (c == '%' || c == '|' || c == '=' || c == '{' || c == '}') {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
}

std::string StoreKey(std::string_view domain, const ext::RateLimitDescriptor& descriptor,
                     const Policy& policy) {
  std::string key = "rls|";
  AppendEscaped(key, domain);
  for (const auto& entry : descriptor.entries()) {
    key += '|';
    AppendEscaped(key, entry.key());
    key += '=';
    AppendEscaped(key, entry.value());
  }
  key += fmt::format("|@{}/{}", AlgorithmName(policy.algorithm), policy.period.count());
  if (key.size() <= kMaxKeyBytes) return key;
  // Past the stores' key bound (long values: paths, tokens): a digest of the whole key,
  // collision-free in practice and still free of braces.
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest.data());
  std::string hashed = "rls#";
  for (unsigned char byte : digest) hashed += fmt::format("{:02x}", byte);
  return hashed;
}

// The descriptor a share_threshold limit counts on: the wildcard's pattern in place of each
// value it shares (upstream's GenerateCacheKey), so every value the wildcard matches shares
// one counter.
ext::RateLimitDescriptor SharedDescriptor(const ext::RateLimitDescriptor& descriptor,
                                          const std::vector<std::string>& shared_values) {
  ext::RateLimitDescriptor shared = descriptor;
  for (int i = 0; i < shared.entries_size(); ++i) {
    const auto at = static_cast<std::size_t>(i);
    if (at < shared_values.size() && !shared_values[at].empty()) {
      shared.mutable_entries(i)->set_value(shared_values[at]);
    }
  }
  return shared;
}

// Upstream's stats key of a request's `limit` override is built from the request's
// values; ours keeps the keys only, so a client cannot grow the metrics without bound.
std::string OverrideStatsKey(std::string_view domain, const ext::RateLimitDescriptor& descriptor) {
  std::string key(domain);
  for (const auto& entry : descriptor.entries()) key += "." + entry.key();
  return key;
}

std::uint32_t ClampRemaining(std::int64_t remaining) {
  return static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(remaining, 0, static_cast<std::int64_t>(kMaxRemaining)));
}

// Time to the end of the epoch-aligned window of `period` holding `now`.
std::chrono::microseconds ToWindowEnd(TimePoint now, std::chrono::microseconds period) {
  const std::int64_t p = period.count();
  const std::int64_t t = now.time_since_epoch().count();
  return std::chrono::microseconds(p - ((t % p) + p) % p);
}

void SetDuration(google::protobuf::Duration* out, std::chrono::microseconds d) {
  out->set_seconds(d.count() / 1'000'000);
  out->set_nanos(static_cast<std::int32_t>(d.count() % 1'000'000) * 1000);
}

// The overall code as upstream's service/ratelimit.go decides it with quota mode: OVER_LIMIT
// when a descriptor not in quota mode is over, or when every quota descriptor is (QUOTA_MODE
// makes every descriptor one, those without a limit included; unlimited ones are neither).
class OverallCode {
 public:
  void NoLimit(bool global_quota) { quotas_ += global_quota ? 1 : 0; }
  void Answered(bool over_limit, bool quota) {
    if (quota) {
      ++quotas_;
      failed_quotas_ += over_limit ? 1 : 0;
    } else {
      failed_limits_ += over_limit ? 1 : 0;
    }
  }
  Response::Code code() const {
    return failed_limits_ > 0 || (quotas_ > 0 && quotas_ == failed_quotas_) ? Response::OVER_LIMIT
                                                                            : Response::OK;
  }

 private:
  int failed_limits_ = 0;
  int failed_quotas_ = 0;
  int quotas_ = 0;
};

// What a decision was, for upstream's counters: the window's count before the hits is the
// limit less what remained (after the hits when they were admitted; a denial spends nothing).
RlsMetrics::Outcome OutcomeOf(const Decision* decision, const RlsLimit& limit, std::int64_t hits,
                              bool over, bool degraded) {
  RlsMetrics::Outcome outcome{.hits = static_cast<std::uint64_t>(hits),
                              .limit = limit.requests_per_unit,
                              .over = over,
                              .shadow = limit.shadow,
                              .degraded = degraded};
  if (decision != nullptr) {
    const std::int64_t left = decision->remaining + (decision->allowed ? hits : 0);
    outcome.before = static_cast<std::uint64_t>(
        std::clamp<std::int64_t>(static_cast<std::int64_t>(limit.requests_per_unit) - left, 0,
                                 static_cast<std::int64_t>(limit.requests_per_unit)));
  }
  return outcome;
}

}  // namespace

// One request from its start to its answer. Shared by the store callbacks; the last one
// to arrive answers.
struct RlsEngine::Pending {
  enum class Kind {
    kNoLimit,    // unknown domain, no match, or replaced: OK without a limit
    kUnlimited,  // OK, limit_remaining UINT32_MAX, not sent to the store
    kZeroLimit,  // requests_per_unit 0: every counted hit is over, without the store
    kDecide,     // sent to the store
    kCount,      // upstream's counter (docs/envoy.md, "Shared counters"): Store::Count
  };
  struct Slot {
    Kind kind = Kind::kNoLimit;
    const RlsLimit* configured = nullptr;
    std::optional<RlsLimit> override_limit;  // a request's `limit`, built per request
    std::string key;
    std::string stats_key;
    // Upstream's metadata of the matched node (RESPONSE_DYNAMIC_METADATA); nullptr: none.
    const google::protobuf::Struct* metadata = nullptr;
    std::int64_t hits = 1;
    std::size_t item = 0;  // all_or_nothing: the store item deciding it
    absl::StatusOr<Decision> decision = Decision{};
    // kCount: upstream's key, its unit, and what came of it.
    std::string counter_key;
    std::int64_t unit_s = 0;
    bool local_over = false;   // in the local cache: not sent
    bool would_exceed = false;  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT: read first
    absl::StatusOr<CountAnswer> counted = CountAnswer{};

    const RlsLimit& limit() const { return override_limit ? *override_limit : *configured; }
  };

  std::shared_ptr<const RlsConfig> config;  // keeps `configured` limits alive
  // RESPONSE_DYNAMIC_METADATA: the request's part, built before the store is asked.
  std::optional<google::protobuf::Struct> dynamic_metadata;
  Response* response = nullptr;
  RlsDone done;
  std::string domain;
  std::optional<TimePoint> now;
  std::vector<Slot> slots;
  std::vector<std::size_t> to_decide;  // slots of kind kDecide
  std::vector<std::size_t> to_count;   // slots of kind kCount not over in the local cache
  bool any_local_over = false;
  // Upstream's counters are keyed by this process's clock (its window start), as upstream's.
  TimePoint count_now;
  std::int64_t now_s = 0;
  std::atomic<std::size_t> reads{0};  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's reads
  bool peek_only = false;              // all_or_nothing, already denied: the store spends nothing
  std::atomic<std::size_t> outstanding{0};
};

RlsEngine::RlsEngine(Store& store, RlsSettings settings, std::shared_ptr<const RlsConfig> config,
                     RlsMetrics& metrics, DecisionClock clock, Store* per_second)
    : store_(store),
      per_second_(per_second),
      settings_(std::move(settings)),
      metrics_(metrics),
      clock_(std::move(clock)),
      config_(std::move(config)),
      local_cache_(settings_.local_cache_bytes) {}

Store& RlsEngine::StoreFor(Unit unit) const {
  return per_second_ != nullptr && unit == RateLimit::SECOND ? *per_second_ : store_;
}

std::int64_t RlsEngine::Ttl(std::int64_t unit_s) {
  if (settings_.expiration_jitter_max_seconds <= 0) return unit_s;
  std::lock_guard lock(jitter_mu_);
  return CounterTtl(unit_s, settings_.expiration_jitter_max_seconds,
                    absl::Uniform<double>(jitter_, 0.0, 1.0));
}

void RlsEngine::SetConfig(std::shared_ptr<const RlsConfig> config) {
  std::lock_guard lock(config_mu_);
  config_.swap(config);
  // The old config is released outside the lock (by `config` going out of scope here is
  // fine: requests in flight hold their own reference).
}

std::shared_ptr<const RlsConfig> RlsEngine::config() const {
  std::lock_guard lock(config_mu_);
  return config_;
}

void RlsEngine::ShouldRateLimit(const pb::RateLimitRequest& request, Response* response,
                                RlsDone done) {
  // Every failed answer is counted (upstream's call.should_rate_limit.*_error).
  done = [this, done = std::move(done)](absl::Status status) mutable {
    metrics_.CountFailure(status);
    done(std::move(status));
  };
  // Upstream's request checks, with its texts.
  if (request.domain().empty()) {
    done(absl::InvalidArgumentError("rate limit domain must not be empty"));
    return;
  }
  if (request.descriptors().empty()) {
    done(absl::InvalidArgumentError("rate limit descriptor list must not be empty"));
    return;
  }
  if (request.descriptors_size() > kMaxDescriptors) {
    done(absl::InvalidArgumentError(
        fmt::format("{} descriptors in one request; at most {} are taken",
                    request.descriptors_size(), kMaxDescriptors)));
    return;
  }
  auto pending = std::make_shared<Pending>();
  pending->config = config();
  if (pending->config == nullptr) {
    done(absl::UnavailableError("no rate limit configuration loaded"));
    return;
  }
  if (settings_.dynamic_metadata) pending->dynamic_metadata = RequestMetadata(request);
  pending->response = response;
  pending->done = std::move(done);
  pending->domain = request.domain();
  if (clock_) pending->now = clock_();
  pending->count_now = pending->now.value_or(SystemNow());
  pending->now_s = std::chrono::floor<std::chrono::seconds>(pending->count_now.time_since_epoch())
                       .count();

  const RlsConfig& config = *pending->config;
  const RlsDomain* domain = config.Domain(request.domain());
  const bool known_domain = domain != nullptr;
  // floodgate's all_or_nothing decides every limit of its domain by floodgate's algorithms.
  const bool upstream_counting = known_domain && !domain->all_or_nothing;
  const int count = request.descriptors_size();
  pending->slots.resize(static_cast<std::size_t>(count));
  // Names other matched limits replace (upstream's `replaces`).
  std::vector<std::string_view> replaced;
  RlsMatch match;
  for (int i = 0; i < count; ++i) {
    match.shared_values.clear();
    const ext::RateLimitDescriptor& descriptor = request.descriptors(i);
    Pending::Slot& slot = pending->slots[static_cast<std::size_t>(i)];
    // hits: the descriptor's hits_addend when set (0 checks without counting), else the
    // request's, where 0 means 1.
    const std::uint64_t hits = descriptor.has_hits_addend()
                                   ? descriptor.hits_addend().value()
                                   : std::max<std::uint64_t>(1, request.hits_addend());
    if (hits > static_cast<std::uint64_t>(kMaxCost)) {
      pending->done(absl::InvalidArgumentError(
          fmt::format("descriptor {}: hits_addend {} is above {}", i, hits, kMaxCost)));
      return;
    }
    slot.hits = static_cast<std::int64_t>(hits);
    if (!known_domain) {  // upstream: no limit at all, overrides included; counted per descriptor
      metrics_.Add(request.domain(), RlsMetrics::kDomainNotFound, 1);
      continue;
    }
    if (descriptor.has_limit()) {
      // The request's own limit replaces the configured one, never in shadow mode.
      const auto unit = static_cast<Unit>(descriptor.limit().unit());
      const auto length = UnitLength(unit);
      if (!length) {
        pending->done(absl::InvalidArgumentError(
            fmt::format("descriptor {}: the limit override has no valid unit", i)));
        return;
      }
      RlsLimit limit;
      limit.stats_key = OverrideStatsKey(request.domain(), descriptor);
      limit.requests_per_unit = descriptor.limit().requests_per_unit();
      limit.unit = unit;
      limit.period = *length;
      limit.upstream_counter = true;
      if (limit.requests_per_unit > 0) {
        Policy policy;
        policy.algorithm = Algorithm::kFixedWindow;
        policy.limit = limit.requests_per_unit;
        policy.period = *length;
        if (auto s = policy.Validate(); !s.ok()) {
          pending->done(absl::InvalidArgumentError(
              fmt::format("descriptor {}: the limit override: {}", i, MessageOf(s))));
          return;
        }
        limit.policy = policy;
      }
      slot.override_limit = std::move(limit);
    } else {
      match = config.Match(request.domain(), descriptor);
      slot.configured = match.limit;
      if (slot.configured == nullptr) continue;
      slot.metadata = match.metadata;
    }
    const RlsLimit& limit = slot.limit();
    for (const std::string& name : limit.replaces) replaced.push_back(name);
    slot.kind = limit.unlimited                                 ? Pending::Kind::kUnlimited
                : upstream_counting && limit.upstream_counter ? Pending::Kind::kCount
                : limit.policy                                ? Pending::Kind::kDecide
                                                              : Pending::Kind::kZeroLimit;
    slot.stats_key = limit.stats_key;
    if (limit.detailed_metric && descriptor.entries_size() > 0) {
      // Upstream's detailed_metric: the last entry's value joins the name.
      slot.stats_key += "_" + descriptor.entries(descriptor.entries_size() - 1).value();
    }
    if (slot.kind == Pending::Kind::kDecide) {
      slot.key = match.shared_values.empty()
                     ? StoreKey(request.domain(), descriptor, *limit.policy)
                     : StoreKey(request.domain(), SharedDescriptor(descriptor, match.shared_values),
                                *limit.policy);
    }
    if (slot.kind == Pending::Kind::kCount) {
      slot.unit_s = UnitLength(limit.unit)->count();
      // share_threshold: the wildcard's pattern in place of the values it shares, as
      // upstream's GenerateCacheKey writes the key (a copy only then).
      std::optional<ext::RateLimitDescriptor> shared;
      if (!match.shared_values.empty()) shared = SharedDescriptor(descriptor, match.shared_values);
      slot.counter_key = CounterKey(settings_.cache_key_prefix, request.domain(),
                                    shared ? *shared : descriptor, pending->now_s, slot.unit_s);
      if (slot.counter_key.size() > kMaxCounterKeyBytes) {
        pending->done(absl::InvalidArgumentError(
            fmt::format("descriptor {}: its counter key is {} bytes, at most {} are taken", i,
                        slot.counter_key.size(), kMaxCounterKeyBytes)));
        return;
      }
    }
  }
  for (std::size_t i = 0; i < pending->slots.size(); ++i) {
    Pending::Slot& slot = pending->slots[i];
    if (slot.kind == Pending::Kind::kNoLimit) continue;
    const std::string& name = slot.limit().name;
    if (!name.empty() && std::find(replaced.begin(), replaced.end(), name) != replaced.end()) {
      slot.kind = Pending::Kind::kNoLimit;
      continue;
    }
    if (slot.kind == Pending::Kind::kDecide) pending->to_decide.push_back(i);
    if (slot.kind == Pending::Kind::kCount) {
      // Upstream's local cache: a key over its limit is not sent again in its window.
      slot.local_over = local_cache_.Contains(slot.counter_key, pending->now_s);
      pending->any_local_over = pending->any_local_over || slot.local_over;
      if (!slot.local_over) pending->to_count.push_back(i);
    }
  }

  if (domain != nullptr && domain->all_or_nothing) {
    // A limit of 0 denies without the store; all or nothing, the others then only peek.
    for (const Pending::Slot& slot : pending->slots) {
      if (slot.kind == Pending::Kind::kZeroLimit && slot.hits > 0 && !slot.limit().shadow) {
        pending->peek_only = true;
      }
    }
  }
  if (pending->to_decide.empty() && pending->to_count.empty()) {
    Finish(*pending);
  } else if (domain != nullptr && domain->all_or_nothing) {
    DecideAll(std::move(pending));
  } else {
    // The last callback may answer while a loop below is still on its last step: after the
    // last call, nothing here touches more than `to_decide` and `to_count`, which Finish
    // only reads.
    pending->outstanding.store(pending->to_decide.size() + pending->to_count.size(),
                               std::memory_order_relaxed);
    if (!pending->to_count.empty()) CountEach(pending);
    DecideEach(std::move(pending));
  }
}

void RlsEngine::CountEach(std::shared_ptr<Pending> pending) {
  // fixed_cache_impl.go reads a request's counts first (GET, pipelined) when it must spare the
  // other keys of a request one of whose keys would go over; with one key there is no other.
  if (!settings_.stop_increment_when_over || pending->any_local_over ||
      pending->to_count.size() < 2) {
    return AddCounts(std::move(pending));
  }
  pending->reads.store(pending->to_count.size(), std::memory_order_relaxed);
  for (const std::size_t i : pending->to_count) {
    Pending::Slot& slot = pending->slots[i];
    const CountRequest read{.key = slot.counter_key, .hits = 0, .ttl = {}, .now = pending->now};
    StoreFor(slot.limit().unit).CountAsync(read, [this, pending,
                                                  i](absl::StatusOr<CountAnswer> answer) {
      Pending::Slot& slot = pending->slots[i];
      if (answer.ok()) {
        slot.would_exceed =
            answer->count + slot.hits > static_cast<std::int64_t>(slot.limit().requests_per_unit);
      } else {
        slot.counted = answer.status();
      }
      if (pending->reads.fetch_sub(1, std::memory_order_acq_rel) == 1) AddCounts(pending);
    });
  }
}

void RlsEngine::AddCounts(std::shared_ptr<Pending> pending) {
  bool any_would_exceed = false;
  for (const std::size_t i : pending->to_count) {
    any_would_exceed = any_would_exceed || pending->slots[i].would_exceed;
  }
  for (const std::size_t i : pending->to_count) {
    Pending::Slot& slot = pending->slots[i];
    if (!slot.counted.ok()) {  // its read failed: the request fails (upstream's panic)
      if (pending->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(*pending);
      continue;
    }
    const auto hits = static_cast<std::int64_t>(
        HitsToAdd(settings_.stop_increment_when_over, static_cast<std::uint64_t>(slot.hits),
                  pending->any_local_over, any_would_exceed, slot.would_exceed));
    const CountRequest count{.key = slot.counter_key,
                             .hits = hits,
                             .ttl = std::chrono::seconds(Ttl(slot.unit_s)),
                             .now = pending->now};
    StoreFor(slot.limit().unit).CountAsync(count, [this, pending,
                                                   i](absl::StatusOr<CountAnswer> answer) {
      pending->slots[i].counted = std::move(answer);
      if (pending->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(*pending);
    });
  }
}

void RlsEngine::DecideEach(std::shared_ptr<Pending> pending) {
  for (const std::size_t i : pending->to_decide) {
    Pending::Slot& slot = pending->slots[i];
    DecideRequest request{
        .key = slot.key, .policy = *slot.limit().policy, .cost = slot.hits, .now = pending->now};
    store_.DecideAsync(request, [this, pending, i](absl::StatusOr<Decision> decision) {
      pending->slots[i].decision = std::move(decision);
      if (pending->outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish(*pending);
    });
  }
}

void RlsEngine::DecideAll(std::shared_ptr<Pending> pending) {
  std::vector<CheckItem> items;
  for (const std::size_t i : pending->to_decide) {
    Pending::Slot& slot = pending->slots[i];
    const Policy& policy = *slot.limit().policy;
    // Two descriptors on one key and algorithm are one counter: one item, their hits added.
    auto same = std::find_if(items.begin(), items.end(), [&](const CheckItem& item) {
      return item.key == slot.key;  // the key names the algorithm
    });
    if (same != items.end()) {
      if (!pending->peek_only) {
        same->cost = std::min<std::int64_t>(same->cost + slot.hits, kMaxCost);
      }
      slot.item = static_cast<std::size_t>(same - items.begin());
      continue;
    }
    slot.item = items.size();
    items.push_back(CheckItem{.key = slot.key,
                              .policy = policy,
                              .cost = pending->peek_only ? 0 : slot.hits,
                              .name = slot.limit().name,
                              .shadow = slot.limit().shadow});
  }
  if (items.size() > kMaxItems) {
    pending->done(absl::InvalidArgumentError(fmt::format(
        "domain '{}' is all_or_nothing: {} limited descriptors in one request, at most {}",
        pending->domain, items.size(), kMaxItems)));
    return;
  }
  const MultiRequest request{.items = items, .now = pending->now};
  store_.DecideAllAsync(request, [this, pending](absl::StatusOr<MultiDecision> multi) {
    for (const std::size_t i : pending->to_decide) {
      Pending::Slot& slot = pending->slots[i];
      if (!multi.ok()) {
        slot.decision = multi.status();
        continue;
      }
      Decision decision = multi->items[slot.item];
      decision.degraded = decision.degraded || multi->degraded;
      slot.decision = decision;
    }
    Finish(*pending);
  });
}

void RlsEngine::Finish(Pending& pending) {
  bool degraded = false;
  const auto failed = [&pending](const absl::Status& status) {
    pending.done(absl::IsInvalidArgument(status)
                     ? status
                     : RlsMetrics::MarkStoreFailure(absl::UnavailableError(
                           fmt::format("rate limit store: {}", MessageOf(status)))));
  };
  for (const std::size_t i : pending.to_decide) {
    const auto& decision = pending.slots[i].decision;
    if (!decision.ok()) return failed(decision.status());
    degraded = degraded || decision->degraded;
  }
  for (const std::size_t i : pending.to_count) {
    const auto& counted = pending.slots[i].counted;
    if (!counted.ok()) return failed(counted.status());
    degraded = degraded || counted->degraded;
  }

  Response& response = *pending.response;
  response.Clear();
  OverallCode overall_code;
  // The metadata of the descriptors that passed, in request order (RESPONSE_DYNAMIC_METADATA).
  std::vector<const google::protobuf::Struct*> passed;
  const Response::DescriptorStatus* binding = nullptr;  // the headers' descriptor
  std::uint32_t least_remaining = kMaxRemaining;
  const TimePoint now = pending.now.value_or(SystemNow());
  // A limited descriptor's answer into the request's: the overall code (quota mode's rule),
  // the passed descriptors' metadata, and upstream's choice of the headers' descriptor: the
  // least remaining, and a descriptor over the limit (not in quota mode) wins over the ones
  // before it.
  const auto settle = [&](const Pending::Slot& slot, const RlsLimit& limit,
                          const Response::DescriptorStatus& status) {
    const bool quota = settings_.global_quota || limit.quota;
    const bool over_limit = status.code() == Response::OVER_LIMIT;
    overall_code.Answered(over_limit, quota);
    if (!over_limit) passed.push_back(slot.metadata);
    if (over_limit && !quota) {
      binding = &status;
      least_remaining = 0;
    } else if (status.limit_remaining() < least_remaining) {
      binding = &status;
      least_remaining = status.limit_remaining();
    }
  };

  for (const Pending::Slot& slot : pending.slots) {
    Response::DescriptorStatus& status = *response.add_statuses();
    status.set_code(Response::OK);
    if (slot.kind == Pending::Kind::kNoLimit) {
      overall_code.NoLimit(settings_.global_quota);
      continue;
    }
    if (slot.kind == Pending::Kind::kUnlimited) {
      status.set_limit_remaining(kMaxRemaining);
      continue;
    }
    const RlsLimit& limit = slot.limit();
    RateLimit& current = *status.mutable_current_limit();
    current.set_requests_per_unit(limit.requests_per_unit);
    current.set_unit(limit.unit);
    current.set_name(limit.name);

    bool over = false;
    bool slot_degraded = false;
    std::chrono::microseconds reset{0};
    const auto hits = static_cast<std::uint64_t>(slot.hits);
    if (slot.kind == Pending::Kind::kCount) {
      slot_degraded = !slot.local_over && slot.counted->degraded;
      const CountVerdict verdict =
          Judge(limit.requests_per_unit, slot.local_over ? 0 : slot.counted->count, hits,
                slot.local_over, limit.shadow, settings_.near_limit_ratio);
      status.set_limit_remaining(verdict.over ? 0 : verdict.remaining);
      // utils.CalculateReset: the unit's seconds left from this process's clock.
      SetDuration(status.mutable_duration_until_reset(),
                  std::chrono::seconds(slot.unit_s - pending.now_s % slot.unit_s));
      // A degraded count (on_error) says nothing of the key: the cache keeps Redis' answers.
      if (verdict.cache_locally && !slot_degraded && local_cache_.enabled()) {
        local_cache_.Insert(slot.counter_key, pending.now_s + slot.unit_s, pending.now_s);
      }
      // Upstream's arithmetic of the stats (base_limiter.go), from the count before these hits.
      RlsMetrics::Outcome outcome;
      outcome.hits = hits;
      outcome.limit = limit.requests_per_unit;
      outcome.before = slot.local_over ? 0
                                       : static_cast<std::uint64_t>(std::max<std::int64_t>(
                                             0, slot.counted->count)) - hits;
      outcome.over = verdict.over;
      outcome.shadow = limit.shadow;
      outcome.local_cache = slot.local_over;
      outcome.degraded = slot_degraded;
      metrics_.Count(slot.stats_key, outcome);
      if (verdict.over && !limit.shadow) status.set_code(Response::OVER_LIMIT);
      settle(slot, limit, status);
      continue;
    }
    if (slot.kind == Pending::Kind::kZeroLimit) {
      over = slot.hits > 0;
      reset = ToWindowEnd(now, limit.period);
    } else {
      const Decision& decision = *slot.decision;
      over = !decision.allowed;
      slot_degraded = decision.degraded;
      status.set_limit_remaining(over ? 0 : ClampRemaining(decision.remaining));
      if (limit.upstream_window) {
        // Upstream: whole seconds to the end of the unit's window.
        const auto to_end = decision.reset_after > std::chrono::microseconds(0)
                                ? decision.reset_after
                                : ToWindowEnd(now, limit.period);
        reset = std::chrono::seconds(CeilSeconds(to_end));
      } else {
        reset = decision.reset_after;
      }
    }
    SetDuration(status.mutable_duration_until_reset(), reset);

    metrics_.Count(slot.stats_key,
                   OutcomeOf(slot.kind == Pending::Kind::kDecide ? &*slot.decision : nullptr, limit,
                             slot.hits, over, slot_degraded));
    // Upstream's shadow_mode: decided and counted, answered OK.
    if (over && !limit.shadow) {
      status.set_code(Response::OVER_LIMIT);
    }
    settle(slot, limit, status);
  }

  if (degraded && settings_.unavailable_on_store_error) {
    response.Clear();
    pending.done(RlsMetrics::MarkStoreFailure(
        absl::UnavailableError("rate limit store unavailable: Envoy's failure_mode_deny decides")));
    return;
  }
  if (settings_.response_headers && binding != nullptr) {
    auto add = [&](const std::string& name, std::string value) {
      auto& header = *response.add_response_headers_to_add();
      header.set_key(name);
      header.set_value(std::move(value));
    };
    add(settings_.limit_header, std::to_string(binding->current_limit().requests_per_unit()));
    add(settings_.remaining_header, std::to_string(binding->limit_remaining()));
    // Whole seconds, rounded up (a client that waits that long is never early).
    const auto& reset = binding->duration_until_reset();
    add(settings_.reset_header, std::to_string(reset.seconds() + (reset.nanos() > 0 ? 1 : 0)));
  }
  Response::Code overall = overall_code.code();
  if (overall == Response::OVER_LIMIT && settings_.global_shadow) {
    overall = Response::OK;
    metrics_.CountGlobalShadow();
  }
  if (pending.dynamic_metadata) {
    AddPassedMetadata(*pending.dynamic_metadata, passed);
    *response.mutable_dynamic_metadata() = std::move(*pending.dynamic_metadata);
  }
  response.set_overall_code(overall);
  pending.done(absl::OkStatus());
}

}  // namespace floodgate::server::rls
