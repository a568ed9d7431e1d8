// The conformance vectors loaded from tests/vectors and run through the Store interface.

#include "conformance.h"

#include <absl/time/time.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <semaphore>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace floodgate::testing {

namespace {

// A decision as the vector files write it (allowed, limit, remaining, retry_after_us,
// reset_after_us), for single and multi-decision vectors alike.
Decision DecisionFromJson(const nlohmann::json& e) {
  Decision decision;
  decision.allowed = e.at("allowed");
  decision.limit = e.at("limit");
  decision.remaining = e.at("remaining");
  decision.retry_after = std::chrono::microseconds(e.at("retry_after_us").get<std::int64_t>());
  decision.reset_after = std::chrono::microseconds(e.at("reset_after_us").get<std::int64_t>());
  decision.blocked = e.value("blocked", false);
  // delay_us is there exactly for a policy with delay= (docs/algorithms.md, "Waiting").
  decision.delayable = e.contains("delay_us");
  decision.delay = std::chrono::microseconds(e.value("delay_us", std::int64_t{0}));
  return decision;
}

// A step's time: µs since the epoch, or an RFC 3339 time with its UTC offset
// ("2028-03-12T03:00:00-04:00"), as the calendar vectors write it to be read.
std::int64_t TimeFromJson(const nlohmann::json& t) {
  if (t.is_number_integer()) return t.get<std::int64_t>();
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, t.get<std::string>(), &time, &error)) {
    throw std::runtime_error(fmt::format("vector time {}: {}", t.dump(), error));
  }
  return absl::ToUnixMicros(time);
}

KeyOperation OperationFromJson(const std::string& op) {
  if (op == "reset") return KeyOperation::kReset;
  if (op == "refund") return KeyOperation::kRefund;
  if (op == "penalize") return KeyOperation::kPenalize;
  throw std::runtime_error(fmt::format("vector op \"{}\": not reset, refund or penalize", op));
}

}  // namespace

std::vector<VectorCase> LoadAllVectors() {
  std::vector<VectorCase> cases;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(FLOODGATE_VECTORS_DIR)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream in(path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc.at("cases")) {
      VectorCase vc{path.filename().string(), c.at("name"), c.value("why", ""), c.at("policy"), {}};
      for (const auto& s : c.at("steps")) {
        VectorStep step{TimeFromJson(s.at("t")), s.at("key"), s.value("cost", 0),
                        DecisionFromJson(s.at("expect"))};
        if (s.contains("op")) {
          step.op = OperationFromJson(s.at("op"));
          step.units = s.value("units", 0);
          vc.operates = true;
        }
        vc.steps.push_back(std::move(step));
      }
      cases.push_back(std::move(vc));
    }
  }
  return cases;
}

std::vector<MultiCase> LoadMultiVectors() {
  std::vector<MultiCase> cases;
  // delay.json: under delay= (written by tests/vectors/delay_oracle.py).
  for (const std::string file : {"multi.json", "leases.json", "delay.json"}) {
    std::ifstream in(std::filesystem::path(FLOODGATE_VECTORS_DIR) / "multi" / file);
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc.at("cases")) {
      MultiCase mc{file, c.at("name"), c.value("why", ""), {}};
      for (const auto& s : c.at("steps")) {
        MultiStep step;
        step.t = s.at("t");
        if (s.contains("release") || s.contains("settle")) {
          step.settle = s.contains("release") ? s.at("release") : s.at("settle");
          step.actual = s.value("actual", 0);
          step.decisions.push_back(DecisionFromJson(s.at("expect")));
          mc.holds = true;
          mc.steps.push_back(std::move(step));
          continue;
        }
        for (const auto& i : s.at("items")) {
          step.items.push_back({i.at("name"), i.at("key"), i.at("policy"), i.at("cost"),
                                i.value("shadow", false), i.value("hold_us", 0)});
        }
        const auto& e = s.at("expect");
        step.allowed = e.at("allowed");
        step.binding = e.at("binding");
        step.retry_after_us = e.at("retry_after_us");
        step.delay_us = e.value("delay_us", std::int64_t{0});
        step.denied_by = e.at("denied_by").get<std::vector<std::string>>();
        step.would_deny = e.at("would_deny").get<std::vector<std::string>>();
        for (const auto& d : e.at("items")) step.decisions.push_back(DecisionFromJson(d));
        if (e.contains("leases")) {
          step.held = e.at("leases").get<std::map<std::string, std::string>>();
        }
        for (const MultiItem& item : step.items) {
          mc.holds |=
              item.cost > 0 && (item.policy.starts_with("concurrency:") || item.hold_us > 0);
        }
        mc.steps.push_back(std::move(step));
      }
      cases.push_back(std::move(mc));
    }
  }
  return cases;
}

