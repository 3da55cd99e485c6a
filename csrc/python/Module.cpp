// torchtpu._C: thin Python bindings over libtorchtpu. No logic lives here that a C++ program
// would miss; the Python package (torchtpu/) builds the device module on top of these.
#include "api/Control.h"

#include <torchtpu/torchtpu.h>

#include <ATen/Context.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/csrc/utils/pybind.h>

#define TORCHTPU_PYTHON_BINDINGS
#include "pytorch/Internals.h"

#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace py = pybind11;

namespace torchtpu::python {

namespace {

// The memory state as torch.cuda.memory._snapshot() gives it (segments with their blocks, and
// the trace of allocations and frees per device), so PyTorch's memory visualizer reads it. Each
// block of this allocator is a segment of its own (blocks are never split).
py::dict memory_snapshot_dict() {
  api::MemoryState state = api::memory_state();
  // Stacks: symbolized together (PyTorch's py_symbolize), one list of frames per context.
  std::vector<torch::CapturedTraceback*> to_symbolize;
  std::vector<int> index_of_blocks, index_of_events;
  auto add = [&](const std::shared_ptr<c10::GatheredContext>& c, std::vector<int>& index) {
    auto* t = dynamic_cast<torch::CapturedTraceback*>(c.get());
    index.push_back(t != nullptr ? int(to_symbolize.size()) : -1);
    if (t != nullptr) to_symbolize.push_back(t);
  };
  for (const auto& b : state.blocks) add(b.context, index_of_blocks);
  for (const auto& e : state.events) add(e.context, index_of_events);
  std::vector<py::object> frames = torch::py_symbolize(to_symbolize);
  auto frames_of = [&](int i) { return i >= 0 ? frames[i] : py::list(); };
  const int n_devices = device_count();
  py::list segments;
  for (size_t i = 0; i < state.blocks.size(); ++i) {
    const auto& b = state.blocks[i];
    py::dict block;
    block["address"] = b.address;
    block["size"] = b.size;
    block["requested_size"] = b.alloc ? b.requested : 0;
    block["state"] = b.alloc ? "active_allocated" : "inactive";
    block["frames"] = frames_of(index_of_blocks[i]);
    py::dict seg;
    seg["device"] = b.device;
    seg["address"] = b.address;
    seg["total_size"] = b.size;
    seg["allocated_size"] = b.alloc ? b.size : 0;
    seg["active_size"] = b.alloc ? b.size : 0;
    seg["requested_size"] = b.alloc ? b.requested : 0;
    seg["stream"] = 0;
    seg["segment_type"] = b.size <= (size_t(1) << 20) ? "small" : "large";
    seg["segment_pool_id"] = py::make_tuple(0, 0);
    seg["is_expandable"] = false;
    seg["dry_run"] = b.dry;
    seg["frames"] = frames_of(index_of_blocks[i]);
    py::list blocks;
    blocks.append(block);
    seg["blocks"] = blocks;
    segments.append(seg);
  }
  py::list traces;
  for (int d = 0; d < n_devices; ++d) traces.append(py::list());
  for (size_t i = 0; i < state.events.size(); ++i) {
    const auto& e = state.events[i];
    py::dict entry;
    entry["action"] = e.alloc ? "alloc" : "free_completed";
    entry["addr"] = e.address;
    entry["size"] = e.size;
    entry["stream"] = 0;
    entry["time_us"] = e.time_us;
    entry["frames"] = frames_of(index_of_events[i]);
    if (e.device < n_devices) traces[e.device].cast<py::list>().append(entry);
  }
  py::dict out;
  out["segments"] = segments;
  out["device_traces"] = traces;
  py::dict settings;
  settings["PYTORCH_CUDA_ALLOC_CONF"] = "";  // (the visualizer reads the key)
  out["allocator_settings"] = settings;
  return out;
}

py::dict chip_dict(const Chip& c) {
  py::dict d;
  d["name"] = c.name;
  d["mxu_dim"] = c.mxu_dim;
  d["mxus_per_core"] = c.mxus_per_core;
  d["tensor_cores"] = c.tensor_cores;
  d["bf16_flops"] = c.bf16_flops;
  d["int8_ops"] = c.int8_ops;
  d["fp8_ops"] = c.fp8_ops;
  d["hbm_bytes"] = c.hbm_bytes;
  d["hbm_bytes_per_s"] = c.hbm_bytes_per_s;
  d["vmem_bytes"] = c.vmem_bytes;
  d["vpu_sublanes"] = c.vpu_sublanes;
  d["vpu_lanes"] = c.vpu_lanes;
  d["source"] = c.source;
  d["clock_hz"] = c.clock_hz;
  d["mxu_macs_per_cell"] = c.mxu_macs_per_cell;
  d["vpu_alus"] = c.vpu_alus;
  d["vpu_ops"] = c.vpu_ops();
  d["mxu_efficiency"] = c.mxu_efficiency;
  d["hbm_efficiency"] = c.hbm_efficiency;
  py::list facts;
  for (const auto& f : c.facts) {
    py::dict fact;
    fact["figure"] = f.figure;
    fact["value"] = f.value;
    fact["source"] = f.source;
    fact["assumed"] = f.assumed;
    facts.append(fact);
  }
  d["facts"] = facts;
  return d;
}

// A graph's inputs or outputs: tensors, undefined for anything else.
std::vector<at::Tensor> tensors_of(const py::sequence& items) {
  std::vector<at::Tensor> out;
  out.reserve(items.size());
  for (const py::handle item : items) {
    out.push_back(THPVariable_Check(item.ptr()) ? THPVariable_Unpack(item.ptr()) : at::Tensor());
  }
  return out;
}

py::list list_of(const std::vector<at::Tensor>& tensors) {
  py::list out;
  for (const at::Tensor& t : tensors) {
    out.append(t.defined() ? py::reinterpret_steal<py::object>(THPVariable_Wrap(t)) : py::none());
  }
  return out;
}

// A compiled program, as Python holds it.
struct ProgramRef {
  api::Program program;
};

// Lines of the code FX generates for compiled graphs ("<eval_with_key>.3:12") -> the user's line
// that made the op ("model.py:40"), from the graphs' stack traces (torchtpu/_dynamo_backend.py).
std::mutex g_fx_lines_mutex;
std::unordered_map<std::string, std::string> g_fx_lines;

std::string user_line_of(std::string location) {
  if (location.rfind("<eval_with_key>", 0) != 0) return location;
  std::lock_guard<std::mutex> lock(g_fx_lines_mutex);
  auto it = g_fx_lines.find(location);
  return it == g_fx_lines.end() ? location : it->second;
}

// The innermost Python frame outside torch and torchtpu, as "file.py:line" (for the locations of
// materialization points and recorded ops; in a compiled graph, the user's line of its op).
std::string python_location() {
  if (!Py_IsInitialized()) return {};
  py::gil_scoped_acquire gil;
  PyFrameObject* frame = PyEval_GetFrame();
  if (frame == nullptr) return {};
  Py_INCREF(frame);
  // The frame whose line is taken (a reference held): the first frame outside the libraries, or
  // the innermost frame when all are theirs. (Only its line is computed: the walk is taken at
  // every synchronization and materialization.)
  PyFrameObject* chosen = nullptr;
  std::string chosen_path;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* name = code->co_filename != nullptr ? PyUnicode_AsUTF8(code->co_filename) : nullptr;
    if (name == nullptr) name = "";
    Py_DECREF(code);
    // (The code FX generates for a compiled graph is named after torch's file that made it.)
    const bool library = std::strncmp(name, "<eval_with_key>", 15) != 0 &&
                         (std::strstr(name, "/torch/") != nullptr ||
                          std::strstr(name, "/torchtpu/") != nullptr);
    if (!library || chosen == nullptr) {
      Py_XDECREF(chosen);
      Py_INCREF(frame);
      chosen = frame;
      chosen_path = name;
    }
    if (!library) {
      Py_DECREF(frame);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  std::string found = chosen_path + ":" + std::to_string(PyFrame_GetLineNumber(chosen));
  Py_DECREF(chosen);
  PyErr_Clear();
  return user_line_of(std::move(found));
}

// Rule 1 of host waits (docs/design.md, "Threads, waits and interrupts"): a thread holding the
// GIL releases it while it waits for a lock.
void run_without_gil(void (*fn)(void*), void* context) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    fn(context);
  } else {
    fn(context);
  }
}

// Rule 2: on Python's main thread, a pending Ctrl-C becomes the
// KeyboardInterrupt of the wait (other threads never handle signals in Python).
std::thread::id g_main_thread;

void raise_pending_interrupt() {
  if (std::this_thread::get_id() != g_main_thread || !Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return;
  python_error error;
  error.persist();
  throw std::move(error);
}

// A Python exception that is not an Exception (KeyboardInterrupt, SystemExit) stops the program.
bool python_stops_program(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const python_error& e) {
    if (!Py_IsInitialized()) return false;
    py::gil_scoped_acquire gil;
    // (Not persisted yet, the exception is still the thread's pending Python error.)
    PyObject* type = e.type != nullptr ? e.type : PyErr_Occurred();
    return type != nullptr && PyErr_GivenExceptionMatches(type, PyExc_Exception) == 0;
  } catch (py::error_already_set& e) {
    if (!Py_IsInitialized()) return false;
    py::gil_scoped_acquire gil;
    return !e.matches(PyExc_Exception);
  } catch (...) {
    return false;
  }
}

// The host hooks libtorchtpu calls into Python through (api::HostHooks; docs/design.md, "Threads,
// waits and interrupts"), and the translation of errors that carry a Python exception.
void install_python_hooks() {
  g_main_thread = std::this_thread::get_id();
  api::HostHooks hooks;
  hooks.location = &python_location;
  hooks.without_gil = &run_without_gil;
  hooks.check_interrupt = &raise_pending_interrupt;
  hooks.holds_gil = [] { return Py_IsInitialized() && PyGILState_Check() != 0; };
  hooks.stops_program = &python_stops_program;
  api::install_host_hooks(hooks);
  // Errors that carry a Python exception (the KeyboardInterrupt of an interrupted wait) reach
  // Python as that exception from these bindings too.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (python_error& e) {
      e.restore();  // (a translator sets the Python error and returns)
    }
  });
}

