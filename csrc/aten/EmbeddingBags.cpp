// Table-batched embedding bags on tpu: the device work behind fbgemm's TBE lookups
// (SplitTableBatchedEmbeddingBagsCodegen, which TorchRec's fused EmbeddingBagCollection shards
// run), as ops of torchtpu's own namespace `torchtpu_tbe` (docs/torchrec.md, "How it works"):
//
//   forward(weights, weights_offsets, D_offsets, total_D, max_D, indices, offsets,
//           pooling_mode, indice_weights?, output_dtype) -> output
//   backward(grad_output, weights!, weights_offsets, D_offsets, indices, offsets, pooling_mode,
//            indice_weights?, optimizer, states!, state_offsets, learning_rate?, hyper, iter)
//   indice_weights_grad(grad_output, weights, weights_offsets, D_offsets, indices, offsets,
//                       feature_requires_grad?) -> grad of the per-sample weights
//   bounds_check(rows_per_table, indices!, offsets!, bounds_check_mode, warning!)
//
// fbgemm's layout: every table's rows are one flat `weights` buffer; feature t reads its table
// at element weights_offsets[t], rows of D_t = D_offsets[t+1] - D_offsets[t] elements; the
// batch's bags are offsets[t * B + b] .. offsets[t * B + b + 1] of `indices`; the pooled output
// is (B, total_D) with feature t in columns D_offsets[t] .. D_offsets[t+1] (pooling_mode 0 sum,
// 1 mean; 2 none: one (max_D) row per index). The backward is fbgemm's "exact" one with its
// fused optimizer: the gradients of every row looked up are summed first (a row looked up twice
// is updated once), then the optimizer updates the row and its state in place: sgd, rowwise
// adagrad, adagrad or adam, with fbgemm's formulas (docs/torchrec.md, "The optimizers"); or
// "gradient": the summed row gradients are added into `weights` (a zeroed gradient buffer: the
// backward of fbgemm's dense, unfused TBE, whose gradient an optimizer outside applies).
//
// Each kernel waits for the device and computes on host aliases of device memory (device memory
// is host memory), on the calling thread, then charges one launch to the cost model: the rows it
// gathers from (and scatters to) HBM, each row one sublane of the (8 x 128) memory tile (its
// elements padded to 128 lanes), plus the indices, offsets and the dense operands; the pooling
// adds and the optimizer's arithmetic on the VPU.
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"
#include "sim/Ledger.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

