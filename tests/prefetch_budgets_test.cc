// The prefetch budget layer against an in-process store that takes exactly (fixed_window).

#include <floodgate/store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "hang_guard.h"
#include "store/prefetch/budgets.h"
#include "test_time.h"

namespace floodgate::prefetch {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// A fixed_window store on a clock the test sets, taking up to k exactly as
// docs/algorithms.md "Take up to k" says (the lease ends at the window's end), with
// settles returning unused units while the lease holds. Takes can be held back to
// answer later, and any call made to fail.
class WindowStore final : public Store {
 public:
  microseconds now{T0};
  bool hold_takes = false;  // queue takes until ReleaseTakes()
  bool no_lease = false;    // answer every take "no lease under this policy" (gcra with δ >= tau)
  // A take's `expires` without the window's end, as a host clock running behind the
  // store's would read it: only the answer's reset_after tells where the window ends.
  bool expires_past_window = false;
  absl::Status take_failure;

  int takes = 0;
  int settles = 0;
  int decides = 0;
  std::vector<std::int64_t> take_sizes;

  // Units charged in the window holding `at`.
  std::int64_t Count(std::string_view key, microseconds at, microseconds period) {
    std::lock_guard lock(mu_);
    auto it = windows_.find(std::string(key));
    if (it == windows_.end() || it->second.window != at.count() / period.count()) return 0;
    return it->second.count;
  }

  void ReleaseTakes() {
    std::deque<std::pair<TakeRequest, ReservationCallback>> held;  // keys in held_keys_
    {
      std::lock_guard lock(mu_);
      held.swap(held_);
    }
    for (auto& [request, done] : held) done(DoTake(request));
    std::lock_guard lock(mu_);
    held_keys_.clear();
  }

  StoreStats Stats() const override { return {}; }
  std::string Describe() const override { return "window://"; }

 protected:
  absl::StatusOr<Decision> DecideValidated(const DecideRequest& request) override {
    std::lock_guard lock(mu_);
    ++decides;
    return Charge(std::string(request.key), request.policy, request.cost, request.now);
  }
  absl::StatusOr<MultiDecision> DecideAllValidated(const MultiRequest&) override {
    return absl::UnimplementedError("not here");
  }
  absl::StatusOr<Reservation> TakeValidated(const TakeRequest& request) override {
    return DoTake(request);
  }
  void TakeAsyncValidated(const TakeRequest& request, ReservationCallback done) override {
    {
      std::lock_guard lock(mu_);
      ++takes;
      take_sizes.push_back(request.up_to);
      if (hold_takes) {
        held_keys_.emplace_back(request.key);
        TakeRequest copy = request;
        copy.key = held_keys_.back();
        held_.emplace_back(copy, std::move(done));
        return;
      }
    }
    done(DoTake(request));
  }
  absl::StatusOr<Decision> SettleValidated(const SettleRequest& request) override {
    std::lock_guard lock(mu_);
    ++settles;
    auto it = leases_.find(std::string(request.id));
    if (it == leases_.end() || now >= it->second.expires) return absl::NotFoundError("no lease");
    Window& w = windows_[it->second.key];
    if (w.window == it->second.window) w.count -= it->second.units - request.actual;
    leases_.erase(it);
    return Decision{true, 0, 0, {}, {}, false};
  }

 private:
  struct Window {
    std::int64_t window = -1;
    std::int64_t count = 0;
  };
  struct Lease {
    std::string key;
    std::int64_t window = 0;
    std::int64_t units = 0;
    microseconds expires{0};
  };

  // Under mu_.
  Decision Charge(const std::string& key, const Policy& policy, std::int64_t cost,
                  std::optional<TimePoint> at) {
    const microseconds t = at ? at->time_since_epoch() : now;
    const std::int64_t window = t.count() / policy.period.count();
    Window& w = windows_[key];
    if (w.window != window) w = Window{window, 0};
    const microseconds end((window + 1) * policy.period.count());
    Decision d;
    d.limit = policy.limit;
    d.allowed = w.count + cost <= policy.limit;
    if (d.allowed) w.count += cost;
    d.remaining = policy.limit - w.count;
    d.retry_after = d.allowed ? microseconds(0) : end - t;
    d.reset_after = w.count > 0 ? end - t : microseconds(0);
    // sliding_window's state lasts a window longer: (w+2)P - now (docs/algorithms.md).
    if (policy.algorithm == Algorithm::kSlidingWindow && w.count > 0)
      d.reset_after += policy.period;
    return d;
  }

