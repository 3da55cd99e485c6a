// The planning passes of fused eager (Plan.h, docs/design.md 3.1): pure functions of the
// recorded nodes and the plan built so far; the GoogleTests in test/cpp/test_plan.cpp check
// what each decides on hand-built graphs.
#include "defer/Plan.h"

#include "runtime/Env.h"

#include <c10/util/flat_hash_map.h>
#include <algorithm>
#include <map>
#include <sstream>
#include <unordered_map>

namespace torchtpu::defer {

Geometry geometry_of(const Operand& o, c10::IntArrayRef shape) {
  Geometry g;
  g.offset = o.offset;
  g.dtype = o.dtype;
  if (o.sizes.empty() && !shape.empty()) {
    g.whole = true;
    return g;
  }
  g.smap.assign(shape.size(), 0);
  const size_t lead = shape.size() - o.sizes.size();
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    g.smap[lead + i] = (o.sizes[i] == 1 && shape[lead + i] != 1) ? 0 : o.strides[i];
  }
  return g;
}

// Each position of `shape` maps to a distinct element.
bool non_overlapping(const Geometry& g, c10::IntArrayRef shape) {
  if (g.whole) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] > 1) dims.emplace_back(g.smap[i], shape[i]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 1;
  for (const auto& [stride, size] : dims) {
    if (stride < span) return false;
    span = stride * size;
  }
  return true;
}


Keys keys_of(const std::vector<Node>& nodes) {
  Keys k;
  ska::flat_hash_map<uint64_t, int> pending;
  ska::flat_hash_map<const c10::StorageImpl*, int> external;
  k.operands.reserve(nodes.size());
  k.results.reserve(nodes.size());
  auto key = [&](const Operand& o) -> int {
    if (o.pending) {
      auto [it, fresh] = pending.emplace(o.pending->id, static_cast<int>(k.pending.size()));
      if (fresh) k.pending.push_back(o.pending);
      return it->second;
    }
    if (o.tensor.defined() && !o.tensor.is_cpu()) {
      auto [it, fresh] = external.emplace(o.tensor.storage().unsafeGetStorageImpl(),
                                          -static_cast<int>(external.size()) - 1);
      return it->second;
    }
    return INT32_MIN;  // undefined, or a CPU scalar
  };
  for (const Node& n : nodes) {
    Keys::List& ops = k.operands.emplace_back();
    for (const auto& o : n.operands) ops.push_back(key(o));
    Keys::List& res = k.results.emplace_back();
    for (const auto& o : n.results) res.push_back(key(o));
  }
  return k;
}

bool alive(const PendingStorage& p) {
  if (p.materialized.load()) return true;
  if (p.dead.load()) return false;
  return static_cast<bool>(p.impl->lock());
}

bool is_convolution(const Node& n) {
  return n.capture == aten::Capture::new_results &&
         traits_of(n).role == aten::FusionRole::matmul_leader && n.results.size() == 1 &&
         n.results[0].defined();
}

// A matmul or convolution that can lead a fused region (its result has a dense layout): an out=
// matmul writing one operand, or a convolution returning one result.
bool matmul_prologue(const Node& n) {
  if (is_convolution(n)) return true;
  if (n.capture != aten::Capture::results_are_arguments ||
      traits_of(n).role != aten::FusionRole::matmul_leader) {
    return false;
  }
  int written = 0;
  for (const auto& o : n.operands) written += o.written;
  return written == 1;
}

// A reduction that can end a fused region: it reads one tensor (the value the region makes) and
// writes one (its out= form).
bool reduction_epilogue(const Node& n) {
  if (n.capture != aten::Capture::results_are_arguments ||
      traits_of(n).role != aten::FusionRole::reduction_epilogue) {
    return false;
  }
  int inputs = 0, written = 0;
  for (const auto& o : n.operands) {
    if (!o.defined()) continue;
    written += o.written;
    inputs += !o.written;
  }
  return inputs == 1 && written == 1;
}

const Operand& written_operand(const Node& n) {
  if (is_convolution(n)) return n.results[0];
  for (const auto& o : n.operands) {
    if (o.written) return o;
  }
  TORCH_INTERNAL_ASSERT(false, *n.name, " writes nothing");
}

int64_t place_of(const Node& n) {
  return (static_cast<int64_t>(n.device.index()) << 40) + static_cast<int64_t>(n.stream);
}

bool debug_flag(const char* flag) {
  static const std::string flags = runtime::env::value("TORCHTPU_DEFER_DEBUG");
  return !flags.empty() && ("," + flags + ",").find("," + std::string(flag) + ",") != std::string::npos;
}

