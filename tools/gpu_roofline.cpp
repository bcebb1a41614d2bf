// dcp-gpu-roofline: what one GPU achieves on the work the analytic cost model prices, next to the
// model's assumptions. It measures BF16 GEMM throughput with cuBLAS (cublasGemmEx: BF16 inputs
// and output, FP32 accumulation) at a transformer's GEMM shapes (tokens 128..65536 x Llama-3-8B's
// widths by default), and memory-bound throughput (device-to-device copy and memset, 16 MiB to
// 4 GiB). It prints a Markdown report and a CSV with the achieved rate, its fraction of the GPU's
// peak, and that fraction over the model's constant (dcp::analytic_constants: dense_efficiency,
// hbm_efficiency). Without a GPU it exits with status 1 and says so; bad flags exit with 2.
//
// Timing: CUDA events on one stream (dcp::cuda::event_timer), after warm-up calls; each
// repetition times `inner` back-to-back calls (chosen so one repetition lasts about a
// millisecond, so launch gaps do not dominate small shapes) and the report gives the median and
// the best repetition. Operands are reused between calls, so small GEMMs run partly from L2: an
// upper bound for those shapes. Inputs are random BF16 values in [-1, 1) (zeros would run
// faster than real data).

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cublas_v2.h>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>

#include "dcp/cost/analytic.hpp"
#include "dcp/cuda/check.hpp"
#include "dcp/cuda/event_timer.hpp"
#include "dcp/spec/hardware.hpp"
#include "dcp/spec/model.hpp"

#include "cli_common.hpp"

namespace {

using dcp::cuda::check;
using dcp::tool::usage_error;

constexpr double mib = 1024.0 * 1024.0;

const char* const usage =
    "usage: dcp-gpu-roofline [--gpu h200|h100] [--peak-tflops T] [--peak-tbps B] [--model NAME]\n"
    "                        [--min-tokens N] [--max-tokens N] [--max-mib M] [--reps N] [--warmup "
    "N]\n"
    "                        [--device D] [--csv FILE] [--dry-run]\n"
    "  --gpu          peaks from a preset (default h200: 989.4 TFLOP/s dense BF16, 4.8 TB/s)\n"
    "  --peak-tflops  override the dense BF16 peak, in TFLOP/s\n"
    "  --peak-tbps    override the HBM peak, in TB/s\n"
    "  --model        whose GEMM widths (default llama3-8b: QKV 4096->6144, O 4096->4096,\n"
    "                 gate+up 4096->28672, down 14336->4096); decoder models only\n"
    "  --min-tokens, --max-tokens   token counts, doubling (default 128..65536)\n"
    "  --max-mib      largest copy and memset, doubling from 16 MiB (default 4096)\n"
    "  --reps         timed repetitions per shape, median reported (default 15)\n"
    "  --warmup       untimed calls before timing each shape (default 5)\n"
    "  --device       CUDA device (default 0)\n"
    "  --csv FILE     write the CSV there instead of after the report on stdout\n"
    "  --dry-run      list what would be measured; touches no GPU\n";

struct options {
  dcp::gpu_spec gpu = dcp::gpus::h200_sxm();
  dcp::model_spec model = dcp::models::llama3_8b();
  std::int64_t min_tokens = 128;
  std::int64_t max_tokens = 65536;
  std::int64_t max_mib = 4096;
  int reps = 15;
  int warmup = 5;
  int device = 0;
  std::string csv_path;
  bool dry_run = false;
  bool help = false;
};

options parse(int argc, char** argv) {
  using dcp::tool::detail::parse_integer;
  using dcp::tool::detail::parse_non_negative;
  options o;
  double peak_tflops = -1;
  double peak_tbps = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      o.help = true;
      continue;
    }
    if (flag == "--dry-run") {
      o.dry_run = true;
      continue;
    }
    if (i + 1 >= argc) throw usage_error(std::string(flag) + " needs a value (or is unknown)");
    const std::string_view value = argv[++i];
    if (flag == "--gpu")
      o.gpu = dcp::tool::gpu_named(value);
    else if (flag == "--peak-tflops")
      peak_tflops = parse_non_negative(flag, value);
    else if (flag == "--peak-tbps")
      peak_tbps = parse_non_negative(flag, value);
    else if (flag == "--model")
      o.model = dcp::tool::model_named(value);
    else if (flag == "--min-tokens")
      o.min_tokens = parse_integer<std::int64_t>(flag, value, 1, 1 << 20);
    else if (flag == "--max-tokens")
      o.max_tokens = parse_integer<std::int64_t>(flag, value, 1, 1 << 20);
    else if (flag == "--max-mib")
      o.max_mib = parse_integer<std::int64_t>(flag, value, 16, 1 << 16);
    else if (flag == "--reps")
      o.reps = parse_integer<int>(flag, value, 1, 1000);
    else if (flag == "--warmup")
      o.warmup = parse_integer<int>(flag, value, 0, 1000);
    else if (flag == "--device")
      o.device = parse_integer<int>(flag, value, 0, 1023);
    else if (flag == "--csv")
      o.csv_path = value;
    else
      throw usage_error("unknown flag " + std::string(flag));
  }
  if (peak_tflops == 0 || peak_tbps == 0) throw usage_error("a peak must be positive");
  if (peak_tflops > 0) o.gpu.peak_flops = peak_tflops * 1e12;
  if (peak_tbps > 0) o.gpu.hbm_bandwidth = peak_tbps * 1e12;
  if (o.min_tokens > o.max_tokens)
    throw usage_error("--min-tokens = " + std::to_string(o.min_tokens) +
                      " is above --max-tokens = " + std::to_string(o.max_tokens));
  if (o.model.family != dcp::model_family::decoder_lm)
    throw usage_error("--model " + o.model.name +
                      ": only decoder models have the four GEMMs measured here");
  return o;
}

