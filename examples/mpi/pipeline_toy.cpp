// Pipeline-parallel gradients on a real multi-process run: `mpiexec -n 4 pipeline_toy`.
//
// A float64 toy language model of four causal-attention layers (toy_attention.hpp's attention,
// stacked with residuals and a tanh) runs in a grid of 2 pipeline stages x 2 pipelines (t = 1,
// p = 2, D = 2; Megatron's rank order puts stage 0 on ranks 0-1 and stage 1 on ranks 2-3). Every
// step, dcp::pipeline_planner over a real pipeline_cost_model (Llama-3-8B on one node of 4
// H200s, half the memory held back, each toy token standing for 256 tokens) chooses the
// micro-batch count, each micro-batch's context-parallel degree over the pipelines and each
// chunk's recomputation; dcp::run_pipeline_step runs this rank's ops in Megatron's order with
// the executor below: activations and gradients go between stages with MPI_Isend / MPI_Recv,
// and a micro-batch of degree 2 splits its sequences' positions over the two ranks of a stage
// (all-gather of keys and values, reduce-scatter of their gradients). The same batch is also
// run unpipelined (the whole model on every rank, each sample alone) as the reference.
//
// Checks (exit code 1 on every rank if one fails): at every one of 20 steps, for the 1F1B grid
// and the interleaved one (v = 2, one layer per chunk), every parameter tensor's gradient is
// within 1e-9 (relative, max norm) of the reference, and so is the loss; the backward pass agrees
// with finite differences; the plans use several micro-batch counts, degrees 1 and 2 and each
// of the toy's three checkpointing modes.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <mpi.h>

#include "dcp/dcp.hpp"
#include "dcp/mpi/communicator.hpp"
#include "dcp/pipeline.hpp"
#include "dcp/runtime/pipeline_step.hpp"

#include "toy_attention.hpp"
#include "toy_dcp.hpp"

namespace {

constexpr int world_ranks = 4;
constexpr std::int64_t stages = 2;     // p
constexpr std::int64_t pipelines = 2;  // D = 4 / (t p)
constexpr int layers = 4;              // divisible by p v for v = 1 and 2
constexpr int steps = 20;
constexpr std::size_t batch_size = 24;
constexpr std::uint64_t data_seed = 2024;
constexpr std::uint64_t weight_seed = 7;
constexpr double learning_rate = 0.5;
constexpr double tolerance = 1e-9;
/// Half the GPU held back: enough pressure that the planner recomputes some chunks and changes
/// the micro-batch count between batches (Llama-3-8B's 32K-token samples still fit).
constexpr double headroom_fraction = 0.5;

using toy::dim;
using toy::vocab;
constexpr auto d = static_cast<std::size_t>(dim);

// --- the model: parameters and the arithmetic of one layer, the embedding and the head ---------

/// Parameter layout: E (vocab x dim), per layer Wq, Wk, Wv, Wo (dim x dim), U (dim x vocab).
struct deep_layout {
  static constexpr std::size_t embedding = 0;
  static constexpr std::size_t first_layer = vocab * d;
  static constexpr std::size_t per_layer = 4 * d * d;
  static constexpr std::size_t head = first_layer + layers * per_layer;
  static constexpr std::size_t parameters = head + d * vocab;
  static constexpr std::size_t query(int l) { return first_layer + per_layer * std::size_t(l); }
  static constexpr std::size_t key(int l) { return query(l) + d * d; }
  static constexpr std::size_t value(int l) { return key(l) + d * d; }
  static constexpr std::size_t output(int l) { return value(l) + d * d; }

  /// The tensors as (name, begin, end), for per-tensor comparisons.
  struct tensor {
    std::string name;
    std::size_t begin;
    std::size_t end;
  };
  static std::vector<tensor> tensors() {
    std::vector<tensor> out{{"E", embedding, first_layer}};
    for (int l = 0; l < layers; ++l) {
      const auto n = std::to_string(l);
      out.push_back({"Wq" + n, query(l), key(l)});
      out.push_back({"Wk" + n, key(l), value(l)});
      out.push_back({"Wv" + n, value(l), output(l)});
      out.push_back({"Wo" + n, output(l), output(l) + d * d});
    }
    out.push_back({"U", head, parameters});
    return out;
  }
};

/// A micro-batch's sequences as this member of a context-parallel group of `members` sees them:
/// its positions of each, and where every member's positions lie in the gather buffers.
struct placement {
  std::vector<toy::detail::placed_sequence> seqs;
  std::size_t tokens = 0;    ///< this member's positions, all sequences
  std::vector<int> counts;   ///< per member: doubles of its keys and values (2 dim per token)
  std::vector<int> offsets;  ///< per member: where they start in the gather buffer
  std::size_t gathered = 0;  ///< doubles in the gather buffer
  std::size_t longest = 0;

