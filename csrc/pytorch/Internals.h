#pragma once
// The one door to PyTorch's internals: every header of PyTorch that is not its public C++ API,
// and every PyTorch symbol torchtpu declares itself, is reached through this file, so a new
// torch version is reviewed here and nowhere else (test/python/test_code_structure.py fails when
// another file includes one of them). It holds no torchtpu code and belongs to no layer: every
// layer, the Python bindings included, may include it (docs/design.md, "Layers").
//
// Public, and included where used: ATen's operators (ATen/ATen.h, ATen/ops/*), torch/library.h,
// c10's core types, c10/core/impl/DeviceGuardImplInterface.h (the device-backend extension point
// that PyTorch's PrivateUse1 documentation and its OpenReg backend use), and the Python binding
// headers torch/extension.h brings (torch/csrc/utils/pybind.h, autograd/python_variable.h,
// Exceptions.h) with those of the device module (Generator.h, Event.h, device_lazy_init.h).
//
// Internal, here, with what torchtpu uses each for:
//   ATen/native/Resize.h             at::native::resize_output for out= results
//   ATen/native/DispatchStub.h       the CPU flash-attention, quantization and conv stubs
//   ATen/native/transformers/attention.h   the flash-attention stubs' declarations
//   ATen/native/layer_norm.h         layer norm's argument checks at the call (aten/CallChecks)
//   ATen/native/CPUFallback.h        the CPU fallback (at::native::cpu_fallback)
//   ATen/native/quantized/*          quantize/dequantize stubs and packed weights
//   c10/core/impl/LocalDispatchKeySet.h    dispatch-key guards (below autograd on the workers)
//   c10/core/impl/PyObjectSlot.h     whether a tensor was made in Python (aten/CallChecks)
//   c10/core/impl/alloc_cpu.h        page-aligned host buffers (runtime/HostBufferPool)
//   torch/csrc/profiler/*            captured stacks for memory history; the PrivateUse1 profiler
//   torch/csrc/jit/serialization/pickler_helper.h   backend metadata in torch.save
//   torch/csrc/distributed/c10d/Backend.hpp, reducer_timer.hpp   tpu_dist and DDP's timer
//   torch::py_symbolize, torch::installCapturedTracebackPython   (declared below; their header
//                                    in libtorch_python needs nlohmann/json, which the wheel lacks)
//
// A file that calls PyTorch's CPU flash-attention stubs defines TORCHTPU_WANTS_FLASH_STUBS before
// its first include; the Python bindings define TORCHTPU_PYTHON_BINDINGS (after pybind11).

// The version these internals were checked against: another torch stops the build here.
#include <torch/headeronly/version.h>
#if !(TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR == 13)
#error "torchtpu was written against PyTorch 2.13's internals (csrc/pytorch/Internals.h) and this build sees another torch: build with torch 2.13 (pip install torch==2.13.0), or review each internal listed in csrc/pytorch/Internals.h against the new version and then update this check."
#endif

// The CPU kernels PyTorch's x86-64 wheels build (AVX2 and AVX512 variants besides the default):
// with these defined, DispatchStub's call names the entry point libtorch_cpu exports, which lets
// the fused attention call PyTorch's CPU flash-attention stubs with its own results. Elsewhere
// those calls are left out (TORCHTPU_FLASH_STUBS undefined) and the stubs' CPU wrappers run.
#if defined(TORCHTPU_WANTS_FLASH_STUBS) && defined(__x86_64__) && \
    !defined(HAVE_AVX2_CPU_DEFINITION) && !defined(HAVE_AVX512_CPU_DEFINITION)
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#define TORCHTPU_FLASH_STUBS 1
#endif

#include <ATen/native/CPUFallback.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Resize.h>
#include <ATen/native/layer_norm.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/native/quantized/PackedParams.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/PyObjectSlot.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/csrc/jit/serialization/pickler_helper.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <torch/csrc/profiler/stubs/base.h>

#ifdef TORCHTPU_PYTHON_BINDINGS
#include <vector>
// From libtorch_python (torch/csrc/profiler/python/combined_traceback.h): symbolizing captured
// stacks, and installing the Python unwinder CapturedTraceback::gather uses.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch
#endif