std::vector<ReserveCase> LoadReserveVectors() {
  std::vector<ReserveCase> cases;
  for (const std::string file : {"reserve.json", "leases.json", "take.json"}) {
    std::ifstream in(std::filesystem::path(FLOODGATE_VECTORS_DIR) / "reserve" / file);
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc.at("cases")) {
      ReserveCase rc{file, c.at("name"), c.value("why", ""), c.at("policy"), {}};
      for (const auto& s : c.at("steps")) {
        ReserveStep step{s.at("t"),
                         s.at("op"),
                         s.value("key", ""),
                         0,
                         {},
                         s.value("hold_us", 0),
                         {},
                         s.value("expect_error", "")};
        if (step.op == "check") {
          step.amount = s.at("cost");
        } else if (step.op == "reserve") {
          step.amount = s.at("estimate");
          step.reservation = s.at("as");
        } else if (step.op == "settle") {
          step.amount = s.at("actual");
          step.reservation = s.at("reservation");
        } else if (step.op == "acquire") {
          step.reservation = s.at("as");
        } else if (step.op == "take") {
          step.amount = s.at("up_to");
          step.lifetime_us = s.at("lifetime_us");
          step.expect_units = s.at("expect_units");
          step.expect_lease_us = s.value("expect_lease_us", 0);
          step.reservation = s.value("as", "");
        } else {
          EXPECT_EQ(step.op, "release") << file << ": " << rc.name;
          step.reservation = s.at("lease");
        }
        if (s.contains("expect")) step.expect = DecisionFromJson(s.at("expect"));
        rc.steps.push_back(std::move(step));
      }
      cases.push_back(std::move(rc));
    }
  }
  return cases;
}