  placement(const toy::batch& data, std::span<const std::uint64_t> ids, int members, int me) {
    const auto m = static_cast<std::size_t>(members);
    std::vector<std::size_t> tokens_of_member(m, 0);
    for (const auto id : ids) {
      toy::detail::placed_sequence p;
      p.seq = &data.at(id);
      p.length = p.seq->length();
      p.first = toy::detail::chunk_begin(p.length, me, members);
      p.end = toy::detail::chunk_begin(p.length, me + 1, members);
      tokens += static_cast<std::size_t>(p.end - p.first);
      longest = std::max(longest, static_cast<std::size_t>(p.length));
      for (std::size_t r = 0; r < m; ++r) {
        const auto member = static_cast<int>(r);
        p.chunk_offset.push_back(tokens_of_member[r]);
        tokens_of_member[r] +=
            static_cast<std::size_t>(toy::detail::chunk_begin(p.length, member + 1, members) -
                                     toy::detail::chunk_begin(p.length, member, members));
      }
      seqs.push_back(std::move(p));
    }
    for (std::size_t r = 0; r < m; ++r) {
      counts.push_back(static_cast<int>(2 * d * tokens_of_member[r]));
      offsets.push_back(static_cast<int>(gathered));
      gathered += static_cast<std::size_t>(counts.back());
    }
  }
};

/// What one layer's forward leaves for its backward. `input` is always kept; the rest as the
/// layer's checkpointing says (empty when dropped, recomputed by the backward).
struct layer_state {
  toy::checkpointing mode = toy::checkpointing::keep_all;
  std::vector<double> input;                       // own tokens x dim
  std::vector<double> queries;                     // own tokens x dim
  std::vector<std::vector<double>> keys, values;   // per sequence, every position, gathered
  std::vector<std::vector<double>> probabilities;  // per own token (keep_all only)
  std::vector<double> attended;                    // o: own tokens x dim
  std::vector<double> activated;                   // tanh(o Wo): own tokens x dim
};

/// The weights and two gradient accumulators (the pipelined step's and the reference's), each
/// with the step's scaled loss after the gradients.
class deep_model {
 public:
  explicit deep_model(std::uint64_t seed) : weights_(deep_layout::parameters) {
    toy::rng r(seed);
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    for (std::size_t i = 0; i < deep_layout::parameters; ++i)
      weights_[i] = (2.0 * r.uniform() - 1.0) * (i < deep_layout::first_layer ? 1.0 : scale);
  }

  std::span<double> weights() noexcept { return weights_; }
  const double* w(std::size_t offset) const noexcept { return weights_.data() + offset; }

  /// x_l+1 = x_l + tanh(attention(x_l) Wo) on this member's tokens; the attention all-gathers
  /// keys and values over `group`. Keeps what `mode` says.
  layer_state layer_forward(int l, const placement& at, std::vector<double> input, MPI_Comm group,
                            toy::checkpointing mode, std::vector<double>& output) const;
  /// From the output's gradient, accumulates the layer's weight gradients into `grad` and
  /// returns the input's gradient (collective: reduce-scatter of key and value gradients).
  std::vector<double> layer_backward(int l, const placement& at, layer_state& state,
                                     const std::vector<double>& output_gradient, MPI_Comm group,
                                     std::span<double> grad) const;

  std::vector<double> embed(const placement& at) const {
    std::vector<double> x(at.tokens * d);
    std::size_t t = 0;
    for (const auto& s : at.seqs)
      for (auto i = s.first; i < s.end; ++i, ++t)
        std::copy_n(w(deep_layout::embedding) + s.seq->tokens[std::size_t(i)] * dim, dim,
                    x.data() + t * d);
    return x;
  }
  static void embed_backward(const placement& at, const std::vector<double>& dx,
                             std::span<double> grad) {
    std::size_t t = 0;
    for (const auto& s : at.seqs)
      for (auto i = s.first; i < s.end; ++i, ++t) {
        double* de = grad.data() + deep_layout::embedding + s.seq->tokens[std::size_t(i)] * dim;
        for (std::size_t a = 0; a < d; ++a) de[a] += dx[t * d + a];
      }
  }

  /// Cross-entropy of the head on `x` (own tokens): adds scale x the sum of the losses to
  /// grad's loss entry, U's gradient to grad, and returns x's gradient.
  std::vector<double> head_forward_backward(const placement& at, const std::vector<double>& x,
                                            double scale, std::span<double> grad) const;

 private:
  /// Queries of own tokens, and every position's keys and values gathered over the group.
  void project_and_gather(int l, const placement& at, layer_state& state, MPI_Comm group) const;

