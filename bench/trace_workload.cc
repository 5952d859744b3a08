#include "bench/trace_workload.h"

#include <algorithm>
#include <memory>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/trace_kernels.h"
#include "client_lib/src/record_writer.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::bench {
namespace {

namespace rec = ::gpuctl::records;

constexpr int64_t kUs = 1000;
constexpr int kLayers = 12;
// Layers per DDP gradient bucket: one all-reduce each.
constexpr int kBucketLayers = 3;
constexpr int kBuckets = kLayers / kBucketLayers;
constexpr uint32_t kComputeStream = 7;
constexpr uint32_t kNcclStream = 13;
// CUPTI's runtime callback ids of the calls the step makes.
constexpr uint32_t kCbidLaunchKernel = 211;
constexpr uint32_t kCbidMemcpyAsync = 41;
constexpr uint32_t kCbidMemsetAsync = 51;
constexpr uint32_t kCbidStreamSynchronize = 131;
// CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind.
constexpr uint8_t kHtoD = 1, kDtoH = 2;
constexpr uint8_t kPageable = 1, kPinned = 2, kDevice = 3;

class StepWriter {
 public:
  StepWriter(const WorkloadOptions& o, int rank)
      : o_(o),
        rank_(rank),
        pid_(o.first_pid + kPidStride * rank),
        rng_(o.seed * 1000003 + static_cast<uint64_t>(rank)),
        host_ns_(o.window_start_ns) {
    main_tid_ = static_cast<uint32_t>(pid_);
    autograd_tid_ = main_tid_ + 89;
    stream_free_[0] = stream_free_[1] = o.window_start_ns;
    rec::DeviceInfoRecord device;
    device.device_id = static_cast<uint32_t>(rank % 8);
    device.name = w_.InternString("NVIDIA H100 80GB HBM3");
    device.compute_major = 9;
    device.sm_count = 132;
    device.max_threads_per_sm = 2048;
    device.max_threads_per_block = 1024;
    device.max_registers_per_sm = device.max_registers_per_block = 65536;
    device.max_shared_memory_per_sm = 233472;
    device.max_shared_memory_per_block = 49152;
    device.max_blocks_per_sm = 32;
    device.warp_size = 32;
    device.global_memory_bytes = 85029158912ull;
    device.global_memory_bandwidth = 3352320000ull;
    device.l2_cache_bytes = 52428800;
    device.core_clock_khz = 1980000;
    w_.Add(device);
    device_ = device.device_id;
    w_.Add(rec::CaptureInfoRecord{rec::kCaptureFlagCuptiActive, 0x2f, 130001, 0, 0,
                                  w_.InternString(""),
                                  w_.InternString("/usr/local/cuda/lib64/libcupti.so.13")});
    w_.AddThreadName(main_tid_, w_.InternString("python3"));
    w_.AddThreadName(autograd_tid_, w_.InternString("pt_autograd_0"));
  }

  // A step in three parts, so that the ranks' all-reduces can be lined up
  // between them: BeginStep, then per gradient bucket BucketReady and
  // AllReduce, then EndStep.
  void BeginStep(int64_t step) {
    w_.AddStep(main_tid_, host_ns_, static_cast<uint64_t>(step));
    events_ += 1;
    Begin("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", main_tid_);
    host_ns_ += 900 * kUs + Jitter(200 * kUs) + (rank_ == o_.straggler ? 4000 * kUs : 0);
    End();
    Begin("## forward ##", main_tid_);
    Copy(kHtoD, kPinned, kDevice, 8 << 20, main_tid_);
    Copy(kHtoD, kPinned, kDevice, 64 << 10, main_tid_);
    for (int layer = 0; layer < kLayers; ++layer) {
      Begin(absl::StrCat("nn.Module: TransformerBlock_", layer), main_tid_);
      for (const KernelKind& k : kForwardLayer) Launch(k, kComputeStream, main_tid_);
      End();
    }
    Launch(kLogSoftmax, kComputeStream, main_tid_);
    Launch(kNllLoss, kComputeStream, main_tid_);
    End();
    Begin("## backward ##", autograd_tid_);
  }

  // The backward of the bucket's layers; returns when this rank's NCCL
  // kernel for it can start: once the compute stream has produced the
  // gradients and the previous all-reduce is done.
  int64_t BucketReady(int bucket) {
    for (int layer = kLayers - 1 - kBucketLayers * bucket;
         layer >= kLayers - kBucketLayers * (bucket + 1); --layer) {
      for (const KernelKind& k : kBackwardLayer) Launch(k, kComputeStream, autograd_tid_);
    }
    stream_free_[1] = std::max(stream_free_[1], stream_free_[0]);
    return std::max(stream_free_[1], host_ns_ + 8 * kUs);
  }

