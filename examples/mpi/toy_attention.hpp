#pragma once
// The "framework" the MPI examples train: a tiny causal-attention language model in float64 with a
// hand-written backward pass, its synthetic variable-length data, and a sequence-parallel
// forward/backward over any MPI communicator. Nothing here knows dcp; toy_dcp.hpp adapts it.
//
// Model (one layer, one head, no positional encoding), for the tokens t_0..t_{T-1} of a sequence:
//   x_i = E[t_i];  q_i = x_i Wq,  k_i = x_i Wk,  v_i = x_i Wv
//   p_ij = softmax_j(q_i . k_j / sqrt(dim)) over j <= i;  o_i = sum_j p_ij v_j
//   h_i = x_i + o_i Wo;  z_i = h_i U;  loss_i = logsumexp(z_i) - z_i[t_{i+1}]
//
// Sequence parallelism (the way all-gather context parallelism works): each member of a group of
// d ranks owns a contiguous chunk of every sequence's positions; the members all-gather the keys
// and values of their chunks (MPI_Allgatherv), compute the loss and the gradients of their own
// queries, and send the partial key and value gradients back to the chunks' owners
// (MPI_Reduce_scatter, SUM), who turn them into weight and embedding gradients. Every per-token
// number is the same whatever the group, so only the order of the sums differs between plans.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>

namespace toy {

inline constexpr int vocab = 32;
inline constexpr int dim = 8;
/// Tokens [vocab - key_tokens, vocab) only ever open a sequence; they set its stride.
inline constexpr int key_tokens = 8;
inline constexpr int body_tokens = vocab - key_tokens;

/// Throws std::runtime_error naming the MPI call unless `code` is MPI_SUCCESS.
inline void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed with code " + std::to_string(code));
}

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
  int below(int n) noexcept { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }

 private:
  std::uint64_t state_;
};

/// One training sequence: position i reads tokens[i] and predicts tokens[i + 1].
struct sequence {
  std::vector<int> tokens;  ///< length() + 1 tokens
  std::int64_t length() const noexcept { return static_cast<std::int64_t>(tokens.size()) - 1; }
};

/// A global batch; a sequence's id is its index.
using batch = std::vector<sequence>;

/// The batch of training step `step`: `count` sequences of min_length..max_length tokens with a
/// heavy tail (Pareto, alpha 0.9, so a few sequences are much longer than the rest). A sequence
/// opens with a key token k; then each token is the previous one plus (k's stride) modulo the body
/// tokens, except one in ten, which is random. Predicting it well needs attention to the opening.
inline batch make_batch(std::uint64_t seed, std::int64_t step, std::size_t count,
                        std::int64_t min_length = 4, std::int64_t max_length = 128) {
  rng r(seed * 1000003u + static_cast<std::uint64_t>(step));
  batch out(count);
  for (auto& s : out) {
    const double pareto = static_cast<double>(min_length) * std::pow(1.0 - r.uniform(), -1.0 / 0.9);
    const auto length =
        std::clamp<std::int64_t>(static_cast<std::int64_t>(pareto), min_length, max_length);
    const int key = body_tokens + r.below(key_tokens);
    const int stride = key - body_tokens + 1;
    s.tokens.resize(static_cast<std::size_t>(length) + 1);
    s.tokens[0] = key;
    s.tokens[1] = r.below(body_tokens);
    for (std::size_t i = 2; i < s.tokens.size(); ++i)
      s.tokens[i] =
          r.uniform() < 0.1 ? r.below(body_tokens) : (s.tokens[i - 1] + stride) % body_tokens;
  }
  return out;
}

/// Tokens (= loss terms) of the sequences `ids` of `data`.
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

/// What the forward pass keeps for the backward pass (the framework's activation checkpointing).
enum class checkpointing {
  keep_all,            ///< queries, keys, values, attention probabilities, outputs
  drop_probabilities,  ///< all but the attention probabilities (recomputed from q and K)
  keep_input_only,     ///< only the layer input: backward recomputes the layer, all-gather included
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

namespace detail {

/// Bytes of activations held, and the most held at once.
class memory_meter {
 public:
  void add(std::size_t values) noexcept {
    held_ += values * sizeof(double);
    peak_ = std::max(peak_, held_);
  }
  void remove(std::size_t values) noexcept { held_ -= values * sizeof(double); }
  std::size_t peak() const noexcept { return peak_; }

