// Loop detection in fused eager (Recording.h): the graph is cut where the op stream starts
// repeating itself, so that the iterations of a loop that reads nothing each replay one cached
// plan. The setting is Google TorchTPU's `TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS`, with its
// meaning and its bounds (docs/eager-modes.md, "Loops that read nothing"):
//
//   - every recorded op leaves a signature (its name, its non-scalar arguments, its operands'
//     sizes and dtypes: no values, no graph positions) in a window of the last 256;
//   - after each op, the window is searched for a suffix made of one sequence of 11 to 128 ops
//     twice in a row, the shortest first (the length found last time is tried before the others);
//   - when one is found the pending graph is flushed (counted as "repeated ops"), and the search
//     sleeps for that many ops, so that each later repetition ends one graph.
//
// "safe" and "aggressive" both flush the whole pending graph: TorchTPU's "safe" runs only the
// part the last op depends on, which a graph that is one loop body mostly is; torchtpu's flush
// has no partial form (Flush.cpp). Unset is "safe", as in TorchTPU; any other value, or "", turns
// detection off.
#include "defer/Defer.h"
#include "defer/Recording.h"
#include "runtime/Env.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"

#include <c10/util/hash.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace torchtpu::defer {

namespace {

constexpr size_t kShortestBody = 11;  // TorchTPU: a repeated sequence longer than 10 ops
constexpr size_t kLongestBody = 128;
constexpr size_t kWindow = 2 * kLongestBody;

RepeatedOps mode_from(const std::string& value) {
  if (value == "safe") return RepeatedOps::safe;
  if (value == "aggressive") return RepeatedOps::aggressive;
  return RepeatedOps::off;
}

}  // namespace

RepeatedOps initial_repeated_ops() {
  // (Set and empty is off, as in TorchTPU: not the table's default.)
  auto value = runtime::env::get_raw("TORCH_TPU_INTERNAL_DETECT_REPEATED_OPS");
  return value ? mode_from(*value) : RepeatedOps::safe;
}

size_t op_signature(const std::string& name, const c10::FunctionSchema& schema,
                    const torch::jit::Stack& args, const std::vector<Operand>& operands) {
  size_t h = hash_op(0, name, 0, c10::Device(c10::kPrivateUse1, 0), schema, args);
  for (const Operand& o : operands) {
    h = c10::hash_combine(h, static_cast<size_t>(o.dtype) + 1);
    for (int64_t x : o.sizes) h = c10::hash_combine(h, std::hash<int64_t>()(x));
  }
  return h;
}

bool RepeatWindow::push(size_t signature) {
  if (history.size() == kWindow) history.pop_front();
  history.push_back(signature);
  if (sleep > 0) {
    --sleep;
    return false;
  }
  const size_t n = history.size();
  // The suffix history[n-2p, n) is one sequence of p ops twice.
  auto repeats = [&](size_t p) {
    if (2 * p > n || history[n - 1] != history[n - 1 - p]) return false;
    return std::equal(history.end() - p, history.end(), history.end() - 2 * p);
  };
  size_t found = 0;
  if (last_body > 0 && repeats(last_body)) {
    found = last_body;
  } else {
    for (size_t p = kShortestBody; p <= std::min(kLongestBody, n / 2) && found == 0; ++p) {
      if (repeats(p)) found = p;
    }
  }
  if (found == 0) return false;
  last_body = found;
  sleep = found - 1;  // (this op ends the repetition; the next ends after `found` more)
  static const runtime::metrics::Counter detected("defer.repeated_ops_cuts");
  detected.add();
  return true;
}

void RepeatWindow::reset() {
  history.clear();
  sleep = 0;
  last_body = 0;
}

void set_repeated_ops(RepeatedOps mode) {
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  s.repeated_ops = mode;
  s.repeats.reset();
}

RepeatedOps repeated_ops() {
  State& s = state();
  auto lock = runtime::lock_without_gil(s.mutex);
  return s.repeated_ops;
}

}  // namespace torchtpu::defer