void RunReserveCase(Store& store, const ReserveCase& c, const std::string& key_prefix) {
  auto policy = Policy::Parse(c.policy);
  ASSERT_TRUE(policy.ok()) << c.policy << ": " << policy.status();
  std::map<std::string, std::string> ids;  // the case's names for the ids the store made
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const ReserveStep& step = c.steps[i];
    const std::string where =
        fmt::format("{} / \"{}\", step {} ({} at t={})", c.file, c.name, i + 1, step.op, step.t);
    const TimePoint now{std::chrono::microseconds(step.t)};
    const std::string key = key_prefix + step.key;
    absl::StatusOr<Decision> got;
    if (step.op == "check") {
      got = store.Decide(DecideRequest{key, *policy, step.amount, now});
    } else if (step.op == "reserve" || step.op == "acquire") {
      const AcquireRequest acquire{key, *policy, now};
      ReserveRequest request{key, *policy, step.amount, kDefaultHold, now};
      if (step.hold_us > 0) request.hold = std::chrono::microseconds(step.hold_us);
      if (step.op == "acquire") request = LeaseReservation(acquire);
      absl::StatusOr<Reservation> reservation =
          step.op == "acquire" ? store.Acquire(acquire) : store.Reserve(request);
      if (!reservation.ok()) {
        got = reservation.status();
      } else {
        // Only an admitted reservation is held, and it expires when its hold ends.
        EXPECT_EQ(reservation->id.empty(), !reservation->decision.allowed) << where;
        if (reservation->decision.allowed) {
          EXPECT_EQ(reservation->expires, now + request.hold) << where;
          EXPECT_EQ(reservation->units, request.estimate) << where;
          EXPECT_TRUE(ids.emplace(step.reservation, reservation->id).second) << where;
          for (const auto& [name, id] : ids) {
            if (name != step.reservation) {
              EXPECT_NE(id, reservation->id) << where;
            }
          }
        }
        got = reservation->decision;
      }
    } else if (step.op == "take") {
      absl::StatusOr<Reservation> lease = store.Take(
          TakeRequest{key, *policy, step.amount, std::chrono::microseconds(step.lifetime_us), now});
      if (!lease.ok()) {
        got = lease.status();
      } else {
        // Only a take that leased units holds them, until the lease ends.
        EXPECT_EQ(lease->units, step.expect_units) << where;
        EXPECT_EQ(lease->id.empty(), lease->units == 0) << where;
        if (lease->units > 0) {
          EXPECT_EQ((lease->expires - now).count(), step.expect_lease_us) << where;
          EXPECT_TRUE(ids.emplace(step.reservation, lease->id).second) << where;
        }
        got = lease->decision;
      }
    } else {
      // A name no step held stands for an id the store never made.
      const auto id = ids.find(step.reservation);
      const std::string held = id != ids.end() ? id->second : "0000000000000000dead";
      got = step.op == "release" ? store.Release(ReleaseRequest{held, now})
                                 : store.Settle(SettleRequest{held, step.amount, now});
    }
    if (!step.expect) {
      ASSERT_TRUE(step.expect_error == "not_found" || step.expect_error == "invalid_argument")
          << where << ": expect_error \"" << step.expect_error << "\"";
      EXPECT_EQ(got.status().code(), step.expect_error == "not_found"
                                         ? absl::StatusCode::kNotFound
                                         : absl::StatusCode::kInvalidArgument)
          << where << ": " << got.status();
      continue;
    }
    ASSERT_TRUE(got.ok()) << where << ": " << got.status();
    EXPECT_EQ(*got, *step.expect) << where;
  }
}

namespace {

void ExpectMultiStep(const MultiStep& step, const MultiDecision& got, const std::string& where) {
  EXPECT_EQ(got.allowed, step.allowed) << where;
  EXPECT_EQ(got.binding, step.binding) << where;
  EXPECT_EQ(got.retry_after.count(), step.retry_after_us) << where;
  EXPECT_EQ(got.delay.count(), step.delay_us) << where;
  std::vector<std::string> denied_by, would_deny;
  for (std::size_t i : got.denied_by) denied_by.push_back(step.items[i].name);
  for (std::size_t i : got.would_deny) would_deny.push_back(step.items[i].name);
  EXPECT_EQ(denied_by, step.denied_by) << where;
  EXPECT_EQ(would_deny, step.would_deny) << where;
  EXPECT_FALSE(got.degraded) << where;
  EXPECT_TRUE(got.unknown.empty()) << where;
  ASSERT_EQ(got.items.size(), step.decisions.size()) << where;
  for (std::size_t i = 0; i < got.items.size(); ++i) {
    EXPECT_EQ(got.items[i], step.decisions[i]) << where << ", item " << step.items[i].name;
  }
}

// Step by step, what each step holds named as the vectors name it for the settle and
// release steps after it.
template <class RequestFn>
void RunHoldingMultiCase(Store& store, const MultiCase& c, RequestFn request) {
  std::map<std::string, std::string> ids;
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const MultiStep& step = c.steps[s];
    const std::string where = fmt::format("{} / \"{}\", step {}", c.file, c.name, s + 1);
    const TimePoint now{std::chrono::microseconds(step.t)};
    if (!step.settle.empty()) {
      const auto id = ids.find(step.settle);
      ASSERT_NE(id, ids.end()) << where << ": no step held " << step.settle;
      const absl::StatusOr<Decision> got =
          store.Settle(SettleRequest{id->second, step.actual, now});
      ASSERT_TRUE(got.ok()) << where << ": " << got.status();
      EXPECT_EQ(*got, step.decisions[0]) << where;
      continue;
    }
    const absl::StatusOr<MultiDecision> got = store.DecideAll(request(s));
    ASSERT_TRUE(got.ok()) << where << ": " << got.status();
    ExpectMultiStep(step, *got, where);
    std::map<std::string, std::string> held;  // item name -> the name it is held as
    for (const HeldReservation& h : got->held) {
      ASSERT_LT(h.item, step.items.size()) << where;
      const MultiItem& item = step.items[h.item];
      const auto named = step.held.find(item.name);
      ASSERT_NE(named, step.held.end()) << where << ": something held for " << item.name;
      const std::chrono::microseconds hold = item.hold_us > 0
                                                 ? std::chrono::microseconds(item.hold_us)
                                                 : Policy::Parse(item.policy)->period;
      EXPECT_EQ(h.expires, now + hold) << where;
      EXPECT_FALSE(h.id.empty()) << where;
      EXPECT_TRUE(ids.emplace(named->second, h.id).second) << where;
      held.emplace(item.name, named->second);
    }
    EXPECT_EQ(held, step.held) << where << ": what the step holds";
  }
}

}  // namespace