  std::vector<double> weights_;
};

void deep_model::project_and_gather(int l, const placement& at, layer_state& state,
                                    MPI_Comm group) const {
  int me = 0;
  toy::check_mpi(MPI_Comm_rank(group, &me), "MPI_Comm_rank");
  const auto members = at.counts.size();
  state.queries.assign(at.tokens * d, 0.0);
  std::vector<double> mine(2 * d * at.tokens + 1);  // + 1: never a null buffer for MPI
  std::size_t t = 0;
  for (const auto& s : at.seqs)
    for (auto i = s.first; i < s.end; ++i, ++t) {
      const double* x = state.input.data() + t * d;
      toy::detail::multiply(x, w(deep_layout::query(l)), dim, dim, state.queries.data() + t * d);
      toy::detail::multiply(x, w(deep_layout::key(l)), dim, dim, mine.data() + 2 * d * t);
      toy::detail::multiply(x, w(deep_layout::value(l)), dim, dim, mine.data() + 2 * d * t + d);
    }
  std::vector<double> all(at.gathered + 1);
  toy::check_mpi(MPI_Allgatherv(mine.data(), at.counts[std::size_t(me)], MPI_DOUBLE, all.data(),
                                at.counts.data(), at.offsets.data(), MPI_DOUBLE, group),
                 "MPI_Allgatherv");
  state.keys.clear();
  state.values.clear();
  for (const auto& s : at.seqs) {
    auto& keys = state.keys.emplace_back(std::size_t(s.length) * d);
    auto& values = state.values.emplace_back(std::size_t(s.length) * d);
    for (std::size_t r = 0; r < members; ++r) {
      const auto begin = toy::detail::chunk_begin(s.length, int(r), int(members));
      const auto end = toy::detail::chunk_begin(s.length, int(r) + 1, int(members));
      const double* from = all.data() + std::size_t(at.offsets[r]) + 2 * d * s.chunk_offset[r];
      for (auto j = begin; j < end; ++j, from += 2 * d) {
        std::copy_n(from, dim, keys.data() + std::size_t(j) * d);
        std::copy_n(from + dim, dim, values.data() + std::size_t(j) * d);
      }
    }
  }
}

layer_state deep_model::layer_forward(int l, const placement& at, std::vector<double> input,
                                      MPI_Comm group, toy::checkpointing mode,
                                      std::vector<double>& output) const {
  layer_state state;
  state.mode = mode;
  state.input = std::move(input);
  project_and_gather(l, at, state, group);
  state.attended.assign(at.tokens * d, 0.0);
  state.activated.assign(at.tokens * d, 0.0);
  output.assign(at.tokens * d, 0.0);
  std::vector<double> row(at.longest + 1);
  std::size_t t = 0;
  for (std::size_t k = 0; k < at.seqs.size(); ++k) {
    const auto& s = at.seqs[k];
    for (auto i = s.first; i < s.end; ++i, ++t) {
      double* o = state.attended.data() + t * d;
      toy::model::attend(state.queries.data() + t * d, state.keys[k].data(), state.values[k].data(),
                         i, row.data(), o);
      if (mode == toy::checkpointing::keep_all)
        state.probabilities.emplace_back(row.begin(), row.begin() + i + 1);
      double* a = state.activated.data() + t * d;
      toy::detail::multiply(o, w(deep_layout::output(l)), dim, dim, a);
      for (std::size_t b = 0; b < d; ++b) {
        a[b] = std::tanh(a[b]);
        output[t * d + b] = state.input[t * d + b] + a[b];
      }
    }
  }
  if (mode == toy::checkpointing::keep_input_only) {
    state.queries.clear();
    state.keys.clear();
    state.values.clear();
    state.attended.clear();
    state.activated.clear();
  }
  return state;
}

std::vector<double> deep_model::layer_backward(int l, const placement& at, layer_state& state,
                                               const std::vector<double>& output_gradient,
                                               MPI_Comm group, std::span<double> grad) const {
  if (state.mode == toy::checkpointing::keep_input_only) {  // the whole layer, gather included
    std::vector<double> unused;
    state =
        layer_forward(l, at, std::move(state.input), group, toy::checkpointing::keep_all, unused);
  }
  const bool probabilities_kept = !state.probabilities.empty();
  const double inverse_sqrt_dim = 1.0 / std::sqrt(static_cast<double>(dim));
  std::vector<double> dx = output_gradient;  // the residual
  std::vector<double> row(at.longest + 1);
  std::vector<double> dp(at.longest + 1);
  std::vector<std::vector<double>> dkeys, dvalues;  // partial: positions up to this member's last
  for (const auto& s : at.seqs) {
    dkeys.emplace_back(std::size_t(s.end) * d, 0.0);
    dvalues.emplace_back(std::size_t(s.end) * d, 0.0);
  }
  double da[dim];
  double dout[dim];
  double dq[dim];
  std::size_t t = 0;
  for (std::size_t k = 0; k < at.seqs.size(); ++k) {
    const auto& s = at.seqs[k];
    const double* kk = state.keys[k].data();
    const double* vv = state.values[k].data();
    for (auto i = s.first; i < s.end; ++i, ++t) {
      const double* x = state.input.data() + t * d;
      const double* q = state.queries.data() + t * d;
      const double* o = state.attended.data() + t * d;
      const double* a = state.activated.data() + t * d;
      const double* p = row.data();
      if (probabilities_kept) {
        p = state.probabilities[t].data();
      } else {  // the forward's arithmetic, so the forward's numbers
        double scratch[dim];
        toy::model::attend(q, kk, vv, i, row.data(), scratch);
      }
      for (std::size_t b = 0; b < d; ++b)
        da[b] = output_gradient[t * d + b] * (1.0 - a[b] * a[b]);  // tanh' = 1 - tanh^2
      toy::detail::outer_add(o, da, dim, dim, grad.data() + deep_layout::output(l));
      std::fill_n(dout, dim, 0.0);
      toy::detail::multiply_transposed_add(w(deep_layout::output(l)), da, dim, dim, dout);
      // Softmax: ds_j = p_j (dp_j - sum_l p_l dp_l) with dp_j = dout . v_j.
      double weighted = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dpj = 0;
        for (std::size_t b = 0; b < d; ++b) dpj += dout[b] * vv[std::size_t(j) * d + b];
        dp[std::size_t(j)] = dpj;
        weighted += p[j] * dpj;
      }
      std::fill_n(dq, dim, 0.0);
      double* dkk = dkeys[k].data();
      double* dvv = dvalues[k].data();
      for (std::int64_t j = 0; j <= i; ++j) {
        const auto at_j = std::size_t(j);
        const double ds = p[j] * (dp[at_j] - weighted) * inverse_sqrt_dim;
        for (std::size_t b = 0; b < d; ++b) {
          dq[b] += ds * kk[at_j * d + b];
          dkk[at_j * d + b] += ds * q[b];
          dvv[at_j * d + b] += p[j] * dout[b];
        }
      }
      toy::detail::outer_add(x, dq, dim, dim, grad.data() + deep_layout::query(l));
      toy::detail::multiply_transposed_add(w(deep_layout::query(l)), dq, dim, dim,
                                           dx.data() + t * d);
    }
  }
  // The partial key and value gradients go back to their positions' owners, summed.
  const auto members = at.counts.size();
  std::vector<double> partial(at.gathered + 1, 0.0);
  for (std::size_t k = 0; k < at.seqs.size(); ++k) {
    const auto& s = at.seqs[k];
    for (std::size_t r = 0; r < members; ++r) {
      const auto begin = toy::detail::chunk_begin(s.length, int(r), int(members));
      const auto end =
          std::min(toy::detail::chunk_begin(s.length, int(r) + 1, int(members)), s.end);
      double* to = partial.data() + std::size_t(at.offsets[r]) + 2 * d * s.chunk_offset[r];
      for (auto j = begin; j < end; ++j, to += 2 * d) {
        std::copy_n(dkeys[k].data() + std::size_t(j) * d, dim, to);
        std::copy_n(dvalues[k].data() + std::size_t(j) * d, dim, to + dim);
      }
    }
  }
  std::vector<double> own(2 * d * at.tokens + 1);
  toy::check_mpi(
      MPI_Reduce_scatter(partial.data(), own.data(), at.counts.data(), MPI_DOUBLE, MPI_SUM, group),
      "MPI_Reduce_scatter");
  for (t = 0; t < at.tokens; ++t) {
    const double* x = state.input.data() + t * d;
    const double* dk = own.data() + 2 * d * t;
    const double* dv = dk + d;
    toy::detail::outer_add(x, dk, dim, dim, grad.data() + deep_layout::key(l));
    toy::detail::outer_add(x, dv, dim, dim, grad.data() + deep_layout::value(l));
    toy::detail::multiply_transposed_add(w(deep_layout::key(l)), dk, dim, dim, dx.data() + t * d);
    toy::detail::multiply_transposed_add(w(deep_layout::value(l)), dv, dim, dim, dx.data() + t * d);
  }
  state = layer_state{};
  return dx;
}