  absl::StatusOr<Reservation> DoTake(const TakeRequest& request) {
    std::lock_guard lock(mu_);
    if (!take_failure.ok()) return take_failure;
    Reservation r;
    if (no_lease) {
      r.decision = Decision{true, request.policy.limit, request.policy.limit, {}, {}, false};
      return r;
    }
    const std::string key(request.key);
    const std::int64_t window = now.count() / request.policy.period.count();
    Window& w = windows_[key];
    if (w.window != window) w = Window{window, 0};
    const std::int64_t units = std::min(request.up_to, request.policy.limit - w.count);
    if (units <= 0) {
      r.decision = Charge(key, request.policy, 1, std::nullopt);
      return r;
    }
    r.decision = Charge(key, request.policy, units, std::nullopt);
    r.units = units;
    const microseconds end((window + 1) * request.policy.period.count());
    const microseconds expires =
        expires_past_window ? now + request.lifetime : std::min(now + request.lifetime, end);
    r.expires = TimePoint(expires);
    r.id = "lease-" + std::to_string(next_id_++);
    leases_[r.id] = Lease{key, window, units, expires};
    return r;
  }

  std::mutex mu_;
  std::map<std::string, Window> windows_;
  std::map<std::string, Lease> leases_;
  int next_id_ = 0;
  std::deque<std::pair<TakeRequest, ReservationCallback>> held_;
  std::deque<std::string> held_keys_;
};

class BudgetsTest : public ::testing::Test {
 protected:
  BudgetsTest() { store_.now = microseconds(T0); }

  std::unique_ptr<Budgets> Make() { return Make(NoSweeper()); }
  std::unique_ptr<Budgets> Make(BudgetOptions options) {
    return std::make_unique<Budgets>(std::make_unique<StoreBackend>(store_), options);
  }
  BudgetOptions NoSweeper() {
    BudgetOptions options;
    options.sweep_every = microseconds(0);  // the tests sweep at the times they choose
    options.clock = [this] { return current_; };
    return options;
  }

  // The moment `at` after T0 on both clocks; the store decides at the same time.
  Moment At(microseconds at) {
    store_.now = microseconds(T0) + at;
    current_ = Moment{Steady::time_point(std::chrono::duration_cast<Steady::duration>(at)),
                      TimePoint(store_.now)};
    return current_;
  }

  // Decides and returns the answer given before returning (every store here answers inline
  // unless takes are held).
  std::optional<absl::StatusOr<Decision>> Decide(Budgets& budgets, std::string_view key,
                                                 const Policy& policy, microseconds at,
                                                 std::int64_t cost = 1) {
    std::optional<absl::StatusOr<Decision>> answer;
    budgets.Decide(
        DecideRequest{key, policy, cost, std::nullopt},
        [&answer](absl::StatusOr<Decision> d) { answer = std::move(d); }, At(at));
    return answer;
  }

  WindowStore store_;
  Moment current_;  // the time At() set last, the budgets' clock
};

Policy Window(std::string_view text) { return *Policy::Parse(text); }

TEST_F(BudgetsTest, AdmitsFromTheBudgetAndTakesAgainWhenItIsSpent) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  for (int i = 0; i < 25; ++i) {
    auto d = Decide(*budgets, "k", policy, milliseconds(1));
    ASSERT_TRUE(d && d->ok());
    EXPECT_TRUE((*d)->allowed) << i;
  }
  EXPECT_EQ(store_.takes, 3);
  EXPECT_EQ(store_.decides, 0);
  EXPECT_EQ(store_.Count("k", store_.now, std::chrono::seconds(1)), 30);  // charged at the take
  const PrefetchStats stats = budgets->stats();
  EXPECT_EQ(stats.leases, 3u);
  EXPECT_EQ(stats.units_leased, 30u);
  EXPECT_EQ(stats.local_decisions, 25u);
  EXPECT_EQ(stats.per_request, 0u);
}

