// The floodgate binary as users run it: flags, output, exit codes.
#include <floodgate/memory_store.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "alias_bomb.h"
#include "hang_guard.h"

namespace floodgate {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct ProcessResult {
  int exit_code;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "floodgate-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string Slurp(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // Runs `floodgate ARGS` through the shell (ARGS is shell-quoted by the caller).
  ProcessResult Floodgate(const std::string& args, const std::string& stdin_file = "/dev/null") {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command = std::string("'") + FLOODGATE_BINARY + "' " + args + " <" +
                                stdin_file + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
  }

  fs::path dir_;
};

TEST_F(CliTest, CheckPrintsDecisionJsonAndExitsByResult) {
  ProcessResult r = Floodgate("check --policy gcra:10/1s,burst=5 user:1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto allowed = nlohmann::json::parse(r.out);
  EXPECT_EQ(allowed["allowed"], true);
  EXPECT_EQ(allowed["limit"], 10);
  EXPECT_EQ(allowed["remaining"], 4);
  EXPECT_EQ(allowed["retry_after_us"], 0);
  EXPECT_EQ(allowed["reset_after_us"], 100000);

  r = Floodgate("check --policy fixed_window:3/1h --cost 4 user:1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(nlohmann::json::parse(r.out)["retry_after_us"], -1);

  r = Floodgate("check --policy gcra:10/1s --cost 0 user:1");
  EXPECT_EQ(r.exit_code, 0);
}

TEST_F(CliTest, CheckErrorsExitTwoWithAMessage) {
  ProcessResult r = Floodgate("check --policy gcra:10/1s,burst=0 user:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("burst must be >= 1, got 0"));
  EXPECT_EQ(r.out, "");

  r = Floodgate("check user:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--policy is required"));

  r = Floodgate("check --policy gcra:1/1s --store memcached://x user:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unsupported store"));

  r = Floodgate("check --policy gcra:1/1s --cost -3 user:1");
  EXPECT_EQ(r.exit_code, 2);

  r = Floodgate("check --policy gcra:1/1s " + std::string(513, 'k'));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("key is 513 bytes"));
}

TEST_F(CliTest, VersionAndHelp) {
  ProcessResult r = Floodgate("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("floodgate 0."));
  r = Floodgate("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("replay"));
  r = Floodgate("");
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(CliTest, ReplayMatchesTheLibraryLineByLine) {
  const char* policy = "sliding_window:20/10s";
  ProcessResult r =
      Floodgate(std::string("replay --policy ") + policy + " --input " + FLOODGATE_SAMPLE_TRACE);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  // Recompute every decision in-process and compare the JSON text.
  MemoryStore store;
  const Policy p = *Policy::Parse(policy);
  std::ifstream trace(FLOODGATE_SAMPLE_TRACE);
  std::istringstream output(r.out);
  std::string in_line, out_line;
  std::size_t lines = 0, denied = 0;
  while (std::getline(trace, in_line)) {
    ASSERT_TRUE(std::getline(output, out_line)) << "missing output for line " << lines + 1;
    const auto in = nlohmann::json::parse(in_line);
    const auto out = nlohmann::json::parse(out_line);
    const Decision d = *store.Decide({in["key"].get<std::string>(), p, in.value("cost", 1),
                                      TimePoint(std::chrono::microseconds(in["t"]))});
    auto expected = nlohmann::json::parse(ToJson(d));
    expected["t"] = in["t"];
    expected["key"] = in["key"];
    ASSERT_EQ(out, expected) << "line " << lines + 1;
    denied += !d.allowed;
    ++lines;
  }
  EXPECT_FALSE(std::getline(output, out_line)) << "extra output";
  EXPECT_GT(lines, 8000u);
  EXPECT_GT(denied, 100u);  // the sample trace has abusers; the policy catches them
  EXPECT_THAT(r.err, HasSubstr("replayed " + std::to_string(lines) + " requests"));
  EXPECT_THAT(r.err, HasSubstr("denied     " + std::to_string(denied)));
  EXPECT_THAT(r.err, HasSubstr("top 10 denied keys"));
  EXPECT_THAT(r.err, HasSubstr("bulk:"));
}

TEST_F(CliTest, ReplayReadsStdinAndWritesAFile) {
  std::ofstream(dir_ / "in.jsonl") << R"({"t":1000000,"key":"a"})"
                                      "\n"
                                   << R"({"t":1000000,"key":"a","cost":1})"
                                      "\n"
                                   << "\n"
                                   << R"({"t":1000001,"key":"b\n\"x"})"
                                      "\n";
  ProcessResult r =
      Floodgate("replay --policy fixed_window:1/1s --output " + (dir_ / "out").string(),
                (dir_ / "in.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      Slurp(dir_ / "out"),
      R"({"t":1000000,"key":"a","allowed":true,"limit":1,"remaining":0,"retry_after_us":0,"reset_after_us":1000000})"
      "\n"
      R"({"t":1000000,"key":"a","allowed":false,"limit":1,"remaining":0,"retry_after_us":1000000,"reset_after_us":1000000})"
      "\n"
      R"({"t":1000001,"key":"b\n\"x","allowed":true,"limit":1,"remaining":0,"retry_after_us":0,"reset_after_us":999999})"
      "\n");
}

// Operation lines (docs/service.md, "replay"): each answers the key's peek after it, in
// trace order with the decisions around it, and the summary counts only the decisions.
TEST_F(CliTest, ReplayOperatesOnKeysInTraceOrder) {
  std::ofstream(dir_ / "ops.jsonl") << R"({"t":1000000,"key":"a","cost":3})"
                                       "\n"
                                    << R"({"t":1000000,"key":"a"})"
                                       "\n"
                                    << R"({"t":1000001,"key":"a","op":"refund","units":2})"
                                       "\n"
                                    << R"({"t":1000002,"key":"a","cost":2})"
                                       "\n"
                                    << R"({"t":1000003,"key":"a","op":"penalize","units":5})"
                                       "\n"
                                    << R"({"t":1000004,"key":"a","op":"reset"})"
                                       "\n"
                                    << R"({"t":1000005,"key":"a","cost":3})"
                                       "\n";
  ProcessResult r =
      Floodgate("replay --policy fixed_window:3/1s --input " + (dir_ / "ops.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(out.size(), 7u) << r.out;
  EXPECT_EQ(out[1]["allowed"], false);
  EXPECT_EQ(out[2]["op"], "refund");
  EXPECT_EQ(out[2]["remaining"], 2);
  EXPECT_EQ(out[3]["allowed"], true);
  EXPECT_EQ(out[4]["op"], "penalize");
  EXPECT_EQ(out[4]["remaining"], 0);
  EXPECT_EQ(out[5]["remaining"], 3);
  EXPECT_EQ(out[6]["allowed"], true);
  EXPECT_THAT(r.err, HasSubstr("replayed 4 requests"));

  std::ofstream(dir_ / "bad-op.jsonl") << R"({"t":1,"key":"a","op":"refund"})"
                                          "\n";
  r = Floodgate("replay --policy gcra:1/1s --input " + (dir_ / "bad-op.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("line 1: \"op\": \"refund\" needs \"units\""));
}

TEST_F(CliTest, CheckOperatesOnAKey) {
  ProcessResult r = Floodgate("check --policy gcra:10/1s --penalize 4 user:1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["remaining"], 6);
  r = Floodgate("check --policy gcra:10/1s --refund 2 user:1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["remaining"], 10);
  r = Floodgate("check --policy gcra:10/1s --reset user:1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["reset_after_us"], 0);
  r = Floodgate("check --policy gcra:10/1s --refund 0 user:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("units must be between 1 and"));
  r = Floodgate("check --policy gcra:10/1s --reset --refund 1 user:1");
  EXPECT_EQ(r.exit_code, 2);
}

// `admin: {token_file: ...}` whose file is missing: serve refuses to start, naming it.
TEST_F(CliTest, ServeRefusesToStartWithoutItsAdminTokenFile) {
  const std::string missing = (dir_ / "no-such-token").string();
  std::ofstream(dir_ / "admin.yaml")
      << "listen: 127.0.0.1:0\nadmin: {token_file: " << missing << "}\n";
  // Under `timeout` (kHangGuard): a serve that started would never end.
  const fs::path err = dir_ / "serve.err";
  const int status = std::system(fmt::format("timeout {} '{}' serve --config '{}' </dev/null "
                                             ">/dev/null 2>'{}'",
                                             testing::kHangGuard.count(), FLOODGATE_BINARY,
                                             (dir_ / "admin.yaml").string(), err.string())
                                     .c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
  EXPECT_THAT(Slurp(err), HasSubstr(missing));
  ProcessResult r = Floodgate("config check " + (dir_ / "admin.yaml").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(missing));
}

// Access logs with second or millisecond timestamps give bursts at one `t`: gcra:7/1m
// admits 7 of them (not 6), and the 8th waits one emission interval, ceil(60 s / 7).
TEST_F(CliTest, ReplayOfASameInstantBurstAdmitsExactlyTheBurst) {
  {
    std::ofstream in(dir_ / "burst.jsonl");
    for (int i = 0; i < 8; ++i)
      in << R"({"t":1700000000000000,"key":"client"})"
         << "\n";
  }
  ProcessResult r = Floodgate("replay --policy gcra:7/1m --output " + (dir_ / "out").string(),
                              (dir_ / "burst.jsonl").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(Slurp(dir_ / "out"));
  std::vector<nlohmann::json> decisions;
  for (std::string line; std::getline(lines, line);)
    decisions.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(decisions.size(), 8u);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(decisions[i]["allowed"], true) << "request " << i + 1;
  EXPECT_EQ(decisions[7]["allowed"], false);
  EXPECT_EQ(decisions[7]["retry_after_us"], 8'571'429);
}

TEST_F(CliTest, ReplayStopsAtABadLineWithItsNumber) {
  std::ofstream(dir_ / "bad.jsonl") << R"({"t":1,"key":"a"})"
                                       "\n"
                                    << R"({"t":2,"key":"a"})"
                                       "\n"
                                    << R"({"t":3,"key":"a","cost":"two"})"
                                       "\n"
                                    << R"({"t":4,"key":"a"})"
                                       "\n";
  ProcessResult r = Floodgate("replay --policy gcra:1/1s --input " + (dir_ / "bad.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("line 3: \"cost\" must be a whole number"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);  // the good lines before it

  std::ofstream(dir_ / "order.jsonl") << R"({"t":5,"key":"a"})"
                                         "\n"
                                      << R"({"t":4,"key":"a"})"
                                         "\n";
  r = Floodgate("replay --policy gcra:1/1s --input " + (dir_ / "order.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("line 2: t 4 is before the previous line's t 5"));

  r = Floodgate("replay --policy gcra:1/1s --input " + (dir_ / "missing.jsonl").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read"));
}

// `config check` reads only regular files, within bounds (docs/security.md, "Configuration
// files"): a FIFO given as the file and a runtime directory holding /proc/kmsg both hung it, a
// 3 KB alias bomb took 30 s and 1.3 GB. Under `timeout` (kHangGuard), so that a hang fails the
// test.
TEST_F(CliTest, ConfigCheckRefusesWhatIsNotABoundedRegularFile) {
  const auto check = [&](const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command =
        fmt::format("timeout -s KILL {} '{}' config check {} </dev/null >{} 2>{}",
                    testing::kHangGuard.count(), FLOODGATE_BINARY, args, out.string(), err.string());
    const int status = std::system(command.c_str());
    return ProcessResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
  };
  ASSERT_EQ(::mkfifo((dir_ / "fifo.yaml").c_str(), 0600), 0);
  ProcessResult r = check((dir_ / "fifo.yaml").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("fifo.yaml: a FIFO: config files are read from regular files only"));

  const fs::path kmsg = dir_ / "kmsg";
  fs::create_directories(kmsg / "config");
  std::ofstream(kmsg / "config" / "a.yaml") << "domain: a\n";
  fs::create_symlink("/proc/kmsg", kmsg / "config" / "k.yaml");
  r = check("--runtime-root " + kmsg.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("k.yaml: a file of /proc or /sys, not a config file"));

  const fs::path bomb = dir_ / "bomb";
  fs::create_directories(bomb / "config");
  std::ofstream(bomb / "config" / "a.yaml") << testing::AliasBomb(10, 7);
  r = check("--runtime-root " + bomb.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("a.yaml:2: more than 1000000 YAML nodes in one config once "
                               "aliases are expanded"));
}

// `floodgate bench` runs bounded by count (--max-decisions), not by time: a run ends when
// its decisions are done, whatever the machine's speed, and --duration is only a guard
// against a hang (minutes, where the runs take milliseconds).
constexpr const char* kBenchBound = "--max-decisions 1000 --duration 120s";

// The hour since the epoch: a fixed window of 1 h admits its limit once per hour.
std::int64_t HourNow() {
  return std::chrono::duration_cast<std::chrono::hours>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What a bench run on one key of a `limit`/1h fixed window admitted: exactly the limit,
// or, when the run crossed an hour boundary (two windows), at most twice that.
void ExpectAdmitted(const nlohmann::json& j, std::int64_t limit, std::int64_t hour_before) {
  const std::int64_t allowed = j["allowed"].get<std::int64_t>();
  if (HourNow() == hour_before) {
    EXPECT_EQ(allowed, limit) << j.dump();
  } else {
    EXPECT_GE(allowed, limit) << j.dump() << " (the run crossed an hour boundary)";
    EXPECT_LE(allowed, 2 * limit) << j.dump() << " (the run crossed an hour boundary)";
  }
  EXPECT_EQ(allowed + j["denied"].get<std::int64_t>(), 1000) << j.dump();
}

TEST_F(CliTest, BenchJsonReportsExactCountsOnOneKey) {
  const std::int64_t hour = HourNow();
  ProcessResult r = Floodgate(
      std::string("bench --policy fixed_window:100/1h --keys 1 --threads 2 --json ") + kBenchBound);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* field : {"decisions_per_sec", "allowed", "denied", "errors", "p50_us", "p90_us",
                            "p99_us", "p999_us"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_EQ(j["decisions"], 1000) << "each thread its share of --max-decisions, all of it";
  EXPECT_GT(j["decisions_per_sec"].get<double>(), 0);
  EXPECT_EQ(j["errors"], 0);
  ExpectAdmitted(j, 100, hour);
  EXPECT_LE(j["p50_us"].get<double>(), j["p99_us"].get<double>());
}

TEST_F(CliTest, BenchDecidesSeveralPoliciesAllOrNothing) {
  // Two limits on one key, the second the tighter: each request is one multi-decision,
  // so the looser limit consumes only what the tighter admits.
  std::int64_t hour = HourNow();
  ProcessResult r = Floodgate(
      std::string("bench --policy fixed_window:100/1h --policy fixed_window:30/1h --same-slot "
                  "--keys 1 --threads 2 --json ") +
      kBenchBound);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "fixed_window:100/1h + fixed_window:30/1h");
  EXPECT_EQ(j["multi"], true);
  EXPECT_EQ(j["errors"], 0);
  ExpectAdmitted(j, 30, hour);

  // --multi: one policy, through the multi-decision API; the same answers.
  hour = HourNow();
  r = Floodgate(std::string("bench --policy fixed_window:100/1h --multi --keys 1 --threads 2 "
                            "--json ") +
                kBenchBound);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["multi"], true);
  EXPECT_EQ(j["errors"], 0);
  ExpectAdmitted(j, 100, hour);

  r = Floodgate(std::string("bench --policy fixed_window:100/1h --keys 1 --json ") + kBenchBound);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["multi"], false);

  // --one-by-one: a single decision per policy, the request allowed when both are.
  hour = HourNow();
  r = Floodgate(
      std::string("bench --policy fixed_window:100/1h --policy fixed_window:30/1h --one-by-one "
                  "--keys 1 --threads 2 --concurrency 4 --json ") +
      kBenchBound);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["multi"], false);
  EXPECT_EQ(j["one_by_one"], true);
  EXPECT_EQ(j["errors"], 0);
  ExpectAdmitted(j, 30, hour);
  r = Floodgate("bench --policy fixed_window:100/1h --one-by-one --duration 100ms");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--one-by-one takes several policies"));
}

// A run bounded by count ends with its decisions, not at --duration: what it measured is
// less than its guard (its decisions take milliseconds; a run that waited out the guard
// reports all of it).
TEST_F(CliTest, BenchEndsWhenItsDecisionsAreDone) {
  ProcessResult r = Floodgate(
      "bench --policy gcra:1000/1s --keys 10 --threads 2 --max-decisions 1000 --duration 30s "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["decisions"], 1000);
  EXPECT_LT(j["seconds"].get<double>(), 30.0) << "the run waited out --duration";
}

TEST_F(CliTest, BenchRejectsBadFlags) {
  ProcessResult r = Floodgate("bench --threads 0");
  EXPECT_EQ(r.exit_code, 2);
  r = Floodgate("bench --duration 5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs a unit"));
}

}  // namespace
}  // namespace floodgate