std::vector<double> deep_model::head_forward_backward(const placement& at,
                                                      const std::vector<double>& x, double scale,
                                                      std::span<double> grad) const {
  std::vector<double> dx(at.tokens * d, 0.0);
  double z[vocab];
  double loss = 0;
  std::size_t t = 0;
  for (const auto& s : at.seqs)
    for (auto i = s.first; i < s.end; ++i, ++t) {
      const int target = s.seq->tokens[std::size_t(i) + 1];
      const double* xi = x.data() + t * d;
      toy::detail::multiply(xi, w(deep_layout::head), dim, vocab, z);
      const double largest = *std::max_element(z, z + vocab);
      const double target_logit = z[target] - largest;
      double total = 0;
      for (int c = 0; c < vocab; ++c) total += z[c] = std::exp(z[c] - largest);
      loss += std::log(total) - target_logit;
      for (int c = 0; c < vocab; ++c) z[c] = scale * (z[c] / total - (c == target ? 1.0 : 0.0));
      toy::detail::outer_add(xi, z, dim, vocab, grad.data() + deep_layout::head);
      toy::detail::multiply_transposed_add(w(deep_layout::head), z, dim, vocab, dx.data() + t * d);
    }
  grad[deep_layout::parameters] += scale * loss;
  return dx;
}

// --- the executor dcp drives ---------------------------------------------------------------------

/// The toy's checkpointing for layer `k` of a chunk of `toy_layers` layers under the plan's
/// setting for a chunk of `model_layers` (the cost model's): its first ceil(r.layers toy_layers
/// / model_layers) layers recompute whole, the others drop the attention probabilities where r
/// is selective.
toy::checkpointing checkpointing_of(dcp::recompute_setting r, int k, int toy_layers,
                                    std::int64_t model_layers) {
  const auto whole = (std::int64_t{r.layers} * toy_layers + model_layers - 1) / model_layers;
  if (k < whole) return toy::checkpointing::keep_input_only;
  return r.selective ? toy::checkpointing::drop_probabilities : toy::checkpointing::keep_all;
}