const PlanOptions& PlanOptions::from_environment() {
  static const PlanOptions options = [] {
    PlanOptions o;
    o.fuse = !debug_flag("nofuse");
    o.reorder = !debug_flag("noreorder");
    o.reduce = !debug_flag("noreduce");
    o.matmul = !debug_flag("nomatmul");
    o.dce = !debug_flag("nodce");
    return o;
  }();
  return options;
}

namespace {

std::string describe(const Operand& o, int key) {
  std::ostringstream s;
  if (key >= 0) {
    s << "%" << key;
  } else if (key == INT32_MIN) {
    s << (o.tensor.defined() ? "scalar" : "_");
    if (!o.tensor.defined()) return s.str();
  } else {
    s << "ext" << -key - 1;
  }
  s << ":" << c10::toString(o.dtype) << c10::IntArrayRef(o.sizes);
  return s.str();
}

}  // namespace

std::vector<char> eliminate_dead_ops(const std::vector<Node>& nodes, const Keys& keys,
                                     const std::vector<char>& alive_keys,
                                     const PlanOptions& options) {
  const size_t n = nodes.size();
  // Dead-op elimination: an op is live when it writes an external tensor or a pending storage
  // that is alive or read by a later live op, or when it checks values (Node::checks_values):
  // its error must be raised even when nothing reads its result.
  std::vector<char> needed(alive_keys.begin(), alive_keys.end());
  std::vector<char> live(n, 0);
  for (size_t i = n; i-- > 0;) {
    bool writes_needed = false;
    for_each_access(nodes, keys, i, [&](const Operand& o, int key) {
      if (o.written && (key < 0 || needed[key])) writes_needed = true;
    });
    if (!writes_needed && !nodes[i].checks_values && options.dce) continue;
    live[i] = 1;
    for_each_access(nodes, keys, i, [&](const Operand& o, int key) {
      if (key >= 0 && (o.read || !o.written)) needed[key] = 1;
    });
  }
  return live;
}

namespace {

// group_regions' state while it walks the live ops in program order (see group_regions).
class RegionGrouper {
 public:
  RegionGrouper(const std::vector<Node>& nodes, const Keys& keys, const std::vector<char>& pinned,
                const PlanOptions& options, Plan& plan)
      : nodes_(nodes), keys_(keys), pinned_(pinned), options_(options), plan_(plan) {}

  void place(size_t i) {
    const Node& node = nodes_[i];
    const int deps = deps_of(i);
    int r;
    if (node.elementwise && options_.fuse) {
      r = place_elementwise(i, deps);
    } else if (reduction_epilogue(node) && options_.reduce) {
      r = place_reduction(i, deps);
    } else if (matmul_prologue(node) && options_.matmul &&
               non_overlapping(geometry_of(written_operand(node), written_operand(node).sizes),
                               written_operand(node).sizes)) {
      r = place_matmul(i);
    } else {
      r = open_region(single(i), {});
    }
    note_accesses(i, r);
  }

 private:
  struct Access {
    Geometry g;
    bool written;
  };
  using Accesses = std::unordered_map<int, Access>;
  using ShapeKey = std::pair<int64_t, std::vector<int64_t>>;  // (place, shape)

  static Region single(size_t i) {
    Region region;
    region.nodes.push_back(static_cast<int>(i));
    return region;
  }
  ShapeKey shape_key(const Node& node, const Dims& shape) const {
    return {place_of(node), std::vector<int64_t>(shape.begin(), shape.end())};
  }

  // The latest region op i depends on: the last writer of what it reads, the last writer and
  // readers of what it writes.
  int deps_of(size_t i) const {
    int deps = -1;
    for_each_access(nodes_, keys_, i, [&](const Operand& o, int key) {
      if (key == INT32_MIN) return;
      if (auto it = last_writer_.find(key); it != last_writer_.end()) {
        deps = std::max(deps, it->second);
      }
      if (o.written) {
        if (auto it = last_reader_.find(key); it != last_reader_.end()) {
          deps = std::max(deps, it->second);
        }
      }
    });
    return deps;
  }
  void note_accesses(size_t i, int r) {
    for_each_access(nodes_, keys_, i, [&](const Operand& o, int key) {
      if (key == INT32_MIN) return;
      if (o.read || !o.written) last_reader_[key] = std::max(last_reader_[key], r);
      if (o.written) last_writer_[key] = r;
    });
  }
  // Adds node i's accesses to `merged`; false when blocking would be unsafe.
  bool merge(size_t i, Accesses& merged) const {
    bool ok = true;
    const Node& node = nodes_[i];
    for_each_access(nodes_, keys_, i, [&](const Operand& o, int key) {
      if (key == INT32_MIN) return;
      const Geometry g = geometry_of(o, node.shape);
      if (o.written && !non_overlapping(g, node.shape)) ok = false;
      auto it = merged.find(key);
      if (it == merged.end()) {
        merged.emplace(key, Access{g, o.written});
      } else {
        if (!(it->second.g == g) && (it->second.written || o.written)) ok = false;
        it->second.written = it->second.written || o.written;
      }
    });
    return ok;
  }
  int open_region(Region region, Accesses access) {
    plan_.regions.push_back(std::move(region));
    region_access_.push_back(std::move(access));
    return static_cast<int>(plan_.regions.size()) - 1;
  }

