#pragma once
// The "framework" the libtorch examples train: a small Llama-style decoder in libtorch (float64,
// CPU), its variable-length data drawn from the Wikipedia length profile, and a
// sequence-parallel forward/backward over any c10d process group. Nothing here knows dcp;
// tiny_llama_dcp.hpp adapts it.
//
// Model: token embedding; `layers` blocks of  x += Wo attn(RoPE(Wq n(x)), RoPE(Wk n(x)), Wv n(x))
// and  x += W2 (silu(W1 n(x)) * W3 n(x))  with n = RMSNorm; a final RMSNorm and an output head;
// loss_i = cross-entropy of position i predicting token i + 1. Causal attention within each
// sequence: several sequences packed into one micro-batch see only themselves (block-diagonal
// causal mask).
//
// Sequence parallelism (all-gather context parallelism): each member of a group of d ranks holds
// a contiguous chunk of every sequence's positions; per layer the members all-gather the rotated
// keys and values of their chunks (gather_rows, forward) and send the key and value gradients
// back to their owners (backward: an all-to-all and a sum, a reduce-scatter Gloo lacks). Every
// per-token number is the same whatever the group; only the order of sums differs.
//
// Activation checkpointing per layer: keep everything; drop the attention probabilities
// (attention recomputes them in backward from q and K); or keep only the layer's input
// (checkpointed_layer: forward without autograd, backward reruns the layer, all-gather included).

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <algorithm>
#include <atomic>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tiny {

inline constexpr std::int64_t vocab = 64;
inline constexpr std::int64_t dim = 32;
inline constexpr std::int64_t heads = 4;
inline constexpr std::int64_t head_dim = dim / heads;
inline constexpr std::int64_t ffn = 64;
inline constexpr int layers = 2;
inline constexpr double rope_base = 10000.0;
inline constexpr double norm_epsilon = 1e-6;
/// Tokens [vocab - key_tokens, vocab) only ever open a sequence; they set its stride.
inline constexpr std::int64_t key_tokens = 8;
inline constexpr std::int64_t body_tokens = vocab - key_tokens;

using process_group = c10::intrusive_ptr<::c10d::ProcessGroup>;

/// A ProcessGroupGloo of `size` ranks over `store` on the loopback device (every rank on this
/// machine), one worker thread.
inline process_group gloo_group(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                int size) {
  auto options = ::c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
  options->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->threads = 1;
  return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, options);
}

// ---- data -----------------------------------------------------------------------------------

/// splitmix64: seedable and identical on every platform (std:: distributions are not).
class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::int64_t below(std::int64_t n) noexcept {
    return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n));
  }

 private:
  std::uint64_t state_;
};

/// One training sequence: position i reads tokens[i] and predicts tokens[i + 1].
struct sequence {
  std::vector<std::int64_t> tokens;  ///< length() + 1 tokens
  [[nodiscard]] std::int64_t length() const noexcept {
    return static_cast<std::int64_t>(tokens.size()) - 1;
  }
};
using batch = std::vector<sequence>;  ///< a global batch; a sequence's id is its index

/// The measured Wikipedia document lengths (one per line; ../shared/data/wikipedia-lengths.txt).
/// Throws std::runtime_error naming the file when it cannot be read.
inline std::vector<std::int64_t> read_lengths(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::int64_t> out;
  std::int64_t value = 0;
  while (in >> value) out.push_back(value);
  if (out.empty()) throw std::runtime_error("tiny::read_lengths: no lengths in " + path);
  return out;
}

/// How Wikipedia lengths become toy lengths: a document of n tokens becomes a sequence of
/// ceil(n / divisor) tokens, at least min_length and at most max_length (the long tail is cut
/// where pretraining would cut a document into context windows).
struct length_scaling {
  std::int64_t divisor = 16;
  std::int64_t min_length = 2;
  std::int64_t max_length = 160;
  [[nodiscard]] std::int64_t operator()(std::int64_t document) const noexcept {
    return std::clamp<std::int64_t>((document + divisor - 1) / divisor, min_length, max_length);
  }
};