 private:
  std::size_t held_ = 0;
  std::size_t peak_ = 0;
};

/// A zeroed buffer of doubles whose size counts towards a meter while it is held.
class buffer {
 public:
  buffer(memory_meter& meter, std::size_t values) : meter_(&meter), data_(values, 0.0) {
    meter_->add(values);
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  buffer(buffer&& other) noexcept : meter_(other.meter_), data_(std::move(other.data_)) {
    other.data_.clear();
  }
  buffer& operator=(buffer&&) = delete;
  ~buffer() { release(); }

  void release() noexcept {
    meter_->remove(data_.size());
    data_.clear();
    data_.shrink_to_fit();
  }
  double* data() noexcept { return data_.data(); }
  const double* data() const noexcept { return data_.data(); }
  double& operator[](std::size_t i) noexcept { return data_[i]; }
  double operator[](std::size_t i) const noexcept { return data_[i]; }
  std::size_t size() const noexcept { return data_.size(); }
  bool empty() const noexcept { return data_.empty(); }

 private:
  memory_meter* meter_;
  std::vector<double> data_;
};

/// out = in W for a row vector `in` of `rows` values and W of rows x cols (row-major).
inline void multiply(const double* in, const double* w, int rows, int cols, double* out) noexcept {
  for (int b = 0; b < cols; ++b) out[b] = 0;
  for (int a = 0; a < rows; ++a)
    for (int b = 0; b < cols; ++b) out[b] += in[a] * w[a * cols + b];
}
/// out += W g for W of rows x cols and g of `cols` values (the gradient through `multiply`).
inline void multiply_transposed_add(const double* w, const double* g, int rows, int cols,
                                    double* out) noexcept {
  for (int a = 0; a < rows; ++a)
    for (int b = 0; b < cols; ++b) out[a] += w[a * cols + b] * g[b];
}
/// dW += in^T g (rows x cols).
inline void outer_add(const double* in, const double* g, int rows, int cols, double* dw) noexcept {
  for (int a = 0; a < rows; ++a)
    for (int b = 0; b < cols; ++b) dw[a * cols + b] += in[a] * g[b];
}

/// Where one sequence of a micro-batch lies: this member's chunk of positions, and every
/// member's chunk in the gather buffers.
struct placed_sequence {
  const sequence* seq = nullptr;
  std::int64_t length = 0;
  std::int64_t first = 0;  ///< this member's positions [first, end)
  std::int64_t end = 0;
  std::vector<std::size_t>
      chunk_offset;  ///< per member: first token of its chunk in the gather buffer
};

/// Member `member` of `members` owns positions [length * member / members, length * (member + 1) /
/// members).
inline std::int64_t chunk_begin(std::int64_t length, int member, int members) noexcept {
  return length * member / members;
}

}  // namespace detail

/// Parameter layout in the flat weight and gradient vectors.
struct layout {
  static constexpr std::size_t embedding = 0;                    ///< E: vocab x dim
  static constexpr std::size_t query = embedding + vocab * dim;  ///< Wq: dim x dim
  static constexpr std::size_t key = query + dim * dim;          ///< Wk
  static constexpr std::size_t value = key + dim * dim;          ///< Wv
  static constexpr std::size_t output = value + dim * dim;       ///< Wo
  static constexpr std::size_t head = output + dim * dim;        ///< U: dim x vocab
  static constexpr std::size_t parameters = head + dim * vocab;
  /// The tensors, as [begin, end) ranges, for per-tensor comparisons.
  static constexpr std::size_t tensor_begin[] = {embedding, query, key, value, output, head};
  static constexpr std::size_t tensor_end[] = {query, key, value, output, head, parameters};
  static constexpr const char* tensor_name[] = {"E", "Wq", "Wk", "Wv", "Wo", "U"};
};

/// The weights, this rank's gradient accumulator and its share of the step's loss.
class model {
 public:
  explicit model(std::uint64_t seed)
      : weights_(layout::parameters), accumulator_(layout::parameters + 1, 0.0) {
    rng r(seed);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    for (std::size_t i = 0; i < layout::parameters; ++i)
      weights_[i] = (2.0 * r.uniform() - 1.0) * (i < layout::query ? 1.0 : scale);
  }

