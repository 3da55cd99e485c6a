// The planning passes of fused eager (defer/Plan.h) on hand-built graphs: what each pass
// decides (regions, fused ops, eliminated ops, which values take HBM, block buffers, pinning),
// without recording or running anything.
#include "defer/Plan.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

using namespace torchtpu::defer;

namespace {

// Builds graphs node by node. Values are pending storages of float32 tensors; "external"
// tensors are real CPU tensors standing for device memory (the planner only looks at their
// storage identity and geometry).
class GraphBuilder {
 public:
  std::vector<Node> nodes;
  std::vector<std::unique_ptr<std::string>> names;  // the nodes' op names

  std::shared_ptr<PendingStorage> value(Dims sizes) {
    auto p = std::make_shared<PendingStorage>();
    p->id = ++next_id_;
    p->nbytes = static_cast<size_t>(c10::multiply_integers(sizes)) * 4;
    sizes_[p->id] = sizes;
    return p;
  }
  at::Tensor external(Dims sizes) { return at::zeros(c10::IntArrayRef(sizes)); }

  Operand in(const std::shared_ptr<PendingStorage>& p) { return operand(p, true, false); }
  Operand out(const std::shared_ptr<PendingStorage>& p) { return operand(p, false, true); }
  Operand in(const at::Tensor& t) {
    Operand o;
    o.tensor = t;
    o.sizes.assign(t.sizes().begin(), t.sizes().end());
    o.strides.assign(t.strides().begin(), t.strides().end());
    o.dtype = t.scalar_type();
    return o;
  }
  Operand scalar(double v) { return in(at::scalar_tensor(v)); }

  // An op over `operands`; element-wise ones iterate over `shape`.
  Node& op(const char* name, const char* overload, std::vector<Operand> operands,
           bool elementwise = false, Dims shape = {}, c10::StreamId stream = 0) {
    Node n(c10::Dispatcher::singleton().findSchemaOrThrow(name, overload));
    // (A node names its op by a string kept for the process, as a kernel keeps its name.)
    names.push_back(std::make_unique<std::string>(
        std::string(name) + (overload[0] ? std::string(".") + overload : "")));
    n.name = names.back().get();
    n.capture = torchtpu::aten::Capture::results_are_arguments;
    n.operands = std::move(operands);
    n.elementwise = elementwise;
    n.shape = shape;
    n.stream = stream;
    nodes.push_back(std::move(n));
    return nodes.back();
  }

  // Per pending key of `keys`, whether it is alive (in `alive_values`).
  std::vector<char> alive(const Keys& keys,
                          std::initializer_list<std::shared_ptr<PendingStorage>> alive_values) {
    std::vector<char> a(keys.pending.size(), 0);
    for (const auto& v : alive_values) a[key(keys, v)] = 1;
    return a;
  }
  static int key(const Keys& keys, const std::shared_ptr<PendingStorage>& v) {
    for (size_t k = 0; k < keys.pending.size(); ++k) {
      if (keys.pending[k] == v) return static_cast<int>(k);
    }
    ADD_FAILURE() << "not in the graph";
    return 0;
  }

 private:
  Operand operand(const std::shared_ptr<PendingStorage>& p, bool read, bool written) {
    Operand o;
    o.pending = p;
    o.sizes = sizes_.at(p->id);
    o.strides.assign(o.sizes.size(), 1);
    for (int64_t j = static_cast<int64_t>(o.sizes.size()) - 2; j >= 0; --j) {
      o.strides[j] = o.strides[j + 1] * o.sizes[j + 1];
    }
    o.dtype = c10::kFloat;
    o.read = read;
    o.written = written;
    return o;
  }
  uint64_t next_id_ = 0;
  std::map<uint64_t, Dims> sizes_;
};

const Dims S{64, 64};

}  // namespace

