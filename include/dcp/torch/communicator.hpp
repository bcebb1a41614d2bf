#pragma once
// dcp::c10d_communicator: dcp::communicator over a c10d ProcessGroup (libtorch's distributed
// engine; Gloo on CPU). Splits create ProcessGroupGloo instances over a PrefixStore of the
// world's store and are cached by their member list, so a group that exists is never built
// twice. Every failure of a c10d or Gloo call throws dcp::comm_error naming the call. Link
// dcp::torch (libtorch, USE_C10D_GLOO and Gloo's headers).
//
// Not in namespace dcp::torch on purpose: a nested `torch` inside dcp would shadow ::torch for
// every `using namespace dcp;`. Code in this header writes ::torch:: and ::c10d:: in full.

#include <ATen/ATen.h>
#include <algorithm>
#include <c10/util/Exception.h>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "dcp/error.hpp"
#include "dcp/runtime/communicator.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// comm_error codes of c10d_communicator (c10d reports failures as exceptions, not codes).
inline constexpr std::int64_t c10d_backend_failure = 1;  ///< a c10d or Gloo call threw
inline constexpr std::int64_t c10d_count_mismatch = 2;   ///< ranks passed different counts
inline constexpr std::int64_t c10d_wrong_result = 3;     ///< the backend returned a wrong shape

/// How c10d_communicator builds its ProcessGroupGloo instances (the world's, with the store
/// constructor, and every split's).
struct c10d_options {
  /// Gloo's transport binds to this host name or address; empty: Gloo's default device (this
  /// machine's host name, falling back to the loopback address). Use "127.0.0.1" when every
  /// rank runs on one machine, the node's address across machines.
  std::string hostname = "127.0.0.1";
  /// Timeout of every collective and of group creation (the store's rendezvous).
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Gloo worker threads per process group.
  int threads = 1;
  /// Prefix of the store keys of the groups splits create. Two world communicators over one
  /// store need different names, or their groups' keys collide.
  std::string name = "dcp";
};

/// One rank's handle on a c10d process group. Models dcp::communicator.
///
/// - `rank()`, `size()`: the process group's.
/// - `all_gather(values)`: two ProcessGroupGloo::allgather calls of int64 tensors: the counts
///   first (unequal counts throw comm_error(c10d_count_mismatch) on every rank, naming each
///   rank's count, and leave the group usable), then the values; rank-major.
/// - `split(color, key)`: all-gathers (colour, key), orders the ranks of each colour by (key,
///   rank), and makes a ProcessGroupGloo for this rank's colour over
///   PrefixStore("<name>/s<n>/c<colour>", store), n counting this communicator's splits (the same
///   on every rank, splits being collective), so names never repeat. The member list (in world
///   ranks) is looked up first in a cache shared by the world communicator, its copies and
///   everything split from it: a group made before is returned again instead of built (creating
///   a Gloo group is a rendezvous through the store, tens of milliseconds). Every member of a
///   group finds the same list in its cache, since all of them made it together. A negative
///   colour gives nullopt.
/// - Copies share their state (process group, split count, cache); they are the same handle.
/// - Semantics as dcp::communicator: collectives in the same order on every rank; not thread-safe.
///   Failures (c10::Error, a std::exception from Gloo, a timeout) throw comm_error with the call
///   ("ProcessGroupGloo::allgather", "ProcessGroupGloo" for a group's creation), a code above and
///   the backend's message.
///
/// process_group() gives the group for the framework's own collectives (sequence-parallel
/// exchanges, the gradient all-reduce); store() the world's store.
class c10d_communicator {
 public:
  using process_group_ptr = c10::intrusive_ptr<::c10d::ProcessGroup>;
  using store_ptr = c10::intrusive_ptr<::c10d::Store>;

