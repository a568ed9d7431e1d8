// The floodgate binary as users run it: flags, output, exit codes.
#include <floodgate/memory_store.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "alias_bomb.h"

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
// 3 KB alias bomb took 30 s and 1.3 GB. Under `timeout`, so that a hang fails the test.
TEST_F(CliTest, ConfigCheckRefusesWhatIsNotABoundedRegularFile) {
  const auto check = [&](const std::string& args) {
    const fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string command = std::string("timeout -s KILL 20 '") + FLOODGATE_BINARY +
                                "' config check " + args + " </dev/null >" + out.string() + " 2>" +
                                err.string();
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

TEST_F(CliTest, BenchJsonReportsExactCountsOnOneKey) {
  ProcessResult r = Floodgate(
      "bench --policy fixed_window:100/1h --keys 1 --threads 2 --duration 300ms "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* field : {"decisions_per_sec", "allowed", "denied", "errors", "p50_us", "p90_us",
                            "p99_us", "p999_us"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_GT(j["decisions_per_sec"].get<double>(), 0);
  EXPECT_EQ(j["errors"], 0);
  // One key, 1 h window: at most one window boundary can fall inside a 0.3 s run.
  EXPECT_GE(j["allowed"].get<int>(), 100);
  EXPECT_LE(j["allowed"].get<int>(), 200);
  EXPECT_EQ(j["allowed"].get<std::int64_t>() + j["denied"].get<std::int64_t>(),
            j["decisions"].get<std::int64_t>());
  EXPECT_LE(j["p50_us"].get<double>(), j["p99_us"].get<double>());
}

TEST_F(CliTest, BenchDecidesSeveralPoliciesAllOrNothing) {
  // Two limits on one key, the second the tighter: each request is one multi-decision,
  // so the looser limit consumes only what the tighter admits.
  ProcessResult r = Floodgate(
      "bench --policy fixed_window:100/1h --policy fixed_window:30/1h --same-slot --keys 1 "
      "--threads 2 --duration 300ms --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["policy"], "fixed_window:100/1h + fixed_window:30/1h");
  EXPECT_EQ(j["multi"], true);
  EXPECT_EQ(j["errors"], 0);
  // At most one window boundary falls inside the run.
  EXPECT_GE(j["allowed"].get<int>(), 30);
  EXPECT_LE(j["allowed"].get<int>(), 60);
  EXPECT_EQ(j["allowed"].get<std::int64_t>() + j["denied"].get<std::int64_t>(),
            j["decisions"].get<std::int64_t>());

  // --multi: one policy, through the multi-decision API; the same answers.
  r = Floodgate(
      "bench --policy fixed_window:100/1h --multi --keys 1 --threads 2 --duration 300ms --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["multi"], true);
  EXPECT_EQ(j["errors"], 0);
  EXPECT_GE(j["allowed"].get<int>(), 100);
  EXPECT_LE(j["allowed"].get<int>(), 200);

  r = Floodgate("bench --policy fixed_window:100/1h --keys 1 --duration 100ms --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["multi"], false);

  // --one-by-one: a single decision per policy, the request allowed when both are.
  r = Floodgate(
      "bench --policy fixed_window:100/1h --policy fixed_window:30/1h --one-by-one --keys 1 "
      "--threads 2 --concurrency 4 --duration 300ms --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["multi"], false);
  EXPECT_EQ(j["one_by_one"], true);
  EXPECT_EQ(j["errors"], 0);
  EXPECT_GE(j["allowed"].get<int>(), 30);
  EXPECT_LE(j["allowed"].get<int>(), 60);
  r = Floodgate("bench --policy fixed_window:100/1h --one-by-one --duration 100ms");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--one-by-one takes several policies"));
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