namespace torchtpu::aten {
namespace {

constexpr char kForward[] = "torchtpu_tbe::forward";
constexpr char kBackward[] = "torchtpu_tbe::backward";
constexpr char kIndiceGrad[] = "torchtpu_tbe::indice_weights_grad";

enum Pooling : int64_t { kSum = 0, kMean = 1, kNone = 2 };

// The small metadata tensors (offsets per feature), read on the host.
std::vector<int64_t> host_longs(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  const at::Tensor h = (t.device().is_privateuseone() ? host_alias(t) : t)
                           .to(at::kLong).contiguous();
  return std::vector<int64_t>(h.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>() + h.numel());
}

at::Tensor host_of(const at::Tensor& t) {
  return t.device().is_privateuseone() ? host_alias(t) : t;
}

// The batch's geometry: T features, B bags each, and for each bag its [begin, end) in indices.
struct Bags {
  std::vector<int64_t> D_offsets, weights_offsets, offsets;
  std::vector<int64_t> indices;
  int64_t T = 0, B = 0;
  int64_t D(int64_t t) const { return D_offsets[t + 1] - D_offsets[t]; }
  int64_t begin(int64_t t, int64_t b) const { return offsets[t * B + b]; }
  int64_t end(int64_t t, int64_t b) const { return offsets[t * B + b + 1]; }
};

Bags read_bags(const char* op, const at::Tensor& weights, const at::Tensor& weights_offsets,
               const at::Tensor& D_offsets, const at::Tensor& indices, const at::Tensor& offsets) {
  Bags g;
  g.D_offsets = host_longs(D_offsets);
  g.weights_offsets = host_longs(weights_offsets);
  g.offsets = host_longs(offsets);
  g.indices = host_longs(indices);
  g.T = static_cast<int64_t>(g.D_offsets.size()) - 1;
  TORCH_CHECK(g.T >= 1 && static_cast<int64_t>(g.weights_offsets.size()) == g.T, op,
              ": D_offsets has ", g.D_offsets.size(), " entries and weights_offsets ",
              g.weights_offsets.size(), "; expected T + 1 and T");
  TORCH_CHECK(!g.offsets.empty() && (g.offsets.size() - 1) % g.T == 0, op, ": offsets has ",
              g.offsets.size(), " entries, not T * B + 1 for T = ", g.T,
              " (variable batch sizes per feature are not supported on tpu)");
  g.B = static_cast<int64_t>(g.offsets.size() - 1) / g.T;
  const int64_t n = static_cast<int64_t>(g.indices.size());
  const int64_t rows_end = weights.numel();
  for (int64_t t = 0; t < g.T; ++t) {
    for (int64_t b = 0; b < g.B; ++b) {
      TORCH_CHECK(g.begin(t, b) >= 0 && g.begin(t, b) <= g.end(t, b) && g.end(t, b) <= n, op,
                  ": offsets are not increasing within [0, ", n, "] at feature ", t, " bag ", b);
      for (int64_t l = g.begin(t, b); l < g.end(t, b); ++l) {
        const int64_t start = g.weights_offsets[t] + g.indices[l] * g.D(t);
        TORCH_CHECK_INDEX(g.indices[l] >= 0 && start + g.D(t) <= rows_end, op, ": index ",
                          g.indices[l], " of feature ", t, " is out of its table");
      }
    }
  }
  return g;
}

// One gathered (or scattered) row of D elements of `bytes` each: one sublane of the memory tile.
double row_bytes(int64_t D, int64_t bytes) {
  return static_cast<double>((D + 127) / 128 * 128 * bytes);
}

double dense_bytes(const at::Tensor& t) {
  if (!t.defined() || t.numel() == 0) return 0;
  return sim::CostModel::padded_bytes(t.sizes(), static_cast<int>(t.element_size()));
}

template <typename scalar_t>
void pool_rows(const Bags& g, const scalar_t* w, const float* pw, int64_t pooling,
               float* out, int64_t total_D, int64_t max_D) {
  at::parallel_for(0, g.T * g.B, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t t = i / g.B, b = i % g.B, D = g.D(t);
      const int64_t begin = g.begin(t, b), end = g.end(t, b);
      if (pooling == kNone) {
        for (int64_t l = begin; l < end; ++l) {
          const scalar_t* row = w + g.weights_offsets[t] + g.indices[l] * D;
          for (int64_t d = 0; d < D; ++d) out[l * max_D + d] = static_cast<float>(row[d]);
        }
        continue;
      }
      float* o = out + b * total_D + g.D_offsets[t];
      std::fill(o, o + D, 0.0f);
      for (int64_t l = begin; l < end; ++l) {
        const scalar_t* row = w + g.weights_offsets[t] + g.indices[l] * D;
        const float s = pw != nullptr ? pw[l] : 1.0f;
        for (int64_t d = 0; d < D; ++d) o[d] += s * static_cast<float>(row[d]);
      }
      if (pooling == kMean && end > begin) {
        const float inv = 1.0f / static_cast<float>(end - begin);
        for (int64_t d = 0; d < D; ++d) o[d] *= inv;
      }
    }
  });
}

void check_tbe_devices(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  check_same_device(op, tensors);
  for (const at::Tensor* t : tensors) {
    TORCH_CHECK(t == nullptr || !t->defined() || t->device().is_privateuseone(), op,
                ": expected tpu tensors, got one on ", t->device());
  }
}