  std::span<const double> weights() const noexcept { return weights_; }
  std::span<double> weights() noexcept { return weights_; }
  /// The accumulated gradients (after all_reduce: the batch's, on every rank).
  std::span<const double> gradients() const noexcept {
    return {accumulator_.data(), layout::parameters};
  }
  /// The accumulated scaled loss (after all_reduce: the batch's mean loss).
  double loss() const noexcept { return accumulator_[layout::parameters]; }

  void zero_grad() { std::fill(accumulator_.begin(), accumulator_.end(), 0.0); }

  /// SUM all-reduce of the gradients and the loss over `world` (collective).
  void all_reduce(MPI_Comm world) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, accumulator_.data(),
                            static_cast<int>(accumulator_.size()), MPI_DOUBLE, MPI_SUM, world),
              "MPI_Allreduce");
  }

  void sgd(double learning_rate) {
    for (std::size_t i = 0; i < layout::parameters; ++i)
      weights_[i] -= learning_rate * accumulator_[i];
  }

  /// Forward and backward of the sequences `ids` of `data`, sequence-parallel over `group`
  /// (collective over it: every member passes the same ids, scale and checkpointing). Adds
  /// `scale` times the sum of the per-token losses of this member's positions to loss(), and
  /// its gradient to gradients(). Returns the peak bytes of activations this member held.
  std::size_t forward_backward(const batch& data, std::span<const std::uint64_t> ids,
                               MPI_Comm group, double scale,
                               checkpointing mode = checkpointing::keep_all);

  /// p = softmax over j <= position of q . k_j / sqrt(dim); out = sum_j p_j v_j (also the
  /// pipeline toy's attention).
  static void attend(const double* q, const double* keys, const double* values,
                     std::int64_t position, double* probabilities, double* out);

 private:
  const double* w(std::size_t offset) const noexcept { return weights_.data() + offset; }
  double* g(std::size_t offset) noexcept { return accumulator_.data() + offset; }

  double head_forward(const double* x, const double* o, int target, double* h,
                      double* probabilities) const;

  std::vector<double> weights_;
  std::vector<double> accumulator_;  ///< gradients, then the loss
};

// --- implementation ---------------------------------------------------------------------------

inline void model::attend(const double* q, const double* keys, const double* values,
                          std::int64_t position, double* probabilities, double* out) {
  const double inverse_sqrt_dim = 1.0 / std::sqrt(static_cast<double>(dim));
  double largest = -INFINITY;
  for (std::int64_t j = 0; j <= position; ++j) {
    double s = 0;
    for (int a = 0; a < dim; ++a) s += q[a] * keys[j * dim + a];
    probabilities[j] = s * inverse_sqrt_dim;
    largest = std::max(largest, probabilities[j]);
  }
  double total = 0;
  for (std::int64_t j = 0; j <= position; ++j)
    total += probabilities[j] = std::exp(probabilities[j] - largest);
  for (int a = 0; a < dim; ++a) out[a] = 0;
  for (std::int64_t j = 0; j <= position; ++j) {
    probabilities[j] /= total;
    for (int a = 0; a < dim; ++a) out[a] += probabilities[j] * values[j * dim + a];
  }
}

/// h = x + o Wo, z = h U; stores softmax(z) and returns the cross-entropy against `target`.
inline double model::head_forward(const double* x, const double* o, int target, double* h,
                                  double* probabilities) const {
  detail::multiply(o, w(layout::output), dim, dim, h);
  for (int a = 0; a < dim; ++a) h[a] += x[a];
  detail::multiply(h, w(layout::head), dim, vocab, probabilities);
  const double largest = *std::max_element(probabilities, probabilities + vocab);
  const double target_logit = probabilities[target] - largest;
  double total = 0;
  for (int c = 0; c < vocab; ++c) total += probabilities[c] = std::exp(probabilities[c] - largest);
  for (int c = 0; c < vocab; ++c) probabilities[c] /= total;
  return std::log(total) - target_logit;  // logsumexp(z) - z[target]
}