TEST_F(BudgetsTest, LocalDecisionsReportTheBudgetPlusTheSharedRemainder) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10,prefetch_ttl=1s");
  auto d = Decide(*budgets, "k", policy, milliseconds(200));
  ASSERT_TRUE(d && d->ok());
  // The take charged 10 of 100 and left 90 shared; this request spent one of the 10.
  EXPECT_EQ((*d)->limit, 100);
  EXPECT_EQ((*d)->remaining, 9 + 90);
  EXPECT_EQ((*d)->reset_after, milliseconds(800));  // the window's end
  d = Decide(*budgets, "k", policy, milliseconds(300));
  EXPECT_EQ((*d)->remaining, 8 + 90);
  EXPECT_EQ((*d)->reset_after, milliseconds(700));
  EXPECT_EQ((*d)->retry_after, microseconds(0));
  EXPECT_FALSE((*d)->degraded);
}

TEST_F(BudgetsTest, InstancesTogetherAdmitExactlyTheLimit) {
  std::vector<std::unique_ptr<Budgets>> instances;
  for (int i = 0; i < 4; ++i) instances.push_back(Make());
  const Policy policy = Window("fixed_window:100/1s,prefetch=7");
  int allowed = 0;
  for (int round = 0; round < 100; ++round) {
    for (auto& instance : instances) {
      auto d = Decide(*instance, "shared", policy, milliseconds(10) + microseconds(round));
      ASSERT_TRUE(d && d->ok());
      allowed += (*d)->allowed;
    }
  }
  EXPECT_EQ(allowed, 100);
  EXPECT_EQ(store_.Count("shared", store_.now, std::chrono::seconds(1)), 100);
}

TEST_F(BudgetsTest, OneTakeInFlightAndTheRequestsMeanwhileWaitForIt) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  store_.hold_takes = true;
  std::vector<std::optional<absl::StatusOr<Decision>>> answers(6);
  for (int i = 0; i < 6; ++i) {
    budgets->Decide(
        DecideRequest{"k", policy, i == 5 ? 11 : 1, std::nullopt},
        [&answers, i](absl::StatusOr<Decision> d) { answers[i] = std::move(d); },
        At(milliseconds(1)));
  }
  EXPECT_EQ(store_.takes, 1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(answers[i].has_value()) << i;
  // A cost larger than a lease is decided per request, without waiting.
  ASSERT_TRUE(answers[5].has_value());
  EXPECT_EQ(store_.decides, 1);
  store_.ReleaseTakes();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(answers[i].has_value() && answers[i]->ok()) << i;
    EXPECT_TRUE((*answers[i])->allowed);
  }
  EXPECT_EQ(store_.takes, 1);
  EXPECT_EQ(budgets->stats().local_decisions, 5u);
}

TEST_F(BudgetsTest, RequestsBeyondTheLeaseWaitForTheNextTake) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:1000/1s,prefetch=auto");
  for (std::uint32_t i = 0; i + 1 < kHotHits; ++i) Decide(*budgets, "k", policy, milliseconds(1));
  store_.hold_takes = true;
  int answered = 0;
  for (int i = 0; i < 20; ++i) {
    budgets->Decide(
        DecideRequest{"k", policy, 1, std::nullopt},
        [&answered](absl::StatusOr<Decision> d) { answered += d.ok() && d->allowed; },
        At(milliseconds(2)));
  }
  EXPECT_EQ(store_.takes, 1);
  store_.ReleaseTakes();  // 8 units for 20 waiting: the other 12 wait for the next take
  EXPECT_EQ(answered, 8);
  EXPECT_EQ(store_.takes, 2);
  EXPECT_EQ(store_.take_sizes.back(), 2 * kAutoFirstLease);  // drained at once: doubled
  store_.ReleaseTakes();
  EXPECT_EQ(answered, 20);
  EXPECT_EQ(store_.takes, 2);
  EXPECT_EQ(store_.decides, static_cast<int>(kHotHits - 1));  // none per request
}

