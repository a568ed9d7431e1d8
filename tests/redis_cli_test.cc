// The floodgate binary on Redis, from several processes.
// Atomicity: 4 `floodgate bench` processes x 64 decisions in flight on one Redis key admit
// exactly the policy's capacity. A naive read-modify-write limiter (read the count,
// decide, write it back; the pattern of the first Go article in our sources) over-admits
// as soon as two clients read before either writes, which shows what the count catches.
// Replay: the same trace on memory:// and redis:// gives identical output.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/wait.h>

#include <barrier>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "redis_server.h"

namespace floodgate::testing {
namespace {

std::string RunCommand(const std::string& command) {
  int status = 0;
  std::string out = RunShell(command, &status);
  EXPECT_EQ(status, 0) << command;
  return out;
}

// Requests each bench process makes: together 2000, above every capacity tested here.
constexpr std::int64_t kPerProcess = 500;

// Runs `floodgate bench` on one key from 4 processes at once; returns the total admitted.
// `url` ends in a query, so options can be appended with '&'. `policies` are bench's
// --policy arguments: several make every request one decision over all of them.
// `decisions`, when given, receives how many requests the processes made in all.
// Each run is bounded by count (--max-decisions), so every process makes exactly
// kPerProcess requests however fast the machine is; --duration only guards a hang, and
// so does the URLs' timeout (60 s: 5 s was outlasted by a settle in the TSan tree beside
// two busy neighbours, an error where the count needs Redis's answer).
std::int64_t AdmittedByFourProcesses(const std::string& url, const std::string& policies,
                                     const std::string& prefix, std::int64_t* decisions = nullptr) {
  std::vector<std::future<std::string>> runs;
  for (int p = 0; p < 4; ++p) {
    runs.push_back(std::async(std::launch::async, [&] {
      const std::string command = fmt::format(
          "'{}' bench --store '{}' --policy {} --keys 1 --threads 1 --concurrency 64 "
          "--max-decisions {} --duration 120s --json",
          FLOODGATE_BINARY, url + "&prefix=" + prefix, policies, kPerProcess);
      return RunCommand(command);
    }));
  }
  std::int64_t admitted = 0;
  for (auto& run : runs) {
    const std::string out = run.get();
    const auto json = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(json.is_discarded()) << out;
    if (json.is_discarded()) continue;
    EXPECT_EQ(json["errors"], 0);
    // A degraded answer came from a process-local fallback, not from Redis: with the
    // patient timeout there must be none, or the count would prove nothing.
    EXPECT_EQ(json["degraded"], 0);
    EXPECT_EQ(json["decisions"], kPerProcess) << out;
    EXPECT_EQ(json["allowed"].get<std::int64_t>() + json["denied"].get<std::int64_t>(),
              json["decisions"].get<std::int64_t>());
    admitted += json["allowed"].get<std::int64_t>();
    if (decisions != nullptr) *decisions += json["decisions"].get<std::int64_t>();
  }
  return admitted;
}

std::int64_t HourNow() {
  return std::chrono::duration_cast<std::chrono::hours>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void ExpectEveryAlgorithmAdmitsExactlyItsCapacity(const std::string& url) {
  const std::pair<const char*, std::int64_t> cases[] = {
      {"fixed_window:1000/1h", 1000},
      {"sliding_log:1000/1h", 1000},
      {"sliding_window:1000/1h", 1000},
      // One unit back every 43 min: none within a run, however slow (a run bounded by
      // count may take longer than any fixed time; an hour's rate returned one each 3.6 s).
      {"gcra:1000/30d,burst=700", 700},
      {"token_bucket:1000/30d,burst=700", 700},
      {"token_bucket:1000/1h,burst=700,refill=interval", 700},
  };
  int i = 0;
  for (const auto& [policy, capacity] : cases) {
    const std::int64_t hour = HourNow();
    const std::int64_t admitted =
        AdmittedByFourProcesses(url, fmt::format("'{}'", policy), fmt::format("atomic{}:", i++));
    if (HourNow() == hour) {
      EXPECT_EQ(admitted, capacity) << policy;
    } else {
      EXPECT_LE(admitted, 2 * capacity) << policy << " (the run crossed an hour boundary)";
    }
  }
}

TEST(RedisAtomicity, FourProcessesAdmitExactlyTheCapacity) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  ExpectEveryAlgorithmAdmitsExactlyItsCapacity(server->url("timeout=60s"));
}

TEST(RedisAtomicity, FourProcessesAdmitExactlyTheCapacityOnACluster) {
  RedisCluster* cluster = RedisCluster::Shared();
  ASSERT_NE(cluster, nullptr);
  ExpectEveryAlgorithmAdmitsExactlyItsCapacity(cluster->url("timeout=60s"));
}

// The key's peek after a run of AdmittedByFourProcesses (bench's one key is "user:0").
nlohmann::json PeekAfter(const std::string& url, const std::string& prefix,
                         const std::string& policy) {
  const std::string out =
      RunShell(fmt::format("'{}' check --store '{}' --policy '{}' --cost 0 user:0",
                           FLOODGATE_BINARY, url + "&prefix=" + prefix, policy),
               nullptr);
  return nlohmann::json::parse(out, nullptr, false);
}

// Reservations (docs/reservations.md, "Bounds"), 4 processes x 64 in flight on one key,
// every admitted reservation settled at once: settled at the estimate, exactly the
// capacity is admitted; settled at 0, every request is admitted and every unit comes
// back (a lost update would leave units spent); settled above the estimate, the key has
// spent exactly the sum of the actuals.
void ExpectReservationsSettleExactly(const std::string& url) {
  // sliding_log: the whole run is inside its hour, wherever the clock is. The limit, 300,
  // is above the 256 requests in flight (so with refunds every request fits) and below the
  // 4 x kPerProcess requests the runs make.
  const std::int64_t at_estimate =
      AdmittedByFourProcesses(url, "'sliding_log:300/1h' --mode reserve --actual 1", "res1:");
  EXPECT_EQ(at_estimate, 300);
  std::int64_t requests = 0;
  const std::int64_t refunded = AdmittedByFourProcesses(
      url, "'sliding_log:300/1h' --mode reserve --actual 0", "res0:", &requests);
  EXPECT_EQ(refunded, requests) << "nothing stays held: every request fits";
  EXPECT_EQ(requests, 4 * kPerProcess) << "more requests than the limit, or the run proves nothing";
  EXPECT_EQ(PeekAfter(url, "res0:", "sliding_log:300/1h")["remaining"], 300);
  requests = 0;
  const std::int64_t overcharged = AdmittedByFourProcesses(
      url, "'sliding_log:100000/1h' --mode reserve --actual 3", "res3:", &requests);
  EXPECT_EQ(overcharged, requests) << "3 per request never reaches 100000 in one run";
  EXPECT_EQ(PeekAfter(url, "res3:", "sliding_log:100000/1h")["remaining"],
            100000 - 3 * overcharged);
}

TEST(RedisAtomicity, FourProcessesReservingAndSettlingSpendExactlyTheActuals) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  ExpectReservationsSettleExactly(server->url("timeout=60s"));
}

TEST(RedisAtomicity, FourProcessesReservingAndSettlingOnAClusterSpendExactlyTheActuals) {
  RedisCluster* cluster = RedisCluster::Shared();
  ASSERT_NE(cluster, nullptr);
  ExpectReservationsSettleExactly(cluster->url("timeout=60s"));
}

// Leases (docs/leases.md): 4 processes x 64 in flight acquiring on one key hold exactly N
// leases (none released, none expiring within the run), and then the key has none left;
// acquiring and releasing, no request fails and the key ends with all N free.
void ExpectExactlyNLeases(const std::string& url) {
  const std::string policy = "concurrency:200,lease=1h";
  EXPECT_EQ(AdmittedByFourProcesses(url, "'" + policy + "' --mode acquire --hold", "lease1:"), 200);
  EXPECT_EQ(PeekAfter(url, "lease1:", policy)["remaining"], 0);
  const std::int64_t cycled =
      AdmittedByFourProcesses(url, "'concurrency:8,lease=1h' --mode acquire", "lease2:");
  EXPECT_GE(cycled, 8) << "released leases are acquired again";
  EXPECT_EQ(PeekAfter(url, "lease2:", "concurrency:8,lease=1h")["remaining"], 8)
      << "every lease released";
}

// A holder killed (SIGKILL) while it holds every lease: nothing releases them, and they
// free themselves once the lease time has passed since they were acquired.
TEST(RedisLeases, AKilledHoldersLeasesFreeThemselvesAfterTheLeaseTime) {
  using Steady = std::chrono::steady_clock;
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const std::string url = server->url("timeout=60s");
  constexpr auto kLease = std::chrono::seconds(2);
  const std::string policy = "concurrency:5,lease=2s";
  // Polls (every 20 ms) end at the event waited for; the guard only ends a hang.
  constexpr auto kGuard = std::chrono::seconds(60);
  // The holder acquires the 5 leases, then keeps asking (denied) until it is killed.
  const auto started = Steady::now();  // the leases are taken after this
  const std::string pid = RunCommand(
      fmt::format("'{}' bench --store '{}' --policy '{}' --mode acquire --hold --keys 1 --rate 200 "
                  "--duration 300s >/dev/null 2>&1 & echo $!",
                  FLOODGATE_BINARY, url + "&prefix=killed:", policy));
  struct KillAtExit {  // the holder, should an assertion end the test before it is killed
    std::string pid;
    ~KillAtExit() {
      if (!pid.empty()) RunShell("kill -9 " + pid + " 2>/dev/null");
    }
  } holder{pid};
  const auto peek = [&] {
    const auto json = PeekAfter(url, "killed:", policy);
    return json.is_discarded() ? std::int64_t{-1} : json["remaining"].get<std::int64_t>();
  };
  std::int64_t remaining = peek();
  while (remaining != 0 && Steady::now() - started < kGuard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the peek
    remaining = peek();
  }
  ASSERT_EQ(remaining, 0) << "the holder took every lease";
  RunCommand("kill -9 " + pid);
  holder.pid.clear();
  // Killed, it released nothing: a peek that returned before the lease time had passed
  // since `started` must still see every lease held (a later one may see them lapsed).
  remaining = peek();
  if (Steady::now() - started < kLease) {
    EXPECT_EQ(remaining, 0) << "killed, it released nothing";
  }
  while (remaining != 5 && Steady::now() - started < kGuard) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the peek
    remaining = peek();
  }
  EXPECT_EQ(remaining, 5) << "every lease freed itself";
  EXPECT_GE(Steady::now() - started, kLease) << "not before the lease time";
}