// The devices, their chips and the device module's lazy initialization.
void bind_device(py::module_& m) {
  m.def("_init", [] {
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  });
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  m.def("_get_default_generator", [](int index) {
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(api::default_generator(index)));
  });

  m.def("device_count", [] { return device_count(); });
  m.def("physical_chip", [](int device) { return physical_chip(device); });
  m.def("current_device", [] { return api::current_device(); });
  m.def("set_device", [](int index) { api::set_device(index); });
  m.def("exchange_device", [](int index) { return api::exchange_device(index); });
  m.def("synchronize", [](int index) {
    py::gil_scoped_release no_gil;
    synchronize(index);
  });

  m.def("chip", [] { return chip_dict(chip()); });
  m.def("all_chips", [] {
    py::list out;
    for (const Chip& c : all_chips()) out.append(chip_dict(c));
    return out;
  });
  m.def("hbm_capacity_bytes", [] { return hbm_capacity_bytes(); });
  m.def("empty_cache_device", [](int index) { api::empty_cache(index); });
}

// Eager modes, checks and the interruption of queued work.
void bind_modes(py::module_& m) {
  m.def("set_eager_mode", [](const std::string& mode) {
    py::gil_scoped_release no_gil;  // (leaving fused eager runs what it recorded)
    set_eager_mode(mode);
  });
  m.def("get_eager_mode", [] { return eager_mode(); });
  m.def("set_check_nans", [](bool on) { api::set_check_nans(on); });
  m.def("set_inline_work", [](int level) { api::set_inline_work(level); });
  m.def("inline_work", [] { return api::inline_work(); });
  m.def("get_check_nans", [] { return api::check_nans(); });
  m.def("sync", [] {
    py::gil_scoped_release no_gil;
    api::sync_all();
  });

  // (A context for torchtpu/_custom_ops.py: entered and left on the same thread.)
  py::class_<api::ForeignOp>(m, "_ForeignOp")
      .def(py::init([] {
        py::gil_scoped_release no_gil;  // (waits for the devices)
        return new api::ForeignOp();
      }));
  m.def("interrupted_once", [] { return api::interrupted_once(); });
  m.def("cancel_queued_work", [] {
    py::gil_scoped_release no_gil;
    return api::cancel_queued_work();
  });
}