/// This rank's group of each degree 1, 2, ..., D at its stage: with t = 1 the ranks of a stage
/// are contiguous and a context-parallel group is an aligned block of the world.
class group_table {
 public:
  group_table(MPI_Comm world, std::int64_t most) {
    int rank = 0;
    toy::check_mpi(MPI_Comm_rank(world, &rank), "MPI_Comm_rank");
    for (std::int64_t degree = 1; degree <= most; degree *= 2) {
      MPI_Comm comm = MPI_COMM_NULL;
      toy::check_mpi(MPI_Comm_split(world, static_cast<int>(rank / degree), rank, &comm),
                     "MPI_Comm_split");
      groups_[degree] = comm;
    }
  }
  group_table(const group_table&) = delete;
  group_table& operator=(const group_table&) = delete;
  ~group_table() {
    for (auto& [degree, comm] : groups_) MPI_Comm_free(&comm);
  }

  /// The communicator of `group`; throws unless it is the aligned block the table holds.
  MPI_Comm of(const dcp::pipeline_group& group) const {
    const auto found = groups_.find(group.degree);
    if (found == groups_.end() || group.ranks.empty() || group.ranks.front() % group.degree != 0)
      throw std::runtime_error("pipeline toy: no communicator for a group of degree " +
                               std::to_string(group.degree) + " from rank " +
                               std::to_string(group.ranks.empty() ? -1 : group.ranks.front()));
    return found->second;
  }

 private:
  std::map<std::int64_t, MPI_Comm> groups_;
};

/// Models dcp::pipeline_executor with the deep toy model: forward and backward of one chunk
/// (its layers, the embedding on virtual stage 0, the loss on the last), point-to-point messages
/// with MPI_Isend (completed in finish()) and MPI_Recv. Gradients go to `grad`.
class pipeline_executor {
 public:
  pipeline_executor(const deep_model& model, const toy::batch& data, const group_table& groups,
                    std::int64_t chunks, std::int64_t model_layers_per_chunk,
                    std::span<double> grad)
      : model_(&model),
        data_(&data),
        groups_(&groups),
        layers_per_chunk_(static_cast<int>(layers / chunks)),
        model_layers_per_chunk_(model_layers_per_chunk),
        grad_(grad) {}

  void forward(const dcp::pipeline_chunk_task& c) {
    auto& state = chunks_[key(c)];
    const MPI_Comm group = groups_->of(c.group);
    state.at.emplace(*data_, c.micro_batch->sample_ids, static_cast<int>(c.group.degree),
                     static_cast<int>(c.group.member));
    std::vector<double> x = c.first ? model_->embed(*state.at) : take(inbox_, c);
    for (int k = 0; k < layers_per_chunk_; ++k) {
      const int l = static_cast<int>(c.virtual_stage) * layers_per_chunk_ + k;
      std::vector<double> y;
      const auto mode =
          checkpointing_of(c.recompute, k, layers_per_chunk_, model_layers_per_chunk_);
      ++modes_[toy::to_string(mode)];
      state.layers.push_back(model_->layer_forward(l, *state.at, std::move(x), group, mode, y));
      x = std::move(y);
    }
    state.output = std::move(x);
  }

  void backward(const dcp::pipeline_chunk_task& c) {
    auto found = chunks_.find(key(c));
    if (found == chunks_.end())
      throw std::runtime_error("pipeline toy: backward of slot " + std::to_string(c.slot) +
                               " virtual stage " + std::to_string(c.virtual_stage) +
                               " before its forward");
    auto& state = found->second;
    const MPI_Comm group = groups_->of(c.group);
    const double scale =
        c.micro_batch->sample_ids.empty()
            ? 0.0
            : c.loss_scale / static_cast<double>(toy::tokens_of(*data_, c.micro_batch->sample_ids));
    std::vector<double> dy =
        c.last ? model_->head_forward_backward(*state.at, state.output, scale, grad_)
               : take(inbox_, c);
    for (int k = layers_per_chunk_ - 1; k >= 0; --k) {
      const int l = static_cast<int>(c.virtual_stage) * layers_per_chunk_ + k;
      dy = model_->layer_backward(l, *state.at, state.layers[std::size_t(k)], dy, group, grad_);
    }
    if (c.first)
      deep_model::embed_backward(*state.at, dy, grad_);
    else
      outbox_[key(c)] = std::move(dy);
    chunks_.erase(found);
  }

