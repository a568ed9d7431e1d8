#pragma once

// Policy: an algorithm with its limit, period and burst, parsed from a policy string.

#include <absl/status/statusor.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace floodgate {

enum class Algorithm : std::uint8_t {
  kGcra,
  kTokenBucket,
  kSlidingLog,
  kSlidingWindow,
  kFixedWindow,
  // In-flight limits (docs/leases.md): at most `limit` leases held at once, each freed by
  // its Release or, at the latest, `period` (the lease time) after its Acquire.
  kConcurrency,
};

enum class Refill : std::uint8_t { kSmooth, kInterval };

// Calendar windows (docs/algorithms.md, "Calendar windows"): with a time zone, the
// window algorithms count per local day, ISO week (from Monday), month or year instead of
// epoch-aligned multiples of the period. kNone: the period's epoch-aligned windows.
enum class Calendar : std::uint8_t { kNone, kDay, kWeek, kMonth, kYear };

// Prefetch (docs/prefetch_client.md): whether a Redis store leases units of the shared
// limit to spend in process. kFixed leases up to Policy::prefetch_units; kAuto sizes the
// lease per key from its traffic.
enum class Prefetch : std::uint8_t { kOff, kFixed, kAuto };

// Ranges from docs/algorithms.md ("Units and inputs") and docs/service.md.
inline constexpr std::int64_t kMaxLimit = 1'000'000'000;
inline constexpr std::int64_t kMaxBurst = 1'000'000'000;
inline constexpr std::int64_t kMaxCost = 1'000'000'000;
inline constexpr std::chrono::microseconds kMinPeriod = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxPeriod = std::chrono::days(366);
// A full burst must refill within the longest period: it bounds every TTL and keeps all
// state times far below 2^53 µs, where doubles stop being exact.
inline constexpr std::chrono::microseconds kMaxBurstWindow = kMaxPeriod;
// sliding_log keeps a log of admissions; past this limit sliding_window is the tool.
inline constexpr std::int64_t kMaxSlidingLogLimit = 100'000;
inline constexpr std::size_t kMaxKeyBytes = 512;
// A policy string: the longest valid one, every option at its widest, is under 200 bytes;
// a longer text is refused by its length, unparsed and not echoed.
inline constexpr std::size_t kMaxPolicyBytes = 256;
// concurrency: the lease time when the policy does not give one, and its range (a lease
// is a reservation held for the lease time, so the bounds are the reservations' holds).
inline constexpr std::chrono::microseconds kDefaultLease = std::chrono::seconds(30);
inline constexpr std::chrono::microseconds kMinLease = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxLease = std::chrono::hours(24);
// How long a prefetched budget lives unless the policy says (prefetch_ttl); its range is
// the reservations' holds (a budget is a reservation, include/floodgate/reservation.h).
inline constexpr std::chrono::microseconds kDefaultPrefetchTtl = std::chrono::milliseconds(100);
inline constexpr std::chrono::microseconds kMinPrefetchTtl = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxPrefetchTtl = std::chrono::hours(24);
// block=D (docs/algorithms.md, "Blocks"): 1 ms to 366 days, the periods' range.
inline constexpr std::chrono::microseconds kMinBlock = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxBlock = std::chrono::days(366);
// delay=D (docs/algorithms.md, "Waiting"): 1 ms to 1 h.
inline constexpr std::chrono::microseconds kMinDelay = std::chrono::milliseconds(1);
inline constexpr std::chrono::microseconds kMaxDelay = std::chrono::hours(1);

