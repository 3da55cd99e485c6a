// Inspect: the pending graph behind some tensors, described without running or changing it
// (Inspect.h; docs/eager-modes.md, "Inspecting the pending graph").
#include "defer/Inspect.h"

#include "defer/Defer.h"
#include "defer/Graph.h"

#include <c10/core/Layout.h>
#include <c10/core/MemoryFormat.h>
#include <c10/util/hash.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace torchtpu::defer {
namespace {

// A storage: a pending one by its record's id, a materialized one by its StorageImpl.
struct Key {
  uint64_t pending = 0;
  const c10::StorageImpl* external = nullptr;
  bool operator==(const Key& o) const { return pending == o.pending && external == o.external; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return c10::hash_combine(std::hash<uint64_t>()(k.pending),
                             std::hash<const void*>()(k.external));
  }
};

std::optional<Key> key_of(const Operand& o) {
  if (o.pending) return Key{o.pending->id, nullptr};
  if (o.tensor.defined() && !o.tensor.is_cpu() && o.tensor.has_storage()) {
    return Key{0, o.tensor.storage().unsafeGetStorageImpl()};
  }
  return std::nullopt;  // undefined, or a CPU constant
}

std::optional<Key> key_of(const at::Tensor& t) {
  if (!t.defined() || t.is_cpu() || !t.has_storage()) return std::nullopt;
  if (auto record = pending_of(t.storage())) return Key{record->id, nullptr};
  return Key{0, t.storage().unsafeGetStorageImpl()};
}

size_t storage_bytes(const Operand& o) {
  if (o.pending) return o.pending->nbytes;
  return o.tensor.defined() && o.tensor.has_storage() ? o.tensor.storage().nbytes() : 0;
}

struct Geometry {
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  // Elements at distinct addresses (a broadcast dimension counts once).
  int64_t distinct() const {
    int64_t n = 1;
    for (size_t i = 0; i < sizes.size(); ++i) {
      n *= strides[i] == 0 ? std::min<int64_t>(sizes[i], 1) : sizes[i];
    }
    return n;
  }
  bool operator==(const Geometry& o) const {
    return sizes == o.sizes && strides == o.strides && offset == o.offset && dtype == o.dtype;
  }
  // Dimensions in storage order (strides not increasing, over dimensions above 1).
  bool ordered() const {
    int64_t last = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == 1) continue;
      if (strides[i] > last) return false;
      last = strides[i];
    }
    return true;
  }
  // No two elements share an address and the addresses are consecutive.
  bool dense() const {
    std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dimensions above 1
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] != 1) dims.emplace_back(strides[i], sizes[i]);
    }
    std::sort(dims.begin(), dims.end());
    int64_t expected = 1;
    for (const auto& [stride, size] : dims) {
      if (size == 0) return true;
      if (stride != expected) return false;
      expected *= size;
    }
    return true;
  }
};

Geometry geometry_of(const Operand& o) {
  return {{o.sizes.begin(), o.sizes.end()}, {o.strides.begin(), o.strides.end()}, o.offset,
          o.dtype};
}

Geometry geometry_of(const at::Tensor& t) {
  return {t.sizes().vec(), t.strides().vec(), t.storage_offset(), t.scalar_type()};
}

void set_geometry(GraphTensor& g, const Geometry& geo) {
  g.sizes = geo.sizes;
  g.strides = geo.strides;
  g.offset = geo.offset;
  g.dtype = c10::toString(geo.dtype);
}

void set_geometry(GraphValue& v, const Geometry& geo) {
  v.sizes = geo.sizes;
  v.strides = geo.strides;
  v.offset = geo.offset;
  v.dtype = c10::toString(geo.dtype);
}

