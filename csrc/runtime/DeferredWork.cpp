#include "runtime/DeferredWork.h"

#include <array>
#include <atomic>
#include <cstddef>

namespace torchtpu::runtime {
namespace {

constexpr std::array<FlushPolicy, 25> kPolicies = {{
    {"host read", false, true},
    {"host-to-device copy", false, false},
    {"random op", true, false},
    {"CPU fallback", true, false},
    {"op not known to the lowering", true, false},
    {"out= tensor sized by the kernel", true, false},
    {"matmul run at once (dtype check or fallback)", true, false},
    {"no meta kernel", true, false},
    {"arguments refused by the meta kernel (run at once)", false, true},
    {"uint16/32/64 op the CPU kernel may lack (run at once)", true, true},
    {"custom op without a tpu kernel", false, true},
    {"graph size limit", false, false},
    {"repeated ops", false, true},
    {"memory pressure", false, false},
    {"storage access", false, false},
    {"storage resize", false, true},
    {"memory statistics", false, false},
    {"mode switch", false, true},
    {"explicit sync", false, true},
    {"device synchronize", false, true},
    {"stream synchronize", false, true},
    {"stream change", false, false},
    {"event record", false, false},
    {"collective", false, true},
    {"compiled graph", false, false},
}};
static_assert(kPolicies.size() == static_cast<size_t>(FlushReason::compiled_graph) + 1,
              "one policy per FlushReason");

std::atomic<DeferredWork*> g_work{nullptr};

}  // namespace

const FlushPolicy& policy(FlushReason reason) { return kPolicies[static_cast<size_t>(reason)]; }

void register_deferred_work(DeferredWork* work) { g_work.store(work); }

void flush_deferred_work(FlushReason reason) {
  if (DeferredWork* w = g_work.load(std::memory_order_acquire)) w->flush(reason);
}

void materialize_deferred_work(FlushReason reason) {
  if (DeferredWork* w = g_work.load(std::memory_order_acquire)) w->materialize_all(reason);
}

}  // namespace torchtpu::runtime