// A rate-limit policy: `limit` units per `period`, shaped by `algorithm`.
// A value type; build one with Parse() or fill the fields and call Validate().
struct Policy {
  Algorithm algorithm = Algorithm::kGcra;
  std::int64_t limit = 1;
  std::chrono::microseconds period = std::chrono::seconds(1);
  // Capacity of gcra and token_bucket; 0 means "same as limit". Must stay 0 for the
  // window algorithms, which have no separate burst.
  std::int64_t burst = 0;
  Refill refill = Refill::kSmooth;  // token_bucket only
  // Client-side leases of the shared limit (docs/prefetch_client.md): not part of the
  // shared state, so instances with and without prefetch share the key's state. Every
  // algorithm but concurrency; memory:// ignores it.
  Prefetch prefetch = Prefetch::kOff;
  std::int64_t prefetch_units = 0;  // kFixed: 1..kMaxCost units per lease at most; else 0
  std::chrono::microseconds prefetch_ttl = kDefaultPrefetchTtl;  // only with prefetch
  // Penalty block (docs/algorithms.md, "Blocks"): a denial blocks the key for this long,
  // denying everything without charging. 0: none; else kMinBlock..kMaxBlock. Every
  // algorithm but concurrency.
  std::chrono::microseconds block{0};
  // tz=ZONE (fixed_window and sliding_window only): the IANA zone name (or "UTC") whose
  // local midnights start the windows, and which calendar unit a window is. Both set or
  // both empty. `period` then holds the unit's longest length (1d: 24h, 1w: 7d, 1mo: 31d,
  // 1y: 366d), a bound for what needs one (the RateLimit-Policy header's w); the
  // decisions use the true bounds of each window (core/calendar.h).
  std::string tz;
  Calendar calendar = Calendar::kNone;
  // delay=D (docs/algorithms.md, "Waiting"): a request that fits within D is admitted with
  // a delay (Decision::delay) instead of denied. 0: none; else kMinDelay..kMaxDelay. gcra,
  // token_bucket and sliding_log only, and not with block, tz or prefetch.
  std::chrono::microseconds delay{0};

  // Parses `ALGORITHM:LIMIT/PERIOD[,burst=B][,refill=smooth|interval]
  // [,prefetch=N|auto][,prefetch_ttl=DURATION][,block=DURATION][,tz=ZONE][,delay=DURATION]`
  // (docs/service.md; with tz the period is 1d, 1w, 1mo or 1y), or
  // `concurrency:N[,lease=DURATION]` (limit N, period the lease time, 30s by default).
  // Errors name the offending part, e.g. "burst must be >= 1, got 0".
  static absl::StatusOr<Policy> Parse(std::string_view text);

  // OK when every field is within the ranges of docs/algorithms.md.
  absl::Status Validate() const;

  // B of docs/algorithms.md: the burst, or the limit when no burst is set.
  std::int64_t capacity() const { return burst == 0 ? limit : burst; }

  // The same policy without prefetch: what the shared state is decided under.
  Policy WithoutPrefetch() const {
    Policy shared = *this;
    shared.prefetch = Prefetch::kOff;
    shared.prefetch_units = 0;
    shared.prefetch_ttl = kDefaultPrefetchTtl;
    return shared;
  }

  // The canonical policy string; Parse(ToString()) == *this.
  std::string ToString() const;

  friend bool operator==(const Policy&, const Policy&) = default;
};

// A Policy that passed Validate(), for a caller deciding many times under the same policy
// (a configured rule, a fixed per-route limit): Limiter::Check with it skips the policy's
// checks and its copy into the request on every decision (docs/embedding.md, "Prepared
// policies"). Made only by Prepare() or Parse(), so holding one proves the checks passed;
// immutable, cheap to share by reference.
class PreparedPolicy {
 public:
  static absl::StatusOr<PreparedPolicy> Prepare(Policy policy);
  // Policy::Parse, then Prepare.
  static absl::StatusOr<PreparedPolicy> Parse(std::string_view text);

  const Policy& policy() const { return policy_; }

 private:
  explicit PreparedPolicy(Policy policy) : policy_(std::move(policy)) {}
  Policy policy_;
};

// A duration written as an integer and a unit (us, ms, s, m, h, d), or a bare unit
// meaning 1 ("s" is one second), as in policy periods and config timeouts.
absl::StatusOr<std::chrono::microseconds> ParseDuration(std::string_view text);
// The shortest exact spelling ParseDuration reads back ("1500ms", "2s", "1d").
std::string FormatDuration(std::chrono::microseconds duration);

// "gcra", "token_bucket", ... as written in policy strings.
std::string_view AlgorithmName(Algorithm algorithm);

}  // namespace floodgate