at::Tensor tbe_forward(const at::Tensor& weights, const at::Tensor& weights_offsets,
                       const at::Tensor& D_offsets, int64_t total_D, int64_t max_D,
                       const at::Tensor& indices, const at::Tensor& offsets, int64_t pooling,
                       const std::optional<at::Tensor>& indice_weights,
                       at::ScalarType output_dtype) {
  const at::Tensor pw_dev = indice_weights.value_or(at::Tensor());
  check_tbe_devices(kForward, {&weights, &weights_offsets, &D_offsets, &indices, &offsets,
                               &pw_dev});
  TORCH_CHECK(pooling == kSum || pooling == kMean || pooling == kNone, kForward,
              ": pooling_mode ", pooling, " (0 sum, 1 mean, 2 none)");
  const c10::DeviceGuard guard(weights.device());
  wait_for_device(weights.device());
  static const std::string name(kForward);  // (HostTime keeps its address)
  const runtime::metrics::HostTime timed(name, /*lasting=*/true);
  const Bags g = read_bags(kForward, weights, weights_offsets, D_offsets, indices, offsets);
  const int64_t n = static_cast<int64_t>(g.indices.size());
  at::Tensor pooled = pooling == kNone
                          ? at::empty({n, max_D}, weights.options().dtype(at::kFloat))
                          : at::empty({g.B, total_D}, weights.options().dtype(at::kFloat));
  at::Tensor pw;
  if (pw_dev.defined()) pw = host_of(pw_dev).to(at::kFloat).contiguous();
  const at::Tensor hw = host_alias(weights).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, hw.scalar_type(), "tbe_forward", [&] {
    pool_rows<scalar_t>(g, hw.const_data_ptr<scalar_t>(),
                        pw.defined() ? pw.const_data_ptr<float>() : nullptr, pooling,
                        host_alias(pooled).data_ptr<float>(), total_D, max_D);
  });
  at::Tensor out = pooled;
  if (output_dtype != at::kFloat) {
    out = at::empty(pooled.sizes(), pooled.options().dtype(output_dtype));
    host_alias(out).copy_(host_alias(pooled));
  }
  // The charge: the rows gathered, the indices, offsets and weights read, the output written.
  double gathered = 0, elements = 0;
  for (int64_t t = 0; t < g.T; ++t) {
    const int64_t looked_up = g.B > 0 ? g.end(t, g.B - 1) - g.begin(t, 0) : 0;
    gathered += looked_up * row_bytes(g.D(t), weights.element_size());
    elements += static_cast<double>(looked_up) * g.D(t);
  }
  const double bytes = gathered + dense_bytes(indices) + dense_bytes(offsets) +
                       dense_bytes(pw_dev) + dense_bytes(out);
  sim::record(kForward, sim::cost_model().vector(static_cast<int64_t>(elements),
                                                 pw_dev.defined() ? 2.0 : 1.0, bytes));
  return out;
}

// The summed gradient of every row looked up: rows[k] is (feature, index) of the k-th distinct
// row (in order of first lookup), grads[k * max_D ...] its gradient.
struct RowGrads {
  std::vector<std::pair<int64_t, int64_t>> rows;
  std::vector<float> grads;
  int64_t lookups = 0;
};

RowGrads row_gradients(const Bags& g, const float* go, const float* pw, int64_t pooling,
                       int64_t grad_stride, int64_t max_D) {
  RowGrads r;
  std::unordered_map<int64_t, int64_t> slot_of;  // element offset of the row -> slot
  for (int64_t t = 0; t < g.T; ++t) {
    const int64_t D = g.D(t);
    for (int64_t b = 0; b < g.B; ++b) {
      const int64_t begin = g.begin(t, b), end = g.end(t, b);
      const float scale = pooling == kMean && end > begin ? 1.0f / (end - begin) : 1.0f;
      for (int64_t l = begin; l < end; ++l) {
        const int64_t key = g.weights_offsets[t] + g.indices[l] * D;
        auto [it, fresh] = slot_of.emplace(key, static_cast<int64_t>(r.rows.size()));
        if (fresh) {
          r.rows.emplace_back(t, g.indices[l]);
          r.grads.resize(r.grads.size() + max_D, 0.0f);
        }
        float* acc = r.grads.data() + it->second * max_D;
        const float* src = pooling == kNone ? go + l * grad_stride
                                            : go + b * grad_stride + g.D_offsets[t];
        const float s = scale * (pw != nullptr ? pw[l] : 1.0f);
        for (int64_t d = 0; d < D; ++d) acc[d] += s * src[d];
        ++r.lookups;
      }
    }
  }
  return r;
}

