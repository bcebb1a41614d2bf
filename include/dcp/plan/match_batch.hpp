#pragma once
// Is a plan read from elsewhere the plan of this batch? validate_plan checks that a plan can run
// a batch (every id once, groups inside the cluster), but a plan made for another batch with
// the same ids (the same lengths file reversed, a batch drawn with another seed) passes it and
// is then judged on samples it was not made for. A dcp.step_plan/1 document states each
// micro-step's tokens; check_plan_matches_batch compares them, and the ids, with the batch and
// names what differs.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dcp/plan/json_reader.hpp"
#include "dcp/plan/step_plan.hpp"
#include "dcp/spec/sample.hpp"

namespace dcp::inline DCP_ABI_NAMESPACE {

/// The "tokens" each micro-step of a dcp.step_plan/1 document states, in document order;
/// nullopt where a micro-step leaves the field out (it is optional for readers). Throws
/// invalid_plan, as read_plan_json does, when the document or a stated value is malformed.
[[nodiscard]] inline std::vector<std::optional<std::int64_t>> read_stated_tokens(
    std::string_view text, std::string_view source = "<plan>") {
  const auto doc = json::parse(text, source);
  const std::string where(source);
  std::vector<std::optional<std::int64_t>> stated;
  if (doc.type != json::value::kind::object || !doc.has("micro_steps")) return stated;
  const auto& steps = doc.at("micro_steps", where);
  for (std::size_t n = 0; n < steps.items.size(); ++n) {
    const auto& s = steps.items[n];
    if (s.type == json::value::kind::object && s.has("tokens")) {
      const std::string path = where + ".micro_steps[" + std::to_string(n) + "].tokens";
      stated.emplace_back(json::as<std::int64_t>(s.at("tokens", path), path));
    } else {
      stated.emplace_back(std::nullopt);
    }
  }
  return stated;
}

namespace detail {

/// "a, b, c, ... (n in all)": the first few of `ids`, for messages.
[[nodiscard]] inline std::string listed_ids(std::span<const std::uint64_t> ids,
                                            std::size_t shown = 5) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < shown; ++i)
    out += (i ? ", " : "") + std::to_string(ids[i]);
  if (ids.size() > shown) out += ", ... (" + std::to_string(ids.size()) + " in all)";
  return out;
}

}  // namespace detail

/// Throws invalid_plan unless `plan` was made for `batch`: every sample id of the plan is in the
/// batch and every sample of the batch in the plan, and each micro-step's stated tokens
/// (`stated_tokens[n]` for plan.micro_steps[n]; nullopt, or a shorter list, skips the check)
/// equal the sum of its samples' tokens in the batch. The message names the first few
/// micro-steps that differ, with their sample ids and the plan's tokens against the batch's,
/// the first few ids on either side only, and how many differ in all. `plan_name` starts it.
/// Repeated ids and the cluster are validate_plan's to check, not this function's.
inline void check_plan_matches_batch(const step_plan& plan,
                                     std::span<const std::optional<std::int64_t>> stated_tokens,
                                     std::span<const sample> batch,
                                     std::string_view plan_name = "the plan") {
  std::vector<std::pair<std::uint64_t, std::int64_t>> tokens_of;  // (id, tokens), by id
  tokens_of.reserve(batch.size());
  for (const auto& s : batch) tokens_of.emplace_back(s.id, s.tokens);
  std::sort(tokens_of.begin(), tokens_of.end());
  const auto find = [&](std::uint64_t id) -> const std::pair<std::uint64_t, std::int64_t>* {
    const auto it =
        std::lower_bound(tokens_of.begin(), tokens_of.end(), id,
                         [](const auto& entry, std::uint64_t key) { return entry.first < key; });
    return it != tokens_of.end() && it->first == id ? &*it : nullptr;
  };

  constexpr std::size_t shown = 3;
  std::vector<std::uint64_t> not_in_batch;
  std::vector<std::uint64_t> planned_ids;
  std::string token_details;
  std::size_t token_mismatches = 0;
  for (std::size_t n = 0; n < plan.micro_steps.size(); ++n) {
    const auto& m = plan.micro_steps[n];
    std::int64_t batch_tokens = 0;
    bool all_known = true;
    for (const auto id : m.sample_ids) {
      planned_ids.push_back(id);
      if (const auto* entry = find(id)) {
        batch_tokens += entry->second;
      } else {
        not_in_batch.push_back(id);
        all_known = false;
      }
    }
    if (!all_known || n >= stated_tokens.size() || !stated_tokens[n]) continue;
    if (*stated_tokens[n] == batch_tokens) continue;
    if (++token_mismatches <= shown)
      token_details += std::string(token_mismatches > 1 ? "; " : "") + "micro_steps[" +
                       std::to_string(n) + "] (sample" + (m.sample_ids.size() == 1 ? " " : "s ") +
                       detail::listed_ids(m.sample_ids, 3) +
                       "): " + std::to_string(*stated_tokens[n]) + " tokens in the plan, " +
                       std::to_string(batch_tokens) + " in the batch";
  }
  std::sort(planned_ids.begin(), planned_ids.end());
  std::vector<std::uint64_t> not_in_plan;
  for (const auto& [id, tokens] : tokens_of)
    if (!std::binary_search(planned_ids.begin(), planned_ids.end(), id)) not_in_plan.push_back(id);
  if (token_mismatches == 0 && not_in_batch.empty() && not_in_plan.empty()) return;

  std::string message = std::string(plan_name) + " was not made for this batch";
  std::string sep = ": ";
  if (token_mismatches > 0) {
    message += sep + std::to_string(token_mismatches) + " of " +
               std::to_string(plan.micro_steps.size()) +
               " micro-steps state other tokens than their samples have in the batch (" +
               token_details + (token_mismatches > shown ? "; ..." : "") + ")";
    sep = "; ";
  }
  if (!not_in_batch.empty()) {
    message += sep + std::to_string(not_in_batch.size()) + " sample id" +
               (not_in_batch.size() == 1 ? " " : "s ") + "of the plan not in the batch (" +
               detail::listed_ids(not_in_batch) + ")";
    sep = "; ";
  }
  if (!not_in_plan.empty()) {
    message += sep + std::to_string(not_in_plan.size()) + " of the batch's " +
               std::to_string(batch.size()) + " samples in no micro-step (" +
               detail::listed_ids(not_in_plan) + ")";
  }
  throw invalid_plan(message);
}

}  // namespace dcp::inline DCP_ABI_NAMESPACE
