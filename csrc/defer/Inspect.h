#pragma once
// A description of the pending graph of fused eager behind some tensors, for tools that show it
// without running it (torch_tpu._internal.sync.computation_graphviz / computation_mlir;
// docs/eager-modes.md, "Inspecting the pending graph"). Inspect.cpp.
//
// The recorded ops write storages in place (an out= tensor, an in-place op, a copy into a
// view), so the description numbers *values*: every write of a storage by a node makes a new
// value, and an operand reads the value its storage holds at that point of the program, through
// its own view (sizes, strides, offset, dtype). A storage that the graph reads before any of its
// nodes writes it is an *input* value (a materialized tensor, or a pending storage that no
// recorded op writes: an uninitialized `empty`).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace torchtpu::defer {

// A view of a value: an operand, a result, a tensor asked about.
struct GraphTensor {
  std::string argument;  // the schema argument it fills ("self", "out", "tensors[1]")
  // The value it views (index into PendingGraphView::values); -1: not read (an out= tensor),
  // a CPU constant (`constant`) or an undefined tensor.
  int64_t value = -1;
  int64_t writes = -1;   // the value the node makes by writing it (written operands, results)
  std::string constant;  // a CPU tensor's values ("2", "[1.5, 2.0]"; "" when over 64 elements)
  bool wrapped_number = false;  // a Python number the binding made a tensor
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  std::string dtype;  // c10's name: "Float", "BFloat16", "Long"
  bool read = false, written = false;
  bool defined = false;
};

// One version of a storage's contents.
struct GraphValue {
  int64_t node = -1;     // the node (index into PendingGraphView::nodes) that wrote it; -1: input
  int64_t storage = 0;   // which storage it is a version of (numbered from 0)
  bool input_pending = false;  // an input that is a pending storage no recorded op writes
  // A partial write (into a view of the storage): the value whose other elements it keeps; the
  // node's written operand says which elements it wrote. -1: the write covers the value.
  int64_t updates = -1;
  // The value's extent: an input's largest view read; a write's view; a partial write's base.
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  std::string dtype;
};

struct GraphNode {
  int64_t index = 0;        // position in the pending graph (program order, all threads)
  std::string name;         // "aten::add"
  std::string overload;     // "out" ("" for the default overload)
  std::vector<GraphTensor> operands;  // tensor arguments, in argument order
  std::vector<GraphTensor> results;   // the new tensors it returns (undefined: not a tensor)
  // Non-tensor arguments: (name, schema type, value as text: "None", "True", "2", "2.5",
  // "[0, 1]", "'tanh'", a ScalarType by c10's name).
  std::vector<std::tuple<std::string, std::string, std::string>> arguments;
  std::string precision;    // MXU ops: the float32 matmul precision when recorded ("highest")
  std::string location;     // Python line, when locations are recorded
};

struct PendingGraphView {
  std::vector<GraphNode> nodes;      // the nodes the tensors depend on, in program order
  std::vector<GraphValue> values;
  std::vector<GraphTensor> outputs;  // the tensors asked about, as views of values
  // The `labelled` tensors of describe_pending, as views of values (value -1: the graph does
  // not touch their storage).
  std::vector<GraphTensor> labelled;
  int64_t pending_ops = 0;           // every node recorded and not yet run
};

// The pending nodes that `tensors` (TPU tensors) depend on, and the values they read and write.
// Runs nothing and records nothing. `labelled`: further tensors to place in the description (the
// caller's variables, to name values).
PendingGraphView describe_pending(const std::vector<at::Tensor>& tensors,
                                  const std::vector<at::Tensor>& labelled);

}  // namespace torchtpu::defer
