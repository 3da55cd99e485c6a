// Loop instruction selection (LoopSelection.h).
#include "defer/LoopSelection.h"
#include "runtime/Env.h"

#include <ATen/Dispatch.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace torchtpu::defer {
namespace {

bool loop_available() {
#if defined(__x86_64__) && defined(TORCHTPU_FUSED_LOOP)
  // TORCHTPU_FUSED_LOOP=0 turns it off (every op then runs its ATen kernel per block).
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          runtime::env::value("TORCHTPU_FUSED_LOOP") != "0";
  return yes;
#else
  return false;
#endif
}

// A float32 tensor operand the loop can address as contiguous memory in every block.
bool loop_tensor(const Source& s, c10::IntArrayRef shape) {
  if (s.g.dtype != c10::kFloat) return false;
  if (s.kind == Source::block) return true;
  if (s.kind != Source::mapped || s.g.whole) return false;
  int64_t expected = 1;
  for (int64_t j = static_cast<int64_t>(shape.size()) - 1; j >= 0; --j) {
    if (shape[j] != 1 && s.g.smap[j] != expected) return false;
    expected *= shape[j];
  }
  return true;
}

// A 0-dim operand passed whole, of a real dtype scalar_value() reads.
bool loop_scalar(const Source& s) {
  if (s.kind != Source::whole || !s.g.smap.empty()) return false;
  switch (s.g.dtype) {
    case c10::kFloat: case c10::kDouble: case c10::kHalf: case c10::kBFloat16:
    case c10::kByte: case c10::kChar: case c10::kShort: case c10::kInt: case c10::kLong:
      return true;
    default:
      return false;
  }
}

}  // namespace

// The value of a 0-dim host tensor (a CPU scalar, or a 0-dim operand over device memory, which
// only holds its value when the region runs), as the loop takes it.
float scalar_value(const at::Tensor& t) {
  float v = 0;
  AT_DISPATCH_ALL_TYPES_AND2(c10::kHalf, c10::kBFloat16, t.scalar_type(), "scalar_value", [&] {
    v = static_cast<float>(*t.const_data_ptr<scalar_t>());
  });
  return v;
}

namespace {

// A Scalar argument as the float ATen's kernels convert it to, when that conversion is exact
// or a plain rounding of a finite double (an integer beyond 2^24, a complex number or a double
// beyond float's range is left to the kernel, which may raise).
std::optional<float> loop_float_argument(const c10::IValue& v) {
  if (v.isDouble()) {
    const double d = v.toDouble();
    if (std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max()) {
      return static_cast<float>(d);
    }
    return std::nullopt;
  }
  if (v.isInt() && std::llabs(v.toInt()) <= (int64_t(1) << 24)) return static_cast<float>(v.toInt());
  if (v.isBool()) return v.toBool() ? 1.f : 0.f;
  return std::nullopt;
}

}  // namespace

// The loop instruction of an op run with `args`, when it has one: (op, a, b, out) over operand
// indices. `not_in_buffer`: per block slot, whether it holds a kernel's new result.
std::optional<loop::Instr> loop_instruction(const FusedOp& f, const torch::jit::Stack& args,
                                            c10::IntArrayRef shape,
                                            const std::vector<char>& not_in_buffer) {
  if (!loop_available() || f.copy || !f.results.empty()) return std::nullopt;
  auto tensor_ok = [&](const Source& s) {
    return loop_tensor(s, shape) && !(s.kind == Source::block && not_in_buffer[s.slot]);
  };
  auto alpha = [&](size_t i) {
    return args.size() > i && args[i].isScalar() ? args[i].toScalar().toDouble() : 1.0;
  };
  const auto& o = f.operands;
  // The ".out" overloads: operands are (inputs..., out). (By the op run, not the op recorded:
  // relu runs as clamp_min.out.)
  if (!f.out_overload) return std::nullopt;
  using Fn = aten::PointwiseFn;
  const Fn fn = f.fn;
  switch (fn) {
    case Fn::add:
    case Fn::sub: {
      if (o.size() != 3) return std::nullopt;
      const double a = alpha(2);
      if (a != 1.0 && a != -1.0) return std::nullopt;
      if (loop_scalar(o[0]) || !tensor_ok(o[0]) || !tensor_ok(o[2])) return std::nullopt;
      if (!tensor_ok(o[1]) && !loop_scalar(o[1])) return std::nullopt;
      const bool plus = (fn == Fn::add) == (a == 1.0);
      return loop::Instr{plus ? loop::Op::add : loop::Op::sub, 2, 0, 1};
    }
    case Fn::mul:
    case Fn::div:
    case Fn::maximum:
    case Fn::minimum: {
      if (o.size() != 3 || !tensor_ok(o[0]) || !tensor_ok(o[2])) return std::nullopt;
      const bool scalar_b = loop_scalar(o[1]);
      // (ATen divides by a host scalar through its reciprocal: not an exact division.)
      if (!(tensor_ok(o[1]) || (scalar_b && fn == Fn::mul))) return std::nullopt;
      const loop::Op op = fn == Fn::mul       ? loop::Op::mul
                          : fn == Fn::div     ? loop::Op::div
                          : fn == Fn::maximum ? loop::Op::maximum
                                              : loop::Op::minimum;
      return loop::Instr{op, 2, 0, 1};
    }
    case Fn::neg:
    case Fn::abs:
      if (o.size() != 2 || !tensor_ok(o[0]) || !tensor_ok(o[1])) return std::nullopt;
      return loop::Instr{fn == Fn::neg ? loop::Op::neg : loop::Op::abs, 1, 0, -1};
    case Fn::clamp_min: {  // clamp_min.out(self, Scalar min, out), and relu
      if (o.size() != 2 || args.size() != 3 || !args[1].isScalar()) return std::nullopt;
      const double m = args[1].toScalar().toDouble();
      if (!std::isfinite(m) || !tensor_ok(o[0]) || !tensor_ok(o[1])) return std::nullopt;
      return loop::Instr{loop::Op::clamp_min, 1, 0, 2};  // b = 2: the scalar entry (see run)
    }
    case Fn::lerp: {  // lerp.Scalar_out(self, end, Scalar weight, out)
      const std::optional<float> w =
          o.size() == 3 && args.size() == 4 ? loop_float_argument(args[2]) : std::nullopt;
      if (!w || !tensor_ok(o[0]) || !tensor_ok(o[1]) || !tensor_ok(o[2])) return std::nullopt;
      loop::Instr in{loop::Op::lerp, 2, 0, 1};
      in.s = *w;
      return in;
    }
    case Fn::addcmul:
    case Fn::addcdiv: {  // addcmul.out(self, tensor1, tensor2, Scalar value, out)
      const std::optional<float> v =
          o.size() == 4 && args.size() == 5 ? loop_float_argument(args[3]) : std::nullopt;
      if (!v) return std::nullopt;
      for (const Source& s : o) {
        if (!tensor_ok(s)) return std::nullopt;
      }
      loop::Instr in{fn == Fn::addcmul ? loop::Op::addcmul : loop::Op::addcdiv, 3, 0, 1};
      in.c = 2;
      in.s = *v;
      return in;
    }
    default:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace torchtpu::defer