TEST_F(BudgetsTest, UnusedUnitsGoBackWhenTheLeaseEnds) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1m,prefetch=10,prefetch_ttl=100ms");
  for (int i = 0; i < 3; ++i) Decide(*budgets, "k", policy, milliseconds(1));
  EXPECT_EQ(store_.Count("k", store_.now, std::chrono::minutes(1)), 10);
  budgets->Sweep(At(milliseconds(50)));  // still held
  EXPECT_EQ(store_.settles, 0);
  // Spending stops a tenth before the ttl, so the return lands while the lease holds.
  budgets->Sweep(At(milliseconds(91)));
  EXPECT_EQ(store_.settles, 1);
  EXPECT_EQ(store_.Count("k", store_.now, std::chrono::minutes(1)), 3);
  EXPECT_EQ(budgets->stats().units_returned, 7u);
  // The next request takes a new lease.
  Decide(*budgets, "k", policy, milliseconds(95));
  EXPECT_EQ(store_.takes, 2);
}

// docs/prefetch_client.md, "Return": a lease the window's end cuts short keeps its unused
// units (they count as spent for the rest of the window); one the ttl ends gives them back.
TEST_F(BudgetsTest, ALeaseTheWindowsEndCutsShortReturnsNothing) {
  static_assert(T0 % 1'000'000 == 0, "T0 starts a 1 s window");
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10,prefetch_ttl=100ms");
  // 50 ms before the window's end: the lease ends with the window, not with the ttl.
  Decide(*budgets, "k", policy, milliseconds(950));
  EXPECT_EQ(store_.takes, 1);
  budgets->Sweep(At(milliseconds(999)));
  EXPECT_EQ(store_.settles, 0);
  EXPECT_EQ(budgets->stats().units_returned, 0u);
  // The next window's first lease ends with its ttl, and its unused units go back.
  Decide(*budgets, "k", policy, milliseconds(1001));
  EXPECT_EQ(store_.takes, 2);
  budgets->Sweep(At(milliseconds(1100)));
  EXPECT_EQ(store_.settles, 1);
  EXPECT_EQ(budgets->stats().units_returned, 9u);
}

TEST_F(BudgetsTest, CloseReturnsWhatIsHeld) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1m,prefetch=10");
  Decide(*budgets, "a", policy, milliseconds(1));
  Decide(*budgets, "b", policy, milliseconds(1), 4);
  budgets->Close();
  EXPECT_EQ(store_.Count("a", store_.now, std::chrono::minutes(1)), 1);
  EXPECT_EQ(store_.Count("b", store_.now, std::chrono::minutes(1)), 4);
  EXPECT_EQ(budgets->stats().units_returned, 9u + 6u);
  // Closed: decided per request.
  Decide(*budgets, "a", policy, milliseconds(2));
  EXPECT_EQ(store_.decides, 1);
}