void RunMultiCase(Store& store, const MultiCase& c, const std::string& key_prefix, bool in_flight) {
  struct Built {
    std::vector<std::string> keys;
    std::vector<CheckItem> items;
  };
  std::vector<Built> built(c.steps.size());
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    for (const MultiItem& item : c.steps[s].items) built[s].keys.push_back(key_prefix + item.key);
    for (std::size_t i = 0; i < c.steps[s].items.size(); ++i) {
      const MultiItem& item = c.steps[s].items[i];
      auto policy = Policy::Parse(item.policy);
      ASSERT_TRUE(policy.ok()) << item.policy << ": " << policy.status();
      built[s].items.push_back(CheckItem{built[s].keys[i], *policy, item.cost, item.name,
                                         item.shadow, std::chrono::microseconds(item.hold_us)});
    }
  }
  const auto request = [&](std::size_t s) {
    return MultiRequest{built[s].items, TimePoint(std::chrono::microseconds(c.steps[s].t))};
  };
  if (c.holds) {
    ASSERT_FALSE(in_flight) << c.file << " / " << c.name << ": a holding case runs step by step";
    return RunHoldingMultiCase(store, c, request);
  }
  std::vector<absl::StatusOr<MultiDecision>> answers;
  if (in_flight) {
    std::vector<std::promise<absl::StatusOr<MultiDecision>>> results(c.steps.size());
    for (std::size_t s = 0; s < c.steps.size(); ++s) {
      store.DecideAllAsync(request(s), [&results, s](absl::StatusOr<MultiDecision> d) {
        results[s].set_value(std::move(d));
      });
    }
    // Every answer is collected before any is judged (see RunCaseInFlight).
    for (auto& result : results) answers.push_back(result.get_future().get());
  } else {
    for (std::size_t s = 0; s < c.steps.size(); ++s) answers.push_back(store.DecideAll(request(s)));
  }
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const std::string where = fmt::format("{} / \"{}\", step {}", c.file, c.name, s + 1);
    ASSERT_TRUE(answers[s].ok()) << where << ": " << answers[s].status();
    ExpectMultiStep(c.steps[s], *answers[s], where);
  }
}

absl::Status FirstMultiStepStatus(Store& store, const MultiCase& c, const std::string& key_prefix) {
  const MultiStep& step = c.steps.at(0);
  std::vector<std::string> keys;
  for (const MultiItem& item : step.items) keys.push_back(key_prefix + item.key);
  std::vector<CheckItem> items;
  for (std::size_t i = 0; i < step.items.size(); ++i) {
    const MultiItem& item = step.items[i];
    items.push_back(CheckItem{keys[i], *Policy::Parse(item.policy), item.cost, item.name,
                              item.shadow, std::chrono::microseconds(item.hold_us)});
  }
  return store.DecideAll(MultiRequest{items, TimePoint(std::chrono::microseconds(step.t))})
      .status();
}

