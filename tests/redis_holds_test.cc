// Reservations and leases on a real redis-server: their ids, settles, releases and on_error.
//
// docs/reservations.md and docs/leases.md are the contract.
#include <floodgate/memory_store.h>

#include <iostream>
#include <sstream>
#include <thread>

#include "redis_test_fixture.h"
#include "take_model.h"
#include "trials.h"

namespace floodgate::testing {
namespace {

// The reservation vectors, one call per operation and with many sharing calls (every
// case's operations from several threads at once, each case on its own keys).
TEST_F(RedisTest, ReservationVectorsOneByOneAndBatched) {
  const auto cases = LoadReserveVectors();
  ASSERT_GE(cases.size(), 14u);
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  for (std::size_t c = 0; c < cases.size(); ++c)
    RunReserveCase(*store, cases[c], fmt::format("r{}:", c));
  auto batched = OpenRedis(Url("connections=1&batch=64&denial_cache=0us"));
  ASSERT_NE(batched, nullptr);
  std::vector<std::jthread> threads;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    threads.emplace_back([&, c] { RunReserveCase(*batched, cases[c], fmt::format("b{}:", c)); });
  }
  threads.clear();
  EXPECT_GT(batched->redis_stats().calls, 0u);
}

// take(k, δ) (lua/take.lua, the twin of src/core/take.h): the model check's trials
// (tests/take_model.h), drawn from one seed, answer on Redis exactly as on memory:// at
// every step (units, lease ends, denials, returns), and stay within the envelope. A fixed
// number of trials per kind, so that a seed checks the same trials on any machine (a fifth
// under a sanitizer: tests/trials.h).
constexpr int kRedisTakeTrials = Trials(40);

TEST_F(RedisTest, TakeModelTrialsAnswerAsOnMemory) {
  const std::uint64_t seed = take_model::ModelSeed();
  std::cout << "take model on Redis: seed " << seed << " (FG_TAKE_MODEL_SEED replays it)\n";
  auto store = OpenRedis(Url("batch=1&denial_cache=0us"));
  ASSERT_NE(store, nullptr);
  MemoryStore memory;
  for (const take_model::Kind& kind : take_model::Kinds()) {
    std::mt19937_64 rng(seed);
    int trial = 0;
    for (; trial < kRedisTakeTrials; ++trial) {
      const Policy policy = take_model::RandomPolicy(rng, kind.algorithm, kind.refill);
      std::mt19937_64 same_draws = rng;
      const std::string key = fmt::format("take:{}:{}", kind.name, trial);
      const take_model::Trial expected = take_model::Simulate(rng, memory, key, policy);
      const take_model::Trial got = take_model::Simulate(same_draws, *store, key, policy);
      for (std::size_t i = 0; i < std::min(got.log.size(), expected.log.size()); ++i) {
        ASSERT_EQ(got.log[i], expected.log[i])
            << "seed " << seed << ", " << kind.name << " trial " << trial << ", "
            << policy.ToString() << ", step " << i;
      }
      ASSERT_EQ(got.log.size(), expected.log.size());
      const std::string violation = take_model::Violation(policy, got.spent);
      ASSERT_EQ(violation, "") << take_model::Report(seed, trial, policy, violation, got);
    }
    std::cout << "  " << kind.name << ": " << trial << " trials\n";
  }
}

TEST_F(RedisTest, ReservationIdsAreOnlyThisStoresAndSettleOnce) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("gcra:10/1h");
  auto reservation = store->Reserve({"k", policy, 4});
  ASSERT_TRUE(reservation.ok()) << reservation.status();
  ASSERT_EQ(reservation->id.size(), 20u);
  for (const std::string& id : {std::string("zz"), std::string("ffff0000000000000000"),
                                reservation->id.substr(0, 19) + "x"}) {
    EXPECT_EQ(store->Settle({id, 1}).status().code(), absl::StatusCode::kNotFound) << id;
  }
  const std::vector<std::string> records = {"--scan", "--pattern", "t:*ReservationIds*res:*"};
  EXPECT_THAT(server_->Cli(records), ::testing::StartsWith("t:RedisTest."));  // held until settled
  auto settled = store->Settle({reservation->id, 1});
  ASSERT_TRUE(settled.ok()) << settled.status();
  EXPECT_EQ(settled->remaining, 9);
  EXPECT_EQ(store->Settle({reservation->id, 1}).status().code(), absl::StatusCode::kNotFound);
  // The record is gone with the settle: only the limit's key is left.
  EXPECT_EQ(server_->Cli(records), "");
}

