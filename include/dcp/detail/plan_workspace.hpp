#pragma once
// plan_workspace: the planner's batch-sized arrays, kept from one plan to the next.
//
// A plan of n samples fills arrays of n elements (the samples in canonical order, their shapes,
// sort keys, the duplicate-id table, the lists and tables the solver schedules from). Allocated
// afresh, each is mapped and faulted
// in afresh on every plan once it is larger than the allocator keeps (glibc maps blocks above
// 32 MB on their own and returns its heap's top above 64 MB): on a 10M-sample batch that was
// most of the planning time. A DataCentricScheduler owns one workspace; the arrays of a plan are
// taken from it (an empty vector that keeps the capacity an earlier plan gave it) and given
// back when the plan is done, so the next plan of a like batch writes into memory it already
// has. Buffers are vectors, so no container's type changes. Only buffers of 32 MiB or more are
// kept (a batch of about 600K samples or more: the allocator keeps smaller ones itself). One
// plan uses the workspace at a time (a plan that finds it in use allocates as before); it holds
// at most a few buffers per element type, so what it keeps is bounded by the largest plans'
// arrays; a plan asks for the length it needs and gets the smallest kept buffer that holds it,
// so arrays of one element type but different lengths find theirs again.

#include <algorithm>
#include <any>
#include <cstddef>
#include <limits>
#include <mutex>
#include <typeindex>
#include <utility>
#include <vector>

#include "dcp/config.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE::detail {

class plan_workspace {
 public:
  /// The batch size from which a plan uses the workspace: about where its largest array (the
  /// samples, 56 bytes each) nears the 32 MiB kept from (below, a plan leaves its memory to the
  /// allocator alone, and its order of frees and faults is as without a workspace).
  static constexpr std::size_t from_samples = std::size_t{1} << 19;
  /// The default of keep_from: see below.
  static constexpr std::size_t default_keep_from = std::size_t{32} << 20;

  /// A workspace that keeps buffers of `keep_from` bytes or more.
  explicit plan_workspace(std::size_t keep_from = default_keep_from) noexcept
      : keep_from_(keep_from) {}

  /// An empty vector for `at_least` elements of T: of the buffers kept for T, the smallest that
  /// holds them, else the largest (none where nothing is kept), so that buffers of one element
  /// type but different lengths each find theirs again.
  template <class T>
  [[nodiscard]] std::vector<T> take(std::size_t at_least) {
    auto& kept = shelf(typeid(T));
    if (kept.empty()) return {};
    constexpr auto most_bytes = std::numeric_limits<std::size_t>::max();
    const std::size_t need = at_least > most_bytes / sizeof(T) ? most_bytes : at_least * sizeof(T);
    const auto pick =
        std::min_element(kept.begin(), kept.end(), [need](const entry& a, const entry& b) {
          const bool a_holds = a.bytes >= need;
          const bool b_holds = b.bytes >= need;
          if (a_holds != b_holds) return a_holds;
          return a_holds ? a.bytes < b.bytes : a.bytes > b.bytes;
        });
    auto out = std::move(std::any_cast<std::vector<T>&>(pick->buffer));
    kept_bytes_ -= pick->bytes;
    kept.erase(pick);
    return out;
  }

  /// Keeps `buffer`'s memory for a later take<T>() where it is `keep_from` bytes or more; of more
  /// than `most` buffers of one type the smallest is let go.
  template <class T>
  void give(std::vector<T>&& buffer) {
    const std::size_t bytes = buffer.capacity() * sizeof(T);
    if (bytes == 0 || bytes < keep_from_) {
      std::vector<T>{}.swap(buffer);  // freed now, as the allocator would free it
      return;
    }
    buffer.clear();
    auto& kept = shelf(typeid(T));
    kept.push_back({bytes, std::any(std::move(buffer))});
    kept_bytes_ += bytes;
    if (kept.size() <= most) return;
    const auto smallest = std::min_element(
        kept.begin(), kept.end(), [](const entry& a, const entry& b) { return a.bytes < b.bytes; });
    kept_bytes_ -= smallest->bytes;
    kept.erase(smallest);
  }

  /// Held by the plan that uses the workspace.
  [[nodiscard]] std::mutex& in_use() noexcept { return in_use_; }

  /// Lets every kept buffer go.
  void release() noexcept {
    shelves_.clear();
    kept_bytes_ = 0;
  }

  /// Bytes of the buffers kept.
  [[nodiscard]] std::size_t kept_bytes() const noexcept { return kept_bytes_; }

 private:
  static constexpr std::size_t most = 8;  // buffers per element type
  // Smaller buffers are left to the allocator, which keeps and reuses them itself: glibc serves
  // blocks below 32 MiB from its heap (once a block of that size has been freed) and maps larger
  // ones afresh on every allocation. Keeping the small ones too would stop it from raising that
  // threshold, and every block above its initial 128 KiB would be mapped afresh instead (a 100K
  // plan took 14 % longer so). Tests keep everything (0).
  std::size_t keep_from_;

  struct entry {
    std::size_t bytes;  // its capacity
    std::any buffer;    // a std::vector<T>
  };

  std::vector<entry>& shelf(std::type_index type) {
    for (auto& [t, kept] : shelves_)
      if (t == type) return kept;
    return shelves_.emplace_back(type, std::vector<entry>{}).second;
  }

  std::vector<std::pair<std::type_index, std::vector<entry>>> shelves_;
  std::size_t kept_bytes_ = 0;
  std::mutex in_use_;
};

/// A buffer taken from a workspace (or a plain empty vector without one), given back when the
/// holder is destroyed.
template <class T>
class kept_buffer {
 public:
  /// For `at_least` elements (plan_workspace::take).
  kept_buffer(plan_workspace* workspace, std::size_t at_least) : workspace_(workspace) {
    if (workspace_ != nullptr) buffer_ = workspace_->take<T>(at_least);
  }
  kept_buffer(const kept_buffer&) = delete;
  kept_buffer& operator=(const kept_buffer&) = delete;
  ~kept_buffer() {
    if (workspace_ != nullptr) workspace_->give(std::move(buffer_));
  }
  [[nodiscard]] std::vector<T>& operator*() noexcept { return buffer_; }
  [[nodiscard]] std::vector<T>* operator->() noexcept { return &buffer_; }

 private:
  plan_workspace* workspace_;
  std::vector<T> buffer_;
};

}  // namespace dcp::inline DCP_ABI_NAMESPACE::detail