  // An element-wise op joins the open fused region over its shape when it can, else opens one.
  int place_elementwise(size_t i, int deps) {
    const Node& node = nodes_[i];
    const ShapeKey key = shape_key(node, node.shape);
    auto it = open_by_shape_.find(key);
    const bool out_of_order =
        it != open_by_shape_.end() && it->second + 1 != static_cast<int>(plan_.regions.size());
    if (it != open_by_shape_.end() && deps <= it->second &&
        !((pinned_[i] || !options_.reorder) && out_of_order)) {
      Accesses merged = region_access_[it->second];
      if (merge(i, merged)) {
        const int r = it->second;
        plan_.regions[r].nodes.push_back(static_cast<int>(i));
        region_access_[r] = std::move(merged);
        return r;
      }
    }
    Accesses access;
    Region region = single(i);
    if (!merge(i, access)) return open_region(std::move(region), {});
    region.fused = true;
    region.shape = node.shape;
    const int r = open_region(std::move(region), std::move(access));
    open_by_shape_[key] = r;
    return r;
  }

  // A reduction joins the open fused region that made its input (which then stays in a region
  // buffer, out of HBM); nothing joins that region after it.
  int place_reduction(size_t i, int deps) {
    const Node& node = nodes_[i];
    size_t in = 0;
    while (node.operands[in].written || !node.operands[in].defined()) ++in;
    const int key = keys_.operands[i][in];
    auto it = open_by_shape_.find(shape_key(node, node.operands[in].sizes));
    auto writer = last_writer_.find(key);
    if (key >= 0 && it != open_by_shape_.end() && writer != last_writer_.end() &&
        writer->second == it->second && deps <= it->second &&
        !plan_.regions[it->second].matmul_first) {
      const int r = it->second;
      plan_.regions[r].nodes.push_back(static_cast<int>(i));
      plan_.regions[r].reduction_last = true;
      open_by_shape_.erase(it);
      return r;
    }
    return open_region(single(i), {});
  }

  // A matmul opens a region its element-wise epilogue can join. Only the matmul's result takes
  // part in the blocking checks: its inputs are read whole before the epilogue runs.
  int place_matmul(size_t i) {
    const Node& node = nodes_[i];
    const Operand& out = written_operand(node);
    Accesses access;
    for (size_t j = 0; j < node.operands.size(); ++j) {
      if (node.operands[j].written) {
        access.emplace(keys_.operands[i][j], Access{geometry_of(out, out.sizes), true});
      }
    }
    if (is_convolution(node)) {
      access.emplace(keys_.results[i][0], Access{geometry_of(out, out.sizes), true});
    }
    Region region = single(i);
    region.fused = region.matmul_first = true;
    region.shape = out.sizes;
    const int r = open_region(std::move(region), std::move(access));
    open_by_shape_[shape_key(node, out.sizes)] = r;
    return r;
  }

  const std::vector<Node>& nodes_;
  const Keys& keys_;
  const std::vector<char>& pinned_;
  const PlanOptions& options_;
  Plan& plan_;
  std::vector<Accesses> region_access_;
  std::map<ShapeKey, int> open_by_shape_;
  std::unordered_map<int, int> last_writer_, last_reader_;
};

}  // namespace

