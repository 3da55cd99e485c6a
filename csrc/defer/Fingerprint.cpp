// Fingerprints (Recording.h): the operands of a recorded op, and the structural hash of the
// pending graph folded op by op (the plan cache's key, with the structure Lowering.cpp adds).
#include "defer/Recording.h"

#include <ATen/EmptyTensor.h>
#include <c10/util/hash.h>

#include <cstring>
#include <string_view>

namespace torchtpu::defer {

void hash_ivalue(size_t& h, const c10::IValue& v) {
  if (v.isNone()) {
    h = c10::hash_combine(h, 0x9e37);
  } else if (v.isInt()) {
    h = c10::hash_combine(h, std::hash<int64_t>()(v.toInt()));
  } else if (v.isBool()) {
    h = c10::hash_combine(h, v.toBool() ? 3 : 5);
  } else if (v.isString()) {
    h = c10::hash_combine(h, std::hash<std::string_view>()(v.toStringView()));
  } else if (v.isIntList()) {
    for (int64_t x : v.toIntList()) h = c10::hash_combine(h, std::hash<int64_t>()(x));
  } else if (v.isDevice()) {
    h = c10::hash_combine(h, std::hash<c10::Device>()(v.toDevice()));
  } else {
    h = c10::hash_combine(h, static_cast<size_t>(v.tagKind().size()));
  }
}

bool is_runtime_scalar(const c10::Argument& a) {
  auto type = a.type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  const auto k = type->kind();
  return k == c10::TypeKind::NumberType || k == c10::TypeKind::FloatType ||
         k == c10::TypeKind::ComplexType;
}

size_t hash_op(size_t fingerprint, const std::string& name, c10::StreamId stream,
               c10::Device device, const c10::FunctionSchema& schema,
               const torch::jit::Stack& args) {
  size_t h = c10::hash_combine(fingerprint, std::hash<std::string>()(name));
  h = c10::hash_combine(h, static_cast<size_t>(stream) * 0x9e3779b1 + device.index());
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (is_runtime_scalar(schema.arguments()[i])) continue;
    const c10::IValue& v = args[i];
    if (!v.isTensor() && !v.isTensorList() && !v.isOptionalTensorList()) hash_ivalue(h, v);
  }
  return h;
}

Operand make_operand(State& s, const at::Tensor& t, size_t& h) {
  Operand o;
  if (!t.defined()) {
    h = c10::hash_combine(h, 1);
    return o;
  }
  o = operand_geometry(t);
  h = c10::hash_combine(h, (o.conj ? 0x11 : 0) + (o.neg ? 0x22 : 0));
  if (auto record = pending_of(t.storage())) {
    c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    if (!impl->has_materializer()) impl->set_materializer(&materialize_on_access);
    auto [it, fresh] =
        s.local_pending.emplace(record->id, static_cast<int>(s.local_pending.size()));
    h = c10::hash_combine(h, 0x100000 + it->second);
    o.pending = std::move(record);
  } else if (t.device().is_cpu()) {
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number the binding wrapped for this call: nobody else holds it, so it keeps
      // its value; kept as it is.
      o.tensor = t;
    } else {
      // A CPU scalar: its value now (a plain copy of its bytes, cheaper than clone()).
      o.tensor = at::detail::empty_cpu({}, t.scalar_type(), std::nullopt, std::nullopt,
                                       std::nullopt, std::nullopt);
      if (t.numel() == 1) {
        std::memcpy(o.tensor.data_ptr(), t.data_ptr(), t.element_size());
      } else {
        o.tensor = t.clone();
      }
    }
    h = c10::hash_combine(h, 7);
  } else {
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto [it, fresh] =
        s.local_external.emplace(impl, static_cast<int>(s.local_external.size()));
    h = c10::hash_combine(h, 0x200000 + it->second);
    o.tensor = t;
  }
  h = c10::hash_combine(h, static_cast<size_t>(o.dtype));
  for (int64_t x : o.sizes) h = c10::hash_combine(h, std::hash<int64_t>()(x));
  for (int64_t x : o.strides) h = c10::hash_combine(h, std::hash<int64_t>()(x) * 31);
  h = c10::hash_combine(h, std::hash<int64_t>()(o.offset));
  return o;
}

// Which operands (in visit order) each argument owns.
using OperandRanges = c10::SmallVector<std::pair<size_t, size_t>, 8>;
OperandRanges operand_ranges(const torch::jit::Stack& args) {
  OperandRanges ranges;
  size_t n = 0;
  for (const c10::IValue& v : args) {
    size_t count = 0;
    if (v.isTensor()) {
      count = 1;
    } else if (v.isTensorList()) {
      count = v.toTensorList().size();
    } else if (v.isOptionalTensorList()) {
      for (const auto& t : v.toOptionalTensorList()) count += std::optional<at::Tensor>(t).has_value();
    }
    ranges.emplace_back(n, n + count);
    n += count;
  }
  return ranges;
}

}  // namespace torchtpu::defer
