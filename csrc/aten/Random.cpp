// The random ops: the fills drawn from the device generator (normal_, uniform_, bernoulli_.float,
// random_ and its overloads, exponential_), multinomial (sampling from categorical
// distributions: every sampled `generate`) and dropout (native_dropout, and dropout_on_device,
// the decomposition fused eager records too: Launch.h). They are one concern because they share
// one rule: the generator's state advances by what the kernel draws, so every one of them draws
// from the device generator on the calling thread, after the queued work, and gives the CPU's
// numbers for a seed in every eager mode (runtime/Generator.h, docs/runtime.md).
#include "aten/Charge.h"
#include "aten/DryRun.h"
#include "aten/Entry.h"
#include "aten/HostAlias.h"
#include "aten/Launch.h"
#include "runtime/Generator.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include <cmath>
#include <mutex>

namespace torchtpu::aten {

// (Declared in Launch.h: fused eager's recorder decomposes dropout with it too.)
std::optional<std::tuple<at::Tensor, at::Tensor>> dropout_on_device(const at::Tensor& input,
                                                                     double p,
                                                                     std::optional<bool> train) {
  if ((train.has_value() && !*train) || !(p > 0 && p < 1) || input.numel() == 0 ||
      !at::isFloatingType(input.scalar_type()) || !input.device().is_privateuseone()) {
    return std::nullopt;
  }
  const at::AutoDispatchBelowADInplaceOrView below_autograd;  // as inside a kernel
  at::Tensor noise = at::empty_like(input);  // laid out like the input, as on the CPU
  noise.bernoulli_(1 - p);
  at::Tensor output = input.mul(noise.mul(1 / (1 - p)));
  return std::make_tuple(std::move(output), noise.to(at::kBool));
}

namespace {

// The launch of multinomial on the chip (also a dry run's charge: estimate_random_op): sampling as XLA lowers it, a pass over the
// probabilities that draws a random number per category, divides and reduces to the argmax
// (OpTraits' units of "multinomial"), with a top-k instead for several samples without
// replacement (the units of "topk" more); with replacement, a cumulative sum over the
// probabilities (the units of "cumsum") and per sample a uniform draw (the units of "random")
// and a binary search over the categories (a unit per step).
sim::Estimate multinomial_estimate(const at::Tensor& self, const at::Tensor& out, int64_t n_sample,
                                   bool replacement) {
  static const double sample = op_traits("aten::multinomial").vpu_units;
  static const double topk = op_traits("aten::topk").vpu_units;
  static const double cumsum = op_traits("aten::cumsum").vpu_units;
  static const double draw = op_traits("aten::random").vpu_units;
  const auto& model = sim::cost_model();
  const bool emulated = self.scalar_type() == at::kDouble;
  const double bytes =
      sim::CostModel::padded_bytes(self.sizes(), static_cast<int>(self.element_size())) +
      sim::CostModel::padded_bytes(out.sizes(), static_cast<int>(out.element_size()));
  if (replacement && n_sample > 1) {
    const double steps = std::ceil(std::log2(std::max<double>(2, self.size(-1))));
    return model.combine(model.vector(self.numel(), cumsum, bytes, emulated),
                         model.vector(out.numel(), draw + steps, 0, emulated));
  }
  return model.vector(self.numel(), sample + (n_sample > 1 ? topk : 0), bytes, emulated);
}

}  // namespace

std::optional<sim::Estimate> estimate_random_op(const std::string& name,
                                                c10::ArrayRef<c10::IValue> args,
                                                const std::vector<at::Tensor>& results) {
  if (name.rfind("aten::multinomial", 0) == 0 && !results.empty() && args.size() >= 3 &&
      args[0].isTensor()) {
    return multinomial_estimate(args[0].toTensor(), results[0], args[1].toInt(),
                                args[2].toBool());
  }
  return std::nullopt;
}

namespace {

// The name the random fills charge their launches under (charge_vector, Charge.h).
constexpr char kRandom[] = "aten::random";

// Random fills: the VPU's generator plus the distribution's transform (an assumed 4 units).
// Runs `draw(host generator)` with the device generator (`gen`, else the default of `device`) lent
// to a CPU kernel as a host copy, then takes its state back, also when the kernel raised after
// drawing (as the CPU's generator keeps those draws). The state advances by what the kernel draws,
// known only once it ran: the draw runs on the calling thread, after the queued work.
template <typename Draw>
void with_host_generator(c10::Device device, const std::optional<at::Generator>& gen,
                         Draw&& draw) {
  at::Generator g =
      gen.has_value() && gen->defined() ? *gen : runtime::default_generator(device.index());
  auto* impl = at::check_generator<runtime::GeneratorImpl>(g);
  wait_for_device(device);
  std::lock_guard<std::mutex> lock(g.mutex());
  at::Generator host = impl->host_copy();
  try {
    draw(host);
  } catch (...) {
    impl->assign_from_host(host);
    throw;
  }
  impl->assign_from_host(host);
}

template <typename Fill>
at::Tensor& random_fill(at::Tensor& self, const std::optional<at::Generator>& gen, Fill&& fill) {
  with_host_generator(self.device(), gen, [&](at::Generator& host) {
    auto alias = host_alias(self);
    fill(alias, host);
  });
  charge_vector<kRandom>(self);
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.normal_(mean, std, g); });
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.uniform_(from, to, g); });
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.bernoulli_(p, g); });
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.random_(g); });
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return random_fill(self, gen, [&](at::Tensor& t, at::Generator& g) { t.random_(to, g); });
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> gen) {
  return random_fill(self, gen,
                     [&](at::Tensor& t, at::Generator& g) { t.random_(from, to, g); });
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  return random_fill(self, gen,
                     [&](at::Tensor& t, at::Generator& g) { t.exponential_(lambd, g); });
}

