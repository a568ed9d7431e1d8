// Reading a config file: a regular file only, its size bounded before a byte is read.

#include "server/config_file.h"

#include <absl/status/status.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace floodgate::server {

namespace {

std::string_view KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

absl::Status Errno(const std::filesystem::path& path, std::string_view doing) {
  return absl::NotFoundError(
      fmt::format("{}: cannot {} the config file: {}", path.string(), doing, std::strerror(errno)));
}

// Closes the descriptor it owns.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::string> ReadConfigFile(const std::filesystem::path& path, std::uint64_t used) {
  // Checked by path before the open: opening a device may act (a watchdog arms, a tape
  // rewinds), and opening a FIFO blocks until a writer comes.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Errno(path, "read");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {}: config files are read from regular files only", path.string(),
                    KindOf(st.st_mode)));
  }
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) != 0) return Errno(path, "read");
  if (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC) {
    return absl::InvalidArgumentError(
        fmt::format("{}: a file of /proc or /sys, not a config file (its size is not its contents)",
                    path.string()));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > kMaxConfigBytes || used > kMaxConfigBytes - size) {
    return absl::ResourceExhaustedError(
        used == 0 ? fmt::format("{}: {} bytes; a config has at most {} (docs/security.md)",
                                path.string(), size, kMaxConfigBytes)
                  : fmt::format("{}: {} bytes after {} in the directory's other files; a config "
                                "has at most {} (docs/security.md)",
                                path.string(), size, used, kMaxConfigBytes));
  }
  // O_NONBLOCK: should the path be swapped for a FIFO since the stat, the open does not wait.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return Errno(path, "open");
  struct stat opened {};
  if (::fstat(fd.get(), &opened) != 0) return Errno(path, "read");
  if (opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
    return absl::UnavailableError(
        fmt::format("{}: replaced while being opened; read again at the next load", path.string()));
  }
  std::string text(size, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(path, "read");
    if (n == 0) break;  // shorter than it was: what is there
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace floodgate::server