// Fused eager: the pending graph, the plan cache and the recorder's settings.
void bind_defer(py::module_& m) {
  m.def("defer_pending_ops", [] { return api::pending_ops(); });
  m.def("defer_is_pending", [](const at::Tensor& t) { return api::is_pending(t); });
  m.def("defer_cache_entries", [] { return api::plan_cache_entries(); });
  m.def("defer_set_cache_policy",
        [](std::optional<bool> allow, std::optional<bool> only, std::optional<bool> dump) {
          api::set_plan_cache_policy(allow, only, dump);
        },
        py::arg("allow") = py::none(), py::arg("only") = py::none(),
        py::arg("dump_on_miss") = py::none());
  m.def("defer_cache_dumps_on_miss", [] { return api::plan_cache_dumps_on_miss(); });
  m.def("defer_materializations", [] { return api::materializations(); });
  m.def("defer_reset_materializations", [] { api::reset_materializations(); });
  m.def("defer_set_dump_path", [](const std::string& path) { api::set_dump_path(path); });
  m.def("defer_cached_plans", [] { return api::cached_plans_text(); });
  m.def("defer_clear_cache", [] { api::clear_plan_cache(); });
  m.def("defer_set_record_locations", [](bool on) { api::set_record_locations(on); });
  m.def("defer_record_locations", [] { return api::record_locations(); });
  m.def("defer_set_max_pending_ops", [](int64_t n) { api::set_max_pending_ops(n); });
  m.def("defer_set_repeated_ops", [](const std::string& mode) { api::set_repeated_ops(mode); });
  m.def("defer_repeated_ops", [] { return api::repeated_ops(); });
  // The pending graph behind tensors (api::describe_pending): plain dicts and lists, for
  // torchtpu/_torch_tpu/_internal/sync/_graph.py.
  m.def(
      "defer_describe_pending",
      [](const std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& labelled) {
        const api::PendingGraph g = api::describe_pending(tensors, labelled);
        auto tensor_dict = [](const api::GraphTensor& t) {
          py::dict d;
          d["argument"] = t.argument;
          d["value"] = t.value;
          d["writes"] = t.writes;
          d["constant"] = t.constant;
          d["wrapped_number"] = t.wrapped_number;
          d["sizes"] = t.sizes;
          d["strides"] = t.strides;
          d["offset"] = t.offset;
          d["dtype"] = t.dtype;
          d["read"] = t.read;
          d["written"] = t.written;
          d["defined"] = t.defined;
          return d;
        };
        auto tensor_list = [&](const std::vector<api::GraphTensor>& ts) {
          py::list l;
          for (const auto& t : ts) l.append(tensor_dict(t));
          return l;
        };
        py::list nodes, values;
        for (const auto& n : g.nodes) {
          py::dict d;
          d["index"] = n.index;
          d["name"] = n.name;
          d["overload"] = n.overload;
          d["operands"] = tensor_list(n.operands);
          d["results"] = tensor_list(n.results);
          d["arguments"] = n.arguments;
          d["precision"] = n.precision;
          d["location"] = n.location;
          nodes.append(std::move(d));
        }
        for (const auto& v : g.values) {
          py::dict d;
          d["node"] = v.node;
          d["storage"] = v.storage;
          d["updates"] = v.updates;
          d["input_pending"] = v.input_pending;
          d["sizes"] = v.sizes;
          d["strides"] = v.strides;
          d["offset"] = v.offset;
          d["dtype"] = v.dtype;
          values.append(std::move(d));
        }
        py::dict out;
        out["nodes"] = nodes;
        out["values"] = values;
        out["outputs"] = tensor_list(g.outputs);
        out["labelled"] = tensor_list(g.labelled);
        out["pending_ops"] = g.pending_ops;
        return out;
      },
      py::arg("tensors"), py::arg("labelled") = std::vector<at::Tensor>());
}

