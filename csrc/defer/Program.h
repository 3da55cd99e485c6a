#pragma once
// Compiled programs (docs/compiled-mode.md, docs/design.md 3.2): a graph of torch.compile(
// backend="tpu") lowered through the pipeline of fused eager into one program.
//
// The first call captures it: begin_program() makes this thread record every op into the
// pending graph (Programs.cpp), whatever the eager mode, and end_program() takes the recorded
// ops, plans them with the passes and the plan cache of fused eager (Plan.h), keeps the plan with
// its operands turned into slots (graph inputs, constants, fresh values) and runs it. Later calls
// replay it with run_program(): the slots are bound to the new inputs and fresh storages, and
// the planned regions are enqueued with no dispatch, recording or planning per op; the cost
// model charges the whole program as one launch, its intermediates in VMEM where they fit.
//
// An op that runs at once instead of being recorded (arange, whose out= kernel sizes its result;
// a host read of a constant) is folded into the program as a constant when it reads no graph
// input and nothing pending. A capture fails, and the graph runs op by op, when an op that reads
// the inputs cannot be recorded (a host read, a CPU fallback, memory pressure, ...), at a random
// op, when another thread records ops meanwhile, when an input is a CPU tensor, when the graph
// writes a tensor that is not an input, or when a value the graph makes is still referenced but
// is not an output. The reason is returned and counted.
#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torchtpu::defer {

struct Program;

// Starts capturing the graph called with `inputs` on this thread (undefined where an input is not
// a tensor). False when a capture is already active (nested graphs run op by op).
bool begin_program(const std::vector<at::Tensor>& inputs);

struct Captured {
  std::shared_ptr<Program> program;   // null when the capture failed
  std::vector<at::Tensor> outputs;    // the program's outputs (undefined where `outputs` was)
  std::string failure;                // why the capture failed
};
// Ends the capture started on this thread. `inputs` and `outputs`: the graph's, undefined where
// they are not tensors. On success the program has run once on `inputs` and its outputs replace
// the recorded ones; on failure the recorded ops run as fused eager runs them.
// Buckets of dynamic sizes (docs/compiled-mode.md, "Buckets"):
//  - `bucket`: the program is captured only to price a bucket (counted as a bucket program, its
//    first run not counted as a run);
//  - `charged_as`: every run of the program, the first too, is charged the estimate of the last
//    run of that program (the same graph captured at the sizes of the bucket that holds this
//    one's, as a TPU would compile it) instead of its own; the difference is counted as padding
//    (compile.padding_ns).
Captured end_program(const std::vector<at::Tensor>& inputs,
                     const std::vector<at::Tensor>& outputs, const std::string& name,
                     bool bucket = false, const Program* charged_as = nullptr);
// Ends the capture after an error inside the graph: what was recorded runs as in fused eager.
void abort_program();
// Whether this thread captures a program now (until the capture ends or fails).
bool capturing_program();

// Replays `program` on `inputs`: its outputs, or nullopt when the inputs do not match the
// inputs it was captured with (sizes, strides, offsets, dtypes, devices, aliasing) or the
// current stream is another (then the caller captures again; counted).
std::optional<std::vector<at::Tensor>> run_program(Program& program,
                                                   const std::vector<at::Tensor>& inputs);

// Charges one run of `program` as its last run was charged, without running it (a call of its
// bucket that ran op by op, uncharged); counted as compile.runs_charged_as_bucket.
void charge_run(const Program& program);

// ops, regions, fused ops, estimated device time of one run, ...
struct ProgramInfo {
  std::string name;
  int64_t ops = 0, regions = 0, fused_regions = 0, ops_eliminated = 0, runs = 0;
  double estimated_seconds = 0;  // one run, as one launch: what is charged
  double own_seconds = 0;        // one run at its own sizes (estimated_seconds unless bucketed)
  std::string charged_as;        // the program of its bucket, when charged as that
  double vmem_kept_bytes = 0;     // HBM bytes one run does not move: intermediates in VMEM
  int64_t vmem_peak_bytes = 0;    // the most VMEM those intermediates hold at once
  std::string ir;
};
ProgramInfo program_info(const Program& program);

}  // namespace torchtpu::defer
