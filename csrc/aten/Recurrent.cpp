// Fused GRU and LSTM cells. PyTorch's RNN code calls these fused kernels (which exist only for
// CUDA upstream) for any device that is not the CPU, so nn.GRU, nn.LSTM and their cells need
// them on "tpu". They are element-wise work on the VPU: written here with PyTorch's host
// element-wise ops on host aliases of the device tensors, the results copied to the device.
// The workspaces are this file's own layout, produced by the forward kernels and read only by
// the backward kernels below:
//   GRU:  [batch, 5H] = (r, z, n, hx, hidden_gates_n)
//   LSTM: [batch, 4H] = (i, f, g, o), the activated gates
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "aten/OpTraits.h"
#include "runtime/Metrics.h"
#include "sim/CostModel.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

at::Tensor host_or_undefined(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? host_alias(*t) : at::Tensor();
}

// The names the cells charge their launches under.
constexpr char kGru[] = "aten::_thnn_fused_gru_cell";
constexpr char kGruBackward[] = "aten::_thnn_fused_gru_cell_backward";
constexpr char kLstm[] = "aten::_thnn_fused_lstm_cell";
constexpr char kLstmBackward[] = "aten::_thnn_fused_lstm_cell_backward";

// At the op's VPU units (OpTraits, found once per op: a static of the template).
template <const char* op>
void charge(const at::Tensor& biggest) {
  static const double units = op_traits(op).vpu_units;
  const double bytes =
      4 * sim::CostModel::padded_bytes(biggest.sizes(), static_cast<int>(biggest.element_size()));
  sim::record(op, sim::cost_model().vector(biggest.numel(), units, bytes));
}

std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates,
                                            const at::Tensor& hidden_gates, const at::Tensor& hx,
                                            const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  check_same_device("aten::_thnn_fused_gru_cell", {&input_gates, &hidden_gates, &hx});
  wait_for_device(hx.device());
  at::Tensor ig = host_alias(input_gates), hg = host_alias(hidden_gates);
  const at::Tensor ib = host_or_undefined(input_bias), hb = host_or_undefined(hidden_bias);
  if (ib.defined()) ig = ig + ib;
  if (hb.defined()) hg = hg + hb;
  const auto i = ig.chunk(3, 1), h = hg.chunk(3, 1);
  const at::Tensor hx_h = host_alias(hx);
  const at::Tensor r = at::sigmoid(i[0] + h[0]);
  const at::Tensor z = at::sigmoid(i[1] + h[1]);
  const at::Tensor n = at::tanh(i[2] + r * h[2]);
  const at::Tensor hy = n + z * (hx_h - n);
  const at::Tensor workspace = at::cat({r, z, n, hx_h, h[2]}, 1);
  charge<kGru>(workspace);
  return {on_device(hy, hx.device()), on_device(workspace, hx.device())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  check_same_device("aten::_thnn_fused_gru_cell_backward", {&grad_hy, &workspace});
  wait_for_device(workspace.device());
  const auto w = host_alias(workspace).chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor g = host_alias(grad_hy);
  const at::Tensor d_n = g * (1 - z) * (1 - n * n);  // through tanh
  const at::Tensor d_z = g * (hx - n) * z * (1 - z);  // through sigmoid
  const at::Tensor d_r = d_n * hn * r * (1 - r);
  const at::Tensor grad_input_gates = at::cat({d_r, d_z, d_n}, 1);
  const at::Tensor grad_hidden_gates = at::cat({d_r, d_z, d_n * r}, 1);
  const at::Tensor grad_hx = g * z;
  at::Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = grad_input_gates.sum(0);
    grad_hidden_bias = grad_hidden_gates.sum(0);
  }
  charge<kGruBackward>(workspace);
  const auto d = grad_hy.device();
  return {on_device(grad_input_gates, d), on_device(grad_hidden_gates, d), on_device(grad_hx, d),
          on_device(grad_input_bias, d), on_device(grad_hidden_bias, d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  check_same_device("aten::_thnn_fused_lstm_cell", {&input_gates, &hidden_gates, &cx});
  wait_for_device(cx.device());
  at::Tensor gates = host_alias(input_gates) + host_alias(hidden_gates);
  const at::Tensor ib = host_or_undefined(input_bias), hb = host_or_undefined(hidden_bias);
  if (ib.defined()) gates = gates + ib;
  if (hb.defined()) gates = gates + hb;
  const auto c = gates.chunk(4, 1);
  const at::Tensor i = at::sigmoid(c[0]), f = at::sigmoid(c[1]), g = at::tanh(c[2]),
                   o = at::sigmoid(c[3]);
  const at::Tensor cy = f * host_alias(cx) + i * g;
  const at::Tensor hy = o * at::tanh(cy);
  const at::Tensor workspace = at::cat({i, f, g, o}, 1);
  charge<kLstm>(workspace);
  const auto d = cx.device();
  return {on_device(hy, d), on_device(cy, d), on_device(workspace, d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy,
    const at::Tensor& cx, const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  check_same_device("aten::_thnn_fused_lstm_cell_backward_impl", {&cx, &cy, &workspace});
  wait_for_device(cx.device());
  const auto w = host_alias(workspace).chunk(4, 1);
  const at::Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  const at::Tensor tanh_cy = at::tanh(host_alias(cy));
  const at::Tensor ghy = host_or_undefined(grad_hy), gcy = host_or_undefined(grad_cy);
  at::Tensor d_c = at::zeros_like(tanh_cy);
  if (gcy.defined()) d_c = d_c + gcy;
  at::Tensor d_o = at::zeros_like(tanh_cy);
  if (ghy.defined()) {
    d_c = d_c + ghy * o * (1 - tanh_cy * tanh_cy);
    d_o = ghy * tanh_cy;
  }
  const at::Tensor grad_gates = at::cat({d_c * g * i * (1 - i), d_c * host_alias(cx) * f * (1 - f),
                                         d_c * i * (1 - g * g), d_o * o * (1 - o)},
                                        1);
  const at::Tensor grad_cx = d_c * f;
  const at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  charge<kLstmBackward>(workspace);
  const auto d = cx.device();
  return {on_device(grad_gates, d), on_device(grad_cx, d), on_device(grad_bias, d)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_gru_cell", entry(TORCH_FN(gru_cell), Capture::new_results));
  m.impl("_thnn_fused_gru_cell_backward", entry(TORCH_FN(gru_cell_backward), Capture::new_results));
  m.impl("_thnn_fused_lstm_cell", entry(TORCH_FN(lstm_cell), Capture::new_results));
  m.impl("_thnn_fused_lstm_cell_backward_impl",
         entry(TORCH_FN(lstm_cell_backward), Capture::new_results));
}

}  // namespace torchtpu::aten