/// The batch of training step `step`: `count` documents drawn from `lengths`, scaled. A sequence
/// opens with a key token k; then each token is the previous one plus k's stride modulo the
/// body tokens, except one in ten, which is random: predicting it well needs attention.
inline batch make_batch(const std::vector<std::int64_t>& lengths, std::uint64_t seed,
                        std::int64_t step, std::size_t count, length_scaling scale = {}) {
  rng r(seed * 1000003u + static_cast<std::uint64_t>(step));
  batch out(count);
  for (auto& s : out) {
    const auto length = scale(
        lengths[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(lengths.size())))]);
    const auto key = body_tokens + r.below(key_tokens);
    const auto stride = key - body_tokens + 1;
    s.tokens.resize(static_cast<std::size_t>(length) + 1);
    s.tokens[0] = key;
    s.tokens[1] = r.below(body_tokens);
    for (std::size_t i = 2; i < s.tokens.size(); ++i)
      s.tokens[i] =
          r.uniform() < 0.1 ? r.below(body_tokens) : (s.tokens[i - 1] + stride) % body_tokens;
  }
  return out;
}

/// Tokens (= loss terms) of the sequences `ids` of `data`, or of all of it.
inline std::int64_t tokens_of(const batch& data, std::span<const std::uint64_t> ids) {
  std::int64_t n = 0;
  for (const auto id : ids) n += data.at(id).length();
  return n;
}
inline std::int64_t tokens_of(const batch& data) {
  std::int64_t n = 0;
  for (const auto& s : data) n += s.length();
  return n;
}

// ---- memory: a counting CPU allocator ---------------------------------------------------------

/// c10's CPU allocator with a count of the bytes it holds and the most it held since
/// reset_peak(). install() makes it the CPU allocator of the process (c10::SetCPUAllocator);
/// every tensor allocated afterwards is counted (parameters, activations, gradients, buffers
/// of the collectives). Thread-safe.
class counting_allocator final : public c10::Allocator {
 public:
  static counting_allocator& install() {
    static counting_allocator* const instance = [] {
      auto* made = new counting_allocator();  // lives as long as the tensors it made
      c10::SetCPUAllocator(made, /*priority=*/100);
      return made;
    }();
    return *instance;
  }

  c10::DataPtr allocate(std::size_t bytes) const override {
    void* data = bytes == 0 ? nullptr : c10::alloc_cpu(bytes);
    if (data != nullptr) record(data, bytes);
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  [[nodiscard]] std::int64_t live_bytes() const noexcept { return live_.load(); }
  [[nodiscard]] std::int64_t peak_bytes() const noexcept { return peak_.load(); }
  void reset_peak() noexcept { peak_.store(live_.load()); }

 private:
  counting_allocator() = default;

  void record(void* data, std::size_t bytes) const {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      sizes_[data] = bytes;
    }
    const auto live =
        live_.fetch_add(static_cast<std::int64_t>(bytes)) + static_cast<std::int64_t>(bytes);
    auto peak = peak_.load();
    while (live > peak && !peak_.compare_exchange_weak(peak, live)) {
    }
  }
  static void release(void* data) {
    if (data == nullptr) return;
    auto& self = install();
    std::size_t bytes = 0;
    {
      const std::lock_guard<std::mutex> lock(self.mutex_);
      const auto found = self.sizes_.find(data);
      if (found != self.sizes_.end()) {
        bytes = found->second;
        self.sizes_.erase(found);
      }
    }
    self.live_.fetch_sub(static_cast<std::int64_t>(bytes));
    c10::free_cpu(data);
  }

  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, std::size_t> sizes_;
  mutable std::atomic<std::int64_t> live_{0};
  mutable std::atomic<std::int64_t> peak_{0};
};

// ---- sequence-parallel layout of one micro-batch -----------------------------------------------

/// What the forward pass keeps of a layer for the backward pass.
enum class checkpointing {
  keep_all,            ///< every activation autograd saves, the attention probabilities included
  drop_probabilities,  ///< all but the attention probabilities (recomputed from q and K)
  keep_input_only,     ///< only the layer input: backward reruns the layer, all-gather included
};

inline const char* to_string(checkpointing c) noexcept {
  switch (c) {
    case checkpointing::keep_all:
      return "keep-all";
    case checkpointing::drop_probabilities:
      return "drop-probabilities";
    case checkpointing::keep_input_only:
      return "keep-input-only";
  }
  return "unknown";
}