// multinomial: PyTorch's CPU kernel on a host alias of the probabilities with the device
// generator lent to it, so a seed gives the CPU's samples in every eager mode (the
// exponential-race algorithm, argmax or topk of p / q with q ~ Exp(1), without replacement or for
// one sample; the cumulative distribution and a binary search per uniform draw with
// replacement). Like the random fills it runs on the calling thread after the queued work: its
// draws advance the generator by an amount known only once it ran, and the CPU kernel reads the
// values for its checks ("probability tensor contains either `inf`, `nan` or element < 0",
// "invalid multinomial distribution"), which raise at the call with the CPU's messages.
// The host result (int64) is computed into `result`, whose dtype the CPU kernel checks.
void draw_multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                      const std::optional<at::Generator>& gen, at::Tensor& result) {
  with_host_generator(self.device(), gen, [&](at::Generator& host) {
    at::multinomial_out(result, host_alias(self), n_sample, replacement, host);
  });
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  check_same_device("aten::multinomial", {&self, &out});
  at::Tensor result = at::empty({0}, out.options().device(at::kCPU));
  draw_multinomial(self, n_sample, replacement, gen, result);
  {
    const c10::DeviceGuard guard(out.device());
    out.resize_(result.sizes());  // (as the CPU kernel resizes its out= tensor)
  }
  if (result.numel() > 0) host_alias(out).copy_(result);
  sim::record("aten::multinomial", multinomial_estimate(self, out, n_sample, replacement));
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor result = at::empty({0}, self.options().device(at::kCPU).dtype(at::kLong));
  draw_multinomial(self, n_sample, replacement, gen, result);
  at::Tensor out = on_device(result, self.device());
  sim::record("aten::multinomial", multinomial_estimate(self, out, n_sample, replacement));
  return out;
}

// native_dropout: the mask from the device generator (Launch.h), the other cases as the CPU
// kernel computes them.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train) {
  if (auto decomposed = dropout_on_device(input, p, train)) return *decomposed;
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(input.numel() == 0 || at::isFloatingType(input.scalar_type()),
              "dropout: expected a floating-point input on ", input.device(), ", got ",
              input.scalar_type());
  if (input.numel() == 0) return {input, at::empty_like(input)};
  // p = 0 or p = 1 (nn.functional.dropout does not send these here): the same decomposition.
  const double keep = 1 - p;
  at::Tensor noise = at::empty_like(input);
  noise.bernoulli_(keep);
  return {input.mul(noise.mul(keep == 0 ? 0.0 : 1 / keep)), noise.to(at::kBool)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", entry(TORCH_FN(normal_), Capture::random));
  m.impl("uniform_", entry(TORCH_FN(uniform_), Capture::random));
  m.impl("bernoulli_.float", entry(TORCH_FN(bernoulli_float_), Capture::random));
  m.impl("random_", entry(TORCH_FN(random_), Capture::random));
  m.impl("random_.to", entry(TORCH_FN(random_to_), Capture::random));
  m.impl("random_.from", entry(TORCH_FN(random_from_), Capture::random));
  m.impl("exponential_", entry(TORCH_FN(exponential_), Capture::random));
  m.impl("multinomial", entry(TORCH_FN(multinomial), Capture::random));
  m.impl("multinomial.out", entry(TORCH_FN(multinomial_out), Capture::random));
  m.impl("native_dropout", entry(TORCH_FN(native_dropout), Capture::random));
}

}  // namespace torchtpu::aten