TEST(Plan, AnElementwiseChainIsOneFusedRegionWhoseTemporariesTakeNoHbm) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S);
  g.op("aten::mul", "out", {g.in(x), g.scalar(2), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);
  g.op("aten::add", "out", {g.in(b), g.in(a), g.scalar(1), g.out(c)}, true, S);
  const Keys keys = keys_of(g.nodes);
  ASSERT_EQ(keys.pending.size(), 3u);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {c}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 1u);
  EXPECT_TRUE(plan->regions[0].fused);
  EXPECT_EQ(plan->fused_ops, 3);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 0);  // block buffers only
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, b)], 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, c)], 1);  // alive: HBM
  const int sa = plan->slot[GraphBuilder::key(keys, a)], sb = plan->slot[GraphBuilder::key(keys, b)];
  EXPECT_GE(sa, 0);
  EXPECT_GE(sb, 0);
  EXPECT_NE(sa, sb);  // both are in use by the last op
  EXPECT_NE(plan->ir.find("fused element-wise over [64, 64], 3 ops"), std::string::npos) << plan->ir;
}

TEST(Plan, ABlockBufferIsReusedAfterTheLastUseOfItsValue) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S), d = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);   // a's last use
  g.op("aten::sin", "out", {g.in(b), g.out(c)}, true, S);   // b's last use
  g.op("aten::cos", "out", {g.in(c), g.out(d)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {d}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 1u);
  std::set<int> slots;
  for (const auto& v : {a, b, c}) slots.insert(plan->slot[GraphBuilder::key(keys, v)]);
  EXPECT_EQ(slots.size(), 2u) << "a chain of three temporaries needs two buffers";
}

TEST(Plan, DeadOpsAreEliminatedExceptThoseThatCheckValues) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  const at::Tensor ids = at::zeros({4}, at::kLong);
  auto dead = g.value(S), kept = g.value({4, 64}), used = g.value(S);
  g.op("aten::mul", "out", {g.in(x), g.scalar(3), g.out(dead)}, true, S);
  Node& select = g.op("aten::index_select", "out", {g.in(x), g.in(ids), g.out(kept)});
  select.checks_values = true;  // an index out of range must still be raised
  g.op("aten::neg", "out", {g.in(x), g.out(used)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto live = eliminate_dead_ops(g.nodes, keys, g.alive(keys, {used}), PlanOptions());
  EXPECT_EQ(std::vector<char>(live.begin(), live.end()), (std::vector<char>{0, 1, 1}));
  PlanOptions no_dce;
  no_dce.dce = false;
  const auto all = eliminate_dead_ops(g.nodes, keys, g.alive(keys, {used}), no_dce);
  EXPECT_EQ(std::vector<char>(all.begin(), all.end()), (std::vector<char>{1, 1, 1}));
}

TEST(Plan, AMatmulLeadsARegionWithItsEpilogueAndItsProductStaysOutOfHbm) {
  GraphBuilder g;
  const at::Tensor A = g.external(S), B = g.external(S), bias = g.external({64});
  auto p = g.value(S), q = g.value(S), r = g.value(S);
  g.op("aten::mm", "out", {g.in(A), g.in(B), g.out(p)});
  g.op("aten::add", "out", {g.in(p), g.in(bias), g.scalar(1), g.out(q)}, true, S);
  g.op("aten::relu", "", {g.in(q), g.out(r)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {r}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 1u);
  EXPECT_TRUE(plan->regions[0].matmul_first);
  EXPECT_EQ(plan->fused_ops, 3);
  EXPECT_EQ(plan->host_buffer[GraphBuilder::key(keys, p)], 1);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, p)], 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, r)], 1);
  PlanOptions no_matmul;
  no_matmul.matmul = false;
  EXPECT_EQ(build_plan(g.nodes, keys, g.alive(keys, {r}), no_matmul)->regions.size(), 2u);
}

TEST(Plan, AReductionEndsTheRegionThatMadeItsInput) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto t = g.value(S), s = g.value({64});
  g.op("aten::mul", "out", {g.in(x), g.in(x), g.out(t)}, true, S);
  g.op("aten::sum", "IntList_out", {g.in(t), g.out(s)});
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {s}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 1u);
  EXPECT_TRUE(plan->regions[0].reduction_last);
  EXPECT_EQ(plan->host_buffer[GraphBuilder::key(keys, t)], 1);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, s)], 1);
}