TEST_F(BudgetsTest, BudgetsNeverCrossAWindow) {
  static_assert(T0 % 1'000'000 == 0, "T0 starts a 1 s window");
  auto budgets = Make();
  const Policy policy = Window("fixed_window:10/1s,prefetch=10,prefetch_ttl=1s");
  // 100 µs before the window's end: the lease ends with the window, not a second later.
  auto d = Decide(*budgets, "k", policy, microseconds(999'900));
  ASSERT_TRUE(d && (*d)->allowed);
  // Every request in the next window is charged to the next window: the 9 units left of
  // the first lease are not spent there.
  const microseconds next = milliseconds(1100);
  for (int i = 0; i < 10; ++i) {
    d = Decide(*budgets, "k", policy, next);
    ASSERT_TRUE(d && (*d)->allowed) << i;
  }
  EXPECT_EQ(store_.takes, 2);
  EXPECT_EQ(store_.Count("k", store_.now, std::chrono::seconds(1)), 10);
  d = Decide(*budgets, "k", policy, next);
  EXPECT_FALSE((*d)->allowed);
}

TEST_F(BudgetsTest, ALeaseAnsweredAfterItsWindowEndedIsNotSpent) {
  static_assert(T0 % 1'000'000 == 0, "T0 starts a 1 s window");
  auto budgets = Make();
  const Policy policy = Window("fixed_window:10/1s,prefetch=10,prefetch_ttl=1s");
  store_.hold_takes = true;
  std::optional<absl::StatusOr<Decision>> answer;
  budgets->Decide(DecideRequest{"k", policy, 1, std::nullopt},
                  [&answer](absl::StatusOr<Decision> d) { answer = std::move(d); },
                  At(microseconds(999'800)));
  // The store takes 100 µs before the window's end; the answer arrives after it.
  At(microseconds(999'900));
  current_.steady += std::chrono::microseconds(300);
  store_.ReleaseTakes();
  ASSERT_TRUE(answer && answer->ok());
  EXPECT_TRUE((*answer)->allowed);
  EXPECT_EQ(store_.decides, 1);  // decided per request
  EXPECT_EQ(budgets->stats().local_decisions, 0u);
  EXPECT_EQ(store_.settles, 1);  // the lease went back unspent
  EXPECT_EQ(budgets->stats().units_returned, 10u);
  store_.hold_takes = false;
  EXPECT_TRUE((*Decide(*budgets, "k", policy, microseconds(1'000'300)))->allowed);
  EXPECT_EQ(store_.takes, 2);
}

TEST_F(BudgetsTest, WindowLeasesEndWithTheWindowOnTheStoresClock) {
  // The store counts like a fixed window here; what the test asks is where each
  // algorithm's lease ends when only reset_after says where the window ends.
  store_.expires_past_window = true;
  for (const char* text : {"fixed_window:10/1s,prefetch=10,prefetch_ttl=1s",
                           "sliding_window:10/1s,prefetch=10,prefetch_ttl=1s"}) {
    auto budgets = Make();
    const Policy policy = Window(text);
    const std::string key = std::string("k-") + text;
    // 100 ms before the window's end: the lease ends with it (less the tenth kept back).
    ASSERT_TRUE((*Decide(*budgets, key, policy, milliseconds(900)))->allowed) << text;
    const int takes = store_.takes;
    Decide(*budgets, key, policy, milliseconds(989));
    EXPECT_EQ(store_.takes, takes) << text << ": still inside the lease";
    Decide(*budgets, key, policy, milliseconds(991));
    EXPECT_EQ(store_.takes, takes + 1) << text << ": the lease ended with its window";
  }
}

TEST_F(BudgetsTest, ADeniedTakeDeniesAsTheSharedStateDoesAndIsRemembered) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:5/1s,prefetch=10");
  const microseconds start = milliseconds(1000);  // a window's start (T0 is a whole second)
  for (int i = 0; i < 5; ++i) EXPECT_TRUE((*Decide(*budgets, "k", policy, start))->allowed);
  EXPECT_EQ(store_.take_sizes, (std::vector<std::int64_t>{10}));
  auto d = Decide(*budgets, "k", policy, start + milliseconds(100));
  ASSERT_TRUE(d && d->ok());
  EXPECT_FALSE((*d)->allowed);
  EXPECT_EQ((*d)->retry_after, milliseconds(900));
  EXPECT_EQ(store_.takes, 2);
  d = Decide(*budgets, "k", policy, start + milliseconds(400));  // remembered: no call
  EXPECT_FALSE((*d)->allowed);
  EXPECT_EQ((*d)->retry_after, milliseconds(600));
  EXPECT_EQ(store_.takes, 2);
  d = Decide(*budgets, "k", policy, start + milliseconds(1000));  // the next window
  EXPECT_TRUE((*d)->allowed);
  EXPECT_EQ(store_.takes, 3);
}

TEST_F(BudgetsTest, NoLeaseUnderThePolicyMeansPerRequest) {
  auto budgets = Make();
  store_.no_lease = true;
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(1)))->allowed);
  EXPECT_EQ(store_.takes, 1);
  EXPECT_EQ(store_.decides, 4);
}

TEST_F(BudgetsTest, AFailedTakeLeavesEachRequestToTheSharedState) {
  auto budgets = Make();
  store_.take_failure = absl::UnavailableError("down");
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(1)))->allowed);
  EXPECT_EQ(store_.takes, 1);
  EXPECT_EQ(store_.decides, 1);
  store_.take_failure = absl::OkStatus();
  EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(2)))->allowed);
  EXPECT_EQ(store_.takes, 2);
  EXPECT_EQ(store_.decides, 1);
}