TEST(RedisAtomicity, FourProcessesHoldExactlyNLeases) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  ExpectExactlyNLeases(server->url("timeout=60s"));
}

TEST(RedisAtomicity, FourProcessesHoldExactlyNLeasesOnACluster) {
  RedisCluster* cluster = RedisCluster::Shared();
  ASSERT_NE(cluster, nullptr);
  ExpectExactlyNLeases(cluster->url("timeout=60s"));
}

// Two stacked limits (docs/multi.md) decided together from 4 processes x 64 in flight:
// exactly the tighter one's capacity, whichever of the two it is.
TEST(RedisAtomicity, FourProcessesAdmitExactlyTheTighterOfTwoStackedLimits) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  const std::int64_t hour = HourNow();
  const std::int64_t tight_first = AdmittedByFourProcesses(
      server->url("timeout=60s"), "'fixed_window:600/1h' --policy 'sliding_log:1000/1h'", "st1:");
  const std::int64_t tight_second =
      AdmittedByFourProcesses(server->url("timeout=60s"),
                              "'gcra:1000/1h,burst=900' --policy 'sliding_window:700/1h'", "st2:");
  if (HourNow() == hour) {
    EXPECT_EQ(tight_first, 600);
    EXPECT_EQ(tight_second, 700);
  } else {
    EXPECT_LE(tight_first, 1200) << "(the run crossed an hour boundary)";
  }
}