/// A micro-batch on a group of `members` ranks, as seen by member `me`: the rows (positions)
/// every member holds, member-major then sequence by sequence, and what this member needs.
/// Held by the autograd functions (a capsule) for their backward passes.
struct micro_batch_layout : torch::CustomClassHolder {
  process_group group;  ///< null when the micro-batch runs on this rank alone
  int members = 1;
  int me = 0;
  std::vector<std::int64_t> rows;  ///< rows held by each member
  std::int64_t max_rows = 0;
  at::Tensor tokens;    ///< [local] this member's input tokens
  at::Tensor targets;   ///< [local] the tokens they predict
  at::Tensor cos, sin;  ///< [local, 1, head_dim / 2] RoPE of this member's positions
  at::Tensor mask;      ///< [local, all] 0 where a query may see a key, -inf elsewhere

  micro_batch_layout(const batch& data, std::span<const std::uint64_t> ids, process_group on)
      : group(std::move(on)) {
    if (group) {
      members = group->getSize();
      me = group->getRank();
    }
    // (sequence index in the micro-batch, position) of every row, member-major.
    std::vector<std::pair<std::int64_t, std::int64_t>> all;
    std::vector<std::int64_t> mine_tokens, mine_targets, mine_positions;
    std::int64_t first_mine = 0;
    for (int m = 0; m < members; ++m) {
      if (m == me) first_mine = static_cast<std::int64_t>(all.size());
      std::int64_t count = 0;
      for (std::size_t s = 0; s < ids.size(); ++s) {
        const auto& seq = data.at(ids[s]);
        const auto length = seq.length();
        for (auto i = length * m / members; i < length * (m + 1) / members; ++i, ++count) {
          all.emplace_back(static_cast<std::int64_t>(s), i);
          if (m == me) {
            mine_tokens.push_back(seq.tokens[static_cast<std::size_t>(i)]);
            mine_targets.push_back(seq.tokens[static_cast<std::size_t>(i + 1)]);
            mine_positions.push_back(i);
          }
        }
      }
      rows.push_back(count);
      max_rows = std::max(max_rows, count);
    }
    const auto local = static_cast<std::int64_t>(mine_tokens.size());
    const auto total = static_cast<std::int64_t>(all.size());
    const auto longs = at::TensorOptions().dtype(at::kLong);
    tokens = at::tensor(mine_tokens, longs).reshape({local});
    targets = at::tensor(mine_targets, longs).reshape({local});
    const auto doubles = at::TensorOptions().dtype(at::kDouble);
    const auto positions = at::tensor(mine_positions, longs).reshape({local, 1}).to(at::kDouble);
    const auto inverse_frequency = at::pow(
        rope_base, -at::arange(0, head_dim / 2, doubles) * (2.0 / static_cast<double>(head_dim)));
    const auto angles = positions * inverse_frequency.reshape({1, head_dim / 2});
    cos = at::cos(angles).reshape({local, 1, head_dim / 2});
    sin = at::sin(angles).reshape({local, 1, head_dim / 2});
    mask = at::full({local, total}, -INFINITY, doubles);
    auto view = mask.accessor<double, 2>();
    for (std::int64_t q = 0; q < local; ++q) {
      const auto [sequence_q, position_q] = all[static_cast<std::size_t>(first_mine + q)];
      for (std::int64_t k = 0; k < total; ++k)
        if (all[static_cast<std::size_t>(k)].first == sequence_q &&
            all[static_cast<std::size_t>(k)].second <= position_q)
          view[q][k] = 0.0;
    }
  }

  [[nodiscard]] std::int64_t local_rows() const noexcept {
    return rows[static_cast<std::size_t>(me)];
  }
};

inline const micro_batch_layout& layout_of(const at::IValue& capsule) {
  return *static_cast<const micro_batch_layout*>(capsule.toCapsule().get());
}