// fbgemm's optimizers, one distinct row at a time (docs/torchrec.md, "The optimizers").
struct Update {
  std::string optimizer;
  float lr = 0, eps = 0, weight_decay = 0, beta1 = 0, beta2 = 0;
  int64_t weight_decay_mode = 0, iter = 0;
  std::vector<float*> states;
  std::vector<std::vector<int64_t>> state_offsets;
};

template <typename scalar_t>
void update_row(const Update& u, scalar_t* w, const float* g, int64_t D, int64_t t,
                int64_t index) {
  if (u.optimizer == "gradient") {
    for (int64_t d = 0; d < D; ++d) w[d] = static_cast<float>(w[d]) + g[d];
  } else if (u.optimizer == "sgd") {
    for (int64_t d = 0; d < D; ++d) w[d] = static_cast<float>(w[d]) - u.lr * g[d];
  } else if (u.optimizer == "rowwise_adagrad") {
    float sum_square = 0;
    for (int64_t d = 0; d < D; ++d) {
      const float gd = u.weight_decay_mode == 1
                           ? g[d] + u.weight_decay * static_cast<float>(w[d]) : g[d];
      sum_square += gd * gd;
    }
    float& momentum = u.states[0][u.state_offsets[0][t] + index];
    momentum += sum_square / static_cast<float>(D);
    const float multiplier = u.lr / (std::sqrt(momentum) + u.eps);
    const float correction = u.weight_decay_mode == 1 ? 1.0f - multiplier * u.weight_decay
                             : (u.weight_decay_mode == 2 || u.weight_decay_mode == 5)
                                 ? 1.0f - u.lr * u.weight_decay : 1.0f;
    for (int64_t d = 0; d < D; ++d) {
      w[d] = correction * static_cast<float>(w[d]) - g[d] * multiplier;
    }
  } else if (u.optimizer == "adagrad") {
    float* m = u.states[0] + u.state_offsets[0][t] + index * D;
    for (int64_t d = 0; d < D; ++d) {
      m[d] += g[d] * g[d];
      w[d] = static_cast<float>(w[d]) - u.lr * g[d] / (std::sqrt(m[d]) + u.eps);
    }
  } else {  // adam
    float* m1 = u.states[0] + u.state_offsets[0][t] + index * D;
    float* m2 = u.states[1] + u.state_offsets[1][t] + index * D;
    const float c1 = 1.0f - std::pow(u.beta1, static_cast<float>(u.iter));
    const float c2 = 1.0f - std::pow(u.beta2, static_cast<float>(u.iter));
    for (int64_t d = 0; d < D; ++d) {
      m1[d] = u.beta1 * m1[d] + (1.0f - u.beta1) * g[d];
      m2[d] = u.beta2 * m2[d] + (1.0f - u.beta2) * g[d] * g[d];
      const float step = (m1[d] / c1) / (std::sqrt(m2[d] / c2) + u.eps) +
                         u.weight_decay * static_cast<float>(w[d]);
      w[d] = static_cast<float>(w[d]) - u.lr * step;
    }
  }
}

// VPU operations per element of a row update, and the state bytes moved per row, by optimizer.
std::pair<double, double> update_cost(const std::string& optimizer, int64_t D) {
  if (optimizer == "sgd" || optimizer == "gradient") return {2, 0};
  if (optimizer == "rowwise_adagrad") return {6, 2 * row_bytes(1, 4)};
  if (optimizer == "adagrad") return {6, 2 * row_bytes(D, 4)};
  return {14, 4 * row_bytes(D, 4)};  // adam: two states, each read and written
}


