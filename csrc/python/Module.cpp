// torchtpu._C: thin Python bindings over libtorchtpu. No logic lives here that a C++ program
// would miss; the Python package (torchtpu/) builds the device module on top of these.
#include "aten/Fallback.h"
#include "defer/Defer.h"
#include "runtime/Allocator.h"
#include "runtime/ChipSpec.h"
#include "runtime/DeferredWork.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/HostWait.h"
#include "runtime/Metrics.h"
#include "runtime/Mode.h"
#include "runtime/Stream.h"
#include "sim/CostModel.h"
#include "sim/Mxu.h"

#include <ATen/Context.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/csrc/utils/pybind.h>

#include <thread>

namespace py = pybind11;

namespace torchtpu::python {
namespace {

using runtime::metrics::Category;

py::dict chip_dict(const runtime::ChipSpec& c) {
  py::dict d;
  d["name"] = c.name;
  d["mxu_dim"] = c.mxu_dim;
  d["mxus_per_core"] = c.mxus_per_core;
  d["tensor_cores"] = c.tensor_cores;
  d["bf16_flops"] = c.bf16_flops;
  d["int8_ops"] = c.int8_ops;
  d["hbm_bytes"] = c.hbm_bytes;
  d["hbm_bytes_per_s"] = c.hbm_bytes_per_s;
  d["vmem_bytes"] = c.vmem_bytes;
  d["vpu_sublanes"] = c.vpu_sublanes;
  d["vpu_lanes"] = c.vpu_lanes;
  d["source"] = c.source;
  return d;
}

Category category_of(const std::string& name) {
  if (name == "op") return Category::op;
  if (name == "fallback") return Category::fallback;
  if (name == "op_time") return Category::op_time;
  if (name == "host_time") return Category::host_time;
  TORCH_CHECK(name == "counter", "unknown metrics category '", name, "'");
  return Category::counter;
}

// The innermost Python frame outside torch and torchtpu, as "file.py:line" (for the locations of
// materialization points and recorded ops).
std::string python_location() {
  if (!Py_IsInitialized()) return {};
  py::gil_scoped_acquire gil;
  PyFrameObject* frame = PyEval_GetFrame();
  if (frame == nullptr) return {};
  Py_INCREF(frame);
  std::string found;
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    PyObject* file = PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_filename");
    const char* name = file != nullptr ? PyUnicode_AsUTF8(file) : nullptr;
    std::string path = name != nullptr ? name : "";
    Py_XDECREF(file);
    Py_DECREF(code);
    const bool library = path.find("/torch/") != std::string::npos ||
                         path.find("/torchtpu/") != std::string::npos;
    if (!library || found.empty()) {
      found = path + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    }
    if (!library) {
      Py_DECREF(frame);
      break;
    }
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  PyErr_Clear();
  return found;
}

// runtime/HostWait.h, rule 1: a thread holding the GIL releases it while it waits for a lock.
void run_without_gil(void (*fn)(void*), void* context) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release no_gil;
    fn(context);
  } else {
    fn(context);
  }
}

// runtime/HostWait.h, rule 2: on Python's main thread, a pending Ctrl-C becomes the
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

}  // namespace