// The table every store runs (conformance.h), as memory:// does in reservation_test: an
// upper-cased id settled the true reservation here, where memory:// refused it.
TEST_F(RedisTest, OnlyItsOwnIdsSettle) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  ExpectOnlyItsOwnIdsSettle(*store, "");
}

// What lua/batch.lua's release groups give back: for every algorithm, a reservation made
// and released leaves the key deciding exactly as a key that never saw it.
TEST_F(RedisTest, AReleasedReservationLeavesNoTrace) {
  const std::string batch = BatchScript();
  const std::int64_t t = 1'700'000'000'000'000;
  // kind, limit, period, burst
  const std::vector<std::array<std::string, 4>> policies = {
      {"gcra", "10", "1000000", "10"}, {"tb", "10", "1000000", "10"},
      {"tbi", "10", "1000000", "10"},  {"sl", "10", "1000000", "10"},
      {"sw", "10", "1000000", "10"},   {"fw", "10", "1000000", "10"}};
  for (const auto& policy : policies) {
    SCOPED_TRACE(policy[0]);
    const auto call = [&](const std::string& key, const std::string& mode, std::int64_t at,
                          std::int64_t now, std::int64_t cost) {
      std::vector<std::string> args = {"EVAL", batch, "1", key, "1"};
      args.insert(args.end(), policy.begin(), policy.end());
      if (mode.empty()) {
        args.push_back("0");
      } else {
        args.insert(args.end(),
                    {"1", "1", "1", mode, "0", mode == "release" ? std::to_string(at) : ""});
      }
      args.insert(args.end(), {"1", std::to_string(now), std::to_string(cost)});
      return server_->Command(args);
    };
    const std::string used = "release:used:" + policy[0], fresh = "release:fresh:" + policy[0];
    // Both keys take 3 at t; `used` reserves 4 more at t + 1 ms and gives them back at
    // t + 2 ms. From then on both keys must answer the same, every way they are asked.
    call(used, "", 0, t, 3);
    call(fresh, "", 0, t, 3);
    const std::string reserved = call(used, "all", 0, t + 1000, 4);
    ASSERT_EQ(reserved.substr(0, 2), "1\n") << reserved;  // allowed
    // The smooth bucket's level is a double: given back, its last bits may differ from a
    // level that never moved, and a wait computed from it by a microsecond.
    const std::int64_t slack = policy[0] == "tb" ? 1 : 0;
    const auto same = [&](const std::string& a, const std::string& b) {
      std::istringstream x(a), y(b);
      std::vector<std::int64_t> u, v;
      for (std::int64_t n; x >> n;) u.push_back(n);
      for (std::int64_t n; y >> n;) v.push_back(n);
      if (u.size() != 5 || v.size() != 5) return false;
      for (std::size_t i = 0; i < 5; ++i) {
        if (std::abs(u[i] - v[i]) > (i >= 2 ? slack : 0)) return false;
      }
      return true;
    };
    const std::string released = call(used, "release", t + 1000, t + 2000, 4);
    const std::string untouched = call(fresh, "all", 0, t + 2000, 0);
    EXPECT_TRUE(same(released, untouched)) << "the peek after the release:\n"
                                           << released << "vs\n"
                                           << untouched;
    for (const std::int64_t dt : {3000, 250'000, 999'999, 1'000'001}) {
      for (const std::int64_t cost : {0, 1, 7, 8}) {
        const std::string a = call(used, "dry", 0, t + dt, cost);
        const std::string b = call(fresh, "dry", 0, t + dt, cost);
        EXPECT_TRUE(same(a, b)) << "at +" << dt << " cost " << cost << ":\n" << a << "vs\n" << b;
      }
    }
  }
}