Update read_update(const std::string& optimizer, const at::TensorList& states,
                   const at::TensorList& state_offsets,
                   const std::optional<at::Tensor>& learning_rate,
                   at::ArrayRef<double> hyper, int64_t iter) {
  static const std::vector<std::string> known{"gradient", "sgd", "rowwise_adagrad", "adagrad",
                                              "adam"};
  TORCH_CHECK(std::find(known.begin(), known.end(), optimizer) != known.end(), kBackward,
              ": optimizer '", optimizer, "' (tpu has sgd, rowwise_adagrad, adagrad, adam and "
              "gradient)");
  const size_t needed = optimizer == "sgd" || optimizer == "gradient" ? 0
                        : optimizer == "adam"                         ? 2
                                                                      : 1;
  TORCH_CHECK(states.size() == needed && state_offsets.size() == needed, kBackward, ": ",
              optimizer, " keeps ", needed, " state tensors, got ", states.size());
  TORCH_CHECK(hyper.size() == 5, kBackward, ": hyper is (eps, weight_decay, weight_decay_mode, "
              "beta1, beta2)");
  Update u;
  u.optimizer = optimizer;
  TORCH_CHECK(optimizer == "gradient" || (learning_rate.has_value() && learning_rate->defined()),
              kBackward, ": ", optimizer, " takes a learning rate tensor");
  if (optimizer != "gradient") u.lr = host_of(*learning_rate).to(at::kFloat).item<float>();
  u.eps = static_cast<float>(hyper[0]);
  u.weight_decay = static_cast<float>(hyper[1]);
  u.weight_decay_mode = static_cast<int64_t>(hyper[2]);
  u.beta1 = static_cast<float>(hyper[3]);
  u.beta2 = static_cast<float>(hyper[4]);
  u.iter = iter;
  TORCH_CHECK(u.weight_decay_mode == 0 || u.weight_decay == 0 || optimizer == "rowwise_adagrad" ||
                  optimizer == "adam", kBackward, ": weight decay with ", optimizer);
  for (size_t i = 0; i < needed; ++i) {
    TORCH_CHECK(states[i].scalar_type() == at::kFloat && states[i].is_contiguous(), kBackward,
                ": optimizer states are contiguous float32 tensors");
    u.states.push_back(host_alias(states[i]).data_ptr<float>());
    u.state_offsets.push_back(host_longs(state_offsets[i]));
  }
  return u;
}

void tbe_backward(const at::Tensor& grad_output, const at::Tensor& weights,
                  const at::Tensor& weights_offsets, const at::Tensor& D_offsets,
                  const at::Tensor& indices, const at::Tensor& offsets, int64_t pooling,
                  const std::optional<at::Tensor>& indice_weights, c10::string_view optimizer,
                  at::TensorList states, at::TensorList state_offsets,
                  const std::optional<at::Tensor>& learning_rate, at::ArrayRef<double> hyper,
                  int64_t iter) {
  const at::Tensor pw_dev = indice_weights.value_or(at::Tensor());
  check_tbe_devices(kBackward, {&grad_output, &weights, &weights_offsets, &D_offsets, &indices,
                                &offsets, &pw_dev});
  TORCH_CHECK(weights.is_contiguous(), kBackward, ": the weights are one contiguous buffer");
  const c10::DeviceGuard guard(weights.device());
  wait_for_device(weights.device());
  static const std::string name(kBackward);  // (HostTime keeps its address)
  const runtime::metrics::HostTime timed(name, /*lasting=*/true);
  const Bags g = read_bags(kBackward, weights, weights_offsets, D_offsets, indices, offsets);
  const Update u = read_update(std::string(optimizer), states, state_offsets, learning_rate,
                               hyper, iter);
  const at::Tensor go = host_of(grad_output).to(at::kFloat).contiguous();
  at::Tensor pw;
  if (pw_dev.defined()) pw = host_of(pw_dev).to(at::kFloat).contiguous();
  int64_t max_D = 0;
  for (int64_t t = 0; t < g.T; ++t) max_D = std::max(max_D, g.D(t));
  const RowGrads r = row_gradients(g, go.const_data_ptr<float>(),
                                   pw.defined() ? pw.const_data_ptr<float>() : nullptr, pooling,
                                   go.size(1), max_D);
  const at::Tensor hw = host_alias(weights);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, hw.scalar_type(), "tbe_backward", [&] {
    scalar_t* w = hw.data_ptr<scalar_t>();
    const int64_t rows = static_cast<int64_t>(r.rows.size());
    at::parallel_for(0, rows, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t k = lo; k < hi; ++k) {
        const auto [t, index] = r.rows[k];
        const int64_t D = g.D(t);
        update_row<scalar_t>(u, w + g.weights_offsets[t] + index * D,
                             r.grads.data() + k * max_D, D, t, index);
      }
    });
  });
  // The charge: the gradient and the lookups read, each distinct row (and its optimizer state)
  // gathered and scattered back, the gradient sums and the update on the VPU.
  double bytes = dense_bytes(grad_output) + dense_bytes(indices) + dense_bytes(offsets) +
                 dense_bytes(pw_dev), elements = 0;
  for (const auto& [t, index] : r.rows) {
    const auto [units, state_bytes] = update_cost(u.optimizer, g.D(t));
    bytes += 2 * row_bytes(g.D(t), weights.element_size()) + state_bytes;
    elements += units * g.D(t);
  }
  elements += static_cast<double>(r.lookups) * max_D * (pw_dev.defined() ? 2 : 1);
  sim::record(kBackward, sim::cost_model().vector(static_cast<int64_t>(elements), 1.0, bytes));
}

