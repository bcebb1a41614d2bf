// Vocabulary: presets match the published parameter counts; value types print and compare.

#include <cmath>
#include <cstdint>
#include <sstream>

#include <doctest/doctest.h>

#include "dcp/dcp.hpp"

#include "../support/errors.hpp"

using namespace dcp;

TEST_CASE("Spec.Models.parameter_counts_within_2_percent_of_published") {
  struct published {
    model_spec model;
    double params;  // source in the comment
  };
  const published table[] = {
      {models::llama3_8b(), 8.030e9},    // HF config: 8,030,261,248
      {models::llama3_70b(), 70.554e9},  // HF config: 70,553,706,496
      {models::qwen25_7b(), 7.61e9},     // Qwen2.5-7B model card: 7.61 B
      {models::qwen25_72b(), 72.7e9},    // Qwen2.5-72B model card: 72.7 B
      {models::qwen3_32b(), 32.8e9},     // Qwen3-32B model card: 32.8 B
      {models::stdit3_xl(), 1.21e9},     // hpcai-tech/OpenSora-STDiT-v3 card: 1.21 B
      {models::wan21_14b(), 14.0e9},     // Wan2.1-T2V-14B: "14B"
  };
  for (const auto& row : table) {
    const auto& model = row.model;
    const double params = row.params;
    CAPTURE(model.name);
    const double ratio = static_cast<double>(model.total_params()) / params;
    CAPTURE(ratio);
    // Wan's "14B" is a rounded name; its configuration gives 14.29 B (docs/cost-sources.md §6).
    CHECK(std::abs(ratio - 1.0) <= (model.name == "Wan2.1-14B" ? 0.025 : 0.02));
  }
  CHECK(models::llama3_8b().total_params() == 8'030'261'248);
  CHECK(models::llama3_70b().total_params() == 70'553'706'496);
  // Qwen3-32B model card: 31.2 B non-embedding parameters (the blocks and the final norm).
  const auto qwen3 = models::qwen3_32b();
  const double non_embedding = static_cast<double>(qwen3.layers * qwen3.block_params());
  CHECK(std::abs(non_embedding / 31.2e9 - 1.0) <= 0.02);
}

TEST_CASE("Spec.Models.head_dim_sets_the_attention_width") {
  // Qwen3-32B: 64 heads of 128, so q and the attention output are 8192 wide, not hidden 5120.
  const auto qwen3 = models::qwen3_32b();
  CHECK(qwen3.head_width() == 128);
  CHECK(qwen3.q_hidden() == 8192);
  CHECK(qwen3.kv_hidden() == 1024);
  const std::int64_t h = 5120;
  CHECK(qwen3.block_params() == 2 * h * 8192 + 2 * h * 1024 + 3 * h * 25600 + 2 * h);
  auto biased = qwen3;
  biased.qkv_bias = true;
  CHECK(biased.block_params() - qwen3.block_params() == 8192 + 2 * 1024);

  // head_dim 0 is hidden / heads: every preset keeps its width, and an explicit head_dim of
  // hidden / heads describes the same model (equal counts), though not an equal spec.
  const auto llama = models::llama3_8b();
  CHECK(llama.head_dim == 0);
  CHECK(llama.head_width() == 128);
  CHECK(llama.q_hidden() == llama.hidden);
  auto explicit_width = llama;
  explicit_width.head_dim = 128;
  CHECK(explicit_width.total_params() == llama.total_params());
  CHECK(explicit_width.per_token_params() == llama.per_token_params());
  CHECK_FALSE(explicit_width == llama);
  for (const auto& dit : {models::stdit3_xl(), models::wan21_14b()}) {
    auto set = dit;
    set.head_dim = dit.hidden / dit.heads;
    CAPTURE(dit.name);
    CHECK(set.total_params() == dit.total_params());
    CHECK(set.per_token_params() == dit.per_token_params());
  }

  // Wider heads add exactly their q, k, v and o weights.
  auto wide = llama;
  wide.head_dim = 256;
  CHECK(wide.block_params() - llama.block_params() == 2 * 4096 * 4096 + 2 * 4096 * 1024);
}

TEST_CASE("Spec.Models.head_dim_is_validated") {
  using dcp::test::contains;
  using dcp::test::message_of;
  // With head_dim set, the hidden size need not be a multiple of the heads.
  auto model = models::llama3_8b();
  model.hidden = 4100;
  auto msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "hidden = 4100 is not a multiple of heads = 32"));
  CHECK(contains(msg, "head_dim"));
  model.head_dim = 128;
  CHECK_NOTHROW(model.validate());

  model = models::llama3_8b();
  model.head_dim = -1;
  msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "model 'Llama-3-8B': head_dim = -1, must be >= 0"));
  model.head_dim = model_spec::max_dimension + 1;
  msg = message_of([&] { model.validate(); });
  CHECK(contains(msg, "head_dim = 2147483648, must be at most 2147483647"));
}

TEST_CASE("Spec.Values.print_and_compare") {
  std::ostringstream os;
  os << text_sample(3, 100) << ' ' << models::llama3_8b() << ' ' << gpus::h200_sxm() << ' '
     << hgx_cluster(4, gpus::h200_sxm()) << ' ' << training_spec{} << ' '
     << execution_config{4, sequence_parallel::ring, recompute_setting::partial(3)};
  const auto text = os.str();
  CHECK(text.find("sample{id=3, tokens=100") != std::string::npos);
  CHECK(text.find("Llama-3-8B") != std::string::npos);
  CHECK(text.find("heads=32/8, head_dim=128 (hidden/heads)") != std::string::npos);
  CHECK(text.find("H200") != std::string::npos);
  CHECK(text.find("degree=4, ring, recompute=layers:3") != std::string::npos);
  CHECK(text_sample(1, 5) == text_sample(1, 5));
  CHECK_FALSE(text_sample(1, 5) == text_sample(1, 6));
  CHECK(models::qwen25_7b() == models::qwen25_7b());
  CHECK_FALSE(models::qwen25_7b() == models::qwen25_72b());
  std::ostringstream qwen3;
  qwen3 << models::qwen3_32b();
  CHECK(qwen3.str().find("heads=64/8, head_dim=128, ffn=25600") != std::string::npos);
  CHECK(hgx_cluster(2, gpus::h100_sxm()) == hgx_cluster(2, gpus::h100_sxm()));
  CHECK(recompute_setting::none() < recompute_setting::partial(1));
  CHECK(to_string(recompute_setting::selective_only()) == "selective");
  CHECK(video_sample(1, {3, 4, 5}).tokens == 60);
}