/// Forward: every member's rows of `local` [rows, width], all-gathered in member order (each
/// padded to max_rows for Gloo's equal-sized allgather). Backward: each member's share of the
/// gradient goes back to it (all-to-all) and is summed over the members: a reduce-scatter.
struct gather_rows : torch::autograd::Function<gather_rows> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& local,
                            const c10::intrusive_ptr<micro_batch_layout>& layout) {
    ctx->saved_data["layout"] = at::IValue::make_capsule(layout);
    const auto width = local.size(1);
    auto padded = at::zeros({layout->max_rows, width}, local.options());
    padded.narrow(0, 0, local.size(0)).copy_(local);
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int m = 0; m < layout->members; ++m) outputs[0].push_back(at::empty_like(padded));
    std::vector<at::Tensor> inputs{padded};
    layout->group->allgather(outputs, inputs)->wait();
    std::vector<at::Tensor> parts;
    for (int m = 0; m < layout->members; ++m)
      parts.push_back(outputs[0][static_cast<std::size_t>(m)].narrow(
          0, 0, layout->rows[static_cast<std::size_t>(m)]));
    return at::cat(parts, 0);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto& layout = layout_of(ctx->saved_data["layout"]);
    const auto& grad = grads[0];
    const auto width = grad.size(1);
    auto input = at::zeros({layout.members, layout.max_rows, width}, grad.options());
    std::int64_t offset = 0;
    for (int m = 0; m < layout.members; ++m) {
      const auto rows = layout.rows[static_cast<std::size_t>(m)];
      input[m].narrow(0, 0, rows).copy_(grad.narrow(0, offset, rows));
      offset += rows;
    }
    auto output = at::empty_like(input);
    std::vector<std::int64_t> equal_splits;
    layout.group->alltoall_base(output, input, equal_splits, equal_splits)->wait();
    return {output.sum(0).narrow(0, 0, layout.local_rows()), at::Tensor()};
  }
};

/// softmax(q K^T / sqrt(head_dim) + mask) V for q [n, heads, head_dim], K and V [T, heads,
/// head_dim], mask [n, T], with a hand-written backward that either keeps the probabilities or
/// recomputes them from q and K (the same arithmetic either way, so both give the same bits).
struct attention : torch::autograd::Function<attention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            bool keep_probabilities) {
    auto p = probabilities(q, k, mask);
    auto out = at::matmul(p, v.transpose(0, 1)).transpose(0, 1);
    if (keep_probabilities)
      ctx->save_for_backward({q, k, v, mask, p});
    else
      ctx->save_for_backward({q, k, v, mask});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    const auto p = saved.size() == 5 ? saved[4] : probabilities(q, k, saved[3]);
    const auto d_out = grads[0].transpose(0, 1);                            // [H, n, hd]
    const auto d_v = at::matmul(p.transpose(1, 2), d_out).transpose(0, 1);  // [T, H, hd]
    const auto d_p = at::matmul(d_out, v.permute({1, 2, 0}));               // [H, n, T]
    const auto d_s = p * (d_p - (d_p * p).sum(-1, true)) * scale();         // [H, n, T]
    const auto d_q = at::matmul(d_s, k.transpose(0, 1)).transpose(0, 1);    // [n, H, hd]
    const auto d_k = at::matmul(d_s.transpose(1, 2), q.transpose(0, 1)).transpose(0, 1);
    return {d_q, d_k, d_v, at::Tensor(), at::Tensor()};
  }

  static double scale() noexcept { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
  /// [H, n, T]
  static at::Tensor probabilities(const at::Tensor& q, const at::Tensor& k,
                                  const at::Tensor& mask) {
    const auto scores = at::matmul(q.transpose(0, 1), k.permute({1, 2, 0})) * scale() + mask;
    return at::softmax(scores, -1);
  }
};

/// The same attention with libtorch's own autograd (it saves the probabilities); the self-check
/// compares the hand-written backward with it.
inline at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& mask) {
  return at::matmul(attention::probabilities(q, k, mask), v.transpose(0, 1)).transpose(0, 1);
}

// ---- the model --------------------------------------------------------------------------------