// The gradient of each per-sample weight: the dot product of its row with its bag's gradient
// (zero for features that do not require it; mean pooling has no per-sample weights in fbgemm).
at::Tensor tbe_indice_weights_grad(const at::Tensor& grad_output, const at::Tensor& weights,
                                   const at::Tensor& weights_offsets, const at::Tensor& D_offsets,
                                   const at::Tensor& indices, const at::Tensor& offsets,
                                   const std::optional<at::Tensor>& feature_requires_grad) {
  check_tbe_devices(kIndiceGrad, {&grad_output, &weights, &weights_offsets, &D_offsets,
                                  &indices, &offsets});
  const c10::DeviceGuard guard(weights.device());
  wait_for_device(weights.device());
  static const std::string name(kIndiceGrad);  // (HostTime keeps its address)
  const runtime::metrics::HostTime timed(name, /*lasting=*/true);
  const Bags g = read_bags(kIndiceGrad, weights, weights_offsets, D_offsets, indices, offsets);
  std::vector<int64_t> wanted;
  if (feature_requires_grad.has_value() && feature_requires_grad->defined()) {
    wanted = host_longs(*feature_requires_grad);
  }
  const at::Tensor go = host_of(grad_output).to(at::kFloat).contiguous();
  const at::Tensor hw = host_alias(weights).to(at::kFloat).contiguous();
  at::Tensor grad = at::zeros({indices.numel()}, weights.options().dtype(at::kFloat));
  float* out = host_alias(grad).data_ptr<float>();
  const float* w = hw.const_data_ptr<float>();
  const float* gp = go.const_data_ptr<float>();
  double gathered = 0, elements = 0;
  for (int64_t t = 0; t < g.T; ++t) {
    if (!wanted.empty() && wanted[t] == 0) continue;
    const int64_t D = g.D(t);
    for (int64_t b = 0; b < g.B; ++b) {
      const float* gb = gp + b * go.size(1) + g.D_offsets[t];
      for (int64_t l = g.begin(t, b); l < g.end(t, b); ++l) {
        const float* row = w + g.weights_offsets[t] + g.indices[l] * D;
        float dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += row[d] * gb[d];
        out[l] = dot;
        gathered += row_bytes(D, weights.element_size());
        elements += 2.0 * D;
      }
    }
  }
  const double bytes = gathered + dense_bytes(grad_output) + dense_bytes(indices) +
                       dense_bytes(offsets) + dense_bytes(grad);
  sim::record(kIndiceGrad, sim::cost_model().vector(static_cast<int64_t>(elements), 1.0, bytes));
  return grad;
}