/// One GEMM of a transformer block: tokens x in -> tokens x out.
struct gemm_shape {
  std::string name;
  std::int64_t in = 0;
  std::int64_t out = 0;
};

/// The block's four GEMMs: fused QKV, attention output, fused gate+up (SwiGLU) or up, down.
std::vector<gemm_shape> block_gemms(const dcp::model_spec& m) {
  const auto up = m.mlp == dcp::mlp_kind::swiglu ? 2 * m.ffn : m.ffn;
  return {{"qkv", m.hidden, m.q_hidden() + 2 * m.kv_hidden()},
          {"o", m.q_hidden(), m.hidden},
          {m.mlp == dcp::mlp_kind::swiglu ? "gate_up" : "up", m.hidden, up},
          {"down", m.ffn, m.hidden}};
}

std::vector<std::int64_t> doubling(std::int64_t first, std::int64_t last) {
  std::vector<std::int64_t> out;
  for (auto v = first; v <= last; v *= 2) out.push_back(v);
  return out;
}

/// One measured line of the report.
struct row {
  std::string kind;  ///< "gemm" or "memory"
  std::string name;  ///< qkv, o, gate_up, down; memcpy_d2d, memset
  std::int64_t tokens = 0;
  std::int64_t m = 0, n = 0, k = 0;  ///< cuBLAS's M x N x K (0 for memory rows)
  double bytes = 0;                  ///< bytes of the buffer (memory rows)
  double work = 0;                   ///< FLOPs, or bytes moved (read + write for a copy)
  int inner = 1;
  double median_seconds = 0;
  double best_seconds = 0;
  double rate() const { return work / median_seconds; }
};

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const char* name = cublasGetStatusName(status);
  const char* text = cublasGetStatusString(status);
  throw dcp::comm_error(call, static_cast<std::int64_t>(status),
                        std::string(name ? name : "") + ": " + (text ? text : ""));
}