/// The weights (float64, each with its gradient) and the sequence-parallel forward/backward.
class model {
 public:
  /// The same weights for the same seed on every rank (libtorch's CPU generator).
  explicit model(std::uint64_t seed) {
    const auto generator = at::detail::createCPUGenerator(seed);
    const auto doubles = at::TensorOptions().dtype(at::kDouble);
    const auto matrix = [&](std::int64_t rows, std::int64_t cols) {
      return at::normal(0.0, 1.0 / std::sqrt(static_cast<double>(cols)), {rows, cols}, generator,
                        doubles);
    };
    embedding_ = add(at::normal(0.0, 1.0, {vocab, dim}, generator, doubles));
    for (int l = 0; l < layers; ++l) {
      auto& b = blocks_.emplace_back();
      b.attention_norm = add(at::ones({dim}, doubles));
      b.wq = add(matrix(dim, dim));
      b.wk = add(matrix(dim, dim));
      b.wv = add(matrix(dim, dim));
      b.wo = add(matrix(dim, dim));
      b.mlp_norm = add(at::ones({dim}, doubles));
      b.w1 = add(matrix(ffn, dim));
      b.w3 = add(matrix(ffn, dim));
      b.w2 = add(matrix(dim, ffn));
    }
    final_norm_ = add(at::ones({dim}, doubles));
    head_ = add(matrix(vocab, dim));
    zero_grad();
  }

  model(const model& other) {  // a deep copy: the same weights, its own gradients
    for (const auto& p : other.parameters_)
      parameters_.push_back(p.detach().clone().requires_grad_(true));
    rebind();
    zero_grad();
  }
  model& operator=(const model&) = delete;

  [[nodiscard]] const std::vector<at::Tensor>& parameters() const noexcept { return parameters_; }
  /// This rank's share of the loss since zero_grad(); the batch's after all_reduce().
  [[nodiscard]] double loss() const noexcept { return loss_; }
  /// When set, attention uses libtorch's own autograd (for the self-check).
  void use_reference_attention(bool on) noexcept { reference_attention_ = on; }

  void zero_grad() {
    for (auto& p : parameters_) p.mutable_grad() = at::zeros_like(p);
    loss_ = 0;
  }

  /// Forward and backward of the sequences `ids` of `data` on `group` (null: this rank alone;
  /// collective over the group otherwise), loss_scale times the sum of their per-token losses,
  /// gradients accumulated. `modes[l]` is layer l's checkpointing (every layer keep_all when
  /// empty).
  void forward_backward(const batch& data, std::span<const std::uint64_t> ids,
                        const process_group& group, double loss_scale,
                        std::span<const checkpointing> modes = {}) {
    if (!modes.empty() && modes.size() != blocks_.size())
      throw std::invalid_argument("tiny::model: " + std::to_string(modes.size()) +
                                  " checkpointing modes for " + std::to_string(blocks_.size()) +
                                  " layers");
    const auto layout = c10::make_intrusive<micro_batch_layout>(data, ids, group);
    auto x = embedding_.index_select(0, layout->tokens);
    for (std::size_t l = 0; l < blocks_.size(); ++l) {
      const auto mode = modes.empty() ? checkpointing::keep_all : modes[l];
      if (mode == checkpointing::keep_input_only)
        x = checkpointed_layer::apply(x, c10::make_intrusive<layer_call>(this, l, layout));
      else
        x = block(l, x, *layout, layout, mode == checkpointing::keep_all);
    }
    const auto logits = at::matmul(rms_norm(x, final_norm_), head_.t());
    const auto loss_sum =
        -at::log_softmax(logits, -1).gather(1, layout->targets.unsqueeze(1)).sum();
    (loss_sum * loss_scale).backward();
    loss_ += loss_sum.item<double>() * loss_scale;
  }

