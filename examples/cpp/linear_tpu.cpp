// linear_tpu: a LibTorch program that trains one step of a small Linear layer on the simulated
// TPU ("tpu:0") and checks every result against the same model on the CPU.
//
// Exit status: 0 all results match, 1 some result differs (printed), 2 a c10::Error was thrown.
#include <torch/torch.h>
#include <torchtpu/torchtpu.h>

#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

namespace {

// Both models run float32 through the same CPU kernels today, so the results are expected to be
// bit-identical; the tolerance leaves room for the simulated MXU numerics (bf16 passes, different
// accumulation order) that will later replace those kernels on the device.
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

int g_mismatches = 0;

// `actual` is a device result, `expected` the CPU reference. Checks the device, then the values.
void check(const std::string& what, const torch::Tensor& actual, const torch::Tensor& expected,
           const torch::Device& expected_device) {
  if (!actual.defined() || !expected.defined()) {
    std::cout << "MISMATCH " << what << ": undefined tensor (actual "
              << (actual.defined() ? "defined" : "undefined") << ", expected "
              << (expected.defined() ? "defined" : "undefined") << ")\n";
    ++g_mismatches;
    return;
  }
  if (actual.device() != expected_device) {
    std::cout << "MISMATCH " << what << ": on " << actual.device() << ", expected on "
              << expected_device << "\n";
    ++g_mismatches;
  }
  const torch::Tensor a = actual.detach().cpu();
  const torch::Tensor e = expected.detach().cpu();
  if (a.sizes() != e.sizes() || a.scalar_type() != e.scalar_type()) {
    std::cout << "MISMATCH " << what << ": " << a.sizes() << " " << a.scalar_type() << " vs "
              << e.sizes() << " " << e.scalar_type() << "\n";
    ++g_mismatches;
    return;
  }
  if (!torch::allclose(a, e, kRtol, kAtol)) {
    const double max_diff = (a - e).abs().max().item<double>();
    std::cout << "MISMATCH " << what << ": max |diff| = " << max_diff << "\n"
              << "  tpu:\n" << a << "\n  cpu:\n" << e << "\n";
    ++g_mismatches;
    return;
  }
  std::cout << "  ok  " << what << "\n";
}

}  // namespace

int main() {
  try {
    const int n = torchtpu::init();
    std::cout << "torchtpu: " << n << " device(s) (device_count() = " << torchtpu::device_count()
              << "), chip " << torchtpu::chip_name() << ", "
              << torchtpu::hbm_capacity_bytes() / (1024 * 1024) << " MiB HBM each\n";

    // Parsing the string (not torchtpu::device()) checks that PrivateUse1 is registered as "tpu".
    const torch::Device dev("tpu:0");
    const torch::Device cpu(torch::kCPU);
    std::cout << "device: " << dev << "\n";

    // CPU model with a fixed seed, and a deep copy of it on the device.
    torch::manual_seed(0);
    torch::nn::Linear cpu_model(16, 8);
    torch::nn::Linear tpu_model(std::dynamic_pointer_cast<torch::nn::LinearImpl>(cpu_model->clone()));
    tpu_model->to(dev);
    check("weight after to(tpu:0)", tpu_model->weight, cpu_model->weight, dev);
    check("bias after to(tpu:0)", tpu_model->bias, cpu_model->bias, dev);

    const torch::Tensor input = torch::randn({4, 16});
    const torch::Tensor target = torch::randn({4, 8});
    const torch::Tensor input_tpu = input.to(dev);
    const torch::Tensor target_tpu = target.to(dev);
    check("input copy", input_tpu, input, dev);

    // Forward, MSE loss, backward on both.
    const torch::Tensor out_cpu = cpu_model->forward(input);
    const torch::Tensor loss_cpu = torch::mse_loss(out_cpu, target);
    loss_cpu.backward();

    const torch::Tensor out_tpu = tpu_model->forward(input_tpu);
    const torch::Tensor loss_tpu = torch::mse_loss(out_tpu, target_tpu);
    loss_tpu.backward();
    torchtpu::synchronize(0);

    std::cout << "loss: cpu " << loss_cpu.item<float>() << ", tpu " << loss_tpu.item<float>()
              << "\n";
    check("output", out_tpu, out_cpu, dev);
    check("loss", loss_tpu, loss_cpu, dev);
    check("weight.grad", tpu_model->weight.grad(), cpu_model->weight.grad(), dev);
    check("bias.grad", tpu_model->bias.grad(), cpu_model->bias.grad(), dev);

    // One SGD step on both.
    torch::optim::SGD opt_cpu(cpu_model->parameters(), torch::optim::SGDOptions(0.1));
    torch::optim::SGD opt_tpu(tpu_model->parameters(), torch::optim::SGDOptions(0.1));
    opt_cpu.step();
    opt_tpu.step();
    torchtpu::synchronize(0);
    check("weight after SGD step", tpu_model->weight, cpu_model->weight, dev);
    check("bias after SGD step", tpu_model->bias, cpu_model->bias, dev);

    // Device-to-device copy.
    if (torchtpu::device_count() > 1) {
      const torch::Device dev1("tpu:1");
      const torch::Tensor on1 = out_tpu.detach().to(dev1);
      torchtpu::synchronize(1);
      check("copy tpu:0 -> tpu:1", on1, out_cpu, dev1);
    } else {
      std::cout << "  skip copy tpu:0 -> tpu:1 (one device)\n";
    }

    int64_t fallback_total = 0;
    const auto fallbacks = torchtpu::fallback_counts();
    for (const auto& kv : fallbacks) fallback_total += kv.second;
    std::cout << "CPU fallbacks: " << fallback_total << " call(s) over " << fallbacks.size()
              << " op(s)\n";
    for (const auto& kv : fallbacks) std::cout << "  " << kv.first << ": " << kv.second << "\n";
    std::cout << "peak memory on tpu:0: " << torchtpu::max_memory_allocated(0) << " bytes\n";

    if (g_mismatches != 0) {
      std::cout << "linear_tpu: FAILED (" << g_mismatches << " mismatch(es))\n";
      return 1;
    }
    std::cout << "linear_tpu: OK\n";
    return 0;
  } catch (const c10::Error& e) {
    std::cerr << "linear_tpu: c10::Error: " << e.what_without_backtrace() << "\n";
    return 2;
  }
}
