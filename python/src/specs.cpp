// The specs (model, GPU, cluster, training, execution config), their enums and presets, samples
// and micro-batch shapes, the execution report.

#include "dcp/spec/execution_report.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/micro_batch_shape.hpp"
#include "dcp/spec/model.hpp"
#include "dcp/spec/sample.hpp"
#include "dcp/spec/training.hpp"

#include "bindings.hpp"

namespace dcp::python {

namespace {

void bind_enums(py::module_& m) {
  py::enum_<attention_kind>(m, "AttentionKind", "How a sample's tokens attend to each other.")
      .value("causal", attention_kind::causal, "decoder LLM: each token sees its prefix")
      .value("full", attention_kind::full, "bidirectional over the whole sample")
      .value("factorised", attention_kind::factorised,
             "spatial attention within a frame, then temporal across frames (STDiT)");
  py::enum_<mlp_kind>(m, "MlpKind", "The MLP of a transformer block.")
      .value("swiglu", mlp_kind::swiglu)
      .value("gelu", mlp_kind::gelu);
  py::enum_<model_family>(m, "ModelFamily", "Decoder LM or diffusion transformer.")
      .value("decoder_lm", model_family::decoder_lm)
      .value("diffusion_transformer", model_family::diffusion_transformer);
  py::enum_<precision>(m, "Precision", "Training precision.")
      .value("bf16_mixed", precision::bf16_mixed);
  py::enum_<sequence_parallel>(m, "SequenceParallel", "How a group shares one sequence.")
      .value("ulysses", sequence_parallel::ulysses, "all-to-all over heads (DeepSpeed-Ulysses)")
      .value("ring", sequence_parallel::ring, "K/V passed around a ring (ring attention)")
      .value("hybrid", sequence_parallel::hybrid,
             "Ulysses inside a node-local group, ring attention across the groups (USP)")
      .value("auto", sequence_parallel::automatic,
             "training-level only: the planner chooses ulysses, ring or hybrid per micro-batch");
  py::enum_<lockstep_mode>(m, "LockstepMode",
                           "Whether every rank runs the same number of micro-steps, round by "
                           "round (dcp::lockstep_mode).")
      .value("auto", lockstep_mode::automatic, "on with ZeRO-3, off otherwise")
      .value("on", lockstep_mode::on,
             "always (FSDP SHARD_GRAD_OP, ZeRO-2 reducing gradients every micro-step)")
      .value("off", lockstep_mode::off,
             "ranks run as many micro-steps as their work needs; invalid with ZeRO-3");
  py::enum_<loss_normalisation>(m, "LossNormalisation", "What the global loss is averaged over.")
      .value("tokens", loss_normalisation::tokens)
      .value("samples", loss_normalisation::samples);
}

void bind_model(py::module_& m) {
  record<model_spec>(
      m, "ModelSpec",
      "Shapes of a transformer (dcp::model_spec). For a diffusion transformer "
      "with factorised attention, layers counts spatial and temporal blocks together.")
      .field("name", &model_spec::name, "display name")
      .field("family", &model_spec::family, "ModelFamily")
      .field("layers", &model_spec::layers, "transformer blocks")
      .field("hidden", &model_spec::hidden, "hidden size")
      .field("heads", &model_spec::heads, "attention heads")
      .field("kv_heads", &model_spec::kv_heads, "key/value heads (GQA)")
      .field("ffn", &model_spec::ffn, "MLP inner size")
      .field("vocab", &model_spec::vocab, "vocabulary (0 for models without an LM head)")
      .field("mlp", &model_spec::mlp, "MlpKind")
      .field("qkv_bias", &model_spec::qkv_bias, "q/k/v projections carry biases")
      .field("attention", &model_spec::attention, "the model's native AttentionKind")
      .field("text_tokens", &model_spec::text_tokens,
             "cross-attention context (DiT captions), tokens")
      .field("text_embed_dim", &model_spec::text_embed_dim, "width of the text encoder output")
      .field("head_dim", &model_spec::head_dim,
             "width of one attention head; 0 means hidden / heads (head_width())")
      .finish()
      .def("head_width", &model_spec::head_width,
           "the width of one head in use: head_dim, or hidden / heads where head_dim is 0")
      .def("q_hidden", &model_spec::q_hidden,
           "width of q and of the attention output: heads * head_width()")
      .def("kv_hidden", &model_spec::kv_hidden, "width of k or v: kv_heads * head_width()")
      .def("has_cross_attention", &model_spec::has_cross_attention, "text_tokens > 0")
      .def("block_params", &model_spec::block_params, "parameters of one transformer block")
      .def("outer_params", &model_spec::outer_params, "parameters outside the blocks")
      .def("total_params", &model_spec::total_params, "all parameters")
      .def("per_token_params", &model_spec::per_token_params,
           "parameters that act on every token in matrix multiplies")
      .def("validate", &model_spec::validate,
           "Raise InvalidSpec naming the first inconsistent field, its value and the limit.")
      .def_readonly_static("max_dimension", &model_spec::max_dimension,
                           "largest value of a shape field");

  auto presets = m.def_submodule("models", "Model presets (dcp::models).");
  presets.def("llama3_8b", &models::llama3_8b, "Llama-3-8B");
  presets.def("llama3_70b", &models::llama3_70b, "Llama-3-70B");
  presets.def("qwen25_7b", &models::qwen25_7b, "Qwen2.5-7B");
  presets.def("qwen25_72b", &models::qwen25_72b, "Qwen2.5-72B");
  presets.def("qwen3_32b", &models::qwen3_32b, "Qwen3-32B: 64 heads of head_dim 128 (q 8192 wide)");
  presets.def("stdit3_xl", &models::stdit3_xl,
              "OpenSora 1.2 STDiT3-XL/2: 28 spatial + 28 temporal blocks, factorised attention");
  presets.def("wan21_14b", &models::wan21_14b, "Wan2.1-T2V-14B: 40 blocks, full 3D attention");
}

void bind_hardware(py::module_& m) {
  record<gpu_spec>(m, "GpuSpec", "One GPU (dcp::gpu_spec).")
      .field("name", &gpu_spec::name, "display name")
      .field("peak_flops", &gpu_spec::peak_flops, "dense BF16 tensor-core FLOP/s")
      .field("memory_bytes", &gpu_spec::memory_bytes,
             "HBM capacity as the driver reports it, bytes")
      .field("hbm_bandwidth", &gpu_spec::hbm_bandwidth, "HBM bandwidth, bytes/s")
      .field("streaming_multiprocessors", &gpu_spec::streaming_multiprocessors,
             "SMs, for GEMM efficiency at small token counts (0 = unknown: no fixed GEMM cost)")
      .finish();

  auto gpu_presets = m.def_submodule("gpus", "GPU presets (dcp::gpus).");
  gpu_presets.def("h100_sxm", &gpus::h100_sxm,
                  "H100 SXM5 80 GB: 989.4 TFLOP/s dense BF16, 3.35 TB/s");
  gpu_presets.def("h200_sxm", &gpus::h200_sxm,
                  "H200 SXM 141 GB: 989.4 TFLOP/s dense BF16, 4.8 TB/s");

  record<cluster_spec>(m, "ClusterSpec",
                       "gpus GPUs in nodes of gpus_per_node, an NVSwitch domain per node and one "
                       "NIC per GPU (dcp::cluster_spec).")
      .field("gpus", &cluster_spec::gpus, "GPUs in the cluster (the data-parallel world)")
      .field("gpus_per_node", &cluster_spec::gpus_per_node, "GPUs per node")
      .field("gpu", &cluster_spec::gpu, "GpuSpec of every GPU")
      .field("nvlink_bandwidth", &cluster_spec::nvlink_bandwidth,
             "per GPU all-to-all bus bandwidth, bytes/s")
      .field("nic_bandwidth", &cluster_spec::nic_bandwidth, "per GPU network bandwidth, bytes/s")
      .field("intra_node_latency", &cluster_spec::intra_node_latency,
             "per collective inside a node, seconds")
      .field("inter_node_latency", &cluster_spec::inter_node_latency,
             "per collective across nodes, seconds")
      .finish()
      .def("nodes", &cluster_spec::nodes, "gpus / gpus_per_node")
      .def("node_of", &cluster_spec::node_of, py::arg("rank"), "the node of a rank")
      .def("validate", &cluster_spec::validate,
           "Raise InvalidSpec naming the first bad field, its value and the limit.")
      .def_readonly_static("max_gpus", &cluster_spec::max_gpus,
                           "largest cluster a spec may describe");

  m.def(
      "hgx_cluster",
      [](py::handle nodes, gpu_spec gpu) {
        return hgx_cluster(from_python<std::int64_t>(nodes, "hgx_cluster: nodes"), std::move(gpu));
      },
      py::arg("nodes"), py::arg("gpu"), "`nodes` HGX nodes of 8 GPUs each.");
  m.attr("gib") = gib;
}

void bind_training(py::module_& m) {
  record<training_spec>(m, "TrainingSpec",
                        "How the model is trained: precision, ZeRO stage, memory headroom, loss "
                        "normalisation (dcp::training_spec).")
      .field("mixed_precision", &training_spec::mixed_precision, "Precision")
      .field("zero_stage", &training_spec::zero_stage, "ZeRO stage over the whole world, 0..3")
      .field("headroom_bytes", &training_spec::headroom_bytes,
             "bytes kept free per GPU (the larger of this and headroom_fraction of capacity)")
      .field("headroom_fraction", &training_spec::headroom_fraction,
             "fraction of capacity kept free")
      .field("runtime_reserve_bytes", &training_spec::runtime_reserve_bytes,
             "CUDA context and NCCL buffers, bytes")
      .field("sp", &training_spec::sp,
             "SequenceParallel style of every group, or automatic: chosen per micro-batch")
      .field("normalise_by", &training_spec::normalise_by, "LossNormalisation")
      .field("chunked_cross_entropy", &training_spec::chunked_cross_entropy,
             "fused/chunked cross-entropy: no full logits tensor")
      .field("lockstep", &training_spec::lockstep, "LockstepMode: auto (on with ZeRO-3), on or off")
      .finish()
      .def("runs_in_lockstep", &training_spec::runs_in_lockstep,
           "whether plans are put in lockstep: lockstep on, or auto under ZeRO-3")
      .def("headroom", &training_spec::headroom, py::arg("cluster"), "bytes kept free per GPU")
      .def("memory_budget", &training_spec::memory_budget, py::arg("cluster"),
           "bytes a micro-batch may use at its peak on one GPU: capacity minus headroom")
      .def("validate", &training_spec::validate, py::arg("cluster"),
           "Raise InvalidSpec naming the first bad field, its value and the limit.");

  record<recompute_setting>(m, "RecomputeSetting",
                            "Activation recomputation of a micro-batch: `layers` blocks fully "
                            "recomputed, `selective` recomputes the cheap parts of the others.")
      .field("layers", &recompute_setting::layers,
             "blocks fully recomputed (checkpointed at their input)")
      .field("selective", &recompute_setting::selective,
             "recompute norms and MLP activations of the others")
      .finish()
      .def_static("none", &recompute_setting::none, "no recomputation")
      .def_static("selective_only", &recompute_setting::selective_only, "selective, no full layers")
      .def_static(
          "full",
          [](py::handle layers) {
            return recompute_setting::full(
                from_python<std::int32_t>(layers, "RecomputeSetting.full: layers"));
          },
          py::arg("model_layers"), "every one of the model's layers recomputed")
      .def_static(
          "partial",
          [](py::handle layers) {
            return recompute_setting::partial(
                from_python<std::int32_t>(layers, "RecomputeSetting.partial: layers"));
          },
          py::arg("recomputed_layers"), "this many layers recomputed")
      .def("is_none", &recompute_setting::is_none, "no layers and not selective")
      .def(py::self < py::self)
      .def(py::self <= py::self)
      .def(py::self > py::self)
      .def(py::self >= py::self)
      .def("__str__", [](const recompute_setting& r) { return to_string(r); });

  record<execution_config>(m, "ExecutionConfig",
                           "What a micro-batch runs with: a group of `degree` GPUs sharing each "
                           "sequence (dcp::execution_config).")
      .field("degree", &execution_config::degree, "GPUs in the group, a power of two")
      .field("sp", &execution_config::sp, "SequenceParallel style")
      .field("recompute", &execution_config::recompute, "RecomputeSetting")
      .finish();
  m.def(
      "validate",
      [](const execution_config& c, const model_spec& model, const cluster_spec& cluster) {
        validate(c, model, cluster);
      },
      py::arg("config"), py::arg("model"), py::arg("cluster"),
      "Raise InvalidSpec if `config` cannot run `model` on `cluster`.");
}

void bind_samples(py::module_& m) {
  record<video_shape>(m, "VideoShape",
                      "A video sample's latent token grid: tokens = frames * height * width "
                      "(latent patches).")
      .field("frames", &video_shape::frames, "latent frames")
      .field("height", &video_shape::height, "latent patches per column")
      .field("width", &video_shape::width, "latent patches per row")
      .finish()
      .def("tokens", &video_shape::tokens, "frames * height * width")
      .def("tokens_per_frame", &video_shape::tokens_per_frame, "height * width");

  record<sample>(m, "Sample",
                 "One sample of a global batch (dcp::sample); `id` must be unique within a batch.")
      .field("id", &sample::id, "what plans refer to, uint64")
      .field("tokens", &sample::tokens, "tokens of the sample")
      .field("attention", &sample::attention, "AttentionKind")
      .field("video", &sample::video, "VideoShape for video samples, else None")
      .finish();

  m.def(
      "text_sample",
      [](py::handle id, py::handle tokens) {
        return text_sample(from_python<std::uint64_t>(id, "text_sample: id"),
                           from_python<std::int64_t>(tokens, "text_sample: tokens"));
      },
      py::arg("id"), py::arg("tokens"), "A text sample of `tokens` tokens with causal attention.");
  m.def(
      "video_sample",
      [](py::handle id, const video_shape& shape, attention_kind attention) {
        return video_sample(from_python<std::uint64_t>(id, "video_sample: id"), shape, attention);
      },
      py::arg("id"), py::arg("shape"), py::arg("attention") = attention_kind::factorised,
      "A video sample over a latent grid; tokens are frames * height * width.");

  record<micro_batch_shape>(m, "MicroBatchShape",
                            "The additive summary of a micro-batch that cost models read.")
      .field("samples", &micro_batch_shape::samples, "samples in the micro-batch")
      .field("tokens", &micro_batch_shape::tokens, "tokens in the micro-batch")
      .field("longest", &micro_batch_shape::longest, "tokens of the longest sample")
      .field("attention_pairs", &micro_batch_shape::attention_pairs,
             "self-attention (query, key) pairs per layer")
      .finish()
      .def_static("of", &micro_batch_shape::of, py::arg("sample"), "the shape of one sample")
      .def_static("pairs_of", &micro_batch_shape::pairs_of, py::arg("sample"),
                  "attention pairs of one sample")
      .def(py::self + py::self)
      .def(py::self += py::self);

  record<execution_report>(m, "ExecutionReport", "What the framework measured for one micro-batch.")
      .field("seconds", &execution_report::seconds,
             "wall time of forward + backward, seconds (0: not measured)")
      .field("peak_bytes", &execution_report::peak_bytes, "peak device bytes (0: not measured)")
      .field("out_of_memory", &execution_report::out_of_memory, "ran out of device memory")
      .finish();
}

}  // namespace

void bind_specs(py::module_& m) {
  bind_enums(m);
  bind_model(m);
  bind_hardware(m);
  bind_training(m);
  bind_samples(m);
}

}  // namespace dcp::python
