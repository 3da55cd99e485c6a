// The op-traits registry (aten/OpTraits.h) against PyTorch's own operator facts: every row names
// a registered op, every override of PyTorch's tags still disagrees with them (an override the
// tags now agree with must go), and the facts the layers rely on hold. The disagreements are
// printed with their reasons.
#include "aten/OpTraits.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>

#include <iostream>
#include <set>
#include <unordered_set>

using namespace torchtpu::aten;

namespace {

std::set<std::string> registered_keys() {
  std::set<std::string> keys;
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) == 0) keys.emplace(op_key(name.name));
  }
  return keys;
}

bool any_overload_tagged(std::string_view key, at::Tag tag) {
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0 || op_key(name.name) != key) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (handle && handle->hasTag(tag)) return true;
  }
  return false;
}

}  // namespace

TEST(OpTraits, KeysNameTheOpInEverySpelling) {
  EXPECT_EQ(op_key("aten::add_.Tensor"), "add");
  EXPECT_EQ(op_key("aten::add.out"), "add");
  EXPECT_EQ(op_key("add"), "add");
  EXPECT_EQ(op_key("aten::_fused_adam_"), "_fused_adam");
  EXPECT_EQ(op_key("aten::_copy_from"), "_copy_from");
  // One key, one set of traits: an op, its in-place and its out= form cost the same.
  EXPECT_EQ(op_traits("aten::_fused_adam_").vpu_units, op_traits("aten::_fused_adam").vpu_units);
  EXPECT_EQ(op_traits("aten::gelu.out").vpu_units, 6);
  EXPECT_EQ(op_traits("aten::exp_").vpu_units, 4);
  EXPECT_EQ(op_traits("aten::no_such_op").unit, OpUnit::other);
  EXPECT_EQ(op_traits("aten::no_such_op").vpu_units, 1);
}

TEST(OpTraits, EveryRowNamesARegisteredOpOnce) {
  const auto registered = registered_keys();
  std::unordered_set<std::string> seen;
  for (const std::string& key : table_keys()) {
    EXPECT_TRUE(registered.count(key)) << key << ": no aten op has this key";
    EXPECT_TRUE(seen.insert(key).second) << key << ": two rows (the second overwrites the first)";
  }
  EXPECT_GT(seen.size(), 350u);
}

TEST(OpTraits, EveryOverrideStillDisagreesWithPyTorchsTags) {
  const auto overrides = tag_overrides();
  ASSERT_FALSE(overrides.empty());
  std::cout << "[ ops whose traits disagree with PyTorch's tags ]\n";
  for (const TagOverride& o : overrides) {
    const at::Tag tag =
        o.fact == "pointwise" ? at::Tag::pointwise : at::Tag::dynamic_output_shape;
    const bool tagged = any_overload_tagged(o.key, tag);
    EXPECT_EQ(tagged, o.tagged) << o.key;
    const OpTraits& t = op_traits(o.key);
    const bool holds =
        o.fact == "pointwise" ? t.pointwise : t.sizing == Sizing::value_dependent;
    EXPECT_NE(holds, tagged) << o.key << ": PyTorch's tags agree now (" << o.fact << " = "
                             << tagged << "); remove the override";
    std::cout << "  " << o.key << ": " << o.fact << " " << (tagged ? "tagged" : "untagged")
              << " by PyTorch, " << (holds ? "true" : "false") << " here -- " << o.why << "\n";
  }
}

TEST(OpTraits, TagsAreReadFromTheDispatcher) {
  // Facts no row states: they come from at::Tag.
  EXPECT_TRUE(op_traits("aten::exp").pointwise);
  EXPECT_TRUE(op_traits("aten::gelu.out").pointwise);  // (the functional overload is tagged)
  EXPECT_TRUE(op_traits("aten::sum.IntList_out").reduction);
  EXPECT_TRUE(op_traits("aten::bernoulli_.float").random);
  EXPECT_EQ(op_traits("aten::nonzero").sizing, Sizing::value_dependent);
  EXPECT_FALSE(op_traits("aten::mm").pointwise);
}

TEST(OpTraits, FactsTheLayersRelyOn) {
  // Units: the VPU executor, the fused executor and the own kernels charge through these.
  EXPECT_EQ(op_traits("aten::random_").vpu_units, 4);
  EXPECT_EQ(op_traits("aten::_thnn_fused_lstm_cell").vpu_units, 3);
  // Placement.
  EXPECT_EQ(op_traits("aten::gelu").unit, OpUnit::vpu);
  EXPECT_EQ(op_traits("aten::mm.out").unit, OpUnit::mxu);
  EXPECT_EQ(op_traits("aten::_int_mm").unit, OpUnit::mxu);
  EXPECT_TRUE(op_traits("aten::_int_mm").integer_operands);
  EXPECT_FALSE(op_traits("aten::mm").integer_operands);
  EXPECT_EQ(op_traits("aten::_copy_from").unit, OpUnit::other);
  // Fusion roles and the loop's functions.
  EXPECT_EQ(op_traits("aten::addmm.out").role, FusionRole::matmul_leader);
  EXPECT_EQ(op_traits("aten::convolution_overrideable").role, FusionRole::matmul_leader);
  EXPECT_EQ(op_traits("aten::amax.out").role, FusionRole::reduction_epilogue);
  EXPECT_EQ(op_traits("aten::var.correction_out").role, FusionRole::none);
  EXPECT_EQ(op_traits("aten::clamp_min.out").fn, PointwiseFn::clamp_min);
  // Sizing.
  EXPECT_EQ(op_traits("aten::relu").sizing, Sizing::like_input);
  EXPECT_EQ(op_traits("aten::native_layer_norm").sizing, Sizing::rule);
  EXPECT_EQ(op_traits("aten::multi_margin_loss").sizing, Sizing::value_dependent);
  EXPECT_EQ(op_traits("aten::index.Tensor").sizing, Sizing::meta_kernel);  // (an override)
  // The rest.
  EXPECT_TRUE(op_traits("aten::grid_sampler_2d").computes_in_float32);
  EXPECT_TRUE(op_traits("aten::fill_.Scalar").writes_without_reading);
  EXPECT_TRUE(op_traits("aten::fill_.Scalar").pointwise);  // (an override)
  EXPECT_TRUE(op_traits("aten::remainder.Tensor_out").divides_integers);
  EXPECT_TRUE(op_traits("aten::index_put_").takes_cpu_indices);
  EXPECT_FALSE(op_traits("aten::max.dim").pointwise);  // (an override)
}