// fbgemm's bounds check of a batch (bounds_check_indices), in place: mode 0 (FATAL) raises at
// the first bag or index out of range, 1 (WARNING) and 2 (IGNORE) repair them: offsets clamped
// into [0, number of indices] (a bag's end not before its start, the last offset the number of
// indices), indices outside their table's rows set to 0; WARNING counts the repairs in
// warning[0] (zeroed first). -1 marks a pruned row and is left alone.
template <typename index_t>
int64_t check_bounds(const std::vector<int64_t>& rows, index_t* ind, int64_t n, index_t* off,
                     int64_t total_B, int64_t mode) {
  const int64_t T = static_cast<int64_t>(rows.size()), B = total_B / T;
  int64_t repairs = 0;
  if (off[total_B] != n) {
    TORCH_CHECK(mode != 0, "bounds_check_indices: the last offset is ", off[total_B],
                ", not the number of indices ", n);
    off[total_B] = static_cast<index_t>(n);
    ++repairs;
  }
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      int64_t begin = off[t * B + b], end = off[t * B + b + 1];
      if (begin < 0 || begin > end || end > n) {
        TORCH_CHECK(mode != 0, "bounds_check_indices: bag ", b, " of table ", t, " spans [",
                    begin, ", ", end, ") of ", n, " indices");
        begin = std::max<int64_t>(0, std::min(begin, n));
        end = std::max(begin, std::min(end, n));
        off[t * B + b] = static_cast<index_t>(begin);
        off[t * B + b + 1] = static_cast<index_t>(end);
        ++repairs;
      }
      for (int64_t l = begin; l < end; ++l) {
        if (ind[l] == -1 || (ind[l] >= 0 && ind[l] < rows[t])) continue;
        TORCH_CHECK_INDEX(mode != 0, "bounds_check_indices: index ", ind[l], " of table ", t,
                          " (", rows[t], " rows)");
        ind[l] = 0;
        ++repairs;
      }
    }
  }
  return repairs;
}

void tbe_bounds_check(const at::Tensor& rows_per_table, const at::Tensor& indices,
                      const at::Tensor& offsets, int64_t mode, const at::Tensor& warning) {
  static const char* op = "torchtpu_tbe::bounds_check";
  check_tbe_devices(op, {&rows_per_table, &indices, &offsets, &warning});
  TORCH_CHECK(mode >= 0 && mode <= 2, op, ": bounds_check_mode ", mode,
              " (0 fatal, 1 warning, 2 ignore)");
  TORCH_CHECK(indices.scalar_type() == offsets.scalar_type() && indices.is_contiguous() &&
                  offsets.is_contiguous() && warning.scalar_type() == at::kLong,
              op, ": contiguous indices and offsets of one integer type, int64 warning");
  const c10::DeviceGuard guard(indices.device());
  wait_for_device(indices.device());
  static const std::string name(op);  // (HostTime keeps its address)
  const runtime::metrics::HostTime timed(name, /*lasting=*/true);
  const std::vector<int64_t> rows = host_longs(rows_per_table);
  const int64_t total_B = offsets.numel() - 1;
  TORCH_CHECK(!rows.empty() && total_B >= 0 && total_B % static_cast<int64_t>(rows.size()) == 0,
              op, ": offsets of ", offsets.numel(), " entries for ", rows.size(), " tables");
  const at::Tensor hi = host_alias(indices), ho = host_alias(offsets);
  int64_t repairs = 0;
  AT_DISPATCH_INDEX_TYPES(hi.scalar_type(), "tbe_bounds_check", [&] {
    repairs = check_bounds<index_t>(rows, hi.data_ptr<index_t>(), hi.numel(),
                                    ho.data_ptr<index_t>(), total_B, mode);
  });
  if (mode == 1) {
    host_alias(warning).view(-1)[0].fill_(repairs);
    if (repairs > 0) TORCH_WARN(op, ": ", repairs, " bags or indices out of range repaired");
  }
  const double bytes = 2 * (dense_bytes(indices) + dense_bytes(offsets));
  sim::record(op, sim::cost_model().vector(indices.numel() + offsets.numel(), 2.0, bytes));
}