  // The NCCL kernel starts here and spins until the last rank's has
  // started (`everyone_ready`), then transfers.
  void AllReduce(int64_t everyone_ready) {
    Launch(kAllReduce, kNcclStream, autograd_tid_, everyone_ready);
  }

  void EndStep() {
    End();
    Begin("Optimizer.step#AdamW.step", main_tid_);
    stream_free_[0] = std::max(stream_free_[0], stream_free_[1]);
    Memset(256 << 10);
    for (int i = 0; i < 4; ++i) Launch(kAdamW, kComputeStream, main_tid_);
    End();
    Begin("aten::item", main_tid_);
    Copy(kDtoH, kDevice, kPageable, 4, main_tid_);
    Synchronize();
    End();
    host_ns_ += 40 * kUs + Jitter(20 * kUs);
  }

  Workload Finish(int64_t steps) {
    Workload out;
    out.pid = pid_;
    out.events = events_;
    out.steps = steps;
    out.window_end_ns = std::max(host_ns_, std::max(stream_free_[0], stream_free_[1])) + 100 * kUs;
    client::PayloadHeaderInfo header;
    header.pid = pid_;
    header.window_start_ns = o_.window_start_ns;
    header.window_end_ns = out.window_end_ns;
    out.payload = w_.Finish(header);
    return out;
  }

  int64_t events() const { return events_; }

 private:
  struct OpenRange {
    uint32_t tid;
    int64_t start_ns;
    uint32_t name;
    uint64_t id;
  };

  // Uniform in [0, spread).
  int64_t Jitter(int64_t spread) {
    return static_cast<int64_t>(rng_() % static_cast<uint64_t>(spread));
  }

  void Begin(const std::string& name, uint32_t tid) {
    ranges_.push_back({tid, host_ns_, w_.InternString(name), ++range_id_});
    host_ns_ += 1500 + Jitter(kUs);
  }

  void End() {
    const OpenRange r = ranges_.back();
    ranges_.pop_back();
    host_ns_ += 1500 + Jitter(kUs);
    w_.AddRange(r.tid, r.start_ns, host_ns_, r.name, static_cast<uint32_t>(ranges_.size()), r.id);
    events_ += 1;
  }

  // A runtime call on `tid` at the host's time; returns its correlation id.
  uint32_t Call(std::string_view name, uint32_t cbid, uint32_t tid, int64_t dur_ns) {
    const uint32_t correlation = ++correlation_;
    rec::ApiCallRecord api;
    api.domain = rec::kApiDomainRuntime;
    api.cbid = cbid;
    api.correlation_id = correlation;
    api.pid = static_cast<uint32_t>(pid_);
    api.tid = tid;
    api.start_ns = host_ns_;
    api.end_ns = host_ns_ + dur_ns;
    api.name = w_.InternString(name);
    w_.Add(api);
    if (!ranges_.empty()) {
      w_.Add(rec::ExternalCorrelationRecord{rec::kExternalKindGpuctlRange, correlation,
                                            ranges_.back().id});
    }
    events_ += 1;
    return correlation;
  }

  // When a GPU op launched now on `stream` (0 compute, 1 NCCL) starts and
  // ends; the host moves past the call. The op's work begins at
  // `work_from` at the earliest.
  std::pair<int64_t, int64_t> Schedule(int row, int64_t dur_ns, int64_t call_ns,
                                       int64_t work_from = 0) {
    const int64_t start = std::max(host_ns_ + call_ns + 2 * kUs + Jitter(kUs), stream_free_[row]);
    stream_free_[row] = std::max(start, work_from) + dur_ns;
    host_ns_ += call_ns + 6 * kUs + Jitter(8 * kUs);
    events_ += 3;  // the op and its two flow events
    return {start, stream_free_[row]};
  }