// Matmul precision and the simulated clock.
void bind_precision(py::module_& m) {
  m.def("set_precision_override",
        [](std::optional<std::string> name) { api::set_precision_override(name); });
  m.def("get_precision_override", [] { return api::precision_override(); });
  m.def("current_precision", [] { return api::current_precision(); });
  m.def("set_full_precision", [](bool on) { api::set_full_precision(on); });
  m.def("full_precision_forced", [] { return api::full_precision_forced(); });
  m.def("set_default_precision",
        [](const std::string& name) { api::set_default_precision(name); });
  m.def("default_precision", [] { return api::default_precision(); });
  m.def("set_highest_algorithm", [](const std::string& name) {
    py::gil_scoped_release no_gil;  // (waits for the devices)
    api::set_highest_algorithm(name);
  });
  m.def("highest_algorithm", [] { return api::highest_algorithm(); });
  m.def("clock_hz", [] { return api::clock_hz(); });
  m.def("launch_seconds", [] { return api::launch_seconds(); });
}

// Device and host memory, events and dry runs.
void bind_memory(py::module_& m) {
  m.def("record_memory_history", [](bool on, size_t max_entries) {
    if (on) torch::installCapturedTracebackPython();  // (once is enough; idempotent)
    api::record_memory_history(on, max_entries);
  });
  m.def("memory_snapshot", [] { return memory_snapshot_dict(); });
  m.def("host_view", [](const at::Tensor& t) { return api::host_view(t); });
  m.def("copy_backend_meta",
        [](const at::Tensor& src, const at::Tensor& dst) { api::copy_backend_meta(src, dst); });
  // Milliseconds between two timing events of the device: torch.Event.elapsed_time, also for
  // subclasses of torch.Event (which torch 2.13's refuses as its argument).
  m.def("event_elapsed_time", [](py::handle start, py::handle end) {
    TORCH_CHECK(THPEvent_Check(start.ptr()) && THPEvent_Check(end.ptr()),
                "expected two torch.Event objects");
    const c10::Event& a = reinterpret_cast<THPEvent*>(start.ptr())->event;
    const c10::Event& b = reinterpret_cast<THPEvent*>(end.ptr())->event;
    return a.elapsedTime(b);
  });
  m.def("swap_memory", [](const at::Tensor& a, const at::Tensor& b) { api::swap_memory(a, b); });
  m.def("host_memory_stats", [] { return api::host_memory_stats(); });
  m.def("reset_host_memory_stats", [](bool peak) { api::reset_host_memory_stats(peak); });
  m.def("set_dry_run", [](bool on) { api::set_dry_run(on); });
  m.def("dry_run", [] { return api::dry_run(); });
}