/// A device allocation freed with the object.
class device_buffer {
 public:
  explicit device_buffer(std::size_t bytes) : bytes_(bytes) {
    check(cudaMalloc(&data_, bytes), "cudaMalloc");
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { (void)cudaFree(data_); }
  void* data() const noexcept { return data_; }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Fills `buffer` with random BF16 values in [-1, 1): a 32 MiB host pattern, copied over it.
void fill_random_bf16(const device_buffer& buffer, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0F, 1.0F);
  std::vector<std::uint16_t> pattern(std::size_t{16} << 20);
  for (auto& value : pattern) {
    // Float to BF16: keep the top 16 bits, rounding to nearest even.
    const auto bits = std::bit_cast<std::uint32_t>(uniform(random));
    value = static_cast<std::uint16_t>((bits + 0x7FFFU + ((bits >> 16) & 1U)) >> 16);
  }
  const auto pattern_bytes = pattern.size() * sizeof(std::uint16_t);
  auto* target = static_cast<char*>(buffer.data());
  for (std::size_t offset = 0; offset < buffer.bytes(); offset += pattern_bytes)
    check(cudaMemcpy(target + offset, pattern.data(),
                     std::min(pattern_bytes, buffer.bytes() - offset), cudaMemcpyHostToDevice),
          "cudaMemcpy");
}

/// Times `call` (which enqueues one operation on the timer's stream): warm-up, then `reps`
/// repetitions of `inner` back-to-back calls; fills the row's inner, median and best seconds.
template <class F>
void time_into(row& r, dcp::cuda::event_timer& timer, int warmup, int reps, F&& call) {
  // The warm-up also estimates one call's time, which sets `inner`.
  const int estimate_calls = std::max(warmup, 1);
  const double estimate = timer.time([&] {
    for (int i = 0; i < estimate_calls; ++i) call();
  }) / estimate_calls;
  r.inner = static_cast<int>(std::clamp(std::ceil(1e-3 / std::max(estimate, 1e-7)), 1.0, 1000.0));
  std::vector<double> seconds;
  for (int rep = 0; rep < reps; ++rep)
    seconds.push_back(timer.time([&] {
      for (int i = 0; i < r.inner; ++i) call();
    }) / r.inner);
  std::sort(seconds.begin(), seconds.end());
  const auto middle = seconds.size() / 2;
  r.median_seconds =
      seconds.size() % 2 ? seconds[middle] : (seconds[middle - 1] + seconds[middle]) / 2;
  r.best_seconds = seconds.front();
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

/// The median of `values` (0 when empty).
double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

int run(const options& o) {
  const dcp::analytic_constants model;  // the planning defaults this program checks
  const auto gemms = block_gemms(o.model);
  const auto tokens = doubling(o.min_tokens, o.max_tokens);
  const auto sizes_mib = doubling(16, o.max_mib);

  if (o.dry_run) {
    std::cout << "would measure on device " << o.device << " (" << o.gpu << "):\n";
    for (const auto& g : gemms)
      for (const auto t : tokens)
        std::cout << "  gemm " << g.name << " tokens " << t << " (" << g.in << " -> " << g.out
                  << "), " << 2.0 * static_cast<double>(t * g.in * g.out) / 1e9 << " GFLOP\n";
    for (const auto s : sizes_mib) std::cout << "  memcpy_d2d and memset of " << s << " MiB\n";
    return 0;
  }

  int devices = 0;
  const auto counted = cudaGetDeviceCount(&devices);
  if (counted != cudaSuccess || devices == 0) {
    std::cerr << "dcp-gpu-roofline: no CUDA device here";
    if (counted != cudaSuccess)
      std::cerr << " (cudaGetDeviceCount failed with code " << static_cast<int>(counted) << ": "
                << dcp::cuda::detail::error_text(counted) << ")";
    std::cerr << ". It measures a GPU: run it on a machine with one (tools/gpu_check.sh).\n";
    return 1;
  }
  if (o.device >= devices) {
    std::cerr << "dcp-gpu-roofline: --device " << o.device << " but this machine has " << devices
              << " CUDA device(s)\n";
    return 1;
  }
  check(cudaSetDevice(o.device), "cudaSetDevice");
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, o.device), "cudaGetDeviceProperties");
  int runtime_version = 0;
  int driver_version = 0;
  check(cudaRuntimeGetVersion(&runtime_version), "cudaRuntimeGetVersion");
  check(cudaDriverGetVersion(&driver_version), "cudaDriverGetVersion");

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  int cublas_version = 0;
  check_cublas(cublasGetVersion(handle, &cublas_version), "cublasGetVersion");
  dcp::cuda::event_timer timer(stream);
  std::vector<row> rows;