TEST_F(BudgetsTest, CostsTheBudgetCannotHoldArePerRequest) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(1), 8))->allowed);
  EXPECT_EQ(store_.takes, 1);
  EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(1), 3))->allowed);  // 2 left
  EXPECT_EQ(store_.decides, 1);
  EXPECT_TRUE((*Decide(*budgets, "k", policy, milliseconds(1), 2))->allowed);  // from the budget
  EXPECT_EQ(store_.decides, 1);
  EXPECT_EQ(store_.Count("k", store_.now, std::chrono::seconds(1)), 13);
}

TEST_F(BudgetsTest, PeeksAndCallerTimesArePerRequest) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100/1s,prefetch=10");
  Decide(*budgets, "k", policy, milliseconds(1), 0);
  std::optional<absl::StatusOr<Decision>> answer;
  budgets->Decide(
      DecideRequest{"k", policy, 1, TimePoint(microseconds(T0))},
      [&](absl::StatusOr<Decision> d) { answer = std::move(d); }, At(milliseconds(1)));
  EXPECT_EQ(store_.takes, 0);
  EXPECT_EQ(store_.decides, 2);
}

TEST_F(BudgetsTest, AutoLeavesColdKeysAloneAndGrowsLeasesForHotOnes) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:100000/1m,prefetch=auto");
  // Fewer than kHotHits requests within one ttl: as without prefetch.
  for (std::uint32_t i = 0; i + 1 < kHotHits; ++i)
    Decide(*budgets, "cold", policy, milliseconds(1));
  EXPECT_EQ(store_.takes, 0);
  EXPECT_EQ(store_.decides, static_cast<int>(kHotHits - 1));
  // Hot: leases that drain before they end double, up to the cap.
  for (int i = 0; i < 2000; ++i) Decide(*budgets, "cold", policy, milliseconds(2));
  ASSERT_GE(store_.take_sizes.size(), 4u);
  EXPECT_EQ(store_.take_sizes[0], kAutoFirstLease);
  EXPECT_EQ(store_.take_sizes[1], 2 * kAutoFirstLease);
  EXPECT_EQ(store_.take_sizes[2], 4 * kAutoFirstLease);
  for (std::int64_t size : store_.take_sizes) EXPECT_LE(size, 100000 / kAutoCapDivisor);
  // A lease that comes back mostly unused shrinks the next one.
  const int takes = store_.takes;
  const std::int64_t last = store_.take_sizes.back();
  budgets->Sweep(At(milliseconds(500)));
  for (int i = 0; i < 3; ++i) Decide(*budgets, "cold", policy, milliseconds(501));
  budgets->Sweep(At(milliseconds(700)));
  Decide(*budgets, "cold", policy, milliseconds(701));
  EXPECT_EQ(store_.takes, takes + 2);
  EXPECT_LT(store_.take_sizes.back(), last);
  EXPECT_EQ(store_.take_sizes.back(), 6);  // about what the last lease spent, doubled
}

TEST_F(BudgetsTest, AutoCapsALeaseAtASixteenthOfTheLimit) {
  auto budgets = Make();
  const Policy policy = Window("fixed_window:160/1m,prefetch=auto");
  for (int i = 0; i < 100; ++i) Decide(*budgets, "k", policy, milliseconds(1));
  for (std::int64_t size : store_.take_sizes) EXPECT_LE(size, 10);
  EXPECT_EQ(store_.take_sizes.back(), 10);
}