// Regions. An element-wise op joins the latest fused region over its shape when that region can
// run it: every op it depends on (the last writer of what it reads, the last writer and readers
// of what it writes) runs in that region or before it, and blocking stays safe (no storage
// written in the region is accessed with two geometries). Regions run in the order they were
// opened, so independent chains interleaved in the program (an optimizer's update of each
// parameter, op by op over all parameters) fuse into one region per shape. A matmul opens a
// region that its element-wise epilogue can join; every other op is a region of its own.
void group_regions(const std::vector<Node>& nodes, const Keys& keys,
                   const std::vector<char>& pinned, const PlanOptions& options, Plan& plan) {
  plan.regions.clear();
  RegionGrouper grouper(nodes, keys, pinned, options, plan);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (plan.live[i]) grouper.place(i);
  }
  for (Region& region : plan.regions) {
    if (region.nodes.size() == 1) region.fused = region.matmul_first = region.reduction_last = false;
  }
  plan.fused_ops = 0;
  for (const Region& region : plan.regions) {
    if (region.fused) plan.fused_ops += static_cast<int>(region.nodes.size());
  }
}


// Ops whose out-of-order join moved an allocation earlier: op i joined a region opened before
// other regions that precede it in the program, and its write is the first access of a value
// that takes memory (HBM or a region buffer). That value now lives from the region on instead
// of from op i on (a backward buffer zeroed in a forward region would live through the whole
// forward pass), so op i is pinned to program order. Returns whether any op was newly pinned.
bool pin_early_allocations(const Plan& plan, const std::vector<Node>& nodes, const Keys& keys,
                           std::vector<char>& pinned) {
  const size_t R = plan.regions.size();
  std::vector<int> region_of(nodes.size(), -1);
  for (size_t r = 0; r < R; ++r) {
    for (int i : plan.regions[r].nodes) region_of[i] = static_cast<int>(r);
  }
  std::vector<char> seen(keys.pending.size(), 0);
  bool changed = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int r = region_of[i];
    if (r < 0) continue;
    const bool hoisted = r + 1 < static_cast<int>(R) &&
                         plan.regions[r + 1].nodes[0] < static_cast<int>(i);
    for_each_access(nodes, keys, i, [&](const Operand& o, int key) {
      if (key < 0 || seen[key]) return;
      seen[key] = 1;
      const bool takes_memory = plan.memory[key] || plan.host_buffer[key];
      if (hoisted && o.written && takes_memory && !pinned[i]) {
        pinned[i] = 1;
        changed = true;
      }
    });
  }
  return changed;
}

void assign_memory(const std::vector<Node>& nodes, const Keys& keys,
                   const std::vector<char>& alive_keys, Plan& plan) {
  const size_t P = keys.pending.size();
  // Memory: a pending storage needs HBM unless it is dead and lives inside one fused region
  // whose first access to it writes it whole.
  std::vector<int> first_region(P, -1);
  std::vector<char> first_is_write(P, 0), many(P, 0), whole_access(P, 0);
  plan.last_region.assign(P, -1);
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    const Region& region = plan.regions[r];
    for (int i : region.nodes) {
      for_each_access(nodes, keys, i, [&](const Operand& o, int key) {
        if (key < 0) return;
        if (first_region[key] < 0) {
          first_region[key] = static_cast<int>(r);
          first_is_write[key] = o.written && !o.read;
        } else if (first_region[key] != static_cast<int>(r)) {
          many[key] = 1;
        }
        const bool matmul_input = region.matmul_first && i == region.nodes[0] && !o.written;
        if (region.fused && !matmul_input && geometry_of(o, region.shape).whole) {
          whole_access[key] = 1;
        }
        plan.last_region[key] = static_cast<int>(r);
      });
    }
  }
  plan.memory.assign(P, 1);
  plan.slot.assign(P, -1);
  plan.host_buffer.assign(P, 0);
  for (size_t k = 0; k < P; ++k) {
    if (first_region[k] < 0) continue;
    const Region& region = plan.regions[first_region[k]];
    if (!alive_keys[k] && !many[k] && region.fused && first_is_write[k] && !whole_access[k]) {
      plan.memory[k] = 0;
      bool matmul_result = false;
      if (region.matmul_first && is_convolution(nodes[region.nodes[0]]) &&
          keys.results[region.nodes[0]][0] == static_cast<int>(k)) {
        // A convolution's result: its kernel leaves it in host memory (ResultInHostMemory).
        matmul_result = true;
      }
      if (region.matmul_first) {
        const int m = region.nodes[0];
        for (size_t j = 0; j < nodes[m].operands.size(); ++j) {
          if (nodes[m].operands[j].written && keys.operands[m][j] == static_cast<int>(k)) {
            matmul_result = true;
          }
        }
      }
      bool reduced = false;  // the input of the region's final reduction
      if (region.reduction_last) {
        const int m = region.nodes.back();
        for (size_t j = 0; j < nodes[m].operands.size(); ++j) {
          if (keys.operands[m][j] == static_cast<int>(k)) {
            reduced = !nodes[m].operands[j].written;
            if (nodes[m].operands[j].written) plan.memory[k] = 1;  // its result
          }
        }
        if (plan.memory[k]) continue;
      }
      if (matmul_result || reduced) {
        plan.host_buffer[k] = 1;  // the whole value, outside HBM (the fused output tiles)
      } else {
        plan.slot[k] = -2;  // a block buffer, assigned below
      }
    }
  }
}