inline std::size_t model::forward_backward(const batch& data, std::span<const std::uint64_t> ids,
                                           MPI_Comm group, double scale, checkpointing mode) {
  int members = 0;
  int me = 0;
  check_mpi(MPI_Comm_size(group, &members), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(group, &me), "MPI_Comm_rank");
  const auto m = static_cast<std::size_t>(members);
  constexpr auto d = static_cast<std::size_t>(dim);

  // Where every sequence's chunks lie; counts per member in doubles (key and value: 2 dim each).
  std::vector<detail::placed_sequence> seqs;
  seqs.reserve(ids.size());
  std::vector<std::size_t> tokens_of_member(m, 0);
  std::size_t n = 0;  // this member's tokens
  for (const auto id : ids) {
    if (id >= data.size())
      throw std::runtime_error("forward_backward: sample id " + std::to_string(id) +
                               " is not in the batch of " + std::to_string(data.size()) +
                               " sequences");
    detail::placed_sequence p;
    p.seq = &data[id];
    p.length = p.seq->length();
    p.first = detail::chunk_begin(p.length, me, members);
    p.end = detail::chunk_begin(p.length, me + 1, members);
    n += static_cast<std::size_t>(p.end - p.first);
    p.chunk_offset.resize(m);
    for (std::size_t r = 0; r < m; ++r) {
      p.chunk_offset[r] = tokens_of_member[r];
      const auto member = static_cast<int>(r);
      tokens_of_member[r] +=
          static_cast<std::size_t>(detail::chunk_begin(p.length, member + 1, members) -
                                   detail::chunk_begin(p.length, member, members));
    }
    seqs.push_back(std::move(p));
  }
  std::vector<int> counts(m, 0);
  std::vector<int> displacements(m, 0);
  std::size_t gathered = 0;
  for (std::size_t r = 0; r < m; ++r) {
    counts[r] = static_cast<int>(2 * d * tokens_of_member[r]);
    displacements[r] = static_cast<int>(gathered);
    gathered += static_cast<std::size_t>(counts[r]);
  }

  detail::memory_meter meter;
  detail::buffer x(meter, n * d);               // the layer input: always kept
  std::optional<detail::buffer> q;              // own queries
  std::vector<detail::buffer> keys, values;     // per sequence, gathered from every member
  std::vector<detail::buffer> probabilities;    // per own query (keep_all only)
  std::optional<detail::buffer> o, h, softmax;  // per own token (not under keep_input_only)

  // Embeds this member's tokens (first time only), computes their queries, keys and values, and
  // all-gathers every chunk's keys and values into full per-sequence arrays.
  const auto project_and_gather = [&](bool embed) {
    q.emplace(meter, n * d);
    detail::buffer mine(meter, 2 * d * n + 1);  // + 1: never a null buffer for MPI
    std::size_t t = 0;
    for (const auto& s : seqs)
      for (auto i = s.first; i < s.end; ++i, ++t) {
        double* xi = x.data() + t * d;
        if (embed)
          std::copy_n(w(layout::embedding) + s.seq->tokens[static_cast<std::size_t>(i)] * dim, dim,
                      xi);
        detail::multiply(xi, w(layout::query), dim, dim, q->data() + t * d);
        detail::multiply(xi, w(layout::key), dim, dim, mine.data() + 2 * d * t);
        detail::multiply(xi, w(layout::value), dim, dim, mine.data() + 2 * d * t + d);
      }
    detail::buffer all(meter, gathered + 1);
    check_mpi(MPI_Allgatherv(mine.data(), counts[static_cast<std::size_t>(me)], MPI_DOUBLE,
                             all.data(), counts.data(), displacements.data(), MPI_DOUBLE, group),
              "MPI_Allgatherv");
    mine.release();
    keys.reserve(seqs.size());
    values.reserve(seqs.size());
    for (const auto& s : seqs) {
      keys.emplace_back(meter, static_cast<std::size_t>(s.length) * d);
      values.emplace_back(meter, static_cast<std::size_t>(s.length) * d);
      for (std::size_t r = 0; r < m; ++r) {
        const auto begin = detail::chunk_begin(s.length, static_cast<int>(r), members);
        const auto end = detail::chunk_begin(s.length, static_cast<int>(r) + 1, members);
        const double* from =
            all.data() + static_cast<std::size_t>(displacements[r]) + 2 * d * s.chunk_offset[r];
        for (auto j = begin; j < end; ++j, from += 2 * d) {
          std::copy_n(from, dim, keys.back().data() + static_cast<std::size_t>(j) * d);
          std::copy_n(from + dim, dim, values.back().data() + static_cast<std::size_t>(j) * d);
        }
      }
    }
  };

  // Per-query scratch for what is not kept: one row of probabilities and the head's activations.
  std::size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, static_cast<std::size_t>(s.length));
  detail::buffer row(meter, longest + 1);
  detail::buffer scratch(meter, 2 * d + vocab);
  const auto target_of = [](const detail::placed_sequence& s, std::int64_t i) {
    return s.seq->tokens[static_cast<std::size_t>(i) + 1];
  };

  // --- forward ---
  if (mode == checkpointing::keep_all) probabilities.reserve(n);
  project_and_gather(true);
  if (mode != checkpointing::keep_input_only) {
    o.emplace(meter, n * d);
    h.emplace(meter, n * d);
    softmax.emplace(meter, n * vocab);
  }
  double loss = 0;
  std::size_t t = 0;
  for (std::size_t k = 0; k < seqs.size(); ++k) {
    const auto& s = seqs[k];
    for (auto i = s.first; i < s.end; ++i, ++t) {
      double* p = row.data();
      if (mode == checkpointing::keep_all)
        p = probabilities.emplace_back(meter, static_cast<std::size_t>(i) + 1).data();
      double* oi = o ? o->data() + t * d : scratch.data();
      double* hi = h ? h->data() + t * d : scratch.data() + d;
      double* si = softmax ? softmax->data() + t * vocab : scratch.data() + 2 * d;
      attend(q->data() + t * d, keys[k].data(), values[k].data(), i, p, oi);
      loss += head_forward(x.data() + t * d, oi, target_of(s, i), hi, si);
    }
  }
  accumulator_[layout::parameters] += scale * loss;

  // --- recompute what was not kept: under keep_input_only, the whole layer, all-gather included
  // ---
  if (mode == checkpointing::keep_input_only) {
    q.reset();
    keys.clear();
    values.clear();
    project_and_gather(false);
  }

  // --- backward ---
  const double inverse_sqrt_dim = 1.0 / std::sqrt(static_cast<double>(dim));
  detail::buffer dx(meter, n * d);
  std::vector<detail::buffer> dkeys, dvalues;  // partial: positions up to this member's last
  dkeys.reserve(seqs.size());
  dvalues.reserve(seqs.size());
  for (const auto& s : seqs) {
    dkeys.emplace_back(meter, static_cast<std::size_t>(s.end) * d);
    dvalues.emplace_back(meter, static_cast<std::size_t>(s.end) * d);
  }
  detail::buffer dp_buffer(meter, longest + 1);
  double* dp = dp_buffer.data();
  // Raw pointers and arrays in the loops over key positions: the O(length^2) part.
  double dz[vocab];
  double dh[dim];
  double dout[dim];
  double dq[dim];
  t = 0;
  for (std::size_t k = 0; k < seqs.size(); ++k) {
    const auto& s = seqs[k];
    const double* kk = keys[k].data();
    const double* vv = values[k].data();
    double* dkk = dkeys[k].data();
    double* dvv = dvalues[k].data();
    for (auto i = s.first; i < s.end; ++i, ++t) {
      const double* xi = x.data() + t * d;
      const double* qi = q->data() + t * d;
      const int target = target_of(s, i);
      const double* p = nullptr;
      const double* oi = nullptr;
      const double* hi = nullptr;
      const double* si = nullptr;
      if (mode == checkpointing::keep_all) {
        p = probabilities[t].data();
      } else {  // the same arithmetic as the forward pass, so the same numbers
        attend(qi, kk, vv, i, row.data(), scratch.data());
        p = row.data();
      }
      if (mode == checkpointing::keep_input_only) {
        head_forward(xi, scratch.data(), target, scratch.data() + d, scratch.data() + 2 * d);
        oi = scratch.data();
        hi = scratch.data() + d;
        si = scratch.data() + 2 * d;
      } else {
        oi = o->data() + t * d;
        hi = h->data() + t * d;
        si = softmax->data() + t * vocab;
      }
      // Cross-entropy and head: dz = scale (softmax - onehot).
      for (int c = 0; c < vocab; ++c) dz[c] = scale * (si[c] - (c == target ? 1.0 : 0.0));
      detail::outer_add(hi, dz, dim, vocab, g(layout::head));
      std::fill_n(dh, dim, 0.0);
      detail::multiply_transposed_add(w(layout::head), dz, dim, vocab, dh);
      double* dxi = dx.data() + t * d;
      for (std::size_t a = 0; a < d; ++a) dxi[a] += dh[a];  // the residual
      detail::outer_add(oi, dh, dim, dim, g(layout::output));
      std::fill_n(dout, dim, 0.0);
      detail::multiply_transposed_add(w(layout::output), dh, dim, dim, dout);
      // Softmax: ds_j = p_j (dp_j - sum_l p_l dp_l) with dp_j = dout . v_j.
      double weighted = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        const auto at = static_cast<std::size_t>(j);
        double dpj = 0;
        for (std::size_t a = 0; a < d; ++a) dpj += dout[a] * vv[at * d + a];
        dp[at] = dpj;
        weighted += p[j] * dpj;
      }
      std::fill_n(dq, dim, 0.0);
      for (std::int64_t j = 0; j <= i; ++j) {
        const auto at = static_cast<std::size_t>(j);
        const double ds = p[j] * (dp[at] - weighted) * inverse_sqrt_dim;
        for (std::size_t a = 0; a < d; ++a) {
          dq[a] += ds * kk[at * d + a];
          dkk[at * d + a] += ds * qi[a];
          dvv[at * d + a] += p[j] * dout[a];
        }
      }
      detail::outer_add(xi, dq, dim, dim, g(layout::query));
      detail::multiply_transposed_add(w(layout::query), dq, dim, dim, dxi);
    }
  }
  probabilities.clear();
  o.reset();
  h.reset();
  softmax.reset();
  q.reset();
  keys.clear();
  values.clear();

  // The partial key and value gradients go back to their chunks' owners, summed over the members.
  detail::buffer partial(meter, gathered + 1);
  for (std::size_t k = 0; k < seqs.size(); ++k) {
    const auto& s = seqs[k];
    for (std::size_t r = 0; r < m; ++r) {
      const auto begin = detail::chunk_begin(s.length, static_cast<int>(r), members);
      const auto end =
          std::min(detail::chunk_begin(s.length, static_cast<int>(r) + 1, members), s.end);
      double* to =
          partial.data() + static_cast<std::size_t>(displacements[r]) + 2 * d * s.chunk_offset[r];
      for (auto j = begin; j < end; ++j, to += 2 * d) {
        std::copy_n(dkeys[k].data() + static_cast<std::size_t>(j) * d, dim, to);
        std::copy_n(dvalues[k].data() + static_cast<std::size_t>(j) * d, dim, to + dim);
      }
    }
  }
  dkeys.clear();
  dvalues.clear();
  detail::buffer own(meter, 2 * d * n + 1);
  check_mpi(
      MPI_Reduce_scatter(partial.data(), own.data(), counts.data(), MPI_DOUBLE, MPI_SUM, group),
      "MPI_Reduce_scatter");
  partial.release();

  // Key and value projections, and the embedding rows of this member's tokens.
  t = 0;
  for (const auto& s : seqs)
    for (auto i = s.first; i < s.end; ++i, ++t) {
      const double* xi = x.data() + t * d;
      const double* dk = own.data() + 2 * d * t;
      const double* dv = dk + d;
      double* dxi = dx.data() + t * d;
      detail::outer_add(xi, dk, dim, dim, g(layout::key));
      detail::outer_add(xi, dv, dim, dim, g(layout::value));
      detail::multiply_transposed_add(w(layout::key), dk, dim, dim, dxi);
      detail::multiply_transposed_add(w(layout::value), dv, dim, dim, dxi);
      double* de = g(layout::embedding) + s.seq->tokens[static_cast<std::size_t>(i)] * dim;
      for (std::size_t a = 0; a < d; ++a) de[a] += dxi[a];
    }
  return meter.peak();
}

}  // namespace toy
