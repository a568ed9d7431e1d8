// Policy strings: parsed, checked against the ranges, and written back in canonical form.
// docs/service.md, "Policy strings"; ranges: docs/algorithms.md, "Units and inputs".
#include <absl/status/status.h>
#include <floodgate/policy.h>
#include <fmt/format.h>

#include <array>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "core/algorithms.h"
#include "core/calendar.h"

namespace floodgate {

namespace {

using std::chrono::microseconds;

constexpr std::array<std::pair<std::string_view, Algorithm>, 6> kAlgorithms{{
    {"gcra", Algorithm::kGcra},
    {"token_bucket", Algorithm::kTokenBucket},
    {"sliding_log", Algorithm::kSlidingLog},
    {"sliding_window", Algorithm::kSlidingWindow},
    {"fixed_window", Algorithm::kFixedWindow},
    {"concurrency", Algorithm::kConcurrency},
}};

// Largest unit first, so ToString() picks the shortest exact spelling.
constexpr std::array<std::pair<std::string_view, std::int64_t>, 6> kUnits{{
    {"d", 86'400'000'000},
    {"h", 3'600'000'000},
    {"m", 60'000'000},
    {"s", 1'000'000},
    {"ms", 1'000},
    {"us", 1},
}};

absl::Status Invalid(std::string_view text, std::string_view reason) {
  return absl::InvalidArgumentError(fmt::format("invalid policy \"{}\": {}", text, reason));
}

// A positive decimal integer, or an error naming `what`.
absl::StatusOr<std::int64_t> ParseCount(std::string_view text, std::string_view what,
                                        std::string_view value) {
  std::int64_t n = 0;
  if (!ParseDecimal(value, n)) {
    return Invalid(text, fmt::format("{} must be a whole number, got \"{}\"", what, value));
  }
  return n;
}

absl::StatusOr<microseconds> ParsePeriod(std::string_view text, std::string_view period) {
  auto parsed = ParseDuration(period);
  if (!parsed.ok()) return Invalid(text, fmt::format("period {}", MessageOf(parsed.status())));
  return *parsed;
}


// Calendar units (tz=ZONE): their spelling and the longest length each can have, which
// Policy::period holds for them (include/floodgate/policy.h).
struct CalendarUnit {
  std::string_view name;
  Calendar unit;
  microseconds longest;
};
constexpr std::array<CalendarUnit, 4> kCalendarUnits{{
    {"d", Calendar::kDay, std::chrono::days(1)},
    {"w", Calendar::kWeek, std::chrono::days(7)},
    {"mo", Calendar::kMonth, std::chrono::days(31)},
    {"y", Calendar::kYear, std::chrono::days(366)},
}};

const CalendarUnit* CalendarUnitOf(Calendar unit) {
  for (const CalendarUnit& c : kCalendarUnits) {
    if (c.unit == unit) return &c;
  }
  return nullptr;
}

// `w`, `mo` and `y` (with or without a count) are calendar units, which no duration is.
const CalendarUnit* CalendarSpelling(std::string_view period) {
  std::size_t digits = 0;
  while (digits < period.size() && period[digits] >= '0' && period[digits] <= '9') ++digits;
  for (const CalendarUnit& c : kCalendarUnits) {
    if (c.unit != Calendar::kDay && period.substr(digits) == c.name) return &c;
  }
  return nullptr;
}

// tz=ZONE (docs/algorithms.md, "Calendar windows"): the window algorithms only, over one
// day, week, month or year, in a zone the database knows.
absl::Status ValidateCalendar(const Policy& policy) {
  const auto bad = [](std::string message) {
    return absl::InvalidArgumentError(std::move(message));
  };
  if (policy.calendar == Calendar::kNone) {
    if (!policy.tz.empty()) return bad("tz needs a calendar period: 1d, 1w, 1mo or 1y");
    return absl::OkStatus();
  }
  const CalendarUnit* unit = CalendarUnitOf(policy.calendar);
  if (unit == nullptr) return bad("unknown calendar unit");
  if (policy.tz.empty()) {
    return bad(fmt::format("1{} is a calendar period: add tz=ZONE (e.g. tz=UTC or "
                           "tz=America/New_York)",
                           unit->name));
  }
  if (policy.algorithm != Algorithm::kFixedWindow &&
      policy.algorithm != Algorithm::kSlidingWindow) {
    return bad(fmt::format("tz is only for fixed_window and sliding_window, not {}",
                           AlgorithmName(policy.algorithm)));
  }
  if (policy.period != unit->longest) {
    return bad(fmt::format("a calendar window (1{}) keeps period {}", unit->name,
                           FormatDuration(unit->longest)));
  }
  if (policy.prefetch != Prefetch::kOff) {
    // A lease ends with its window (docs/algorithms.md, "Take up to k"), which only the
    // zone knows; prefetch's leases are not taught calendars yet.
    return bad("prefetch is not for calendar windows (tz=) yet");
  }
  if (absl::StatusOr<absl::TimeZone> zone = core::LoadZone(policy.tz); !zone.ok()) {
    return zone.status();
  }
  return absl::OkStatus();
}

// gcra decides in whole µs (docs/algorithms.md, revision 2): E = ceil(P / L). Where L does
// not divide P the rate comes out a little slower than asked; past 0.1% that is no longer
// the policy the user wrote, so it is refused rather than silently changed. The spec's
// other gcra bound, tau = B * E <= 3.2e14 µs, needs no check of its own: the burst window
// (B * P / L <= 366 d, checked for every bucket) times at most 1.001 is far below it.
absl::Status ValidateGcraRounding(const Policy& policy) {
  const std::int64_t period = policy.period.count();
  // E * L <= P + L - 1, so any L <= P div 1000 passes (requests at least 1 ms apart: most
  // policies) without the division every decision would otherwise pay here.
  if (policy.limit <= period / 1000) return absl::OkStatus();
  const std::int64_t emission = core::GcraEmissionUs(policy);
  const std::int64_t stretched = emission * policy.limit;  // <= P + L: no overflow
  if (stretched > period + period / 1000) {
    // The rate a client gets is P / E per P where L per P was asked: that much under.
    const double slower =
        100.0 * (1.0 - static_cast<double>(period) / static_cast<double>(stretched));
    return absl::InvalidArgumentError(fmt::format(
        "gcra spaces requests in whole µs: {}/{} would be {} µs apart, {:.{}f}% under the "
        "limit; use token_bucket, or a limit that divides the period",
        policy.limit, FormatDuration(policy.period), emission, slower, slower < 1 ? 2 : 1));
  }
  return absl::OkStatus();
}

// prefetch=N|auto and prefetch_ttl (docs/prefetch_client.md): a lease is a take, whose
// request bounds (include/floodgate/reservation.h) these are.
absl::Status ValidatePrefetch(const Policy& policy) {
  const auto bad = [](std::string message) {
    return absl::InvalidArgumentError(std::move(message));
  };
  if (static_cast<unsigned>(policy.prefetch) > static_cast<unsigned>(Prefetch::kAuto)) {
    return bad("unknown prefetch mode");
  }
  if (policy.prefetch == Prefetch::kFixed &&
      (policy.prefetch_units < 1 || policy.prefetch_units > kMaxCost)) {
    return bad(fmt::format("prefetch must be between 1 and 1000000000 units, got {}",
                           policy.prefetch_units));
  }
  if (policy.prefetch != Prefetch::kFixed && policy.prefetch_units != 0) {
    return bad("prefetch_units is only for prefetch=N");
  }
  if (policy.prefetch == Prefetch::kOff && policy.prefetch_ttl != kDefaultPrefetchTtl) {
    return bad("prefetch_ttl needs prefetch=N or prefetch=auto");
  }
  if (policy.prefetch_ttl < kMinPrefetchTtl || policy.prefetch_ttl > kMaxPrefetchTtl) {
    return bad(fmt::format("prefetch_ttl must be between 1ms and 24h, got {}",
                           FormatDuration(policy.prefetch_ttl)));
  }
  return absl::OkStatus();
}

// delay=D (docs/algorithms.md, "Waiting"): the algorithms whose earliest fitting time is
// exact and monotone, and none of the options that would give the schedule a second owner.
absl::Status ValidateDelay(const Policy& policy) {
  if (policy.delay.count() == 0) return absl::OkStatus();
  const auto bad = [](std::string message) {
    return absl::InvalidArgumentError(std::move(message));
  };
  if (policy.delay < kMinDelay || policy.delay > kMaxDelay) {
    return bad(
        fmt::format("delay must be between 1ms and 1h, got {}", FormatDuration(policy.delay)));
  }
  if (!policy.tz.empty() || policy.calendar != Calendar::kNone) {
    return bad(
        "delay is not for calendar windows (tz=): a window's count has no earliest "
        "time to wait for that keeps the schedule exact; use gcra, token_bucket or "
        "sliding_log");
  }
  if (policy.algorithm != Algorithm::kGcra && policy.algorithm != Algorithm::kTokenBucket &&
      policy.algorithm != Algorithm::kSlidingLog) {
    return bad(fmt::format("delay is only for gcra, token_bucket and sliding_log, not {}",
                           AlgorithmName(policy.algorithm)));
  }
  if (policy.block.count() != 0) {
    return bad(
        "delay and block exclude each other: a request delayed instead of denied "
        "never starts a block");
  }
  if (policy.prefetch != Prefetch::kOff) {
    return bad(
        "delay and prefetch exclude each other: a prefetched budget is spent in "
        "process, outside the key's one schedule");
  }
  return absl::OkStatus();
}

// `concurrency:N[,lease=DURATION]`: no rate, a count of leases and how long each lives.
absl::StatusOr<Policy> ParseConcurrency(std::string_view text, Policy policy) {
  std::string_view rest = text.substr(text.find(':') + 1);
  const std::size_t comma = rest.find(',');
  const std::string_view count = rest.substr(0, comma);
  if (count.find('/') != std::string_view::npos) {
    return Invalid(text,
                   "concurrency takes a number of leases, not a rate: "
                   "concurrency:N[,lease=DURATION], e.g. concurrency:10,lease=30s");
  }
  auto limit = ParseCount(text, "the number of leases", count);
  if (!limit.ok()) return limit.status();
  policy.limit = *limit;
  policy.period = kDefaultLease;
  if (comma != std::string_view::npos) {
    const std::string_view option = rest.substr(comma + 1);
    if (option.starts_with("block")) {
      return Invalid(text,
                     "block is not for concurrency: a lease is held, never denied for a rate; "
                     "block works with gcra, token_bucket, sliding_log, sliding_window and "
                     "fixed_window");
    }
    if (option.starts_with("delay")) {
      return Invalid(text,
                     "delay is not for concurrency: a lease is held while the work runs, not "
                     "scheduled for later; delay works with gcra, token_bucket and sliding_log");
    }
    if (option.starts_with("prefetch")) {
      return Invalid(text,
                     "prefetch is not for concurrency: its leases are held and released, not "
                     "spent; prefetch works with gcra, token_bucket, sliding_log, sliding_window "
                     "and fixed_window");
    }
    if (!option.starts_with("lease=") || option.find(',') != std::string_view::npos) {
      return Invalid(
          text, fmt::format("unknown option \"{}\" (concurrency takes lease=DURATION)", option));
    }
    auto lease = ParseDuration(option.substr(6));
    if (!lease.ok()) return Invalid(text, fmt::format("lease {}", MessageOf(lease.status())));
    policy.period = *lease;
  }
  if (absl::Status status = policy.Validate(); !status.ok()) {
    return Invalid(text, MessageOf(status));
  }
  return policy;
}

}  // namespace

std::string FormatDuration(microseconds period) {
  for (const auto& [name, us] : kUnits) {
    if (period.count() % us == 0) {
      const std::int64_t n = period.count() / us;
      return fmt::format("{}{}", n, name);
    }
  }
  return fmt::format("{}us", period.count());  // unreachable: "us" divides everything
}

absl::StatusOr<microseconds> ParseDuration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  std::int64_t scale = 0;
  for (const auto& [name, us] : kUnits) {
    if (unit == name) scale = us;
  }
  if (scale == 0) {
    // "0.5s": the number stopped at the '.', and the rest is not a unit.
    if (!unit.empty() && (unit.front() == '.' || unit.front() == ',')) {
      return absl::InvalidArgumentError(fmt::format(
          "\"{}\" must be a whole number with a unit: use a smaller unit (e.g. 500ms)", text));
    }
    return absl::InvalidArgumentError(
        fmt::format("\"{}\" needs a unit: us, ms, s, m, h or d (e.g. 10s)", text));
  }
  std::int64_t count = 1;
  if (!number.empty() && (!ParseDecimal(number, count) || count > kMaxPeriod.count() / scale)) {
    return absl::InvalidArgumentError(fmt::format("\"{}\" is longer than 366d", text));
  }
  return microseconds(count * scale);
}

std::string_view AlgorithmName(Algorithm algorithm) {
  for (const auto& [name, value] : kAlgorithms) {
    if (value == algorithm) return name;
  }
  return "unknown";
}

absl::StatusOr<Policy> Policy::Parse(std::string_view text) {
  if (text.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("a policy is at most {} bytes, got {}", kMaxPolicyBytes, text.size()));
  }
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return Invalid(text, "expected ALGORITHM:LIMIT/PERIOD, e.g. gcra:100/1m");
  }
  Policy policy;
  const std::string_view algorithm = text.substr(0, colon);
  bool known = false;
  for (const auto& [name, value] : kAlgorithms) {
    if (algorithm == name) {
      policy.algorithm = value;
      known = true;
    }
  }
  if (!known) {
    return Invalid(text, fmt::format("unknown algorithm \"{}\" (gcra, token_bucket, "
                                     "sliding_log, sliding_window, fixed_window, concurrency)",
                                     algorithm));
  }
  if (policy.algorithm == Algorithm::kConcurrency) return ParseConcurrency(text, policy);