// Collectives: charging, recording and the cross-rank checks of tpu_dist.
void bind_collectives(py::module_& m) {
  m.def("charge_collective", [](const std::string& kind, double bytes, int64_t chips) {
    return api::charge_collective(kind, bytes, chips);
  });
  m.def("collective_waited", [](uint64_t id) { api::collective_waited(id); });
  // (torch's pybind caster of c10d's classes: the ProcessGroupGloo object as its Backend)
  m.def("register_collective_group", [](int64_t id, py::object backend, bool check) {
    api::register_collective_group(id, backend.cast<c10::intrusive_ptr<c10d::Backend>>(), check);
  });
  m.def("check_same_across_ranks", [](int64_t group, const std::string& kind,
                                      const std::vector<at::Tensor>& tensors) {
    py::gil_scoped_release no_gil;  // (waits for the other ranks)
    api::check_same_across_ranks(group, kind, tensors);
  });
  m.def("recorded_collective_waited",
        [](int64_t group, uint64_t sequence) { api::recorded_collective_waited(group, sequence); });
  m.def("program_capturing", [] { return api::capturing_program(); });
  m.def("run_recorded_collectives", [] {
    py::gil_scoped_release no_gil;
    api::run_recorded_collectives();
  });
}

// Kernels charged from Python and the pricing of a run on another chip.
void bind_pricing(py::module_& m) {
  m.def("charge_kernel", [](const std::string& op, const std::vector<std::vector<int64_t>>& mms,
                            double vpu_units, double hbm_bytes) {
    std::vector<api::KernelMatmul> matmuls;
    for (const auto& m : mms) {
      TORCH_CHECK(m.size() == 7, "charge_kernel: a matmul is (batch, M, K, N, passes, "
                  "element_bytes, rate)");
      matmuls.push_back({m[0], m[1], m[2], m[3], int32_t(m[4]), int32_t(m[5]), int32_t(m[6])});
    }
    return api::charge_kernel(op, matmuls, vpu_units, hbm_bytes);
  });
  m.def("price_run", [](const std::string& chip, double launch_us) {
    const api::PricedRun r = api::price_run(chip, launch_us);
    py::dict d;
    d["chip"] = r.chip;
    d["launch_seconds"] = r.launch_seconds;
    d["seconds"] = r.seconds;
    d["busy_s"] = r.busy_s;
    d["mxu_s"] = r.mxu_s;
    d["vpu_s"] = r.vpu_s;
    d["hbm_s"] = r.hbm_s;
    d["ici_s"] = r.ici_s;
    d["flops"] = r.flops;
    d["peak_s"] = r.peak_s;
    d["mxu_flops"] = r.mxu_flops;
    d["hbm_bytes"] = r.hbm_bytes;
    d["launches"] = r.launches;
    d["bound"] = std::map<std::string, int64_t>{
        {"mxu", r.bound_mxu}, {"vpu", r.bound_vpu}, {"hbm", r.bound_hbm}, {"ici", r.bound_ici}};
    d["priced_as_native"] = r.priced_as_native;
    d["hidden_ici_seconds"] = r.hidden_ici_seconds;
    d["topology"] = r.topology;
    d["op_seconds"] = r.op_seconds;
    d["op_launches"] = r.op_launches;
    d["op_flops"] = r.op_flops;
    d["op_hbm_bytes"] = r.op_hbm_bytes;
    d["op_mxu_s"] = r.op_mxu_s;
    d["priced_as_native_ops"] = r.priced_as_native_ops;
    d["device_seconds"] = r.device_seconds;
    return d;
  });
}