// ---------------------------------------------------------------------------------------------
// Arguments as text (Python's spelling: None, True, 2, 2.5, [0, 1], 'tanh')

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {  // the shortest that reads back
    std::snprintf(buf, sizeof(buf), "%.*g", precision, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\\' || c == '\'') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string format_argument(const c10::IValue& v, const c10::TypePtr& declared) {
  if (v.isNone()) return "None";
  c10::TypePtr type = declared;
  if (type->kind() == c10::TypeKind::OptionalType) {
    type = type->castRaw<c10::OptionalType>()->getElementType();
  }
  std::ostringstream out;
  if (v.isInt()) {
    switch (type->kind()) {
      case c10::TypeKind::ScalarTypeType:
        return c10::toString(static_cast<c10::ScalarType>(v.toInt()));
      case c10::TypeKind::LayoutType:
        out << static_cast<c10::Layout>(v.toInt());
        return out.str();
      case c10::TypeKind::MemoryFormatType:
        out << static_cast<c10::MemoryFormat>(v.toInt());
        return out.str();
      default:
        return std::to_string(v.toInt());
    }
  }
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isDouble()) return format_double(v.toDouble());
  if (v.isComplexDouble()) {
    const c10::complex<double> z = v.toComplexDouble();
    return "complex(" + format_double(z.real()) + ", " + format_double(z.imag()) + ")";
  }
  if (v.isString()) return quoted(v.toStringRef());
  if (v.isDevice()) return quoted(v.toDevice().str());
  if (v.isList()) {
    out << "[";
    const auto list = v.toListRef();
    c10::TypePtr element = c10::AnyType::get();
    if (auto* l = type->castRaw<c10::ListType>()) element = l->getElementType();
    for (size_t i = 0; i < list.size(); ++i) {
      out << (i > 0 ? ", " : "") << format_argument(list[i], element);
    }
    out << "]";
    return out.str();
  }
  return "<" + std::string(v.tagKind()) + ">";
}

// A CPU tensor's values (a Python number, a CPU scalar): "2", "[1.5, 2.0]"; "" past 64 elements.
std::string format_constant(const at::Tensor& t) {
  if (t.numel() > 64) return "";
  const at::Tensor flat = t.reshape({-1});
  std::vector<std::string> items;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const c10::Scalar s = flat[i].item();
    if (s.isBoolean()) {
      items.push_back(s.toBool() ? "True" : "False");
    } else if (s.isIntegral(/*includeBool=*/false)) {
      items.push_back(std::to_string(s.toLong()));
    } else if (s.isComplex()) {
      const auto z = s.toComplexDouble();
      items.push_back("complex(" + format_double(z.real()) + ", " + format_double(z.imag()) + ")");
    } else {
      items.push_back(format_double(s.toDouble()));
    }
  }
  if (t.dim() == 0 && items.size() == 1) return items[0];
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i > 0 ? ", " : "") + items[i];
  return out + "]";
}

// The schema argument each operand fills, in the order of Node::operands (for_each_tensor_slot).
std::vector<std::string> operand_arguments(const Node& n) {
  std::vector<std::string> names;
  const auto& schema_args = n.op.schema().arguments();
  for (size_t i = 0; i < n.args.size(); ++i) {
    const std::string name =
        i < schema_args.size() ? schema_args[i].name() : "arg" + std::to_string(i);
    const c10::IValue& slot = n.args[i];
    if (slot.isTensor()) {
      names.push_back(name);
    } else if (slot.isTensorList()) {
      for (size_t k = 0; k < slot.toTensorList().size(); ++k) {
        names.push_back(name + "[" + std::to_string(k) + "]");
      }
    } else if (slot.isOptionalTensorList()) {
      const auto list = slot.toOptionalTensorList();
      for (size_t k = 0; k < list.size(); ++k) {
        if (std::optional<at::Tensor>(list.get(k)).has_value()) {
          names.push_back(name + "[" + std::to_string(k) + "]");
        }
      }
    }
  }
  return names;
}

// ---------------------------------------------------------------------------------------------
// The description

class Describer {
 public:
  Describer(const std::vector<Node>& nodes, const std::vector<at::Tensor>& tensors,
            const std::vector<at::Tensor>& labelled)
      : nodes_(nodes), tensors_(tensors), labelled_(labelled) {}