// The naive limiter: GET, decide, SET, from 4 clients, in rounds where all four read
// before any writes (the interleaving a loaded server gives now and then, here every
// time): each round admits four and counts one, so 300 rounds admit 1200 under a limit
// of 1000 and leave a count of 300.
TEST(RedisAtomicity, NaiveReadModifyWriteOverAdmits) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 4, kRounds = 300;
  std::atomic<std::int64_t> admitted{0};
  std::barrier read(kClients), wrote(kClients);
  {
    std::vector<std::jthread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&] {
        redisContext* redis = redisConnect("127.0.0.1", server->port());
        const bool connected = redis != nullptr && redis->err == 0;
        EXPECT_TRUE(connected);
        for (int i = 0; i < kRounds; ++i) {
          long long count = 0;
          if (connected) {
            auto* reply = static_cast<redisReply*>(redisCommand(redis, "GET naive"));
            count = reply->type == REDIS_REPLY_STRING ? std::atoll(reply->str) : 0;
            freeReplyObject(reply);
          }
          read.arrive_and_wait();
          if (connected && count < 1000) {
            freeReplyObject(redisCommand(redis, "SET naive %lld PX 3600000", count + 1));
            ++admitted;
          }
          wrote.arrive_and_wait();
        }
        if (redis != nullptr) redisFree(redis);
      });
    }
  }
  EXPECT_EQ(admitted.load(), kClients * kRounds) << "the naive limiter admitted every request";
  EXPECT_EQ(server->Cli({"GET", "naive"}), "300\n") << "and counted a quarter of them";
  std::printf("naive read-modify-write admitted %lld of a limit of 1000, counting %d\n",
              static_cast<long long>(admitted.load()), kRounds);
}