  std::vector<std::string_view> parts;
  for (std::string_view rest = text.substr(colon + 1);;) {
    const std::size_t comma = rest.find(',');
    parts.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const std::string_view rate = parts[0];
  const std::size_t slash = rate.find('/');
  if (slash == std::string_view::npos) {
    return Invalid(text, fmt::format("rate \"{}\" must be LIMIT/PERIOD, e.g. 100/1m", rate));
  }
  auto limit = ParseCount(text, "limit", rate.substr(0, slash));
  if (!limit.ok()) return limit.status();
  policy.limit = *limit;
  const std::string_view period_text = rate.substr(slash + 1);
  if (const CalendarUnit* unit = CalendarSpelling(period_text)) {
    if (period_text != unit->name && period_text != fmt::format("1{}", unit->name)) {
      return Invalid(text, fmt::format("a calendar period is one unit: 1d, 1w, 1mo or 1y, got "
                                       "\"{}\"",
                                       period_text));
    }
    policy.calendar = unit->unit;
    policy.period = unit->longest;
  } else {
    auto period = ParsePeriod(text, period_text);
    if (!period.ok()) return period.status();
    policy.period = *period;
  }

  bool has_burst = false;
  bool has_refill = false;
  bool has_prefetch = false;
  bool has_prefetch_ttl = false;
  bool has_block = false;
  bool has_delay = false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view option = parts[i];
    const std::size_t eq = option.find('=');
    const std::string_view name = option.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : option.substr(eq + 1);
    if (name == "burst") {
      if (has_burst) return Invalid(text, "burst given twice");
      if (policy.algorithm != Algorithm::kGcra && policy.algorithm != Algorithm::kTokenBucket) {
        return Invalid(text,
                       fmt::format("burst is only for gcra and token_bucket, not {}", algorithm));
      }
      auto burst = ParseCount(text, "burst", value);
      if (!burst.ok()) return burst.status();
      if (*burst < 1) return Invalid(text, fmt::format("burst must be >= 1, got {}", *burst));
      policy.burst = *burst;
      has_burst = true;
    } else if (name == "refill") {
      if (has_refill) return Invalid(text, "refill given twice");
      if (policy.algorithm != Algorithm::kTokenBucket) {
        return Invalid(text, fmt::format("refill is only for token_bucket, not {}", algorithm));
      }
      if (value == "smooth") {
        policy.refill = Refill::kSmooth;
      } else if (value == "interval") {
        policy.refill = Refill::kInterval;
      } else {
        return Invalid(text, fmt::format("refill must be smooth or interval, got \"{}\"", value));
      }
      has_refill = true;
    } else if (name == "prefetch") {
      if (has_prefetch) return Invalid(text, "prefetch given twice");
      if (value == "auto") {
        policy.prefetch = Prefetch::kAuto;
      } else {
        auto units = ParseCount(text, "prefetch", value);
        if (!units.ok()) {
          return Invalid(text, fmt::format("prefetch must be auto or a whole number of units, "
                                           "got \"{}\"",
                                           value));
        }
        policy.prefetch = Prefetch::kFixed;
        policy.prefetch_units = *units;
      }
      has_prefetch = true;
    } else if (name == "prefetch_ttl") {
      if (has_prefetch_ttl) return Invalid(text, "prefetch_ttl given twice");
      auto ttl = ParseDuration(value);
      if (!ttl.ok()) return Invalid(text, fmt::format("prefetch_ttl {}", MessageOf(ttl.status())));
      policy.prefetch_ttl = *ttl;
      has_prefetch_ttl = true;
    } else if (name == "block") {
      if (has_block) return Invalid(text, "block given twice");
      auto block = ParseDuration(value);
      if (!block.ok()) return Invalid(text, fmt::format("block {}", MessageOf(block.status())));
      if (block->count() == 0) return Invalid(text, "block must be between 1ms and 366d, got 0");
      policy.block = *block;
      has_block = true;
    } else if (name == "delay") {
      if (has_delay) return Invalid(text, "delay given twice");
      auto delay = ParseDuration(value);
      if (!delay.ok()) return Invalid(text, fmt::format("delay {}", MessageOf(delay.status())));
      if (*delay < kMinDelay || *delay > kMaxDelay) {
        return Invalid(
            text, fmt::format("delay must be between 1ms and 1h, got {}", FormatDuration(*delay)));
      }
      policy.delay = *delay;
      has_delay = true;
    } else if (name == "tz") {
      if (!policy.tz.empty()) return Invalid(text, "tz given twice");
      if (value.empty()) return Invalid(text, "tz needs a zone name, e.g. tz=Europe/Berlin");
      policy.tz = std::string(value);
    } else {
      return Invalid(text, fmt::format("unknown option \"{}\" (expected burst=B, "
                                       "refill=smooth|interval, prefetch=N|auto, "
                                       "prefetch_ttl=DURATION, block=DURATION, tz=ZONE or "
                                       "delay=DURATION)",
                                       option));
    }
  }
  if (has_prefetch_ttl && !has_prefetch) {
    return Invalid(text, "prefetch_ttl needs prefetch=N or prefetch=auto");
  }
  if (!policy.tz.empty() && policy.calendar == Calendar::kNone) {
    // With a zone, the day is the local one (1d or 24h alike); other lengths have no
    // calendar meaning.
    if (policy.period != std::chrono::days(1) && policy.period != std::chrono::days(7)) {
      return Invalid(text, fmt::format("with tz the period must be 1d, 1w, 1mo or 1y, got {}",
                                       period_text));
    }
    policy.calendar = policy.period == std::chrono::days(1) ? Calendar::kDay : Calendar::kWeek;
  }
  if (absl::Status status = policy.Validate(); !status.ok()) {
    return Invalid(text, MessageOf(status));
  }
  return policy;
}

absl::Status Policy::Validate() const {
  const auto bad = [](std::string message) {
    return absl::InvalidArgumentError(std::move(message));
  };
  if (static_cast<unsigned>(algorithm) > static_cast<unsigned>(Algorithm::kConcurrency)) {
    return bad("unknown algorithm");
  }
  if (algorithm == Algorithm::kConcurrency) {
    // Its leases are the admissions of a sliding log over the lease time (docs/leases.md),
    // so it has that log's bound.
    if (limit < 1 || limit > kMaxSlidingLogLimit) {
      return bad(fmt::format("concurrency holds 1 to 100000 leases, got {}", limit));
    }
    if (period < kMinLease || period > kMaxLease) {
      return bad(fmt::format("lease must be between 1ms and 24h, got {}", FormatDuration(period)));
    }
    if (burst != 0 || refill != Refill::kSmooth) {
      return bad("burst and refill are not for concurrency");
    }
    if (prefetch != Prefetch::kOff || prefetch_ttl != kDefaultPrefetchTtl) {
      return bad("prefetch is not for concurrency: its leases are held and released, not spent");
    }
    if (block.count() != 0) return bad("block is not for concurrency: a lease is never denied");
    if (delay.count() != 0) return bad("delay is not for concurrency: a lease is not scheduled");
    if (!tz.empty() || calendar != Calendar::kNone) {
      return bad("tz is only for fixed_window and sliding_window, not concurrency");
    }
    return absl::OkStatus();
  }
  // Most policies set none of the options, and every store validates the policy of every
  // decision: one test for all of them (each passes when its fields are left unset), and
  // their own checks only for a policy that sets one.
  const bool sets_options = block.count() != 0 || delay.count() != 0 ||
                            prefetch != Prefetch::kOff || prefetch_units != 0 ||
                            prefetch_ttl != kDefaultPrefetchTtl || calendar != Calendar::kNone ||
                            !tz.empty();
  if (sets_options) {
    if (block.count() != 0 && (block < kMinBlock || block > kMaxBlock)) {
      return bad(fmt::format("block must be between 1ms and 366d, got {}", FormatDuration(block)));
    }
    if (absl::Status status = ValidatePrefetch(*this); !status.ok()) return status;
    if (absl::Status status = ValidateDelay(*this); !status.ok()) return status;
    if (absl::Status status = ValidateCalendar(*this); !status.ok()) return status;
  }
  if (limit < 1 || limit > kMaxLimit) {
    return bad(fmt::format("limit must be between 1 and 1000000000, got {}", limit));
  }
  if (algorithm == Algorithm::kSlidingLog && limit > kMaxSlidingLogLimit) {
    return bad(
        fmt::format("sliding_log keeps a log of the last period's admissions, so its "
                    "limit is at most 100000, got {}; use sliding_window for larger limits",
                    limit));
  }
  if (period < kMinPeriod) {
    return bad(fmt::format("period must be at least 1ms, got {}", FormatDuration(period)));
  }
  if (period > kMaxPeriod) {
    return bad(fmt::format("period must be at most 366d, got {}", FormatDuration(period)));
  }
  const bool has_burst = algorithm == Algorithm::kGcra || algorithm == Algorithm::kTokenBucket;
  if (burst < 0) return bad(fmt::format("burst must be >= 1, got {}", burst));
  if (burst > kMaxBurst) return bad(fmt::format("burst must be at most 1000000000, got {}", burst));
  if (!has_burst && burst != 0) {
    return bad(
        fmt::format("burst is only for gcra and token_bucket, not {}", AlgorithmName(algorithm)));
  }
  if (algorithm != Algorithm::kTokenBucket && refill != Refill::kSmooth) {
    return bad(fmt::format("refill is only for token_bucket, not {}", AlgorithmName(algorithm)));
  }
  // burst * period / limit, the time a full burst takes to refill, compared without
  // overflow: each factor is at most 10^9 or 366d in µs (< 2^45).
  const __int128 burst_window = static_cast<__int128>(capacity()) * period.count();
  if (burst_window > static_cast<__int128>(kMaxBurstWindow.count()) * limit) {
    return bad(
        fmt::format("burst={} takes longer than 366d to refill at {}/{}; lower burst or "
                    "raise the rate",
                    capacity(), limit, FormatDuration(period)));
  }
  if (algorithm == Algorithm::kGcra) return ValidateGcraRounding(*this);
  return absl::OkStatus();
}

absl::StatusOr<PreparedPolicy> PreparedPolicy::Prepare(Policy policy) {
  if (absl::Status status = policy.Validate(); !status.ok()) return status;
  return PreparedPolicy(std::move(policy));
}

absl::StatusOr<PreparedPolicy> PreparedPolicy::Parse(std::string_view text) {
  absl::StatusOr<Policy> policy = Policy::Parse(text);
  if (!policy.ok()) return policy.status();
  return Prepare(*std::move(policy));
}

std::string Policy::ToString() const {
  if (algorithm == Algorithm::kConcurrency) {
    return fmt::format("concurrency:{},lease={}", limit, FormatDuration(period));
  }
  const CalendarUnit* unit = CalendarUnitOf(calendar);
  std::string out =
      unit != nullptr
          ? fmt::format("{}:{}/1{}", AlgorithmName(algorithm), limit, unit->name)
          : fmt::format("{}:{}/{}", AlgorithmName(algorithm), limit, FormatDuration(period));
  if (burst != 0) out += fmt::format(",burst={}", burst);
  if (refill == Refill::kInterval) out += ",refill=interval";
  if (prefetch == Prefetch::kFixed) out += fmt::format(",prefetch={}", prefetch_units);
  if (prefetch == Prefetch::kAuto) out += ",prefetch=auto";
  if (prefetch_ttl != kDefaultPrefetchTtl) {
    out += fmt::format(",prefetch_ttl={}", FormatDuration(prefetch_ttl));
  }
  if (block.count() != 0) out += fmt::format(",block={}", FormatDuration(block));
  if (!tz.empty()) out += fmt::format(",tz={}", tz);
  if (delay.count() != 0) out += fmt::format(",delay={}", FormatDuration(delay));
  return out;
}

}  // namespace floodgate