TEST(Plan, OpsOfDifferentStreamsDoNotFuse) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S, /*stream=*/0);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S, /*stream=*/3);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {b}), PlanOptions());
  EXPECT_EQ(plan->regions.size(), 2u);
  EXPECT_EQ(plan->fused_ops, 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 1);  // crosses regions: HBM
}

TEST(Plan, InterleavedChainsFuseOneRegionPerShape) {
  // An optimizer's update op by op over all parameters: two parameter shapes, interleaved.
  GraphBuilder g;
  const Dims T{32};
  const at::Tensor w1 = g.external(S), w2 = g.external(T);
  for (int step = 0; step < 3; ++step) {
    g.op("aten::mul", "out", {g.in(w1), g.scalar(0.9), g.in(w1)}, true, S).operands[2].written = true;
    g.op("aten::mul", "out", {g.in(w2), g.scalar(0.9), g.in(w2)}, true, T).operands[2].written = true;
  }
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, {}, PlanOptions());
  ASSERT_EQ(plan->regions.size(), 2u);
  EXPECT_EQ(plan->regions[0].nodes, (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(plan->regions[1].nodes, (std::vector<int>{1, 3, 5}));
  PlanOptions in_order;
  in_order.reorder = false;
  EXPECT_EQ(build_plan(g.nodes, keys, {}, in_order)->regions.size(), 6u);
}

TEST(Plan, AnOutOfOrderJoinThatWouldAllocateEarlyIsPinned) {
  // A value zeroed late in the program (a backward buffer) would join a region opened early
  // (the forward pass) and live from there: it is pinned to program order instead.
  GraphBuilder g;
  const at::Tensor x = g.external(S), y = g.external(S);
  auto a = g.value(S), b = g.value(S), z = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::cumsum", "out", {g.in(y), g.out(b)});  // a kernel region in between
  g.op("aten::zero", "", {g.out(z)}, true, S);       // first access: a write
  const Keys keys = keys_of(g.nodes);
  const auto alive = g.alive(keys, {a, b, z});
  const auto plan = build_plan(g.nodes, keys, alive, PlanOptions());
  EXPECT_EQ(plan->replans, 1);
  ASSERT_EQ(plan->regions.size(), 3u);
  EXPECT_EQ(plan->regions[2].nodes, (std::vector<int>{2}));
}

TEST(Plan, WithoutFusionEveryOpIsARegionOfItsOwn) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);
  const Keys keys = keys_of(g.nodes);
  PlanOptions no_fusion;
  no_fusion.fuse = false;
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {b}), no_fusion);
  EXPECT_EQ(plan->regions.size(), 2u);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 1);
}

// keys_of: pending storages are numbered 0.. in order of first use, one key per storage however
// often it is used; CPU scalars and undefined operands have no storage (INT32_MIN).
TEST(Plan, KeysNumberPendingStoragesByFirstUseAndGiveScalarsNone) {
  GraphBuilder g;
  auto a = g.value(S), b = g.value(S);
  g.op("aten::mul", "out", {g.in(b), g.scalar(2), g.out(a)}, true, S);
  g.op("aten::add", "out", {g.in(a), g.in(b), g.scalar(1), g.out(b)}, true, S);
  g.op("aten::neg", "out", {Operand(), g.out(a)}, true, S);
  const Keys keys = keys_of(g.nodes);
  ASSERT_EQ(keys.pending.size(), 2u);
  EXPECT_EQ(keys.pending[0], b);  // b is used first
  EXPECT_EQ(keys.pending[1], a);
  EXPECT_EQ(keys.operands[0], (Keys::List{0, INT32_MIN, 1}));
  EXPECT_EQ(keys.operands[1], (Keys::List{1, 0, INT32_MIN, 0}));
  EXPECT_EQ(keys.operands[2], (Keys::List{INT32_MIN, 1}));
}