void RunCaseInFlight(Store& store, const VectorCase& c, const std::string& key_prefix) {
  if (c.operates) return;
  auto policy = Policy::Parse(c.policy);
  ASSERT_TRUE(policy.ok()) << c.policy << ": " << policy.status();
  std::vector<std::promise<absl::StatusOr<Decision>>> results(c.steps.size());
  std::vector<std::string> keys;
  for (const auto& step : c.steps) keys.push_back(key_prefix + step.key);
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    store.DecideAsync(
        {keys[i], *policy, c.steps[i].cost, TimePoint(std::chrono::microseconds(c.steps[i].t))},
        [&results, i](absl::StatusOr<Decision> d) { results[i].set_value(std::move(d)); });
  }
  // Every answer is collected before any is judged: the promises must outlive the
  // callbacks, which may still be running on the store's thread.
  std::vector<absl::StatusOr<Decision>> answers;
  for (auto& result : results) answers.push_back(result.get_future().get());
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    ASSERT_TRUE(answers[i].ok()) << answers[i].status();
    EXPECT_EQ(*answers[i], c.steps[i].expect) << c.file << " / " << c.name << ", step " << i + 1;
  }
}

std::size_t RunCasesInFlight(Store& store, const std::vector<VectorCase>& cases,
                             const std::string& key_prefix, const InFlightHooks& hooks) {
  std::vector<Policy> policies;
  for (const VectorCase& c : cases) {
    auto policy = Policy::Parse(c.policy);
    EXPECT_TRUE(policy.ok()) << c.policy << ": " << policy.status();
    if (!policy.ok()) return 0;
    policies.push_back(*policy);
  }
  std::vector<std::vector<std::promise<absl::StatusOr<Decision>>>> results(cases.size());
  std::size_t submitted = 0;
  if (hooks.hold) hooks.hold();
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].operates) continue;
    results[c] = std::vector<std::promise<absl::StatusOr<Decision>>>(cases[c].steps.size());
    for (std::size_t i = 0; i < cases[c].steps.size(); ++i) {
      const VectorStep& step = cases[c].steps[i];
      // The store copies the key before DecideAsync returns.
      store.DecideAsync(
          {fmt::format("{}{}:{}", key_prefix, c, step.key), policies[c], step.cost,
           TimePoint(std::chrono::microseconds(step.t))},
          [&results, c, i](absl::StatusOr<Decision> d) { results[c][i].set_value(std::move(d)); });
      ++submitted;
    }
  }
  if (hooks.release) hooks.release();
  // Every answer is collected before any is judged: the promises must outlive the
  // callbacks, which may still be running on the store's thread.
  std::vector<std::vector<absl::StatusOr<Decision>>> answers(cases.size());
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (auto& result : results[c]) answers[c].push_back(result.get_future().get());
  }
  for (std::size_t c = 0; c < cases.size(); ++c) {
    if (cases[c].operates) continue;
    for (std::size_t i = 0; i < cases[c].steps.size(); ++i) {
      EXPECT_TRUE(answers[c][i].ok()) << answers[c][i].status();
      if (!answers[c][i].ok()) continue;
      EXPECT_EQ(*answers[c][i], cases[c].steps[i].expect)
          << cases[c].file << " / " << cases[c].name << ", step " << i + 1;
    }
  }
  return submitted;
}