  void send(const dcp::pipeline_chunk_task& c, const dcp::pipeline_transfer& t) {
    std::vector<double> payload;
    if (t.payload == dcp::pipeline_payload::activation) {
      payload = std::move(chunks_.at(key(c)).output);  // not the last chunk: no loss to make
    } else {
      payload = take(outbox_, c);
    }
    auto& buffer = in_flight_.emplace_back(std::move(payload));
    if (buffer.empty()) buffer.reserve(1);  // never a null buffer for MPI
    MPI_Request request = MPI_REQUEST_NULL;
    toy::check_mpi(
        MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_DOUBLE,
                  static_cast<int>(t.peer), static_cast<int>(t.tag), MPI_COMM_WORLD, &request),
        "MPI_Isend");
    requests_.push_back(request);
  }

  void receive(const dcp::pipeline_chunk_task& c, const dcp::pipeline_transfer& t) {
    const placement at(*data_, c.micro_batch->sample_ids, static_cast<int>(c.group.degree),
                       static_cast<int>(c.group.member));
    std::vector<double> payload(at.tokens * d + 1);
    MPI_Status status;
    toy::check_mpi(
        MPI_Recv(payload.data(), static_cast<int>(at.tokens * d), MPI_DOUBLE,
                 static_cast<int>(t.peer), static_cast<int>(t.tag), MPI_COMM_WORLD, &status),
        "MPI_Recv");
    int count = 0;
    toy::check_mpi(MPI_Get_count(&status, MPI_DOUBLE, &count), "MPI_Get_count");
    if (static_cast<std::size_t>(count) != at.tokens * d)
      throw std::runtime_error("pipeline toy: received " + std::to_string(count) +
                               " values from rank " + std::to_string(t.peer) + ", expected " +
                               std::to_string(at.tokens * d));
    payload.pop_back();
    inbox_[key(c)] = std::move(payload);
  }

  /// Completes the sends; every chunk's forward must have met its backward.
  void finish() {
    toy::check_mpi(
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
        "MPI_Waitall");
    requests_.clear();
    in_flight_.clear();
    if (!chunks_.empty() || !inbox_.empty() || !outbox_.empty())
      throw std::runtime_error("pipeline toy: the step ended with chunks or messages left over");
  }

  const std::map<std::string, std::int64_t>& modes() const noexcept { return modes_; }

 private:
  struct chunk_state {
    std::optional<placement> at;
    std::vector<layer_state> layers;
    std::vector<double> output;
  };
  using chunk_key = std::pair<std::int64_t, std::int64_t>;  // slot, virtual stage
  static chunk_key key(const dcp::pipeline_chunk_task& c) { return {c.slot, c.virtual_stage}; }
  static std::vector<double> take(std::map<chunk_key, std::vector<double>>& box,
                                  const dcp::pipeline_chunk_task& c) {
    const auto found = box.find(key(c));
    if (found == box.end())
      throw std::runtime_error("pipeline toy: nothing received for slot " + std::to_string(c.slot) +
                               " virtual stage " + std::to_string(c.virtual_stage));
    auto out = std::move(found->second);
    box.erase(found);
    return out;
  }

  const deep_model* model_;
  const toy::batch* data_;
  const group_table* groups_;
  int layers_per_chunk_;
  std::int64_t model_layers_per_chunk_;
  std::span<double> grad_;
  std::map<chunk_key, chunk_state> chunks_;
  std::map<chunk_key, std::vector<double>> inbox_;   // received, for the op that follows
  std::map<chunk_key, std::vector<double>> outbox_;  // input gradients, for the send that follows
  std::deque<std::vector<double>> in_flight_;        // send buffers until finish()
  std::vector<MPI_Request> requests_;
  std::map<std::string, std::int64_t> modes_;  // toy checkpointing mode -> layer forwards
};
static_assert(dcp::pipeline_executor<pipeline_executor>);

// --- the reference, the comparisons and the run
// ---------------------------------------------------

/// The batch unpipelined: every rank holds the whole model and runs every world-th sample alone
/// (a static plan of degree 1), each token's loss scaled by 1 / the batch's tokens; the caller
/// sums over the ranks.
void reference_step(const deep_model& model, const toy::batch& data, int rank, int ranks,
                    std::span<double> grad) {
  const double scale = 1.0 / static_cast<double>(toy::tokens_of(data));
  for (std::size_t id = static_cast<std::size_t>(rank); id < data.size();
       id += static_cast<std::size_t>(ranks)) {
    const std::uint64_t ids[] = {id};
    const placement at(data, ids, 1, 0);
    std::vector<double> x = model.embed(at);
    std::vector<layer_state> states;
    for (int l = 0; l < layers; ++l) {
      std::vector<double> y;
      states.push_back(
          model.layer_forward(l, at, std::move(x), MPI_COMM_SELF, toy::checkpointing::keep_all, y));
      x = std::move(y);
    }
    auto dy = model.head_forward_backward(at, x, scale, grad);
    for (int l = layers - 1; l >= 0; --l)
      dy = model.layer_backward(l, at, states[std::size_t(l)], dy, MPI_COMM_SELF, grad);
    deep_model::embed_backward(at, dy, grad);
  }
}

void all_reduce_sum(std::span<double> values) {
  toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                               MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                 "MPI_Allreduce");
}

/// Max over the parameter tensors of |g - reference|_max / |reference|_max.
double relative_difference(std::span<const double> g, std::span<const double> reference) {
  double worst = 0;
  for (const auto& tensor : deep_layout::tensors()) {
    double scale = 0;
    double difference = 0;
    for (auto i = tensor.begin; i < tensor.end; ++i) {
      scale = std::max(scale, std::abs(reference[i]));
      difference = std::max(difference, std::abs(g[i] - reference[i]));
    }
    if (difference > 0) worst = std::max(worst, scale > 0 ? difference / scale : INFINITY);
  }
  return worst;
}

