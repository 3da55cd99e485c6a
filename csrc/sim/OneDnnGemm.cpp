// oneDNN's matmul, bf16 x bf16 -> f32 (OneDnnGemm.h). Primitives are made once per shape and
// kept (making one is a JIT compilation, about 0.7 ms); each thread executes on a stream and a
// scratchpad of its own (user-managed, so that concurrent executions share no buffer).
#include "sim/OneDnnGemm.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace torchtpu::sim::onednn {
namespace {

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);  // (leaked)
  return *e;
}

struct Prepared {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, scratchpad;
};

using Shape = std::array<int64_t, 6>;  // batch, batch_a, batch_b, M, N, K

std::shared_ptr<const Prepared> prepared(const Shape& s) {
  static std::mutex mutex;
  static auto* cache = new std::map<Shape, std::shared_ptr<const Prepared>>();  // (leaked)
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache->find(s);
    if (it != cache->end()) return it->second;
  }
  using dt = dnnl::memory::data_type;
  using tag = dnnl::memory::format_tag;
  const auto [batch, batch_a, batch_b, M, N, K] = s;
  auto made = std::make_shared<Prepared>();
  made->a = dnnl::memory::desc({batch_a, M, K}, dt::bf16, tag::abc);
  made->b = dnnl::memory::desc({batch_b, K, N}, dt::bf16, tag::abc);
  made->c = dnnl::memory::desc({batch, M, N}, dt::f32, tag::abc);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(made->a, made->b, made->c), attr, engine());
  made->scratchpad = pd.scratchpad_desc();
  made->primitive = dnnl::matmul(pd);
  std::lock_guard<std::mutex> lock(mutex);
  if (cache->size() >= 512) cache->clear();  // (shapes of a program are few; bound the rest)
  return cache->emplace(s, std::move(made)).first->second;
}

}  // namespace

bool available() {
  static const bool yes = [] {
    try {
      // A bf16 matmul with a native (not emulated) kernel: where the CPU has no bf16 dot
      // product, MKL's GEMM is kept.
      dnnl::memory::desc a({1, 64, 64}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::abc);
      dnnl::memory::desc c({1, 64, 64}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::abc);
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine());
      const std::string impl = pd.impl_info_str();
      return impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
}

bool gemm_bf16_f32(int64_t batch, int64_t batch_a, int64_t batch_b, int64_t M, int64_t N,
                   int64_t K, const uint16_t* a, const uint16_t* b, float* c) {
  try {
    const std::shared_ptr<const Prepared> p = prepared({batch, batch_a, batch_b, M, N, K});
    thread_local dnnl::stream stream(engine());
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < p->scratchpad.get_size()) scratch.resize(p->scratchpad.get_size());
    dnnl::engine& e = engine();
    dnnl::memory am(p->a, e, const_cast<uint16_t*>(a)), bm(p->b, e, const_cast<uint16_t*>(b)),
        cm(p->c, e, c), sm(p->scratchpad, e, scratch.data());
    p->primitive.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm},
                                  {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
    stream.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace torchtpu::sim::onednn