// geometry_of maps an operand onto an iteration shape: broadcast dimensions get stride 0, a
// 0-dim operand is passed whole; non_overlapping tells a layout that blocks may write apart.
TEST(Plan, GeometryBroadcastsWithStrideZeroAndOnlyDistinctElementsAreNonOverlapping) {
  GraphBuilder g;
  auto row = g.value({1, 64}), m = g.value(S), zero_dim = g.value({});
  const Geometry r = geometry_of(g.in(row), S);
  EXPECT_EQ(r.smap, (Dims{0, 1}));
  EXPECT_FALSE(r.whole);
  EXPECT_FALSE(non_overlapping(r, S));  // 64 positions read one element each
  Operand t = g.in(m);
  std::swap(t.strides[0], t.strides[1]);  // a transposed view
  const Geometry tg = geometry_of(t, S);
  EXPECT_EQ(tg.smap, (Dims{1, 64}));
  EXPECT_TRUE(non_overlapping(tg, S));
  EXPECT_TRUE(geometry_of(g.in(zero_dim), S).whole);
  EXPECT_FALSE(non_overlapping(geometry_of(g.in(zero_dim), S), S));
}

// eliminate_dead_ops is transitive: an op whose only reader is dead is dead too.
TEST(Plan, DeadOpEliminationRemovesAChainWhoseLastValueIsDead) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);  // b: nobody refers to it
  g.op("aten::sin", "out", {g.in(x), g.out(c)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto live = eliminate_dead_ops(g.nodes, keys, g.alive(keys, {c}), PlanOptions());
  EXPECT_EQ(std::vector<char>(live.begin(), live.end()), (std::vector<char>{0, 0, 1}));
  // With b alive instead, the chain that makes it is kept and sin is dead.
  const auto live_b = eliminate_dead_ops(g.nodes, keys, g.alive(keys, {b}), PlanOptions());
  EXPECT_EQ(std::vector<char>(live_b.begin(), live_b.end()), (std::vector<char>{1, 1, 0}));
}

// group_regions keeps blocking safe: a value written in a region is never accessed there with
// another geometry (a transposed read of it would see other blocks' elements).
TEST(Plan, AValueWrittenInARegionIsNotReadThereThroughAnotherLayout) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  Operand transposed = g.in(a);
  std::swap(transposed.strides[0], transposed.strides[1]);
  g.op("aten::exp", "out", {transposed, g.out(b)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {b}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 2u);
  EXPECT_EQ(plan->fused_ops, 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 1);  // read in another region: HBM
}

// group_regions: an element-wise op that reads what a later region wrote cannot join the
// region opened before it; assign_memory gives a value used in several regions memory, and
// its last_region is the last of them.
TEST(Plan, AnOpThatReadsALaterRegionsResultOpensANewRegion) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::cumsum", "out", {g.in(a), g.out(b)});  // a kernel region after it
  g.op("aten::add", "out", {g.in(a), g.in(b), g.scalar(1), g.out(c)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {c}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 3u);
  EXPECT_EQ(plan->regions[0].nodes, (std::vector<int>{0}));
  EXPECT_EQ(plan->regions[2].nodes, (std::vector<int>{2}));
  EXPECT_EQ(plan->replans, 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 1);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, b)], 1);
  EXPECT_EQ(plan->last_region[GraphBuilder::key(keys, a)], 2);
  EXPECT_EQ(plan->last_region[GraphBuilder::key(keys, b)], 2);
}

// PlanOptions::reduce off (TORCHTPU_DEFER_DEBUG=noreduce): a reduction is a region of its own
// and the value it reduces takes HBM instead of a region buffer.
TEST(Plan, WithoutReductionFusionAReductionIsARegionOfItsOwn) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto t = g.value(S), s = g.value({64});
  g.op("aten::mul", "out", {g.in(x), g.in(x), g.out(t)}, true, S);
  g.op("aten::sum", "IntList_out", {g.in(t), g.out(s)});
  const Keys keys = keys_of(g.nodes);
  PlanOptions no_reduce;
  no_reduce.reduce = false;
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {s}), no_reduce);
  ASSERT_EQ(plan->regions.size(), 2u);
  EXPECT_FALSE(plan->regions[0].reduction_last);
  EXPECT_EQ(plan->fused_ops, 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, t)], 1);
  EXPECT_EQ(plan->host_buffer[GraphBuilder::key(keys, t)], 0);
}