void ExpectOnlyItsOwnIdsSettle(Store& store, const std::string& key_prefix) {
  const Policy policy = *Policy::Parse("gcra:1000/1s");
  // An id with a letter, to write it in upper case: ids are random hex digits, so 40 in a
  // row without one (each ~(10/16)^16, 5e-4) does not happen.
  std::string id;
  for (int i = 0; i < 40 && id.find_first_of("abcdef") == std::string::npos; ++i) {
    auto reservation = store.Reserve({key_prefix + "ids" + std::to_string(i), policy, 1});
    ASSERT_TRUE(reservation.ok()) << reservation.status();
    id = reservation->id;
  }
  const std::size_t letter = id.find_first_of("abcdef");
  ASSERT_NE(letter, std::string::npos) << id;
  std::string upper = id;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string one_upper = id;
  one_upper[letter] = static_cast<char>(std::toupper(static_cast<unsigned char>(id[letter])));
  const std::vector<std::pair<std::string_view, std::string>> forged = {
      {"upper-cased", upper},
      {"one letter upper-cased", one_upper},
      {"signed", "+" + id},
      {"after a space", " " + id},
      {"before a newline", id + "\n"},
      {"in 0x", "0x" + id},
      {"one digit short", id.substr(0, id.size() - 1)},
      {"one digit more", id + "0"},
  };
  for (const auto& [what, other] : forged) {
    const auto settled = store.Settle({other, 0});
    EXPECT_EQ(settled.status().code(), absl::StatusCode::kNotFound)
        << what << " \"" << other << "\" (of " << id << "): " << settled.status();
  }
  const auto settled = store.Settle({id, 0});
  EXPECT_TRUE(settled.ok()) << settled.status();
}

void RunCase(Store& store, const VectorCase& c, const std::string& key_prefix, PolicyForm form) {
  auto policy = Policy::Parse(c.policy);
  ASSERT_TRUE(policy.ok()) << c.policy << ": " << policy.status();
  auto prepared = PreparedPolicy::Prepare(*policy);
  ASSERT_TRUE(prepared.ok()) << c.policy << ": " << prepared.status();
  for (std::size_t i = 0; i < c.steps.size(); ++i) {
    const VectorStep& step = c.steps[i];
    const std::string key = key_prefix + step.key;
    const TimePoint now{std::chrono::microseconds(step.t)};
    auto got = step.op ? store.Operate(OperateRequest{key, *policy, *step.op, step.units, now})
               : form == PolicyForm::kPrepared
                   ? store.Decide(key, *prepared, step.cost, now)
                   : store.Decide(DecideRequest{key, *policy, step.cost, now});
    ASSERT_TRUE(got.ok()) << got.status();
    const std::string where =
        step.op
            ? fmt::format("{} / \"{}\" ({}), step {} (t={}, key={}, {} {})", c.file, c.name,
                          c.policy, i + 1, step.t, step.key, KeyOperationName(*step.op), step.units)
            : fmt::format("{} / \"{}\" ({}), step {} (t={}, key={}, cost={})", c.file, c.name,
                          c.policy, i + 1, step.t, step.key, step.cost);
    EXPECT_EQ(got->allowed, step.expect.allowed) << where;
    EXPECT_EQ(got->limit, step.expect.limit) << where;
    EXPECT_EQ(got->remaining, step.expect.remaining) << where;
    EXPECT_EQ(got->retry_after.count(), step.expect.retry_after.count()) << where;
    EXPECT_EQ(got->reset_after.count(), step.expect.reset_after.count()) << where;
    EXPECT_EQ(got->blocked, step.expect.blocked) << where;
    EXPECT_EQ(got->delayable, step.expect.delayable) << where;
    EXPECT_EQ(got->delay.count(), step.expect.delay.count()) << where;
    EXPECT_FALSE(got->degraded) << where;
  }
}

namespace {

// `threads` threads start together; each submits `per_thread` requests with at most
// `window` of them in flight, and waits for all its answers before it ends (so does this
// call). `submit(release)` starts one request and calls release() once it is answered,
// on whatever thread answers it.
template <class Submit>
void FromThreadsInFlight(int threads, int per_thread, int window, Submit submit) {
  std::barrier start(threads);
  std::vector<std::jthread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&] {
      start.arrive_and_wait();
      std::counting_semaphore<> slots(window);
      for (int i = 0; i < per_thread; ++i) {
        slots.acquire();
        submit([&slots] { slots.release(); });
      }
      for (int i = 0; i < window; ++i) slots.acquire();
    });
  }
}