  PendingGraphView run() {
    view_.pending_ops = static_cast<int64_t>(nodes_.size());
    const std::vector<bool> included = slice();
    note_extents(included);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (included[i]) describe_node(i);
    }
    for (const at::Tensor& t : tensors_) {
      GraphTensor g = tensor_view(t);
      const Key key = *key_of(t);
      g.value = current_or_input(key, geometry_of(t));
      view_.outputs.push_back(std::move(g));
    }
    for (const at::Tensor& t : labelled_) {
      GraphTensor g = tensor_view(t);
      if (auto key = key_of(t)) {
        auto it = current_.find(*key);
        if (it != current_.end()) g.value = it->second;
      }
      view_.labelled.push_back(std::move(g));
    }
    return std::move(view_);
  }

 private:
  // The nodes the tensors depend on: walking back from the last node, a node that writes a
  // storage needed is needed, and so is every storage it reads (and writes: a partial write
  // keeps the other elements).
  std::vector<bool> slice() const {
    std::unordered_set<Key, KeyHash> needed;
    for (const at::Tensor& t : tensors_) needed.insert(*key_of(t));
    std::vector<bool> included(nodes_.size(), false);
    for (size_t i = nodes_.size(); i-- > 0;) {
      const Node& n = nodes_[i];
      bool writes_needed = false;
      auto check = [&](const Operand& o) {
        auto key = key_of(o);
        writes_needed = writes_needed || (o.written && key && needed.count(*key) > 0);
      };
      for (const Operand& o : n.operands) check(o);
      for (const Operand& o : n.results) check(o);
      if (!writes_needed) continue;
      included[i] = true;
      for (const Operand& o : n.operands) {
        if (auto key = key_of(o)) needed.insert(*key);
      }
    }
    return included;
  }

  // The largest view of each storage (an input's extent: of those with the most distinct
  // elements, the first in storage order, else the first) and its size in bytes.
  void note_extents(const std::vector<bool>& included) {
    auto note = [&](const Key& key, const Geometry& g, size_t nbytes) {
      auto [it, fresh] = extent_.emplace(key, g);
      const Geometry& e = it->second;
      if (!fresh && (g.distinct() > e.distinct() ||
                     (g.distinct() == e.distinct() && g.ordered() && !e.ordered()))) {
        it->second = g;
      }
      if (nbytes > 0) nbytes_[key] = nbytes;
    };
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (!included[i]) continue;
      for (const Operand& o : nodes_[i].operands) {
        if (auto key = key_of(o)) note(*key, geometry_of(o), storage_bytes(o));
      }
      for (const Operand& o : nodes_[i].results) {
        if (auto key = key_of(o)) note(*key, geometry_of(o), storage_bytes(o));
      }
    }
    for (const at::Tensor& t : tensors_) note(*key_of(t), geometry_of(t), t.storage().nbytes());
    // A labelled tensor (a variable of the caller) over a storage the graph uses is its extent
    // when it has as many elements: the input is then the variable, not one of its views.
    for (const at::Tensor& t : labelled_) {
      auto key = key_of(t);
      auto it = key ? extent_.find(*key) : extent_.end();
      if (it == extent_.end()) continue;
      const Geometry g = geometry_of(t);
      if (g.distinct() > it->second.distinct() ||
          (g.distinct() == it->second.distinct() && g.ordered())) {
        it->second = g;
      }
    }
  }

  int64_t storage_number(const Key& key) {
    auto [it, fresh] = storages_.emplace(key, static_cast<int64_t>(storages_.size()));
    return it->second;
  }

  int64_t add_value(GraphValue v) {
    view_.values.push_back(std::move(v));
    return static_cast<int64_t>(view_.values.size()) - 1;
  }

  // The value the storage holds now; an input (its largest view) when the graph has not
  // written it.
  int64_t current_or_input(const Key& key, const Geometry& fallback) {
    auto it = current_.find(key);
    if (it != current_.end()) return it->second;
    auto extent = extent_.find(key);
    GraphValue v;
    v.storage = storage_number(key);
    v.input_pending = key.pending != 0;
    set_geometry(v, extent != extent_.end() ? extent->second : fallback);
    const int64_t id = add_value(std::move(v));
    current_[key] = id;
    return id;
  }

  // A write of `g` into the storage by node `node`: the new value.
  int64_t write(const Key& key, const Geometry& g, int64_t node) {
    GraphValue v;
    v.node = node;
    v.storage = storage_number(key);
    auto it = current_.find(key);
    std::optional<Geometry> previous;
    if (it != current_.end()) {
      const GraphValue& p = view_.values[it->second];
      previous = Geometry{p.sizes, p.strides, p.offset, g.dtype};
    } else if (auto e = extent_.find(key); e != extent_.end()) {
      previous = e->second;
    }
    auto nbytes = nbytes_.find(key);
    const bool whole_storage =
        g.dense() && g.offset == 0 && nbytes != nbytes_.end() &&
        static_cast<size_t>(g.numel()) * c10::elementSize(g.dtype) == nbytes->second;
    const bool same_elements =
        previous && ((g.sizes == previous->sizes && g.strides == previous->strides &&
                      g.offset == previous->offset) ||
                     (g.dense() && previous->dense() && g.offset == previous->offset &&
                      g.numel() == previous->numel()));
    const bool covers = !previous || whole_storage || same_elements;
    if (covers) {
      set_geometry(v, g);
    } else {
      v.updates = current_or_input(key, *previous);
      const GraphValue& base = view_.values[v.updates];
      v.sizes = base.sizes;
      v.strides = base.strides;
      v.offset = base.offset;
      v.dtype = base.dtype;
    }
    const int64_t id = add_value(std::move(v));
    current_[key] = id;
    return id;
  }

  GraphTensor tensor_view(const at::Tensor& t) {
    GraphTensor g;
    g.defined = t.defined();
    if (g.defined) set_geometry(g, geometry_of(t));
    return g;
  }

  void describe_node(size_t i) {
    const Node& n = nodes_[i];
    GraphNode d;
    d.index = static_cast<int64_t>(i);
    const auto& schema = n.op.schema();
    d.name = schema.name();
    d.overload = schema.overload_name();
    d.location = n.location;
    if (traits_of(n).unit == aten::OpUnit::mxu) d.precision = sim::name(n.precision);
    const auto& args = schema.arguments();
    for (size_t k = 0; k < n.args.size() && k < args.size(); ++k) {
      const c10::IValue& v = n.args[k];
      if (v.isTensor() || v.isTensorList() || v.isOptionalTensorList()) continue;
      // (real_type: ScalarType, Layout, MemoryFormat rather than the int they are passed as)
      const c10::TypePtr& type = args[k].real_type();
      if (v.isNone() && type->kind() == c10::TypeKind::OptionalType &&
          type->castRaw<c10::OptionalType>()->getElementType()->kind() ==
              c10::TypeKind::TensorType) {
        continue;  // an absent optional tensor
      }
      d.arguments.emplace_back(args[k].name(), type->str(), format_argument(v, type));
    }
    const std::vector<std::string> names = operand_arguments(n);
    const int64_t node = static_cast<int64_t>(view_.nodes.size());
    // Reads first (they see the values before this node's writes), then writes.
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const Operand& o = n.operands[k];
      GraphTensor g;
      g.argument = k < names.size() ? names[k] : "operand" + std::to_string(k);
      g.defined = o.defined();
      g.read = o.read;
      g.written = o.written;
      if (g.defined) set_geometry(g, geometry_of(o));
      if (auto key = key_of(o)) {
        if (o.read) g.value = current_or_input(*key, geometry_of(o));
      } else if (o.tensor.defined()) {  // a CPU constant
        g.constant = format_constant(o.tensor);
        g.wrapped_number = o.tensor.unsafeGetTensorImpl()->is_wrapped_number();
      }
      d.operands.push_back(std::move(g));
    }
    for (size_t k = 0; k < n.results.size(); ++k) {
      const Operand& o = n.results[k];
      GraphTensor g;
      g.argument = "result" + std::to_string(k);
      g.defined = o.defined();
      g.written = o.written;
      if (g.defined) set_geometry(g, geometry_of(o));
      d.results.push_back(std::move(g));
    }
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const Operand& o = n.operands[k];
      if (!o.written) continue;
      if (auto key = key_of(o)) d.operands[k].writes = write(*key, geometry_of(o), node);
    }
    for (size_t k = 0; k < n.results.size(); ++k) {
      const Operand& o = n.results[k];
      if (!o.written) continue;
      if (auto key = key_of(o)) d.results[k].writes = write(*key, geometry_of(o), node);
    }
    view_.nodes.push_back(std::move(d));
  }

  const std::vector<Node>& nodes_;
  const std::vector<at::Tensor>& tensors_;
  const std::vector<at::Tensor>& labelled_;
  PendingGraphView view_;
  std::unordered_map<Key, int64_t, KeyHash> current_;    // storage -> the value it holds
  std::unordered_map<Key, int64_t, KeyHash> storages_;   // storage -> its number
  std::unordered_map<Key, Geometry, KeyHash> extent_;    // storage -> its largest view
  std::unordered_map<Key, size_t, KeyHash> nbytes_;
};

}  // namespace

PendingGraphView describe_pending(const std::vector<at::Tensor>& tensors,
                                  const std::vector<at::Tensor>& labelled) {
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK_VALUE(t.defined() && t.device().is_privateuseone() && t.has_storage() &&
                          t.layout() == c10::kStrided,
                      "the pending graph is described for tpu tensors with storage; got ",
                      t.defined() ? t.toString() + " on " + t.device().str()
                                  : std::string("an undefined tensor"));
  }
  PendingGraphView view;
  // (Reading a CPU constant's values dispatches CPU ops: no Python mode of the caller sees them.)
  const NoPythonDispatch no_python;
  visit_recorded_nodes([&](const std::vector<Node>& nodes) {
    view = Describer(nodes, tensors, labelled).run();
  });
  return view;
}

}  // namespace torchtpu::defer