// Meta kernels: the results' shapes (fused eager's recorder and dry runs size the ops by them;
// a dry run, which has no index values, prices the calls as one pass over their operands).
at::Tensor tbe_forward_meta(const at::Tensor& weights, const at::Tensor&,
                            const at::Tensor& D_offsets, int64_t total_D, int64_t max_D,
                            const at::Tensor& indices, const at::Tensor& offsets, int64_t pooling,
                            const std::optional<at::Tensor>&, at::ScalarType output_dtype) {
  const auto options = weights.options().dtype(output_dtype);
  if (pooling == kNone) return at::empty({indices.numel(), max_D}, options);
  const int64_t T = std::max<int64_t>(D_offsets.numel() - 1, 1);
  return at::empty({(offsets.numel() - 1) / T, total_D}, options);
}

void tbe_backward_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                       const at::Tensor&, const at::Tensor&, int64_t,
                       const std::optional<at::Tensor>&, c10::string_view, at::TensorList,
                       at::TensorList, const std::optional<at::Tensor>&, at::ArrayRef<double>,
                       int64_t) {}

at::Tensor tbe_indice_weights_grad_meta(const at::Tensor&, const at::Tensor& weights,
                                        const at::Tensor&, const at::Tensor&,
                                        const at::Tensor& indices, const at::Tensor&,
                                        const std::optional<at::Tensor>&) {
  return at::empty({indices.numel()}, weights.options().dtype(at::kFloat));
}

}  // namespace

TORCH_LIBRARY(torchtpu_tbe, m) {
  m.def("forward(Tensor weights, Tensor weights_offsets, Tensor D_offsets, int total_D, "
        "int max_D, Tensor indices, Tensor offsets, int pooling_mode, Tensor? indice_weights, "
        "ScalarType output_dtype) -> Tensor");
  m.def("backward(Tensor grad_output, Tensor(a!) weights, Tensor weights_offsets, "
        "Tensor D_offsets, Tensor indices, Tensor offsets, int pooling_mode, "
        "Tensor? indice_weights, str optimizer, Tensor(b!)[] states, Tensor[] state_offsets, "
        "Tensor? learning_rate, float[] hyper, int iter) -> ()");
  m.def("indice_weights_grad(Tensor grad_output, Tensor weights, Tensor weights_offsets, "
        "Tensor D_offsets, Tensor indices, Tensor offsets, Tensor? feature_requires_grad) "
        "-> Tensor");
  m.def("bounds_check(Tensor rows_per_table, Tensor(a!) indices, Tensor(b!) offsets, "
        "int bounds_check_mode, Tensor(c!) warning) -> ()");
}

// (Capture::none: each runs at once, after the pending work it depends on; its values decide
// how much it gathers, so it reads the indices on the host, as fbgemm's CPU kernels do)
TORCH_LIBRARY_IMPL(torchtpu_tbe, PrivateUse1, m) {
  m.impl("forward", entry(TORCH_FN(tbe_forward), Capture::none));
  m.impl("backward", entry(TORCH_FN(tbe_backward), Capture::none));
  m.impl("indice_weights_grad", entry(TORCH_FN(tbe_indice_weights_grad), Capture::none));
  m.impl("bounds_check", entry(TORCH_FN(tbe_bounds_check), Capture::none));
}

TORCH_LIBRARY_IMPL(torchtpu_tbe, Meta, m) {
  m.impl("forward", TORCH_FN(tbe_forward_meta));
  m.impl("backward", TORCH_FN(tbe_backward_meta));
  m.impl("indice_weights_grad", TORCH_FN(tbe_indice_weights_grad_meta));
  m.impl("bounds_check", [](const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t,
                            const at::Tensor&) {});
}

}  // namespace torchtpu::aten
