#pragma once
// dcp::communicator — the host control plane the runtime needs from a distributed engine: rank,
// size, split by colour and key, and an all-gather of a few integers. dcp::comm_error is how an
// adapter reports a failed backend call.

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "dcp/error.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// A backend call failed (an MPI error class, an ncclResult_t, an in-process fault). The message
/// names the call and the code; both are also kept for programs that branch on them.
class comm_error : public error {
 public:
  comm_error(std::string call, std::int64_t code, const std::string& detail = {})
      : error(describe(call, code, detail)), call_(std::move(call)), code_(code), detail_(detail) {}

  /// The backend call that failed, e.g. "ncclCommSplit" or "MPI_Allgather".
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  /// The backend's return code, unchanged.
  [[nodiscard]] std::int64_t code() const noexcept { return code_; }
  /// What the adapter added about the failure (may be empty).
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

 private:
  [[nodiscard]] static std::string describe(const std::string& call, std::int64_t code,
                                            const std::string& detail) {
    std::string out = call + " failed with code " + std::to_string(code);
    if (!detail.empty()) out += ": " + detail;
    return out;
  }

  std::string call_;
  std::int64_t code_;
  std::string detail_;
};

namespace detail {
template <class T>
struct optional_value {};
template <class T>
struct optional_value<std::optional<T>> {
  using type = T;
};

/// Everything of `communicator` except that the split's result is itself a communicator (a
/// concept cannot name itself); the full concept checks that one level down.
template <class C>
concept communicator_operations =
    std::move_constructible<C> &&
    requires(const C& cc, C& c, std::span<const std::int64_t> mine, int color, int key) {
      { cc.rank() } -> std::integral;
      { cc.size() } -> std::integral;
      { c.all_gather(mine) } -> std::same_as<std::vector<std::int64_t>>;
      typename optional_value<std::remove_cvref_t<decltype(c.split(color, key))>>::type;
    };
}  // namespace detail

/// The communicator a split of C produces (it need not be C).
template <class C>
using split_result_t = typename detail::optional_value<
    std::remove_cvref_t<decltype(std::declval<C&>().split(0, 0))>>::type;

/// A group of processes that can agree on small host-side values.
///
/// Requirements on `const C& cc`, `C& c`, `std::span<const std::int64_t> mine`, `int color, key`:
///  1. `cc.rank()` and `cc.size()` -> integral, with 0 <= rank < size.
///  2. `c.all_gather(mine)` -> `std::vector<std::int64_t>`: collective; every rank passes the same
///     count; the result holds size * count values, rank-major (rank 0's values first).
///  3. `c.split(color, key)` -> `std::optional<C2>` where C2 has the operations 1-3: collective
///     over c; ranks with the same non-negative colour form one group, ranked by (key, rank in
///     c); a negative colour means "not a member" and gives nullopt.
///  4. C is move-constructible.
///  5. Semantics: every rank calls the collectives in the same order; thread-compatible, not
///     thread-safe (NCCL and torchcomms are not); a failed backend call throws comm_error.
/// Models: in_process_communicator (dcp/runtime/in_process.hpp). Adapters for MPI and NCCL wrap
/// the engine's handle rather than specialising anything on it.
template <class C>
concept communicator =
    detail::communicator_operations<C> && detail::communicator_operations<split_result_t<C>>;

}  // namespace dcp::inline DCP_ABI_NAMESPACE
