// torch.profiler sees the simulated device (docs/insight.md, "The device timeline").
//
// A Kineto activity profiler registered for PrivateUse1 (PyTorch's PrivateUse1ProfilerRegistry):
// when a profile asks for the TPU activity (torch.profiler.ProfilerActivity.TPU, the alias of
// PrivateUse1), a session turns the ledger's device trace on (sim/Ledger.h). Every launch
// charged to the cost model is then traced at issue, with the correlation id of the CPU op
// issuing it (Kineto pushes it to the session on the op's thread). When the trace is processed,
// each launch becomes:
//  - a device kernel event on a track per (device, stream), lasting the cost model's estimate on
//    the simulated chip; the stream's simulated clock runs launches back to back, and a launch
//    starts no earlier than it was issued (the device can fall behind the host, never ahead);
//  - a "tpuLaunchKernel" runtime event on the issuing thread at issue (as cudaLaunchKernel),
//    with a flow arrow to the kernel.
// Kernels are linked to their CPU op, so key_averages() fills its device-time columns; the sum of
// device time equals torchtpu.metrics.estimate() for the same launches.
//
// Also PyTorch's PrivateUse1 profiler stubs (TpuProfilerStubs below): the device events the
// autograd profiler's fallback mode records around every op (use_device="tpu").
#include "runtime/ChipSpec.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"
#include "runtime/StreamMark.h"
#include "sim/Ledger.h"

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include "pytorch/Internals.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace torchtpu::api {
namespace {

using libkineto::ActivityType;

class TpuSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    sim::take_trace();  // anything traced before this session is not its own
    sim::set_tracing(true);
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    sim::set_tracing(false);
    events_ = sim::take_trace();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0,
                 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_activity, int64_t,
                    int64_t) override {
    const int32_t pid = static_cast<int32_t>(getpid());
    const std::string chip = runtime::current_chip().name;
    std::map<std::pair<int, int64_t>, int64_t> clock;  // (device, stream) -> simulated ns
    // Each launch has an id of its own (a CPU op can issue several launches; flow ids must be
    // unique), above the range of the CPU ops' correlation ids.
    int32_t launch_id = 1 << 30;
    for (const sim::TraceEvent& e : events_) {
      ++launch_id;
      const int64_t duration = std::llround(e.seconds * 1e9);
      int64_t& now = clock[{e.device, e.stream}];
      const int64_t start = std::max(now, e.issued_ns);
      now = start + duration;
      resources_.insert({e.device, e.stream});

      libkineto::GenericTraceActivity kernel;
      kernel.activityType = ActivityType::CONCURRENT_KERNEL;
      kernel.activityName = e.name + " (tpu)";
      kernel.startTime = start;
      kernel.endTime = start + duration;
      kernel.device = e.device;
      kernel.resource = static_cast<int32_t>(e.stream);
      kernel.id = launch_id;
      if (e.correlation != 0) {
        kernel.linked = linked_activity(static_cast<int32_t>(e.correlation));
        kernel.flow.id = static_cast<uint32_t>(launch_id);
        kernel.flow.type = libkineto::kLinkAsyncCpuGpu;
        kernel.flow.start = 0;
      }
      kernel.addMetadataQuoted("device time", "estimated for TPU " + chip + " (cost model)");
      kernel.addMetadataQuoted("bound by", e.bound);
      // (Quoted: the unquoted form formats through fmt, which torch does not export.)
      kernel.addMetadataQuoted("stream", std::to_string(e.stream));
      kernel.addMetadataQuoted("flops", std::to_string(e.flops));
      kernel.addMetadataQuoted("hbm bytes", std::to_string(e.hbm_bytes));
      kernel.addMetadataQuoted("queued us", std::to_string(double(start - e.issued_ns) * 1e-3));
      if (e.priced_as_native) kernel.addMetadataQuoted("host fallback", "priced as if native");
      // The host time the simulator took for the work on this machine (measured).
      const int64_t host_ns = e.host_ns ? e.host_ns->load() : -1;
      kernel.addMetadataQuoted("host us (measured, this machine)",
                               host_ns >= 0 ? std::to_string(double(host_ns) * 1e-3)
                                            : std::string("not measured (ran inline)"));
      kernel.log(logger);

      if (e.correlation != 0) {
        libkineto::GenericTraceActivity launch;
        launch.activityType = ActivityType::PRIVATEUSE1_RUNTIME;
        launch.activityName = "tpuLaunchKernel";
        launch.startTime = e.issued_ns;
        launch.endTime = e.issued_ns;
        launch.device = pid;
        launch.resource = e.thread;
        launch.threadId = e.thread;
        launch.id = launch_id;
        launch.linked = kernel.linked;
        launch.flow.id = static_cast<uint32_t>(launch_id);
        launch.flow.type = libkineto::kLinkAsyncCpuGpu;
        launch.flow.start = 1;
        launch.log(logger);
      }
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        0, 0x1000000, "TPU 0", "simulated TPU " + runtime::current_chip().name});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : resources_) {
      out.push_back(libkineto::ResourceInfo{
          stream, stream, device, "TPU " + std::to_string(device) + " stream " +
                                      std::to_string(stream) + " (estimated)"});
    }
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { sim::push_correlation(id); }
  void popCorrelationId() override { sim::pop_correlation(); }

 private:
  std::vector<sim::TraceEvent> events_;
  std::set<std::pair<int, int64_t>> resources_;
};

class TpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config&) override {
    // Only when the profile asks for the device (ProfilerActivity.TPU).
    if (types.count(ActivityType::CONCURRENT_KERNEL) == 0) return nullptr;
    return std::make_unique<TpuSession>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"torchtpu"};
  std::set<ActivityType> activities_{ActivityType::CONCURRENT_KERNEL,
                                     ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(TpuActivityProfiler);

// ---------------------------------------------------------------------------------------------
// The device time of each op in the autograd profiler's fallback mode (docs/insight.md, "Device
// time per op with use_device"): torch.autograd.profiler.profile(use_device="tpu") (with its
// default use_kineto=False) records a device event through PyTorch's PrivateUse1 profiler stubs
// when every op starts and ends, and reports the time between the two as the op's device time
// (privateuse1_elapsed_us, FunctionEvent.device_time). Without stubs each op logged
// "PrivateUse1 used in profiler but not enabled" and the device times were garbage.
//
// An event here is a mark on the current stream of the current device (runtime/StreamMark.h),
// timed when the stream reaches it, as a torch.tpu.Event's recording is (the same type): the
// time between two marks is that of the device work queued between them, as this machine ran it
// (measured, not the cost model's estimate: that is the TPU activity's timeline above). A mark
// on an idle stream is reached at once and costs no queue item. Unlike an event's record, a mark
// does not flush fused eager's recorded ops (profiling would change what fuses): their work is
// timed in the op that runs them.
class TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex d = runtime::current_device();
    if (device != nullptr) *device = d;
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
    if (runtime::device_count() == 0) {  // (no device: no device time)
      event->reset();
      return;
    }
    auto mark = std::make_shared<runtime::StreamMark>();
    runtime::StreamQueue& queue = runtime::queue_of(runtime::current_stream(d));
    if (queue.query()) {
      mark->complete();
    } else {
      queue.enqueue([] {}, "profiler mark", [mark] { mark->complete(); });
    }
    *event = std::move(mark);
  }

  // Microseconds from `start` to `end` (waiting until the streams reach them). Marks on one
  // stream are reached in order; an op that changed the current stream between its two marks
  // (its end reached first, on an idle stream) counts none, not a negative time.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    if (start == nullptr || end == nullptr || !*start || !*end) return 0;
    const auto a = static_cast<runtime::StreamMark*>(start->get())->reached();
    const auto b = static_cast<runtime::StreamMark*>(end->get())->reached();
    return b > a ? std::chrono::duration<float, std::micro>(b - a).count() : 0.0f;
  }

  // (No annotation ranges: the TPU activity's timeline names the ops.)
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  void onEachDevice(std::function<void(int)> op) const override {
    if (runtime::device_count() == 0) return;
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, runtime::current_device()));
    for (c10::DeviceIndex i = 0; i < runtime::device_count(); ++i) {
      guard.set_index(i);
      op(i);
    }
  }
  void synchronize() const override {
    if (runtime::device_count() > 0) runtime::synchronize_device(runtime::current_device());
  }
  bool enabled() const override { return true; }
};

const bool stubs_registered = [] {
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace torchtpu::api