  // --- GEMMs: Y[tokens x out] = X[tokens x in] W[out x in]^T, row-major, as a Linear layer -----
  // cuBLAS is column-major: C (out x tokens) = op(A) B with A = W stored (in x out), op = T,
  // and B = X stored (in x tokens): the "TN" layout.
  std::int64_t max_in = 0;
  std::int64_t max_out = 0;
  std::int64_t max_weight = 0;
  for (const auto& g : gemms) {
    max_in = std::max(max_in, g.in);
    max_out = std::max(max_out, g.out);
    max_weight = std::max(max_weight, g.in * g.out);
  }
  const auto bf16 = static_cast<std::int64_t>(sizeof(std::uint16_t));
  const std::int64_t max_tokens = tokens.empty() ? 0 : tokens.back();
  {
    const device_buffer weights(static_cast<std::size_t>(max_weight * bf16));
    const device_buffer inputs(static_cast<std::size_t>(max_tokens * max_in * bf16));
    const device_buffer outputs(static_cast<std::size_t>(max_tokens * max_out * bf16));
    fill_random_bf16(weights, 1);
    fill_random_bf16(inputs, 2);
    check(cudaDeviceSynchronize(),
          "cudaDeviceSynchronize");  // the timed stream does not wait for it
    const float alpha = 1.0F;
    const float beta = 0.0F;
    for (const auto& g : gemms)
      for (const auto t : tokens) {
        row r;
        r.kind = "gemm";
        r.name = g.name;
        r.tokens = t;
        r.m = g.out;
        r.n = t;
        r.k = g.in;
        r.work =
            2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
        const int m = static_cast<int>(r.m);
        const int n = static_cast<int>(r.n);
        const int k = static_cast<int>(r.k);
        time_into(r, timer, o.warmup, o.reps, [&] {
          check_cublas(
              cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, weights.data(),
                           CUDA_R_16BF, k, inputs.data(), CUDA_R_16BF, k, &beta, outputs.data(),
                           CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
        });
        rows.push_back(r);
        std::cerr << "gemm " << g.name << " tokens " << t << ": " << fixed(r.rate() / 1e12, 1)
                  << " TFLOP/s\n";
      }
  }

  // --- memory-bound: device-to-device copy (reads and writes each byte) and memset (writes) ----
  {
    const std::size_t largest = static_cast<std::size_t>(sizes_mib.back()) << 20;
    const device_buffer from(largest);
    const device_buffer to(largest);
    check(cudaMemset(from.data(), 1, largest), "cudaMemset");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (const auto s : sizes_mib) {
      const std::size_t bytes = static_cast<std::size_t>(s) << 20;
      row copy;
      copy.kind = "memory";
      copy.name = "memcpy_d2d";
      copy.bytes = static_cast<double>(bytes);
      copy.work = 2.0 * static_cast<double>(bytes);
      time_into(copy, timer, o.warmup, o.reps, [&] {
        check(cudaMemcpyAsync(to.data(), from.data(), bytes, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync");
      });
      rows.push_back(copy);
      row set;
      set.kind = "memory";
      set.name = "memset";
      set.bytes = static_cast<double>(bytes);
      set.work = static_cast<double>(bytes);
      time_into(set, timer, o.warmup, o.reps,
                [&] { check(cudaMemsetAsync(to.data(), 0, bytes, stream), "cudaMemsetAsync"); });
      rows.push_back(set);
      std::cerr << "memory " << s << " MiB: copy " << fixed(copy.rate() / 1e12, 2)
                << " TB/s, memset " << fixed(set.rate() / 1e12, 2) << " TB/s\n";
    }
  }
  check_cublas(cublasDestroy(handle), "cublasDestroy");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");

  // --- report ---------------------------------------------------------------------------------
  const double peak_flops = o.gpu.peak_flops;
  const double peak_bandwidth = o.gpu.hbm_bandwidth;
  auto& out = std::cout;
  out << "# GPU roofline: " << properties.name << "\n\n"
      << "- device " << o.device << ": " << properties.multiProcessorCount << " SMs, "
      << fixed(static_cast<double>(properties.totalGlobalMem) / dcp::gib, 1)
      << " GiB, compute capability " << properties.major << "." << properties.minor
      << "; CUDA runtime " << runtime_version << ", driver " << driver_version << ", cuBLAS "
      << cublas_version << "\n"
      << "- peaks (the fractions below are of these): " << fixed(peak_flops / 1e12, 1)
      << " TFLOP/s dense BF16, " << fixed(peak_bandwidth / 1e12, 2) << " TB/s HBM\n"
      << "- the analytic model (dcp::analytic_constants) assumes dense_efficiency = "
      << model.dense_efficiency << " and hbm_efficiency = " << model.hbm_efficiency << "\n"
      << "- " << o.reps << " timed repetitions after " << o.warmup
      << " warm-up calls; median (best) per call; a repetition is `inner` back-to-back calls\n\n";

  out << "## BF16 GEMM, " << o.model.name
      << " widths (cublasGemmEx, BF16 in/out, FP32 accumulate, TN)\n\n"
      << "| GEMM | tokens | M x N x K | inner | median ms | best ms | TFLOP/s | of peak | / model "
         "|\n"
      << "|---|---:|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    if (r.kind != "gemm") continue;
    const double fraction = r.rate() / peak_flops;
    out << "| " << r.name << " | " << r.tokens << " | " << r.m << " x " << r.n << " x " << r.k
        << " | " << r.inner << " | " << fixed(r.median_seconds * 1e3, 4) << " | "
        << fixed(r.best_seconds * 1e3, 4) << " | " << fixed(r.rate() / 1e12, 1) << " | "
        << fixed(fraction, 3) << " | " << fixed(fraction / model.dense_efficiency, 2) << " |\n";
  }
  out << "\n## Memory-bound (a copy moves 2 x its size: read + write)\n\n"
      << "| operation | MiB | inner | median ms | best ms | TB/s | of peak | / model |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& r : rows) {
    if (r.kind != "memory") continue;
    const double fraction = r.rate() / peak_bandwidth;
    out << "| " << r.name << " | " << fixed(r.bytes / mib, 0) << " | " << r.inner << " | "
        << fixed(r.median_seconds * 1e3, 4) << " | " << fixed(r.best_seconds * 1e3, 4) << " | "
        << fixed(r.rate() / 1e12, 3) << " | " << fixed(fraction, 3) << " | "
        << fixed(fraction / model.hbm_efficiency, 2) << " |\n";
  }

  // Summary: the regimes the constants stand for (large GEMMs, large transfers).
  std::vector<double> large_gemm;
  std::vector<double> all_gemm;
  std::vector<double> large_copy;
  std::vector<double> large_set;
  for (const auto& r : rows) {
    if (r.kind == "gemm") {
      all_gemm.push_back(r.rate() / peak_flops);
      if (r.tokens >= 4096) large_gemm.push_back(r.rate() / peak_flops);
    } else if (r.bytes >= 256 * mib) {
      (r.name == "memset" ? large_set : large_copy).push_back(r.rate() / peak_bandwidth);
    }
  }
  out << "\n## Against the model\n\n"
      << "| regime | measured fraction of peak (median) | model constant | measured / model |\n"
      << "|---|---:|---:|---:|\n";
  const auto line = [&](const std::string& regime, const std::vector<double>& values,
                        double constant, const std::string& name) {
    if (values.empty()) return;
    const double measured = median_of(values);
    out << "| " << regime << " | " << fixed(measured, 3) << " | " << name << " = " << constant
        << " | " << fixed(measured / constant, 2) << " |\n";
  };
  line("GEMMs with tokens >= 4096", large_gemm, model.dense_efficiency, "dense_efficiency");
  line("all GEMMs measured", all_gemm, model.dense_efficiency, "dense_efficiency");
  line("device-to-device copies >= 256 MiB", large_copy, model.hbm_efficiency, "hbm_efficiency");
  line("memsets >= 256 MiB", large_set, model.hbm_efficiency, "hbm_efficiency");

  std::ostringstream csv;
  csv << "kind,name,tokens,m,n,k,bytes,inner,median_seconds,best_seconds,rate_per_second,fraction_"
         "of_peak,"
         "model_constant,measured_over_model\n";
  csv << std::setprecision(9);
  for (const auto& r : rows) {
    const bool gemm = r.kind == "gemm";
    const double fraction = r.rate() / (gemm ? peak_flops : peak_bandwidth);
    const double constant = gemm ? model.dense_efficiency : model.hbm_efficiency;
    csv << r.kind << ',' << r.name << ',' << r.tokens << ',' << r.m << ',' << r.n << ',' << r.k
        << ',' << static_cast<std::int64_t>(r.bytes) << ',' << r.inner << ',' << r.median_seconds
        << ',' << r.best_seconds << ',' << r.rate() << ',' << fraction << ',' << constant << ','
        << fraction / constant << '\n';
  }
  if (o.csv_path.empty()) {
    out << "\n## CSV\n\n```csv\n" << csv.str() << "```\n";
  } else {
    std::ofstream file(o.csv_path);
    file << csv.str();
    if (!file) {
      std::cerr << "dcp-gpu-roofline: could not write " << o.csv_path << "\n";
      return 1;
    }
    out << "\nCSV written to " << o.csv_path << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  try {
    o = parse(argc, argv);
  } catch (const usage_error& e) {
    std::cerr << "dcp-gpu-roofline: " << e.what() << "\n" << usage;
    return 2;
  }
  if (o.help) {
    std::cout << usage;
    return 0;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "dcp-gpu-roofline: " << e.what() << "\n";
    return 1;
  }
}
