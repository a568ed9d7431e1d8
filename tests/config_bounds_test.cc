// What reading any config costs at most: its file (ReadConfigFile) and its YAML (YamlBudget).
//
// docs/security.md, "Configuration files": both floodgate's config file and the RLS config
// directory are read through these two; server_config_test, rls_config_test and
// rls_loader_test show each config refusing what passes them.

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "server/config_file.h"
#include "server/yaml_budget.h"

namespace floodgate::server {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A map of 3 keys and their values, two of them an alias of a list of 2: 1 + 3 + 3 * 3.
constexpr std::string_view kAliased = "a: &x [1, 2]\nb: *x\nc: *x\n";

TEST(YamlBudget, CountsEveryAliasAsTheNodesItRepeats) {
  YamlBudget budget;
  ASSERT_TRUE(budget.Charge(kAliased, "t.yaml").ok());
  EXPECT_EQ(budget.used(), 13u);
  // The files of one config share it.
  ASSERT_TRUE(budget.Charge("d: 1\n", "u.yaml").ok());
  EXPECT_EQ(budget.used(), 16u);
}

TEST(YamlBudget, RefusesPastTheBoundAtTheNodeThatPassesIt) {
  YamlBudget exact(13);
  EXPECT_TRUE(exact.Charge(kAliased, "t.yaml").ok());
  YamlBudget less(12);
  const absl::Status s = less.Charge(kAliased, "t.yaml");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "t.yaml:3: more than 12 YAML nodes in one config once aliases are expanded: *x "
            "repeats 3 (docs/security.md)");
  EXPECT_EQ(less.used(), 0u);  // a refused file charges nothing
  YamlBudget shared(14);
  ASSERT_TRUE(shared.Charge(kAliased, "t.yaml").ok());
  EXPECT_EQ(shared.Charge("a: 1\n", "u.yaml").message(),
            "u.yaml:1: more than 14 YAML nodes in one config (docs/security.md)");
}

// Ten wide and seven deep: 3 KB naming 10^7 nodes, refused after a pass over its text.
TEST(YamlBudget, RefusesAnAliasBombWithoutExpandingIt) {
  std::string level = "&l0 [x, x, x, x, x, x, x, x, x, x]";
  for (int d = 1; d < 7; ++d) {
    const std::string alias = "*l" + std::to_string(d - 1);
    level = "&l" + std::to_string(d) + " [" + level;
    for (int i = 1; i < 10; ++i) level += ", " + alias;
    level += "]";
  }
  YamlBudget budget;
  const absl::Status s = budget.Charge("a: " + level + "\n", "bomb.yaml");
  EXPECT_THAT(s.message(), HasSubstr("bomb.yaml:1: more than 1000000 YAML nodes"));
}

TEST(YamlBudget, RefusesAnAliasInsideItsOwnAnchor) {
  YamlBudget budget;
  EXPECT_EQ(budget.Charge("a: &x [1, {k: *x}]\n", "t.yaml").message(),
            "t.yaml:1: alias *x is inside the node its anchor names: a loop");
}

TEST(YamlBudget, RefusesAKeyGivenTwiceInOneMapping) {
  YamlBudget budget;
  EXPECT_EQ(budget.Charge("a: 1\nb:\n  c: 1\n  d: 2\n  c: 3\n", "t.yaml").message(),
            "t.yaml:5: key \"c\" given twice in one mapping (first on line 3)");
  EXPECT_EQ(budget.Charge("a: {x: 1, x: 2}\n", "t.yaml").message(),
            "t.yaml:1: key \"x\" given twice in one mapping (first on line 1)");
  // A key by an alias is that key.
  EXPECT_EQ(budget.Charge("k: &n name\nm:\n  name: 1\n  *n : 2\n", "t.yaml").message(),
            "t.yaml:4: key \"name\" given twice in one mapping (first on line 3)");
  // The same key in two mappings, or a mapping repeated by an alias, is no repeat.
  EXPECT_TRUE(budget.Charge("a: &m {x: 1}\nb: {x: 1}\nc: *m\n", "t.yaml").ok());
}

TEST(YamlBudget, LeavesSyntaxErrorsToTheLoad) {
  YamlBudget budget;
  EXPECT_TRUE(budget.Charge("a: [1\n", "t.yaml").ok());
  EXPECT_TRUE(budget.Charge("a: *undefined\n", "t.yaml").ok());
}

class ConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "config-file-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ConfigFileTest, ReadsARegularFileAndASymlinkToOne) {
  std::ofstream(dir_ / "a.yaml") << "rules: []\n";
  fs::create_symlink(dir_ / "a.yaml", dir_ / "link.yaml");
  for (const char* name : {"a.yaml", "link.yaml"}) {
    auto text = ReadConfigFile(dir_ / name);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ(*text, "rules: []\n");
  }
}

// None of these is opened: a FIFO would block the read, /proc/kmsg blocks (and is consumed
// by reading), a device may act when opened.
TEST_F(ConfigFileTest, RefusesAllButRegularFilesBeforeOpeningThem) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/null", dir_ / "null.yaml");
  fs::create_symlink("/proc/kmsg", dir_ / "kmsg.yaml");
  fs::create_symlink("/proc/self/status", dir_ / "status.yaml");
  fs::create_directory(dir_ / "dir.yaml");
  const char* kProc = ": a file of /proc or /sys, not a config file (its size is not its contents)";
  const std::pair<const char*, const char*> cases[] = {
      {"fifo", ": a FIFO: config files are read from regular files only"},
      {"null.yaml", ": a character device: config files are read from regular files only"},
      {"kmsg.yaml", kProc},
      {"status.yaml", kProc},
      {"dir.yaml", ": a directory: config files are read from regular files only"},
  };
  for (const auto& [name, reason] : cases) {
    auto text = ReadConfigFile(dir_ / name);
    ASSERT_FALSE(text.ok()) << name;
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_EQ(text.status().message(), (dir_ / name).string() + reason);
  }
  EXPECT_EQ(ReadConfigFile(dir_ / "missing.yaml").status().code(), absl::StatusCode::kNotFound);
}

// Sparse files: their size is refused by stat, before a byte is read.
TEST_F(ConfigFileTest, RefusesPastTheByteBoundBeforeReading) {
  const fs::path big = dir_ / "big.yaml";
  std::ofstream(big).close();
  fs::resize_file(big, std::uint64_t{3} << 30);
  auto text = ReadConfigFile(big);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(text.status().message(),
            big.string() + ": 3221225472 bytes; a config has at most 16777216 (docs/security.md)");

  const fs::path exact = dir_ / "exact.yaml";
  std::ofstream(exact).close();
  fs::resize_file(exact, kMaxConfigBytes);
  ASSERT_TRUE(ReadConfigFile(exact).ok());
  EXPECT_EQ(ReadConfigFile(exact, 1).status().message(),
            exact.string() +
                ": 16777216 bytes after 1 in the directory's other files; a config has at most "
                "16777216 (docs/security.md)");
}

}  // namespace
}  // namespace floodgate::server