// Metrics and the CPU fallback's mode.
void bind_metrics(py::module_& m) {
  m.def("metrics_snapshot", [](const std::string& category) { return api::metrics(category); });
  m.def("metrics_reset", [] { reset_metrics(); });
  m.def("metrics_count", [](const std::string& name, int64_t delta) { api::count(name, delta); });
  m.def("set_fallback_mode", [](const std::string& mode) {
    if (!api::set_fallback_mode(mode)) {
      throw py::value_error("fallback mode must be 'warn', 'error' or 'silent', not '" + mode +
                            "'");
    }
  });
  m.def("get_fallback_mode", [] { return api::fallback_mode(); });
}

// Compiled programs: capture, replay and their statistics.
void bind_programs(py::module_& m) {
  py::class_<ProgramRef>(m, "Program");
  m.def("program_begin",
        [](const py::sequence& inputs) { return api::begin_program(tensors_of(inputs)); });
  m.def(
      "program_end",
      [](const py::sequence& inputs, const py::sequence& outputs, const std::string& name,
         bool bucket, const std::optional<ProgramRef>& charged_as) {
        const std::vector<at::Tensor> in = tensors_of(inputs), out = tensors_of(outputs);
        const api::Program charge = charged_as ? charged_as->program : nullptr;
        api::CapturedProgram c;
        {
          py::gil_scoped_release nogil;
          c = api::end_program(in, out, name, bucket, charge);
        }
        py::object program = py::none();
        if (c.program) program = py::cast(ProgramRef{std::move(c.program)});
        return py::make_tuple(program, list_of(c.outputs), c.failure);
      },
      py::arg("inputs"), py::arg("outputs"), py::arg("name"), py::arg("bucket") = false,
      py::arg("charged_as") = py::none());
  m.def("begin_uncharged", [] { api::begin_uncharged(); });
  m.def("end_uncharged", [] {
    py::gil_scoped_release nogil;
    return api::end_uncharged();
  });
  m.def("program_charge", [](const ProgramRef& p) { api::charge_program(p.program); });
  m.def("add_fx_lines", [](const std::map<std::string, std::string>& lines) {
    std::lock_guard<std::mutex> lock(g_fx_lines_mutex);
    for (const auto& [fx, user] : lines) g_fx_lines[fx] = user;
  });
  m.def("program_abort", [] {
    py::gil_scoped_release nogil;
    api::abort_program();
  });
  m.def("program_run", [](const ProgramRef& p, const py::sequence& inputs) -> py::object {
    const std::vector<at::Tensor> in = tensors_of(inputs);
    std::optional<std::vector<at::Tensor>> out;
    {
      py::gil_scoped_release nogil;
      out = api::run_program(p.program, in);
    }
    if (!out) return py::none();
    return list_of(*out);
  });
  m.def("program_stats", [](const ProgramRef& p) {
    const api::ProgramStats st = api::program_stats(p.program);
    py::dict d;
    d["name"] = st.name;
    d["ops"] = st.ops;
    d["regions"] = st.regions;
    d["fused_regions"] = st.fused_regions;
    d["ops_eliminated"] = st.ops_eliminated;
    d["runs"] = st.runs;
    d["estimated_seconds"] = st.estimated_seconds;
    d["own_seconds"] = st.own_seconds;
    d["charged_as"] = st.charged_as;
    d["vmem_kept_bytes"] = st.vmem_kept_bytes;
    d["vmem_peak_bytes"] = st.vmem_peak_bytes;
    d["ir"] = st.ir;
    return d;
  });
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  install_python_hooks();
  m.doc() = "torchtpu native bindings";
  bind_device(m);
  bind_modes(m);
  bind_defer(m);
  bind_precision(m);
  bind_memory(m);
  bind_collectives(m);
  bind_pricing(m);
  bind_metrics(m);
  bind_programs(m);
}

}  // namespace torchtpu::python