// pin_early_allocations, run by hand between the passes: it pins exactly the op whose
// out-of-order join made a value take memory early, and once that op is pinned, grouping again
// keeps it in program order and nothing more is pinned (the rounds of build_plan settle).
TEST(Plan, PinningMarksTheHoistedAllocationAndThenSettles) {
  GraphBuilder g;
  const at::Tensor x = g.external(S), y = g.external(S);
  auto a = g.value(S), b = g.value(S), z = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::cumsum", "out", {g.in(y), g.out(b)});
  g.op("aten::zero", "", {g.out(z)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto alive = g.alive(keys, {a, b, z});
  Plan plan;
  plan.live = eliminate_dead_ops(g.nodes, keys, alive, PlanOptions());
  std::vector<char> pinned(g.nodes.size(), 0);
  group_regions(g.nodes, keys, pinned, PlanOptions(), plan);
  assign_memory(g.nodes, keys, alive, plan);
  ASSERT_EQ(plan.regions.size(), 2u);
  EXPECT_EQ(plan.regions[0].nodes, (std::vector<int>{0, 2}));  // zero joined the first region
  EXPECT_TRUE(pin_early_allocations(plan, g.nodes, keys, pinned));
  EXPECT_EQ(pinned, (std::vector<char>{0, 0, 1}));
  group_regions(g.nodes, keys, pinned, PlanOptions(), plan);
  assign_memory(g.nodes, keys, alive, plan);
  EXPECT_EQ(plan.regions.size(), 3u);
  EXPECT_FALSE(pin_early_allocations(plan, g.nodes, keys, pinned));
}

// assign_block_slots gives block buffers only to values that live inside their region (no
// memory): a value kept alive or used by another region has slot -1.
TEST(Plan, OnlyValuesWithoutMemoryGetBlockSlots) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);
  g.op("aten::sin", "out", {g.in(b), g.out(c)}, true, S);
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {b, c}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 1u);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, a)], 0);
  EXPECT_EQ(plan->slot[GraphBuilder::key(keys, a)], 0);
  EXPECT_EQ(plan->memory[GraphBuilder::key(keys, b)], 1);  // alive
  EXPECT_EQ(plan->slot[GraphBuilder::key(keys, b)], -1);
  EXPECT_EQ(plan->slot[GraphBuilder::key(keys, c)], -1);
}

// print_ir lists every region with its kind and its ops, values in block buffers marked.
TEST(Plan, TheIrNamesEveryRegionAndItsOps) {
  GraphBuilder g;
  const at::Tensor x = g.external(S);
  auto a = g.value(S), b = g.value(S), c = g.value(S);
  g.op("aten::neg", "out", {g.in(x), g.out(a)}, true, S);
  g.op("aten::exp", "out", {g.in(a), g.out(b)}, true, S);
  g.op("aten::cumsum", "out", {g.in(b), g.out(c)});
  const Keys keys = keys_of(g.nodes);
  const auto plan = build_plan(g.nodes, keys, g.alive(keys, {c}), PlanOptions());
  ASSERT_EQ(plan->regions.size(), 2u);
  EXPECT_EQ(plan->ir, print_ir(g.nodes, keys, *plan));
  EXPECT_NE(plan->ir.find("region 0"), std::string::npos) << plan->ir;
  EXPECT_NE(plan->ir.find("region 1: kernel"), std::string::npos) << plan->ir;
  EXPECT_NE(plan->ir.find("#0 aten::neg.out("), std::string::npos) << plan->ir;
  EXPECT_NE(plan->ir.find("#2 aten::cumsum.out("), std::string::npos) << plan->ir;
  EXPECT_NE(plan->ir.find("[block]"), std::string::npos) << plan->ir;  // a: in a block buffer
}