  /// A new ProcessGroupGloo of `size` ranks over PrefixStore("<name>/world", store) (collective:
  /// every rank of the world constructs it with its rank). Throws dcp::error for a rank outside [0,
  /// size), comm_error when the group cannot be made (e.g. a rank never joins within
  /// options.timeout).
  c10d_communicator(store_ptr store, int rank, int size, c10d_options options = {}) {
    if (!store) throw error("dcp::c10d_communicator: no store given");
    if (size < 1 || rank < 0 || rank >= size)
      throw error("dcp::c10d_communicator: rank " + std::to_string(rank) + " of size " +
                  std::to_string(size) + ", must be 0 <= rank < size");
    auto world_store = c10::make_intrusive<::c10d::PrefixStore>(options.name + "/world", store);
    init(std::move(store), make_gloo(world_store, rank, size, options), std::move(options));
  }

  /// A handle on an existing process group (of any backend, e.g. the framework's world group)
  /// and the store its ranks share; splits make ProcessGroupGloo instances over that store.
  c10d_communicator(store_ptr store, process_group_ptr group, c10d_options options = {}) {
    if (!store) throw error("dcp::c10d_communicator: no store given");
    if (!group) throw error("dcp::c10d_communicator: no process group given");
    init(std::move(store), std::move(group), std::move(options));
  }

  [[nodiscard]] int rank() const noexcept { return node_->rank; }
  [[nodiscard]] int size() const noexcept { return node_->size; }
  [[nodiscard]] const process_group_ptr& process_group() const noexcept { return node_->group; }
  [[nodiscard]] const store_ptr& store() const noexcept { return shared_->store; }
  /// This group's store-key prefix ("dcp" for the world, "dcp/s0/c1" for a split of it, ...).
  [[nodiscard]] const std::string& name() const noexcept { return node_->name; }
  /// The world ranks of this group's members, by group rank.
  [[nodiscard]] const std::vector<std::int64_t>& world_ranks() const noexcept {
    return node_->world_ranks;
  }
  /// Process groups splits have built / found in the cache, on this rank, over the whole tree.
  [[nodiscard]] std::int64_t groups_created() const noexcept { return shared_->created; }
  [[nodiscard]] std::int64_t groups_reused() const noexcept { return shared_->reused; }

  /// size() * mine.size() values, rank-major (see the class comment).
  [[nodiscard]] std::vector<std::int64_t> all_gather(std::span<const std::int64_t> mine) {
    const std::int64_t count[1] = {static_cast<std::int64_t>(mine.size())};
    const auto counts = gather(count);
    for (std::size_t r = 0; r < counts.size(); ++r)
      if (counts[r] != count[0]) {
        std::string detail = "all_gather needs the same count on every rank; counts by rank:";
        for (std::size_t s = 0; s < counts.size(); ++s)
          detail += (s ? ", " : " ") + std::to_string(counts[s]);
        throw comm_error("ProcessGroupGloo::allgather", c10d_count_mismatch, detail);
      }
    if (mine.empty()) return {};
    return gather(mine);
  }

  /// See the class comment. Collective over this communicator.
  [[nodiscard]] std::optional<c10d_communicator> split(int color, int key) {
    const std::int64_t mine[2] = {color, key};
    const auto all = all_gather(mine);
    const std::string name =
        node_->name + "/s" + std::to_string(node_->splits++) + "/c" + std::to_string(color);
    if (color < 0) return std::nullopt;
    // (key, parent rank) of every rank with this colour, in group order.
    std::vector<std::pair<std::int64_t, std::int64_t>> order;
    for (std::int64_t r = 0; r < node_->size; ++r)
      if (all[static_cast<std::size_t>(2 * r)] == color)
        order.emplace_back(all[static_cast<std::size_t>(2 * r + 1)], r);
    std::sort(order.begin(), order.end());
    auto child = std::make_shared<node>();
    child->name = name;
    child->size = static_cast<int>(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (order[i].second == node_->rank) child->rank = static_cast<int>(i);
      child->world_ranks.push_back(node_->world_ranks[static_cast<std::size_t>(order[i].second)]);
    }
    const auto cached = shared_->groups.find(child->world_ranks);
    if (cached != shared_->groups.end()) {
      child->group = cached->second;
      ++shared_->reused;
    } else {
      auto store = c10::make_intrusive<::c10d::PrefixStore>(name, shared_->store);
      child->group = make_gloo(store, child->rank, child->size, shared_->options);
      shared_->groups.emplace(child->world_ranks, child->group);
      ++shared_->created;
    }
    return c10d_communicator(shared_, std::move(child));
  }