// A Redis lease keeps no record (docs/leases.md): its id is its key and its member, and
// only the true id releases it. Ids forged from a true one (another random part, a shorter
// lease time, which would trim other leases) find nothing and change nothing, whatever
// the key's bytes; the longest key's id stays within kMaxReservationIdBytes.
TEST_F(RedisTest, ALeaseIdIsItsKeyAndMemberAndOnlyTheTrueOneReleases) {
  auto store = OpenRedis(Url());
  ASSERT_NE(store, nullptr);
  const Policy policy = *Policy::Parse("concurrency:2,lease=30s");
  for (const std::string& key :
       {std::string("tenant\r\n\0:7", 11), std::string(kMaxKeyBytes, 'k')}) {
    SCOPED_TRACE(key.size());
    EXPECT_EQ(server_->Cli({"FLUSHALL"}), "OK\n");
    const auto lease = store->Acquire(AcquireRequest{key, policy, std::nullopt});
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->decision.allowed);
    EXPECT_EQ(lease->decision.remaining, 1);
    const std::string& id = lease->id;
    EXPECT_LE(id.size(), kMaxReservationIdBytes);
    EXPECT_EQ(id.find('.'), id.find_first_of(".+/=\r\n,"));  // base64url, then the member
    EXPECT_EQ(server_->Cli({"DBSIZE"}), "1\n");              // the key alone: no record
    const auto held = [&] {
      auto peek = store->Decide({key, policy, 0, std::nullopt});
      return peek.ok() ? policy.limit - peek->remaining : -1;
    };
    const std::size_t member = id.find('.') + 1;
    std::string other_random = id;
    other_random[member] = other_random[member] == '0' ? '1' : '0';
    std::string shorter_lease = id;
    const std::size_t t = shorter_lease.find(".30000000.");
    ASSERT_NE(t, std::string::npos) << id;
    shorter_lease.replace(t, 10, ".1000.");
    for (const std::string& forged : {other_random, shorter_lease, "!!." + id.substr(member),
                                      id.substr(0, member), id.substr(0, member) + "x.1.1.1"}) {
      SCOPED_TRACE(forged);
      const auto released = store->Release(ReleaseRequest{forged, std::nullopt});
      EXPECT_TRUE(absl::IsNotFound(released.status())) << released.status();
      EXPECT_EQ(held(), 1);
    }
    const auto at_a_cost = store->Settle(SettleRequest{id, 1, std::nullopt});
    EXPECT_TRUE(absl::IsInvalidArgument(at_a_cost.status())) << at_a_cost.status();
    EXPECT_EQ(held(), 1);
    const auto released = store->Release(ReleaseRequest{id, std::nullopt});
    ASSERT_TRUE(released.ok()) << released.status();
    EXPECT_EQ(released->remaining, 2);
    EXPECT_EQ(held(), 0);
    EXPECT_TRUE(absl::IsNotFound(store->Release(ReleaseRequest{id, std::nullopt}).status()));
  }
}

// Redis down (docs/leases.md): an acquire, alone or in a multi-decision, is answered by
// on_error and never holds a lease: fail_open admits with nothing to release, fail_closed
// and local deny. Answered because the connection is gone, not by a timeout waited out
// (the timeout is a guard here).
TEST(RedisLeases, OnErrorAnswersWithoutALease) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const Policy leases = *Policy::Parse("concurrency:3,lease=1m");
  const Policy rate = *Policy::Parse("sliding_log:10/1h");
  const std::vector<CheckItem> items = {{"r", rate, 1, "rate"}, {"c", leases, 1, "running"}};
  std::vector<std::unique_ptr<RedisStore>> stores;
  for (const char* mode : {"fail_open", "fail_closed", "local"}) {
    stores.push_back(OpenRedis(server->url(fmt::format("timeout=60s&on_error={}", mode))));
    ASSERT_NE(stores.back(), nullptr) << mode;
  }
  server->Kill();
  for (std::size_t s = 0; s < stores.size(); ++s) {
    const bool open = s == 0;
    const auto lease = stores[s]->Acquire(AcquireRequest{"c", leases, std::nullopt});
    ASSERT_TRUE(lease.ok()) << s << ": " << lease.status();
    EXPECT_TRUE(lease->decision.degraded) << s;
    EXPECT_EQ(lease->decision.allowed, open) << s;
    EXPECT_TRUE(lease->id.empty()) << s;
    const auto multi = stores[s]->DecideAll({items, std::nullopt});
    ASSERT_TRUE(multi.ok()) << s << ": " << multi.status();
    EXPECT_TRUE(multi->degraded) << s;
    EXPECT_EQ(multi->allowed, open) << s;
    EXPECT_TRUE(multi->held.empty()) << s;
    EXPECT_EQ(stores[s]->redis_stats().timeouts, 0u) << s;
  }
}