  /// SUM of the gradients and the loss over `world` (one flat all-reduce).
  void all_reduce(const process_group& world) {
    std::vector<at::Tensor> flat;
    for (const auto& p : parameters_) flat.push_back(p.grad().reshape({-1}));
    flat.push_back(at::full({1}, loss_, at::kDouble));
    std::vector<at::Tensor> buffer{at::cat(flat)};
    world->allreduce(buffer)->wait();
    std::int64_t offset = 0;
    for (auto& p : parameters_) {
      p.mutable_grad().copy_(buffer[0].narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
    loss_ = buffer[0][offset].item<double>();
  }

  /// Plain gradient descent.
  void sgd(double learning_rate) {
    const at::NoGradGuard no_grad;
    for (auto& p : parameters_) p.sub_(p.grad() * learning_rate);
  }

 private:
  struct block_weights {
    at::Tensor attention_norm, wq, wk, wv, wo, mlp_norm, w1, w3, w2;
  };

  /// A layer's call as the checkpointing function sees it.
  struct layer_call : torch::CustomClassHolder {
    layer_call(model* m, std::size_t l, c10::intrusive_ptr<micro_batch_layout> on)
        : owner(m), layer(l), layout(std::move(on)) {}
    model* owner;
    std::size_t layer;
    c10::intrusive_ptr<micro_batch_layout> layout;
  };

  /// Forward without autograd, keeping only the input; backward reruns the layer (the keys'
  /// and values' all-gather included) with autograd and back-propagates through it, which also
  /// accumulates the layer's weight gradients.
  struct checkpointed_layer : torch::autograd::Function<checkpointed_layer> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                              const c10::intrusive_ptr<layer_call>& call) {
      ctx->saved_data["call"] = at::IValue::make_capsule(call);
      ctx->save_for_backward({x});
      const at::NoGradGuard no_grad;
      return call->owner->block(call->layer, x, *call->layout, call->layout, false);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
      const auto* call = static_cast<const layer_call*>(ctx->saved_data["call"].toCapsule().get());
      const auto input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
      at::Tensor output;
      {
        const at::AutoGradMode enable(true);
        output = call->owner->block(call->layer, input, *call->layout, call->layout, false);
      }
      torch::autograd::backward({output}, {grads[0]});
      return {input.grad(), at::Tensor()};
    }
  };

  at::Tensor add(at::Tensor t) {
    parameters_.push_back(t.requires_grad_(true));
    return parameters_.back();
  }
  void rebind() {
    std::size_t i = 0;
    embedding_ = parameters_[i++];
    blocks_.assign(layers, {});
    for (auto& b : blocks_)
      for (at::Tensor* t :
           {&b.attention_norm, &b.wq, &b.wk, &b.wv, &b.wo, &b.mlp_norm, &b.w1, &b.w3, &b.w2})
        *t = parameters_[i++];
    final_norm_ = parameters_[i++];
    head_ = parameters_[i++];
  }

  static at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) {
    return x * at::rsqrt(x.pow(2).mean(-1, true) + norm_epsilon) * weight;
  }
  static at::Tensor rope(const at::Tensor& x, const micro_batch_layout& layout) {
    const auto first = x.narrow(-1, 0, head_dim / 2);
    const auto second = x.narrow(-1, head_dim / 2, head_dim / 2);
    return at::cat(
        {first * layout.cos - second * layout.sin, first * layout.sin + second * layout.cos}, -1);
  }

  /// Layer l on this member's rows x [local, dim]. (The layout twice: by reference to read,
  /// and owned, for gather_rows to keep for its backward.)
  at::Tensor block(std::size_t l, const at::Tensor& x, const micro_batch_layout& layout,
                   const c10::intrusive_ptr<micro_batch_layout>& owned,
                   bool keep_probabilities) const {
    const auto& b = blocks_[l];
    const auto n = x.size(0);
    const auto h = rms_norm(x, b.attention_norm);
    const auto q = rope(at::matmul(h, b.wq.t()).view({n, heads, head_dim}), layout);
    const auto k = rope(at::matmul(h, b.wk.t()).view({n, heads, head_dim}), layout);
    const auto v = at::matmul(h, b.wv.t());
    auto kv = at::cat({k.reshape({n, dim}), v}, 1);
    if (layout.members > 1) kv = gather_rows::apply(kv, owned);
    const auto total = kv.size(0);
    const auto keys = kv.narrow(1, 0, dim).reshape({total, heads, head_dim});
    const auto values = kv.narrow(1, dim, dim).reshape({total, heads, head_dim});
    const auto o = reference_attention_
                       ? reference_attention(q, keys, values, layout.mask)
                       : attention::apply(q, keys, values, layout.mask, keep_probabilities);
    const auto after_attention = x + at::matmul(o.reshape({n, dim}), b.wo.t());
    const auto g = rms_norm(after_attention, b.mlp_norm);
    return after_attention +
           at::matmul(at::silu(at::matmul(g, b.w1.t())) * at::matmul(g, b.w3.t()), b.w2.t());
  }

  std::vector<at::Tensor> parameters_;
  at::Tensor embedding_;
  std::vector<block_weights> blocks_;
  at::Tensor final_norm_;
  at::Tensor head_;
  double loss_ = 0;
  bool reference_attention_ = false;
};

}  // namespace tiny
