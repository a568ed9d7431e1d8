// Zone names: tz= takes a name on the zone database's list, never a path, and looks nothing else
// up.

#include "core/zone_names.h"

#include <fcntl.h>
#include <floodgate/policy.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/strings.h"
#include "core/calendar.h"

namespace floodgate {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Refusal(const std::string& policy) {
  auto parsed = Policy::Parse(policy);
  return parsed.ok() ? std::string("accepted") : std::string(MessageOf(parsed.status()));
}

TEST(ZoneNames, TzdataZiNamesItsZonesAndLinks) {
  const core::ZoneNames names = core::ZoneNames::FromTzdataZi(
      "# version 2025b\n"
      "R d 1916 o - Jun 14 23s 1 S\n"
      "Z Europe/Berlin 0:53:28 - LMT 1893 Ap\n"
      "1 c CE%sT 1945 May 24 2\n"
      "Z\tAsia/Tokyo 9:18:59 - LMT 1887 D 31 15u\n"
      "L Europe/Berlin Arctic/Longyearbyen\n");
  EXPECT_TRUE(names.Contains("Europe/Berlin"));
  EXPECT_TRUE(names.Contains("Asia/Tokyo"));
  EXPECT_TRUE(names.Contains("Arctic/Longyearbyen"));  // a link's name, not its target's
  EXPECT_TRUE(names.Contains("UTC"));                  // abseil's own
  EXPECT_FALSE(names.Contains("d"));                   // a rule's name
  EXPECT_FALSE(names.Contains("1"));
  EXPECT_EQ(names.size(), 4u);
  EXPECT_FALSE(core::ZoneNames::Read("/nonexistent-zoneinfo").ok());
}

TEST(ZoneNames, TheSystemListIsTzdatas) {
  ASSERT_TRUE(core::SystemZoneNamesError().ok()) << core::SystemZoneNamesError();
  const core::ZoneNames& names = core::SystemZoneNames();
  EXPECT_GT(names.size(), 400u);
  for (const char* zone : {"Europe/Berlin", "America/New_York", "Asia/Kolkata", "UTC", "Etc/UTC",
                           "America/Argentina/ComodRivadavia"}) {
    EXPECT_TRUE(names.Contains(zone)) << zone;
  }
}

// Each of these is a file abseil would open, a path out of the database, or a name it
// would parse without a file: none is on the list, so none is looked up.
TEST(ZoneNames, APathIsNeverAZone) {
  for (const std::string tz :
       {"/dev/stdin", "/proc/self/fd/0", "/usr/share/zoneinfo/Europe/Berlin",
        "file:/usr/share/zoneinfo/UTC", "../../../../usr/share/zoneinfo/Europe/Berlin",
        "Europe/../Europe/Berlin", "./UTC", "Europe//Berlin", "posix/Europe/Berlin", "right/UTC",
        "localtime", "posixrules", "zone1970.tab", "tzdata.zi", "Fixed/UTC+01:00", "Europe",
        "Europe/Berlin/", "europe/berlin"}) {
    EXPECT_THAT(Refusal("fixed_window:5/1d,tz=" + tz), HasSubstr("unknown time zone")) << tz;
  }
}

// Issue 39: 3,000 policies with distinct 30 KB zone names grew abseil's cache by 87 MB.
TEST(ZoneNames, ALongNameIsRefusedByItsLengthWithoutEchoingIt) {
  const std::string refusal = Refusal("fixed_window:5/1d,tz=" + std::string(30'000, 'x'));
  EXPECT_EQ(refusal, "a policy is at most 256 bytes, got 30021");
  EXPECT_THAT(Refusal("fixed_window:5/1d,tz=" + std::string(65, 'x')),
              HasSubstr("tz is 65 bytes; a zone name is at most 64"));
  EXPECT_THAT(Refusal("fixed_window:5/1d,tz=" + std::string(64, 'x')),
              HasSubstr("unknown time zone"));  // 64 is a length taken, then not on the list
  Policy built = *Policy::Parse("fixed_window:5/1d,tz=UTC");
  built.tz = std::string(30'000, 'x');
  EXPECT_THAT(std::string(MessageOf(built.Validate())),
              HasSubstr("tz is 30000 bytes; a zone name is at most 64"));
}

// A FIFO holding bytes: whoever opens it as a zone reads them (with no writer, the open
// blocks for good, as tz=/dev/stdin did on a pipe). The bytes still there prove nothing
// opened it.
class FifoZone : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "floodgate-zone-XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    path_ = dir_ + "/zone";
    ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
    fd_ = open(path_.c_str(), O_RDWR | O_NONBLOCK);  // a writer, so no open blocks
    ASSERT_GE(fd_, 0);
    const std::string junk(kBytes, 'j');  // not TZif: a reader gives up after its header
    ASSERT_EQ(write(fd_, junk.data(), junk.size()), static_cast<ssize_t>(kBytes));
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  int Unread() const {
    int n = -1;
    ioctl(fd_, FIONREAD, &n);
    return n;
  }

  static constexpr std::size_t kBytes = 100;
  std::string dir_;
  std::string path_;
  int fd_ = -1;
};

TEST_F(FifoZone, ParsingAPolicyNamingItReadsNothing) {
  EXPECT_THAT(Refusal("fixed_window:5/1d,tz=" + path_), HasSubstr("unknown time zone"));
  EXPECT_EQ(Unread(), static_cast<int>(kBytes));
}

TEST_F(FifoZone, AHandBuiltPolicyNamingItDecidesInUtcReadingNothing) {
  Policy policy = *Policy::Parse("fixed_window:5/1d,tz=UTC");
  policy.tz = path_;
  const core::CalendarZone calendar = core::CalendarOf(policy);
  EXPECT_EQ(calendar.zone, absl::UTCTimeZone());
  EXPECT_EQ(Unread(), static_cast<int>(kBytes));
}

}  // namespace
}  // namespace floodgate