TEST_F(BudgetsTest, TheTableIsBoundedAndIdleBudgetsAreDropped) {
  BudgetOptions options = NoSweeper();
  options.max_budgets = 2;
  auto budgets = Make(options);
  const Policy policy = Window("fixed_window:100/1m,prefetch=5");
  Decide(*budgets, "a", policy, milliseconds(1));
  Decide(*budgets, "b", policy, milliseconds(1));
  Decide(*budgets, "c", policy, milliseconds(1));
  EXPECT_EQ(store_.takes, 2);
  EXPECT_EQ(store_.decides, 1);  // no room for c's budget
  EXPECT_EQ(budgets->stats().budgets, 2u);
  budgets->Sweep(At(milliseconds(200)));  // leases over and returned; entries still fresh
  EXPECT_EQ(budgets->stats().budgets, 2u);
  budgets->Sweep(At(std::chrono::seconds(5)));  // idle past max(1 s, 10 ttl)
  EXPECT_EQ(budgets->stats().budgets, 0u);
  Decide(*budgets, "c", policy, std::chrono::seconds(5));
  EXPECT_EQ(store_.takes, 3);
}

TEST_F(BudgetsTest, ThreadsOfSeveralInstancesWithTakesAnsweredElsewhere) {
  // Four instances, two threads each, on one key; takes answered by another thread, as a
  // store's I/O thread answers them. Every unit is admitted once or returned.
  const Policy policy = Window("fixed_window:1000/1h,prefetch=7");
  std::vector<std::unique_ptr<Budgets>> instances;
  for (int i = 0; i < 4; ++i) instances.push_back(Make());
  store_.hold_takes = true;
  const Moment now = At(milliseconds(1));
  std::atomic<bool> stop{false};
  std::thread answerer([&] {
    while (!stop.load()) store_.ReleaseTakes();
  });
  constexpr int kPerThread = 400;
  std::atomic<int> answered{0}, allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        instances[t % 4]->Decide(
            DecideRequest{"shared", policy, 1, std::nullopt},
            [&](absl::StatusOr<Decision> d) {
              allowed += d.ok() && d->allowed;
              ++answered;
            },
            now);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto deadline = Steady::now() + floodgate::testing::kHangGuard;
  while (answered.load() < 8 * kPerThread && Steady::now() < deadline) std::this_thread::yield();
  stop = true;
  answerer.join();
  ASSERT_EQ(answered.load(), 8 * kPerThread);
  std::uint64_t returned = 0;
  for (auto& instance : instances) {
    instance->Close();
    returned += instance->stats().units_returned;
  }
  EXPECT_EQ(allowed.load() + static_cast<int>(returned), 1000);
  EXPECT_EQ(store_.Count("shared", store_.now, std::chrono::hours(1)), allowed.load());
  EXPECT_EQ(store_.decides, 0);
}

TEST_F(BudgetsTest, TheSweeperReturnsLeasesOnItsOwn) {
  BudgetOptions options;
  options.sweep_every = milliseconds(1);
  auto budgets = Make(options);
  // Real clocks here: the lease's 10 ms end passes while the test waits for the sweeper.
  const Policy policy = Window("fixed_window:100/1h,prefetch=10,prefetch_ttl=10ms");
  store_.now = microseconds(SystemNow().time_since_epoch());
  budgets->Decide(DecideRequest{"k", policy, 1, std::nullopt}, [](absl::StatusOr<Decision>) {});
  const auto deadline = Steady::now() + floodgate::testing::kHangGuard;
  while (budgets->stats().units_returned == 0 && Steady::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  // 9 when the request spent its unit from the lease; 10 when the lease's 10 ms ended
  // before the request was answered from it (a slow machine: the TSan tree saw it). Either
  // way the sweeper returned the lease's unspent units by itself.
  const std::uint64_t returned = budgets->stats().units_returned;
  EXPECT_GE(returned, 9u);
  EXPECT_LE(returned, 10u);
}

}  // namespace
}  // namespace floodgate::prefetch
