// device_only: a LibTorch program that names the "tpu" device and nothing of torchtpu's API: it
// links torchtpu::torchtpu and never calls torchtpu::init(). The device, its kernels and its
// allocator register themselves when libtorchtpu loads, so the library must be loaded although
// the program references none of its symbols (the exported target keeps it on the link line).
//
// Exit status: 0 the result matches the CPU, 1 it differs, 2 a c10::Error was thrown.
#include <torch/torch.h>

#include <iostream>

int main() {
  try {
    const torch::Device tpu("tpu:0");
    const torch::Tensor a = torch::arange(12, torch::kFloat).reshape({3, 4});
    const torch::Tensor b = torch::ones({4, 2});
    const torch::Tensor on_tpu = torch::matmul(a.to(tpu), b.to(tpu)).relu();
    const bool same = on_tpu.device() == tpu && torch::allclose(on_tpu.cpu(), torch::matmul(a, b).relu());
    std::cout << "device_only: " << (same ? "OK" : "MISMATCH") << " on " << on_tpu.device() << "\n";
    return same ? 0 : 1;
  } catch (const c10::Error& e) {
    std::cout << "device_only: error: " << e.what_without_backtrace() << "\n";
    return 2;
  }
}