// 8 threads x 64 decisions in flight on one key, all at `now`; returns how many were
// admitted.
std::int64_t Hammer(Store& store, const Policy& policy, const std::string& key, int per_thread,
                    TimePoint now) {
  std::atomic<std::int64_t> admitted{0}, failed{0};
  FromThreadsInFlight(8, per_thread, 64, [&](auto release) {
    store.DecideAsync({key, policy, 1, now}, [&, release](absl::StatusOr<Decision> d) {
      if (!d.ok() || d->degraded) {
        ++failed;
      } else if (d->allowed) {
        ++admitted;
      }
      release();
    });
  });
  EXPECT_EQ(failed.load(), 0) << key;
  return admitted.load();
}

}  // namespace

void ExpectExactCapacityUnderContention(Store& store) {
  const std::pair<const char*, std::int64_t> bounds[] = {
      {"fixed_window:1000/1h", 1000},
      {"sliding_log:1000/1h", 1000},
      {"sliding_window:1000/1h", 1000},
      {"gcra:1000/1h,burst=500", 500},
      {"token_bucket:1000/1h,burst=500", 500},
      {"token_bucket:1000/1h,burst=500,refill=interval", 500}};
  for (const auto& [text, expected] : bounds) {
    // Every decision at one instant: exactly the capacity, however long the run takes
    // (on the clock, gcra and token_bucket give a unit back every 3.6 s of a slow run,
    // and a fixed window turns at the hour).
    EXPECT_EQ(Hammer(store, *Policy::Parse(text), text, 500, SystemNow()), expected) << text;
  }
}

void ExpectExactLeasesUnderContention(Store& store, const std::string& key_prefix) {
  struct Round {
    const char* rate;
    const char* leases;
    std::int64_t admitted;   // the tighter limit
    std::int64_t rate_left;  // after the round: denied requests spent none of it
    std::int64_t leases_left;
  };
  const Round rounds[] = {
      {"sliding_log:30/1h", "concurrency:50,lease=1h", 30, 0, 20},      // the rate denies
      {"sliding_log:1000/1h", "concurrency:20,lease=1h", 20, 980, 0}};  // the leases deny
  for (const Round& round : rounds) {
    const std::string rate_key = key_prefix + round.rate;
    const std::string lease_key = key_prefix + round.leases;
    const CheckItem items[] = {{rate_key, *Policy::Parse(round.rate), 1, "rate"},
                               {lease_key, *Policy::Parse(round.leases), 1, "inflight"}};
    std::atomic<std::int64_t> admitted{0}, leases{0}, failed{0};
    FromThreadsInFlight(4, 32, 16, [&](auto release) {
      store.DecideAllAsync({items, std::nullopt}, [&, release](absl::StatusOr<MultiDecision> d) {
        if (!d.ok() || d->degraded) {
          ++failed;
        } else {
          admitted += d->allowed;
          leases += static_cast<std::int64_t>(d->held.size());
        }
        release();
      });
    });
    EXPECT_EQ(failed.load(), 0) << round.rate << " + " << round.leases;
    EXPECT_EQ(admitted.load(), round.admitted) << round.rate << " + " << round.leases;
    EXPECT_EQ(leases.load(), round.admitted) << round.rate << " + " << round.leases;
    const CheckItem peeks[] = {{rate_key, items[0].policy, 0, "rate"},
                               {lease_key, items[1].policy, 0, "inflight"}};
    const absl::StatusOr<MultiDecision> after = store.DecideAll({peeks, std::nullopt});
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->items[0].remaining, round.rate_left) << round.rate << " + " << round.leases;
    EXPECT_EQ(after->items[1].remaining, round.leases_left) << round.rate << " + " << round.leases;
  }
}