  void Launch(const KernelKind& k, uint32_t stream, uint32_t tid, int64_t work_from = 0) {
    const int64_t call_ns = 4 * kUs + Jitter(3 * kUs);
    rec::KernelRecord r;
    r.correlation_id = Call("cudaLaunchKernel", kCbidLaunchKernel, tid, call_ns);
    r.device_id = device_;
    r.context_id = 1;
    r.stream_id = stream;
    r.name = w_.InternString(k.name);
    const int64_t dur = k.dur_us * kUs + Jitter(k.dur_us * kUs / 10 + 1);
    std::tie(r.start_ns, r.end_ns) =
        Schedule(stream == kNcclStream ? 1 : 0, dur, call_ns, work_from);
    r.grid = {k.grid_x, k.grid_y, 1};
    r.block = {k.block_x, 1, 1};
    r.registers_per_thread = k.registers;
    r.static_shared_memory = k.static_shared;
    r.dynamic_shared_memory = k.dynamic_shared;
    r.queued_ns = 0;
    w_.Add(r);
  }

  void Copy(uint8_t kind, uint8_t src, uint8_t dst, uint64_t bytes, uint32_t tid) {
    const int64_t call_ns = 5 * kUs + Jitter(4 * kUs);
    rec::MemcpyRecord m;
    m.correlation_id = Call("cudaMemcpyAsync", kCbidMemcpyAsync, tid, call_ns);
    m.device_id = m.src_device = m.dst_device = device_;
    m.context_id = m.src_context = m.dst_context = 1;
    m.stream_id = kComputeStream;
    m.copy_kind = kind;
    m.src_kind = src;
    m.dst_kind = dst;
    m.flags = rec::kMemcpyFlagAsync;
    m.bytes = bytes;
    // About 25 GB/s over PCIe, plus a few µs of setup.
    std::tie(m.start_ns, m.end_ns) =
        Schedule(0, 2 * kUs + static_cast<int64_t>(bytes / 25), call_ns);
    w_.Add(m);
  }

  void Memset(uint64_t bytes) {
    const int64_t call_ns = 4 * kUs + Jitter(3 * kUs);
    rec::MemsetRecord m;
    m.correlation_id = Call("cudaMemsetAsync", kCbidMemsetAsync, main_tid_, call_ns);
    m.device_id = device_;
    m.context_id = 1;
    m.stream_id = kComputeStream;
    m.memory_kind = kDevice;
    m.flags = rec::kMemsetFlagAsync;
    m.bytes = bytes;
    std::tie(m.start_ns, m.end_ns) = Schedule(0, 3 * kUs, call_ns);
    w_.Add(m);
  }

  // The host waits for the compute stream to drain.
  void Synchronize() {
    const int64_t end = std::max(host_ns_ + 3 * kUs, stream_free_[0] + 4 * kUs);
    rec::SyncRecord s;
    s.correlation_id =
        Call("cudaStreamSynchronize", kCbidStreamSynchronize, main_tid_, end - host_ns_);
    s.type = 3;  // stream synchronize
    s.context_id = 1;
    s.stream_id = kComputeStream;
    s.cuda_event_id = rec::kInvalidId;
    s.start_ns = host_ns_;
    s.end_ns = end;
    w_.Add(s);
    events_ += 3;  // the sync and its two flow events
    host_ns_ = end;
  }

  const WorkloadOptions& o_;
  const int rank_;
  const int32_t pid_;
  std::mt19937_64 rng_;
  client::RecordWriter w_;
  uint32_t main_tid_ = 0, autograd_tid_ = 0, device_ = 0;
  uint32_t correlation_ = 0;
  uint64_t range_id_ = 0;
  int64_t host_ns_;
  int64_t stream_free_[2] = {0, 0};
  int64_t events_ = 0;
  std::vector<OpenRange> ranges_;
};

}  // namespace

std::vector<Workload> BuildWorkloads(const WorkloadOptions& options) {
  std::vector<std::unique_ptr<StepWriter>> ranks;
  ranks.reserve(static_cast<size_t>(options.world_size));
  for (int rank = 0; rank < options.world_size; ++rank) {
    ranks.push_back(std::make_unique<StepWriter>(options, rank));
  }
  int64_t steps = 0;
  // Every rank writes as many events per step.
  while (ranks[0]->events() < options.events) {
    for (auto& rank : ranks) rank->BeginStep(steps);
    for (int bucket = 0; bucket < kBuckets; ++bucket) {
      int64_t everyone_ready = 0;
      for (auto& rank : ranks) everyone_ready = std::max(everyone_ready, rank->BucketReady(bucket));
      for (auto& rank : ranks) rank->AllReduce(everyone_ready);
    }
    for (auto& rank : ranks) rank->EndStep();
    ++steps;
  }
  std::vector<Workload> out;
  out.reserve(ranks.size());
  for (auto& rank : ranks) out.push_back(rank->Finish(steps));
  return out;
}

}  // namespace gpuctl::bench