TEST(RedisReplay, SameTraceSameOutputAsMemory) {
  auto server = RedisServer::Start();
  ASSERT_NE(server, nullptr);
  for (const char* policy :
       {"sliding_log:20/10s", "gcra:10/1s,burst=20", "token_bucket:5/1s,burst=30,refill=interval",
        "sliding_window:60/1m", "token_bucket:3/1s,burst=9", "fixed_window:30/10s"}) {
    const std::string args =
        fmt::format("replay --policy '{}' --input '{}'", policy, FLOODGATE_SAMPLE_TRACE);
    const std::string memory =
        RunCommand(fmt::format("'{}' {} 2>/dev/null", FLOODGATE_BINARY, args));
    const std::string redis = RunCommand(fmt::format(
        "'{}' {} --store '{}' 2>/dev/null", FLOODGATE_BINARY, args, server->url("timeout=60s")));
    EXPECT_GT(memory.size(), 500'000u) << policy;
    EXPECT_TRUE(memory == redis) << policy << ": the outputs differ";
  }
  // Replays never touch live keys: all of them sit under a random replay prefix.
  EXPECT_EQ(server->Cli({"EVAL", "return #redis.call('KEYS', 'fg:gcra:*')", "0"}), "0\n");
  EXPECT_NE(server->Cli({"EVAL", "return #redis.call('KEYS', 'fg:replay:*')", "0"}), "0\n");
}

// `check` and `replay` want the error, not a degraded answer: with no Redis there they
// fail at once, exit 2, naming the address and the cause (serve starts anyway).
TEST(RedisCli, CheckAndReplayFailFastWithoutRedis) {
  const int port = FreeLoopbackPort();
  const std::string url = fmt::format("redis://127.0.0.1:{}", port);
  int status = 0;
  const std::string check = RunShell(
      fmt::format("'{}' check --policy gcra:1/1s --store '{}' user:1 2>&1", FLOODGATE_BINARY, url),
      &status);
  EXPECT_EQ(WEXITSTATUS(status), 2) << check;
  EXPECT_NE(check.find(fmt::format("redis unreachable at 127.0.0.1:{}: connection refused", port)),
            std::string::npos)
      << check;
  const std::string replay = RunShell(fmt::format("'{}' replay --policy gcra:1/1s --store '{}' "
                                                  "--input '{}' 2>&1 >/dev/null",
                                                  FLOODGATE_BINARY, url, FLOODGATE_SAMPLE_TRACE),
                                      &status);
  EXPECT_EQ(WEXITSTATUS(status), 2) << replay;
  EXPECT_NE(replay.find("redis unreachable"), std::string::npos) << replay;
}

}  // namespace
}  // namespace floodgate::testing