std::size_t ExpectSameInstantGcraBurstsAdmitExactlyB(Store& store, const std::string& key_prefix,
                                                     const InFlightHooks& hooks) {
  std::vector<std::string> texts = {
      "gcra:7/1m",           "gcra:3/1s,burst=7", "gcra:7/13s",         "gcra:1000/7s",
      "gcra:999/1s",         "gcra:1001/1s",      "gcra:11/1h,burst=3", "gcra:6/1s",
      "gcra:13/1s,burst=40", "gcra:97/1m",        "gcra:1/1ms,burst=9", "gcra:3/7ms"};
  // And policies drawn at random (fixed seed): any that Validate accepts must hold too.
  std::mt19937_64 rng(20261123);
  while (texts.size() < 40) {
    const std::int64_t limit = std::uniform_int_distribution<std::int64_t>(1, 5000)(rng);
    const std::int64_t period_ms = std::uniform_int_distribution<std::int64_t>(1, 86'400'000)(rng);
    const std::int64_t burst = std::uniform_int_distribution<std::int64_t>(1, 300)(rng);
    const std::string text = fmt::format("gcra:{}/{}ms,burst={}", limit, period_ms, burst);
    if (Policy::Parse(text).ok()) texts.push_back(text);
  }
  std::vector<Policy> policies;
  for (const std::string& text : texts) {
    const auto policy = Policy::Parse(text);
    EXPECT_TRUE(policy.ok()) << text << ": " << policy.status();
    if (!policy.ok()) return 0;
    policies.push_back(*policy);
  }
  const TimePoint now(std::chrono::microseconds(1'700'000'000'123'457));
  // Policy p's B + 1 requests on its own key, every policy's in flight at once.
  std::vector<std::vector<std::promise<absl::StatusOr<Decision>>>> results(policies.size());
  std::size_t submitted = 0;
  if (hooks.hold) hooks.hold();
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const std::int64_t burst = policies[p].capacity();
    results[p] = std::vector<std::promise<absl::StatusOr<Decision>>>(burst + 1);
    const std::string key = fmt::format("{}burst{}", key_prefix, p);
    for (std::int64_t i = 0; i <= burst; ++i) {
      store.DecideAsync({key, policies[p], 1, now}, [&results, p, i](absl::StatusOr<Decision> d) {
        results[p][i].set_value(std::move(d));
      });
      ++submitted;
    }
  }
  if (hooks.release) hooks.release();
  // Every answer is collected before any is judged: the promises must outlive the
  // callbacks, which may still be running on the store's thread.
  std::vector<std::vector<absl::StatusOr<Decision>>> answers(policies.size());
  for (std::size_t p = 0; p < policies.size(); ++p) {
    for (auto& result : results[p]) answers[p].push_back(result.get_future().get());
  }
  for (std::size_t p = 0; p < policies.size(); ++p) {
    const Policy& policy = policies[p];
    const std::int64_t burst = policy.capacity();
    const std::int64_t emission =
        (policy.period.count() + policy.limit - 1) / policy.limit;  // docs/algorithms.md: E
    // Decisions in flight may reach the store in any order (several connections): the
    // admitted ones must report remaining B-1 .. 0 between them, and one is denied.
    std::vector<std::int64_t> remaining;
    std::int64_t admitted = 0;
    for (const auto& d : answers[p]) {
      EXPECT_TRUE(d.ok()) << texts[p] << ": " << d.status();
      if (!d.ok()) continue;
      EXPECT_FALSE(d->degraded) << texts[p];
      if (d->allowed) {
        ++admitted;
        remaining.push_back(d->remaining);
      } else {
        EXPECT_EQ(d->retry_after.count(), emission) << texts[p];
        EXPECT_EQ(d->reset_after.count(), burst * emission) << texts[p];
      }
    }
    std::sort(remaining.begin(), remaining.end());
    for (std::size_t i = 0; i < remaining.size(); ++i) {
      EXPECT_EQ(remaining[i], static_cast<std::int64_t>(i)) << texts[p];
    }
    EXPECT_EQ(admitted, burst) << texts[p];
  }
  return submitted;
}

}  // namespace floodgate::testing
