#pragma once
// What an op is, in one place (docs/design.md, "Op traits"): the kernels, the recorder, the
// planner, the executor and the cost accounting all ask here, by the op's key.
//
// Facts PyTorch states about its operators (its tags: at::Tag::pointwise, reduction,
// dynamic_output_shape, nondeterministic_seeded) are read from the dispatcher, over every
// overload of the key; torchtpu's own facts (which unit runs the op, its VPU cost units, its
// fusion role, how its results are sized, its dtype policy) are rows of the table in
// OpTraits.cpp, beside a short table of the ops where torchtpu disagrees with PyTorch's tags,
// each with its reason. test/cpp/test_op_traits.cpp lists the disagreements and checks that
// every row names a real op and every override still disagrees.
//
// The registry is built on first use from the ops registered at that time; an op registered
// later (a custom op) has the default traits (nothing known: it is not fused, costs 1 unit).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace torchtpu::aten {

// "aten::add_.Tensor" -> "add": the op's name without the aten namespace, the overload and the
// in-place "_" (so that an op, its in-place form and its out= form share their traits).
std::string_view op_key(std::string_view name);

// Which unit runs the op.
enum class OpUnit : uint8_t {
  other,  // a kernel of its own (copies, fills, random fills, ...), a view, a composite, a fallback
  vpu,    // the VPU executor (HostExecution.cpp): every overload with a CPU kernel
  mxu,    // the matrix unit: matmuls and convolutions (Matmul.cpp)
};

// What the op can be in a fused region (defer/Passes.cpp).
enum class FusionRole : uint8_t {
  none,                // element-wise ops fuse by `pointwise`, not by a role
  matmul_leader,       // a matmul or convolution whose result feeds the region's element-wise ops
  reduction_epilogue,  // a reduction that reads the region's value and ends it
};

// The element-wise function, for ops a code generator writes itself (defer/FusedLoop.h).
enum class PointwiseFn : uint8_t {
  none, add, sub, mul, div, maximum, minimum, neg, abs, clamp_min, relu, lerp, addcmul, addcdiv
};

// How fused eager sizes the results of an op that returns new tensors (defer/ResultSizing.cpp).
enum class Sizing : uint8_t {
  meta_kernel,      // the op's meta kernel (a Python one costs about a millisecond)
  rule,             // a C++ rule in the recorder, as the CPU kernel sizes them
  like_input,       // as TensorIterator lays out an element-wise result of its one input
  value_dependent,  // by the values of the inputs (or the meta kernel disagrees with the CPU
                    // kernel): not recorded, run at once after the work it depends on
};

struct OpTraits {
  OpUnit unit = OpUnit::other;
  // From PyTorch's tags (any overload), with the overrides of OpTraits.cpp:
  bool pointwise = false;      // each output element from the inputs at its broadcast position
  bool reduction = false;      // (the tag; informational: the planner uses `role`)
  bool random = false;         // draws from a generator (nondeterministic_seeded)
  // torchtpu's own facts:
  FusionRole role = FusionRole::none;
  PointwiseFn fn = PointwiseFn::none;
  Sizing sizing = Sizing::meta_kernel;
  double vpu_units = 1;             // VPU cycles per vreg of its largest tensor (sim/CostModel.h)
  bool computes_in_float32 = false;  // reduced-precision inputs are widened (CPU kernel unreliable)
  bool contiguous_operands = false;  // tensor inputs made contiguous (CPU kernel assumes one layout)
  bool writes_without_reading = false;  // fill_, zero_: the written operand is not read
  bool divides_integers = false;    // raises on an integer division by zero (checks values)
  bool takes_cpu_indices = false;   // CPU index tensors in a list are allowed (advanced indexing)
  bool integer_operands = false;    // an MXU op on int8 operands (int32 results), not floating point
  // A collective of a process group (the ops of the namespace tpu_dist, aten/Collectives.h): a
  // side effect every rank runs in one order, so fused eager never eliminates or fuses it and
  // runs it in program order with the other ops that are not fused.
  bool collective = false;
};

// The traits of an op, by any spelling of its name ("aten::gelu.out", "gelu_", "gelu"); every op
// of the namespace tpu_dist ("tpu_dist::all_reduce_") is a collective.
const OpTraits& op_traits(std::string_view name);

// Where torchtpu's traits disagree with PyTorch's tags, and why (for the test and the docs).
struct TagOverride {
  std::string key;
  std::string fact;     // "pointwise"
  bool tagged = false;  // what PyTorch's tags say (the registry says the opposite)
  std::string why;
};
std::vector<TagOverride> tag_overrides();

// Every key of torchtpu's table (for the test: each must name a registered op).
std::vector<std::string> table_keys();

}  // namespace torchtpu::aten