void assign_block_slots(const std::vector<Node>& nodes, const Keys& keys, Plan& plan) {
  // Block buffers: a buffer is reused once the value in it has had its last use in the
  // region, so that a long chain works in a few buffers that stay in cache.
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    const Region& region = plan.regions[r];
    if (!region.fused) continue;
    std::unordered_map<int, size_t> last_use;
    for (size_t j = 0; j < region.nodes.size(); ++j) {
      for_each_access(nodes, keys, region.nodes[j], [&](const Operand&, int key) {
        if (key >= 0 && plan.slot[key] != -1) last_use[key] = j;
      });
    }
    std::vector<int> free_slots;
    int next = 0;
    for (size_t j = 0; j < region.nodes.size(); ++j) {
      for_each_access(nodes, keys, region.nodes[j], [&](const Operand&, int key) {
        if (key < 0 || plan.slot[key] != -2) return;
        if (free_slots.empty()) {
          plan.slot[key] = next++;
        } else {
          plan.slot[key] = free_slots.back();
          free_slots.pop_back();
        }
      });
      for (const auto& [key, last] : last_use) {
        if (last == j) free_slots.push_back(plan.slot[key]);
      }
    }
  }
}

std::string print_ir(const std::vector<Node>& nodes, const Keys& keys, const Plan& plan) {
  const size_t n = nodes.size();
  // The IR, as text.
  std::ostringstream ir;
  int eliminated = 0;
  for (char l : plan.live) eliminated += !l;
  ir << "graph: " << n << " ops, " << plan.regions.size() << " regions, " << eliminated
     << " eliminated\n";
  for (size_t r = 0; r < plan.regions.size(); ++r) {
    const Region& region = plan.regions[r];
    if (region.fused) {
      ir << "  region " << r << ": fused "
         << (region.matmul_first ? "matmul with element-wise epilogue" : "element-wise")
         << " over " << c10::IntArrayRef(region.shape) << ", " << region.nodes.size()
         << " ops\n";
    } else {
      ir << "  region " << r << ": kernel\n";
    }
    for (int i : region.nodes) {
      ir << "    #" << i << " " << *nodes[i].name << "(";
      for (size_t j = 0; j < nodes[i].operands.size(); ++j) {
        if (j) ir << ", ";
        const int key = keys.operands[i][j];
        ir << (nodes[i].operands[j].written ? "out " : "") << describe(nodes[i].operands[j], key);
        if (key >= 0 && !plan.memory[key]) ir << (plan.host_buffer[key] ? " [region]" : " [block]");
      }
      ir << ")";
      for (size_t j = 0; j < nodes[i].results.size(); ++j) {
        const int key = keys.results[i][j];
        ir << (j ? ", " : " -> ") << describe(nodes[i].results[j], key);
        if (key >= 0 && !plan.memory[key]) ir << " [block]";
      }
      ir << "\n";
    }
  }
  return ir.str();
}

std::shared_ptr<Plan> build_plan(const std::vector<Node>& nodes, const Keys& keys,
                                 const std::vector<char>& alive_keys,
                                 const PlanOptions& options) {
  auto plan = std::make_shared<Plan>();
  plan->live = eliminate_dead_ops(nodes, keys, alive_keys, options);
  std::vector<char> pinned(nodes.size(), 0);
  auto plan_memory = [&] {
    group_regions(nodes, keys, pinned, options, *plan);
    assign_memory(nodes, keys, alive_keys, *plan);
  };
  plan_memory();
  // Each round pins more ops; a few rounds settle it (each only removes joins).
  for (int round = 0; round < 8 && options.pin_allocations &&
                      pin_early_allocations(*plan, nodes, keys, pinned);
       ++round) {
    plan_memory();
    ++plan->replans;
  }
  assign_block_slots(nodes, keys, *plan);
  plan->ir = print_ir(nodes, keys, *plan);
  return plan;
}

}  // namespace torchtpu::defer
