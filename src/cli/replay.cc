// floodgate replay: decide every line of a recorded trace at its own time.
// floodgate replay --policy POLICY [--store URL] [--input FILE|-] [--output FILE|-]
// (docs/service.md, "replay").
#include <floodgate/store.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli/commands.h"
#include "cli/replay_summary.h"
#include "cli/trace.h"
#include "common/strings.h"

namespace floodgate::cli {

namespace {

using Clock = std::chrono::steady_clock;

// A one-line progress bar on a terminal. Redrawn at most every 100 ms; the fraction is
// bytes read of the file's size, so it is exact however long lines are, and a pipe
// (size unknown) shows only the count and rate.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(Clock::now()), last_(start_) {}

  void Update(std::uint64_t lines, std::uint64_t bytes, std::uint64_t total_bytes) {
    if (!enabled_ || (lines & 4095) != 0) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = lines / seconds;
    if (total_bytes > 0) {
      const double fraction = std::min(1.0, static_cast<double>(bytes) / total_bytes);
      const int filled = static_cast<int>(fraction * 30);
      const double eta = fraction > 0 ? seconds * (1 - fraction) / fraction : 0;
      fmt::print(stderr, "\r[{:#<{}}{:.<{}}] {:5.1f}%  {} lines  {:.0f}/s  ETA {:.0f}s ", "",
                 filled, "", 30 - filled, fraction * 100, lines, rate, eta);
    } else {
      fmt::print(stderr, "\r{} lines  {:.0f}/s ", lines, rate);
    }
    drawn_ = true;
  }
  void Clear() {
    if (drawn_) fmt::print(stderr, "\r\033[K");
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_, last_;
};

// A replay never touches live state: on a shared store its keys get a fresh random
// prefix (docs/service.md, "replay"). It uses one connection, so decisions in flight reach
// the store in trace order, and a patient timeout unless the URL sets one: a replay
// wants the store's answers, not on_error's. The embedded store is private anyway.
std::string ReplayStoreUrl(const std::string& url) {
  if (!url.starts_with("redis")) return url;
  std::random_device random;
  std::string out = url + (url.find('?') == std::string::npos ? "?" : "&");
  out += fmt::format("connections=1&prefix=fg:replay:{:08x}{:08x}:", random(), random());
  if (url.find("timeout=") == std::string::npos) out += "&timeout=10s";
  return out;
}

// How many decisions a replay keeps in flight: enough to fill batch script calls.
constexpr std::size_t kReplayWindow = 1024;

struct InFlight {
  std::uint64_t line;
  std::int64_t t;
  std::string key;
  std::optional<absl::StatusOr<Decision>> result;  // set by the store's callback
  std::optional<KeyOperation> op;                  // an operation line's
};

std::string EscapeKey(std::string_view key) {
  return nlohmann::json(std::string(key))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Command AddReplay(CLI::App& app) {
  struct Flags {
    std::string policy;
    std::string store = "memory://";
    std::string input = "-";
    std::string output = "-";
    std::size_t top = 10;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "replay",
      "Decide every line of a JSON Lines trace {\"t\": µs, \"key\": ..., \"cost\": 1} "
      "at its own time (or operate on the key: \"op\": \"reset\", \"refund\" or \"penalize\" with "
      "\"units\"); print one Decision per line and a summary on stderr");
  cmd->add_option("--policy", flags->policy, "ALGORITHM:LIMIT/PERIOD[,burst=B][,refill=...]")
      ->required();
  cmd->add_option("--store", flags->store, "store URL")->capture_default_str();
  cmd->add_option("--input", flags->input, "trace file, or - for stdin")->capture_default_str();
  cmd->add_option("--output", flags->output, "decisions file, or - for stdout")
      ->capture_default_str();
  cmd->add_option("--top", flags->top, "denied keys to list in the summary")->capture_default_str();

  return {
      cmd, [flags]() -> int {
        const auto fail = [](std::string_view why) {
          fmt::print(stderr, "floodgate replay: {}\n", why);
          return kExitError;
        };
        auto policy = Policy::Parse(flags->policy);
        if (!policy.ok()) return fail(MessageOf(policy.status()));
        auto store = OpenStore(ReplayStoreUrl(flags->store));
        if (!store.ok()) return fail(MessageOf(store.status()));

        std::FILE* in = flags->input == "-" ? stdin : std::fopen(flags->input.c_str(), "rb");
        if (in == nullptr) {
          return fail(fmt::format("cannot read {}: {}", flags->input, std::strerror(errno)));
        }
        LineReader reader(in, in != stdin);
        std::FILE* out = flags->output == "-" ? stdout : std::fopen(flags->output.c_str(), "wb");
        if (out == nullptr) {
          return fail(fmt::format("cannot write {}: {}", flags->output, std::strerror(errno)));
        }
        std::setvbuf(out, nullptr, _IOFBF, 1 << 20);

        TraceParser parser;
        ReplaySummary summary;
        Progress progress(isatty(fileno(stderr)) != 0);
        const auto start = Clock::now();
        std::string_view line;
        std::uint64_t line_no = 0;
        std::int64_t previous_t = -1;
        std::string buffer;
        int status = kExitAllowed;
        std::optional<std::string> bad_line;
        // Decisions go out asynchronously and are written in trace order as they land.
        std::mutex mu;
        std::condition_variable landed;
        std::deque<std::shared_ptr<InFlight>> window;
        const auto wait_for = [&](const InFlight& f) {
          std::unique_lock lock(mu);
          landed.wait(lock, [&] { return f.result.has_value(); });
        };
        const auto write_oldest = [&]() -> bool {
          const std::shared_ptr<InFlight> oldest = std::move(window.front());
          window.pop_front();
          wait_for(*oldest);
          const absl::StatusOr<Decision>& decision = *oldest->result;
          if (!decision.ok()) {
            progress.Clear();
            status = fail(fmt::format("line {}: {}", oldest->line, MessageOf(decision.status())));
            return false;
          }
          // An operation's answer is the key's peek: not a decision the summary counts.
          if (!oldest->op) summary.Add(oldest->key, *decision, oldest->t);
          buffer = ToJson(*decision);
          buffer.replace(
              0, 1,
              oldest->op
                  ? fmt::format("{{\"t\":{},\"key\":{},\"op\":\"{}\",", oldest->t,
                                EscapeKey(oldest->key), KeyOperationName(*oldest->op))
                  : fmt::format("{{\"t\":{},\"key\":{},", oldest->t, EscapeKey(oldest->key)));
          buffer += '\n';
          std::fwrite(buffer.data(), 1, buffer.size(), out);
          return true;
        };
        while (reader.Next(line)) {
          ++line_no;
          progress.Update(line_no, reader.bytes_read(), reader.total_bytes());
          if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
          auto event = parser.Parse(line);
          if (!event.ok()) {
            bad_line = fmt::format("line {}: {}", line_no, MessageOf(event.status()));
            break;
          }
          if (event->t < previous_t) {
            bad_line = fmt::format(
                "line {}: t {} is before the previous line's t {}; a trace must be in time order",
                line_no, event->t, previous_t);
            break;
          }
          previous_t = event->t;
          // An operation goes by a script of its own, which the store does not order with
          // the decisions in flight beside it: every earlier line lands first, and the
          // operation's answer before any later line is sent.
          bool written = true;
          while (written && !window.empty() && (event->op || window.size() >= kReplayWindow)) {
            written = write_oldest();
          }
          if (!written) break;
          auto flight = std::make_shared<InFlight>(
              InFlight{line_no, event->t, std::string(event->key), std::nullopt, event->op});
          window.push_back(flight);
          const TimePoint at{std::chrono::microseconds(event->t)};
          auto landing = [&mu, &landed, flight](absl::StatusOr<Decision> decision) {
            std::lock_guard lock(mu);
            flight->result = std::move(decision);
            landed.notify_all();
          };
          if (event->op) {
            (*store)->OperateAsync({flight->key, *policy, *event->op, event->units, at},
                                   std::move(landing));
            if (!write_oldest()) break;
          } else {
            (*store)->DecideAsync({flight->key, *policy, event->cost, at}, std::move(landing));
          }
        }
        // Every callback must land before `mu` and `landed` go out of scope. The lines
        // before a bad one are still written; after a store error nothing more is.
        while (!window.empty()) {
          if (status == kExitAllowed) {
            write_oldest();
          } else {
            wait_for(*window.front());
            window.pop_front();
          }
        }
        if (bad_line && status == kExitAllowed) {
          progress.Clear();
          status = fail(*bad_line);
        }
        progress.Clear();
        if (reader.failed()) status = fail(fmt::format("reading {} failed", flags->input));
        if (std::fflush(out) != 0 || std::ferror(out)) {
          status = fail(fmt::format("writing {} failed: {}", flags->output, std::strerror(errno)));
        }
        if (out != stdout) std::fclose(out);
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        fmt::print(stderr, "{}", summary.Render(policy->ToString(), flags->top, seconds));
        const StoreStats stats = (*store)->Stats();
        if (stats.evictions > 0) {
          fmt::print(stderr,
                     "warning: the store evicted {} live keys to stay under max_keys; "
                     "raise it (e.g. --store 'memory://?max_keys=10000000') for exact "
                     "results\n",
                     stats.evictions);
        }
        return status;
      }};
}

}  // namespace floodgate::cli