// lua/reservation.lua settles a call's records under the policy each record names (the
// previous settle's when it names the same, else found by name): settles of interleaved
// policies, two of one kind with other numbers, answer in one call as each does alone.
TEST_F(RedisTest, SettlesOfInterleavedPoliciesInOneCallAnswerAsAlone) {
  const std::string script = redis::lua::DriverScript(redis::lua::k_reservation);
  // Two gcra policies and a fixed window, sent as p, then kind, limit, period_us, burst.
  const std::vector<std::array<std::string, 4>> sent = {{"gcra", "10", "1000000", "10"},
                                                        {"gcra", "20", "1000000", "20"},
                                                        {"fw", "10", "1000000", "10"}};
  std::vector<std::string> policies = {std::to_string(sent.size())};
  for (const auto& policy : sent) policies.insert(policies.end(), policy.begin(), policy.end());
  const std::int64_t t = 1'700'000'000'000'000;
  const std::vector<int> policy_of = {1, 2, 3, 1, 3, 2};
  const std::vector<int> actual_of = {0, 1, 5, 2, 0, 3};
  const std::size_t n = policy_of.size();
  // Each operation's 7 integers, one per line as redis-cli prints them (the clock last).
  const auto lines = [](const std::string& reply) {
    std::vector<std::string> out;
    std::istringstream in(reply);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  const auto reserve = [&](const std::string& prefix, std::size_t from, std::size_t count) {
    std::vector<std::string> args = {"EVAL", script, std::to_string(2 * count)};
    for (std::size_t i = from; i < from + count; ++i) {
      args.push_back(fmt::format("{}k{}", prefix, i));
      args.push_back(fmt::format("{}rec{}", prefix, i));
    }
    args.insert(args.end(), policies.begin(), policies.end());
    args.push_back(std::to_string(count));
    for (std::size_t i = from; i < from + count; ++i) {
      args.insert(args.end(),
                  {"r", std::to_string(policy_of[i]), std::to_string(t), "3", "60000000"});
    }
    return lines(server_->Cli(args));
  };
  const auto settle = [&](const std::string& prefix, std::size_t from, std::size_t count) {
    std::vector<std::string> args = {"EVAL", script, std::to_string(count)};
    for (std::size_t i = from; i < from + count; ++i)
      args.push_back(fmt::format("{}rec{}", prefix, i));
    args.insert(args.end(), {"0", std::to_string(count)});
    for (std::size_t i = from; i < from + count; ++i) {
      args.insert(args.end(), {"s", std::to_string(t + 1000), std::to_string(actual_of[i])});
    }
    return lines(server_->Cli(args));
  };
  const std::vector<std::string> reserved = reserve("one:", 0, n);
  ASSERT_EQ(reserved.size(), 7 * n + 1) << ::testing::PrintToString(reserved);
  const std::vector<std::string> together = settle("one:", 0, n);
  ASSERT_EQ(together.size(), 7 * n + 1) << ::testing::PrintToString(together);
  for (std::size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(reserve("alone:", i, 1).size(), 8u);
    const std::vector<std::string> alone = settle("alone:", i, 1);
    ASSERT_EQ(alone.size(), 8u);
    EXPECT_EQ(alone[0], "1");  // settled
    EXPECT_EQ(std::vector<std::string>(together.begin() + 7 * i, together.begin() + 7 * i + 7),
              std::vector<std::string>(alone.begin(), alone.begin() + 7));
  }
}

}  // namespace
}  // namespace floodgate::testing
