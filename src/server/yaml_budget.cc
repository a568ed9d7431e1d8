// YAML counted from the parser's events before yaml-cpp builds it (docs/security.md).

#include "server/yaml_budget.h"

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include <istream>
#include <optional>
#include <streambuf>
#include <vector>

namespace floodgate::server {

namespace {

// The text as a stream without a copy (yaml-cpp's parser reads a std::istream).
class ViewBuffer : public std::streambuf {
 public:
  explicit ViewBuffer(std::string_view text) {
    char* begin = const_cast<char*>(text.data());  // only read: the get area
    setg(begin, begin, begin + text.size());
  }
};

int LineOf(const YAML::Mark& mark) { return mark.line >= 0 ? mark.line + 1 : 0; }

// Sums the nodes of a document as its events come: a collection's size is known at its
// end, so an anchor's is known by the time any alias may name it, and an alias adds it
// without walking anything. Records the first error and ignores what follows.
class NodeCounter final : public YAML::EventHandler {
 public:
  NodeCounter(const std::string& source, std::uint64_t used, std::uint64_t max)
      : source_(source), used_(used), max_(max) {}

  const absl::Status& status() const { return status_; }
  std::uint64_t used() const { return used_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnAnchor(const YAML::Mark&, const std::string& name) override { anchor_name_ = name; }

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    static const std::string kNull = "~";
    Leaf(mark, anchor, &kNull, 1);
  }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf(mark, anchor, &value, 1);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = anchors_.find(anchor);
    if (!status_.ok() || it == anchors_.end()) return;  // yaml-cpp refuses unknown anchors
    const Anchor& named = it->second;
    if (named.open) {
      return Fail(mark,
                  fmt::format("alias *{} is inside the node its anchor names: a loop", named.name));
    }
    Leaf(mark, 0, named.scalar ? &*named.scalar : nullptr, named.nodes, &named);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(mark, anchor, Frame::Kind::kSequence);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(mark, anchor, Frame::Kind::kMap);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapEnd() override { Close(); }

 private:
  struct Anchor {
    std::string name;
    bool open = true;
    std::uint64_t nodes = 0;
    std::optional<std::string> scalar;  // an anchored scalar, which may be used as a key
  };
  struct Frame {
    enum class Kind { kSequence, kMap } kind;
    YAML::anchor_t anchor = 0;
    std::uint64_t nodes = 0;  // below it: the collection itself is charged to its parent
    bool expect_key = true;
    absl::flat_hash_map<std::string, int> keys;  // a map's scalar keys, and their lines
  };

  void Fail(const YAML::Mark& mark, std::string_view what) {
    if (status_.ok()) {
      status_ = absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_, LineOf(mark), what));
    }
  }

  // Every node starts here: in a mapping, every other one is a key (`text` when scalar).
  void Start(const YAML::Mark& mark, const std::string* text) {
    if (stack_.empty() || stack_.back().kind != Frame::Kind::kMap) return;
    Frame& map = stack_.back();
    const bool is_key = map.expect_key;
    map.expect_key = !is_key;
    if (!is_key || text == nullptr) return;  // a value, or a key no schema reads
    const auto [it, inserted] = map.keys.try_emplace(*text, LineOf(mark));
    if (!inserted) {
      Fail(mark, fmt::format("key \"{}\" given twice in one mapping (first on line {})", *text,
                             it->second));
    }
  }

  void Charge(const YAML::Mark& mark, std::uint64_t nodes, const Anchor* alias) {
    used_ += nodes;
    if (!stack_.empty()) stack_.back().nodes += nodes;
    if (used_ <= max_) return;
    Fail(mark, alias == nullptr
                   ? fmt::format("more than {} YAML nodes in one config (docs/security.md)", max_)
                   : fmt::format("more than {} YAML nodes in one config once aliases are "
                                 "expanded: *{} repeats {} (docs/security.md)",
                                 max_, alias->name, alias->nodes));
  }

  void Leaf(const YAML::Mark& mark, YAML::anchor_t anchor, const std::string* text,
            std::uint64_t nodes, const Anchor* alias = nullptr) {
    if (!status_.ok()) return;
    Start(mark, text);
    Charge(mark, nodes, alias);
    if (anchor != 0) {
      anchors_[anchor] = {anchor_name_, false, nodes,
                          text ? std::optional<std::string>(*text) : std::nullopt};
    }
  }

  void Open(const YAML::Mark& mark, YAML::anchor_t anchor, Frame::Kind kind) {
    if (!status_.ok()) return;
    Start(mark, nullptr);
    Charge(mark, 1, nullptr);
    if (anchor != 0) anchors_[anchor] = {anchor_name_, true, 0, std::nullopt};
    stack_.push_back({kind, anchor});
  }

  void Close() {
    if (!status_.ok() || stack_.empty()) return;
    Frame done = std::move(stack_.back());
    stack_.pop_back();
    // Its nodes were charged as they came; what its parent holds grows by as many.
    if (!stack_.empty()) stack_.back().nodes += done.nodes;
    if (done.anchor != 0) {
      Anchor& anchor = anchors_[done.anchor];
      anchor.open = false;
      anchor.nodes = done.nodes + 1;  // with the collection itself
    }
  }

  const std::string& source_;
  std::uint64_t used_;
  const std::uint64_t max_;
  absl::Status status_;
  std::string anchor_name_;  // the last &name seen: the next anchored node's
  absl::flat_hash_map<YAML::anchor_t, Anchor> anchors_;
  std::vector<Frame> stack_;
};

}  // namespace

absl::Status YamlBudget::Charge(std::string_view text, const std::string& source) {
  ViewBuffer buffer(text);
  std::istream stream(&buffer);
  NodeCounter counter(source, used_, max_nodes_);
  try {
    YAML::Parser parser(stream);
    parser.HandleNextDocument(counter);
  } catch (const YAML::Exception&) {
    // Not YAML: the caller's YAML::Load says so in its words.
  }
  if (!counter.status().ok()) return counter.status();
  used_ = counter.used();
  return absl::OkStatus();
}

}  // namespace floodgate::server