 private:
  struct node {
    process_group_ptr group;
    std::string name;
    std::vector<std::int64_t> world_ranks;
    int rank = 0;
    int size = 0;
    std::int64_t splits = 0;
  };
  struct tree {
    store_ptr store;
    c10d_options options;
    std::map<std::vector<std::int64_t>, process_group_ptr> groups;  // by member list
    std::int64_t created = 0;
    std::int64_t reused = 0;
  };

  c10d_communicator(std::shared_ptr<tree> shared, std::shared_ptr<node> n)
      : shared_(std::move(shared)), node_(std::move(n)) {}

  void init(store_ptr store, process_group_ptr group, c10d_options options) {
    shared_ = std::make_shared<tree>();
    shared_->store = std::move(store);
    shared_->options = std::move(options);
    node_ = std::make_shared<node>();
    node_->rank = group->getRank();
    node_->size = group->getSize();
    node_->name = shared_->options.name;
    for (std::int64_t r = 0; r < node_->size; ++r) node_->world_ranks.push_back(r);
    node_->group = std::move(group);
    shared_->groups.emplace(node_->world_ranks, node_->group);
  }

  /// Runs `fn`, turning whatever c10d or Gloo throws into comm_error(call, c10d_backend_failure).
  template <class F>
  static auto guarded(const char* call, F&& fn) {
    try {
      return fn();
    } catch (const comm_error&) {
      throw;
    } catch (const c10::Error& e) {
      throw comm_error(call, c10d_backend_failure, e.what_without_backtrace());
    } catch (const std::exception& e) {
      throw comm_error(call, c10d_backend_failure, e.what());
    }
  }

  [[nodiscard]] static process_group_ptr make_gloo(const store_ptr& store, int rank, int size,
                                                   const c10d_options& options) {
    return guarded("ProcessGroupGloo", [&]() -> process_group_ptr {
      auto gloo = ::c10d::ProcessGroupGloo::Options::create(options.timeout);
      gloo->devices.push_back(
          options.hostname.empty()
              ? ::c10d::ProcessGroupGloo::createDefaultDevice()
              : ::c10d::ProcessGroupGloo::createDeviceForHostname(options.hostname));
      gloo->threads = std::max(1, options.threads);
      return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, gloo);
    });
  }

  /// One allgather of int64 values (the same count on every rank, checked by the caller).
  [[nodiscard]] std::vector<std::int64_t> gather(std::span<const std::int64_t> mine) {
    return guarded("ProcessGroupGloo::allgather", [&] {
      const auto count = static_cast<std::int64_t>(mine.size());
      auto input = at::empty({count}, at::TensorOptions().dtype(at::kLong));
      std::memcpy(input.data_ptr<std::int64_t>(), mine.data(), mine.size() * sizeof(std::int64_t));
      std::vector<std::vector<at::Tensor>> outputs(1);
      for (int r = 0; r < node_->size; ++r) outputs[0].push_back(at::empty_like(input));
      std::vector<at::Tensor> inputs{input};
      node_->group->allgather(outputs, inputs)->wait();
      std::vector<std::int64_t> out;
      out.reserve(static_cast<std::size_t>(node_->size) * mine.size());
      for (const auto& t : outputs.at(0)) {
        if (t.numel() != count || t.scalar_type() != at::kLong)
          throw comm_error("ProcessGroupGloo::allgather", c10d_wrong_result,
                           "a rank's part has " + std::to_string(t.numel()) + " values, expected " +
                               std::to_string(count));
        const auto contiguous = t.contiguous();
        const auto* data = contiguous.data_ptr<std::int64_t>();
        out.insert(out.end(), data, data + count);
      }
      if (outputs[0].size() != static_cast<std::size_t>(node_->size))
        throw comm_error("ProcessGroupGloo::allgather", c10d_wrong_result,
                         std::to_string(outputs[0].size()) + " parts for " +
                             std::to_string(node_->size) + " ranks");
      return out;
    });
  }

  std::shared_ptr<tree> shared_;
  std::shared_ptr<node> node_;
};

static_assert(dcp::communicator<c10d_communicator>);

}  // namespace dcp::inline DCP_ABI_NAMESPACE