/// Before training, on a small batch each rank runs alone: the backward pass agrees with central
/// finite differences of the loss (each rank checks every ranks-th parameter); collective.
double finite_difference_error(int rank, int ranks) {
  const toy::batch data = toy::make_batch(data_seed + 1, 0, 3, 4, 12);
  const deep_model base(weight_seed);
  std::vector<double> analytic(deep_layout::parameters + 1, 0.0);
  reference_step(base, data, 0, 1, analytic);
  const auto loss = [&](const deep_model& m) {
    std::vector<double> g(deep_layout::parameters + 1, 0.0);
    reference_step(m, data, 0, 1, g);
    return g[deep_layout::parameters];
  };
  double worst = 0;
  for (auto i = static_cast<std::size_t>(rank); i < deep_layout::parameters;
       i += static_cast<std::size_t>(ranks)) {
    if (analytic[i] == 0 && i < deep_layout::first_layer) continue;  // rows of unused tokens
    const double step = 1e-5;
    deep_model plus = base;
    deep_model minus = base;
    plus.weights()[i] += step;
    minus.weights()[i] -= step;
    const double numeric = (loss(plus) - loss(minus)) / (2 * step);
    worst =
        std::max(worst, std::abs(numeric - analytic[i]) / std::max(std::abs(analytic[i]), 1e-3));
  }
  toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                 "MPI_Allreduce");
  return worst;
}

/// The planner of one grid, and what its plans did over the run.
struct grid_run {
  std::string name;
  dcp::pipeline_planner planner;
  std::set<std::int64_t> slot_counts;
  std::int64_t fewest_micro_batches = INT64_MAX;
  std::int64_t most_micro_batches = 0;
  std::map<std::int64_t, std::int64_t> degrees;              // degree -> micro-batches
  std::map<dcp::recompute_setting, std::int64_t> recompute;  // setting -> chunks
  std::map<std::string, std::int64_t> modes;                 // toy mode -> layer forwards
  double worst_gradient = 0;
  double worst_loss = 0;
};

dcp::pipeline_planner planner_for(std::int64_t virtual_stages) {
  dcp::cluster_spec cluster;
  cluster.gpus = world_ranks;
  cluster.gpus_per_node = world_ranks;
  cluster.gpu = dcp::gpus::h200_sxm();
  dcp::training_spec training;
  training.headroom_fraction = headroom_fraction;
  return dcp::pipeline_planner(dcp::pipeline_cost_model(
      dcp::models::llama3_8b(), std::move(cluster), training, {1, stages, virtual_stages}));
}

/// One pipelined step: its plan's micro-batch count per pipeline and in all, and the gradients
/// (then the scaled loss) summed over the world.
struct step_result {
  std::int64_t slots = 0;
  std::int64_t micro_batches = 0;
  std::vector<double> grad;
};

/// Plans the batch on `run`'s grid, runs this rank's ops and sums the gradients over the world.
step_result pipelined_step(grid_run& run, const deep_model& model, const toy::batch& data,
                           const group_table& groups, int rank) {
  const auto plan = run.planner.plan(toy::planner_samples(data));
  run.slot_counts.insert(plan.slots);
  const auto count = static_cast<std::int64_t>(plan.micro_batches.size());
  run.fewest_micro_batches = std::min(run.fewest_micro_batches, count);
  run.most_micro_batches = std::max(run.most_micro_batches, count);
  for (const auto& mb : plan.micro_batches) {
    ++run.degrees[mb.degree];
    for (const auto& r : mb.recompute) ++run.recompute[r];
  }
  std::vector<double> grad(deep_layout::parameters + 1, 0.0);
  pipeline_executor executor(model, data, groups, plan.grid.chunks(),
                             run.planner.cost().layers_per_chunk(), grad);
  dcp::run_pipeline_step(plan, rank, world_ranks, executor);
  executor.finish();
  for (const auto& [mode, n] : executor.modes()) run.modes[mode] += n;
  all_reduce_sum(grad);
  return {plan.slots, count, std::move(grad)};
}

/// What a run's plans must show: several micro-batch counts, degrees 1 and 2, every toy mode.
std::vector<std::string> check_variety(const grid_run& run) {
  std::vector<std::string> problems;
  if (run.slot_counts.size() < 2)
    problems.push_back(run.name + ": the planner chose one micro-batch count for every step");
  if (!run.degrees.contains(1) || !run.degrees.contains(2))
    problems.push_back(run.name + ": the plans did not use both degrees 1 and 2");
  for (const auto mode : {toy::checkpointing::keep_all, toy::checkpointing::drop_probabilities,
                          toy::checkpointing::keep_input_only})
    if (!run.modes.contains(toy::to_string(mode)))
      problems.push_back(run.name + ": no layer ran with checkpointing " + toy::to_string(mode));
  return problems;
}

/// The toy's modes counted on every rank (each rank runs its own stage's layers).
void sum_modes_over_ranks(grid_run& run) {
  for (const auto mode : {toy::checkpointing::keep_all, toy::checkpointing::drop_probabilities,
                          toy::checkpointing::keep_input_only}) {
    double n = static_cast<double>(run.modes[toy::to_string(mode)]);
    toy::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
                   "MPI_Allreduce");
    if (n > 0)
      run.modes[toy::to_string(mode)] = static_cast<std::int64_t>(n);
    else
      run.modes.erase(toy::to_string(mode));
  }
}