PYBIND11_MODULE(_C, m) {
  defer::set_location_provider(&python_location);
  g_main_thread = std::this_thread::get_id();
  runtime::set_without_gil_hook(&run_without_gil);
  runtime::set_interrupt_hook(&raise_pending_interrupt);
  runtime::set_gil_held_hook([] { return Py_IsInitialized() && PyGILState_Check() != 0; });
  // Errors that carry a Python exception (the KeyboardInterrupt of an interrupted wait) reach
  // Python as that exception from these bindings too.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (python_error& e) {
      e.restore();  // (a translator sets the Python error and returns)
    }
  });
  m.doc() = "torchtpu native bindings";

  m.def("_init", [] {
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  });
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  m.def("_get_default_generator", [](int index) {
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(runtime::default_generator(index)));
  });

  m.def("device_count", [] { return int(runtime::device_count()); });
  m.def("current_device", [] { return int(runtime::current_device()); });
  m.def("set_device", [](int index) {
    if (index >= 0) runtime::set_device(static_cast<c10::DeviceIndex>(index));
  });
  m.def("exchange_device", [](int index) {
    if (index < 0) return -1;
    return int(runtime::exchange_device(static_cast<c10::DeviceIndex>(index)));
  });
  m.def("synchronize", [](int index) {
    py::gil_scoped_release no_gil;
    runtime::synchronize_device(index < 0 ? runtime::current_device()
                                          : static_cast<c10::DeviceIndex>(index));
  });

  m.def("chip", [] { return chip_dict(runtime::current_chip()); });
  m.def("all_chips", [] {
    py::list out;
    for (const auto& c : runtime::all_chips()) out.append(chip_dict(c));
    return out;
  });
  m.def("hbm_capacity_bytes", [] { return runtime::hbm_capacity_bytes(); });
  m.def("empty_cache_device", [](int index) {
    runtime::allocator().empty_cache(static_cast<c10::DeviceIndex>(index));
  });

  m.def("set_eager_mode", [](const std::string& mode) {
    const auto next = runtime::eager_mode_from_name(mode);
    py::gil_scoped_release no_gil;
    runtime::set_eager_mode(next);
  });
  m.def("get_eager_mode", [] { return std::string(runtime::name(runtime::eager_mode())); });
  m.def("set_check_nans", [](bool on) { runtime::set_check_nans(on); });
  m.def("get_check_nans", [] { return runtime::check_nans(); });
  m.def("sync", [] {
    py::gil_scoped_release no_gil;
    runtime::materialize_deferred_work(runtime::FlushReason::explicit_sync);
    for (c10::DeviceIndex i = 0; i < runtime::device_count(); ++i) runtime::synchronize_device(i);
  });

  m.def("interrupted_once", [] { return runtime::interrupted_once(); });
  m.def("cancel_queued_work", [] {
    py::gil_scoped_release no_gil;
    return runtime::cancel_all_queued_work();
  });
  m.def("defer_pending_ops", [] { return defer::pending_ops(); });
  m.def("defer_materializations", [] { return defer::materializations(); });
  m.def("defer_reset_materializations", [] { defer::reset_materializations(); });
  m.def("defer_set_dump_path", [](const std::string& path) { defer::set_dump_path(path); });
  m.def("defer_cached_plans", [] { return defer::cached_plans_text(); });
  m.def("defer_clear_cache", [] { defer::clear_cache(); });
  m.def("defer_set_record_locations", [](bool on) { defer::set_record_locations(on); });
  m.def("defer_record_locations", [] { return defer::record_locations(); });
  m.def("defer_set_max_pending_ops", [](int64_t n) { defer::set_max_pending_ops(n); });

  m.def("set_precision_override", [](std::optional<std::string> name) {
    sim::set_precision_override(name ? std::optional<sim::Precision>(sim::precision_from_name(*name))
                                     : std::nullopt);
  });
  m.def("get_precision_override", []() -> std::optional<std::string> {
    auto p = sim::precision_override();
    if (!p) return std::nullopt;
    return std::string(sim::name(*p));
  });
  m.def("current_precision", [] { return std::string(sim::name(sim::current_precision())); });
  m.def("clock_hz", [] { return sim::cost_model().clock_hz(); });
  m.def("launch_seconds", [] { return sim::cost_model().launch_seconds(); });

  m.def("metrics_snapshot", [](const std::string& category) {
    return runtime::metrics::snapshot(category_of(category));
  });
  m.def("metrics_reset", [] { runtime::metrics::reset(); });

  m.def("set_fallback_mode", [](const std::string& mode) {
    if (mode == "warn") {
      aten::set_fallback_mode(aten::FallbackMode::warn);
    } else if (mode == "error") {
      aten::set_fallback_mode(aten::FallbackMode::error);
    } else if (mode == "silent") {
      aten::set_fallback_mode(aten::FallbackMode::silent);
    } else {
      throw py::value_error("fallback mode must be 'warn', 'error' or 'silent', not '" + mode +
                            "'");
    }
  });
  m.def("get_fallback_mode", [] {
    switch (aten::fallback_mode()) {
      case aten::FallbackMode::warn: return "warn";
      case aten::FallbackMode::error: return "error";
      case aten::FallbackMode::silent: return "silent";
    }
    return "warn";
  });
}

}  // namespace torchtpu::python