int train_and_compare() {
  auto world = dcp::mpi::communicator::world();
  const int rank = world.rank();
  const bool root = rank == 0;
  if (world.size() != world_ranks) {
    if (root)
      std::cerr << "pipeline_toy needs " << world_ranks << " ranks (mpiexec -n " << world_ranks
                << "), got " << world.size() << std::endl;
    return 1;
  }
  const auto started = std::chrono::steady_clock::now();
  const group_table groups(MPI_COMM_WORLD, pipelines);
  std::vector<grid_run> runs;
  runs.push_back({"1F1B (p 2, v 1)", planner_for(1), {}, INT64_MAX, 0, {}, {}, {}, 0, 0});
  runs.push_back({"interleaved (p 2, v 2)", planner_for(2), {}, INT64_MAX, 0, {}, {}, {}, 0, 0});
  deep_model model(weight_seed);

  std::vector<std::string> problems;
  const double fd_error = finite_difference_error(rank, world_ranks);
  if (!(fd_error <= 1e-6)) {
    char text[120];
    std::snprintf(text, sizeof text,
                  "self-check: the backward pass differs from finite differences by %.3g",
                  fd_error);
    problems.push_back(text);
  }
  if (root)
    std::printf(
        "pipeline toy: %d ranks = 2 stages x 2 pipelines, a %d-layer float64 attention model, %d "
        "steps of %zu sequences (4..128 tokens)\nplans for Llama-3-8B on one node of 4 H200s "
        "(headroom %.0f %%), each toy token planned as %lld tokens\nself-check: backward vs "
        "finite differences, max relative error %.2e\n\n%4s  %-16s  %-11s  %-11s  %s\n",
        world_ranks, layers, steps, batch_size, headroom_fraction * 100,
        static_cast<long long>(toy::planned_tokens_per_token), fd_error, "step", "loss",
        "m / mbs v=1", "m / mbs v=2", "max rel. grad. diff vs unpipelined");

  int steps_run = 0;
  for (int step = 0; step < steps && problems.empty(); ++step, ++steps_run) {
    const toy::batch data = toy::make_batch(data_seed, step, batch_size);
    std::vector<double> reference(deep_layout::parameters + 1, 0.0);
    reference_step(model, data, rank, world_ranks, reference);
    all_reduce_sum(reference);
    const std::span<const double> reference_view(reference);
    const double reference_loss = reference[deep_layout::parameters];
    double worst = 0;
    std::vector<step_result> results;
    for (auto& run : runs) {
      const auto& result = results.emplace_back(pipelined_step(run, model, data, groups, rank));
      const auto& grad = result.grad;
      const double g = relative_difference(grad, reference_view);
      const double l =
          std::abs(grad[deep_layout::parameters] - reference_loss) / std::abs(reference_loss);
      run.worst_gradient = std::max(run.worst_gradient, g);
      run.worst_loss = std::max(run.worst_loss, l);
      worst = std::max(worst, g);
      if (!(g <= tolerance) || !(l <= tolerance)) {
        char text[200];
        std::snprintf(text, sizeof text,
                      "step %d, %s: gradient differs by %.3g, loss by %.3g (relative), more than "
                      "%.0e",
                      step, run.name.c_str(), g, l, tolerance);
        problems.push_back(text);
      }
    }
    if (root && (step % 5 == 0 || step == steps - 1 || !problems.empty()))
      std::printf("%4d  %-16.12g  %2lld / %-6lld  %2lld / %-6lld  %.2e\n", step, reference_loss,
                  static_cast<long long>(results[0].slots),
                  static_cast<long long>(results[0].micro_batches),
                  static_cast<long long>(results[1].slots),
                  static_cast<long long>(results[1].micro_batches), worst);
    for (std::size_t i = 0; i < deep_layout::parameters; ++i)
      model.weights()[i] -= learning_rate * results[0].grad[i];
  }
  for (auto& run : runs) sum_modes_over_ranks(run);
  if (problems.empty())
    for (const auto& run : runs) {
      const auto found = check_variety(run);
      problems.insert(problems.end(), found.begin(), found.end());
    }

  if (root) {
    std::printf("\nwhat the plans did over %d steps:\n", steps_run);
    for (const auto& run : runs) {
      std::string counts;
      for (const auto m : run.slot_counts)
        counts += (counts.empty() ? "" : " ") + std::to_string(m);
      std::printf(
          "  %s: micro-batches per pipeline (m) %s; %lld..%lld micro-batches per step\n"
          "    %s\n    recompute (chunks): %s\n    toy checkpointing (layer forwards): %s\n"
          "    max relative difference vs unpipelined: gradient %.2e, loss %.2e\n",
          run.name.c_str(), counts.c_str(), static_cast<long long>(run.fewest_micro_batches),
          static_cast<long long>(run.most_micro_batches), toy::histogram(run.degrees).c_str(),
          toy::histogram(run.recompute).c_str(), toy::histogram(run.modes).c_str(),
          run.worst_gradient, run.worst_loss);
    }
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - started;
    std::printf("wall time %.2f s\n", elapsed.count());
  }
  if (!problems.empty()) {
    if (root)
      for (const auto& problem : problems) std::fprintf(stderr, "FAILED: %s\n", problem.c_str());
    return 1;
  }
  if (root) std::printf("pipeline toy: passed (tolerance %.0e)\n", tolerance);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // MPI_Init, then train_and_compare(); an exception or a non-zero return on any rank aborts the
  // whole job (the other ranks may wait in a collective this rank will never reach).
  return dcp::mpi::environment::run(argc, argv, [] { return train_and_compare(); });
}
