#ifndef GPUCTL_DAEMON_CONVERT_TESTING_PAYLOAD_BUILDER_H_
#define GPUCTL_DAEMON_CONVERT_TESTING_PAYLOAD_BUILDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "gpuctl/v1/record_codec.h"

namespace gpuctl::testing {

// GPU records (records.h, minor 1), with test-friendly defaults. Strings
// are interned by the builder.
struct KernelSpec {
  uint32_t device = 0;
  uint32_t context = 1;
  uint32_t stream = 7;
  uint32_t correlation = 0;
  std::string name = "kernel";
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int32_t grid[3] = {1, 1, 1};
  int32_t block[3] = {1, 1, 1};
  uint32_t registers_per_thread = 0;
  uint32_t static_shared_memory = 0;
  uint32_t dynamic_shared_memory = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint32_t shared_memory_executed = 0;
};

struct MemcpySpec {
  uint32_t device = 0;
  uint32_t context = 1;
  uint32_t stream = 7;
  uint32_t correlation = 0;
  uint8_t copy_kind = 1;  // HtoD
  uint8_t src_kind = 2;   // Pinned
  uint8_t dst_kind = 3;   // Device
  uint8_t flags = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint32_t src_device = 0;
  uint32_t dst_device = 0;
  uint32_t src_context = 0;
  uint32_t dst_context = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
};

struct MemsetSpec {
  uint32_t device = 0;
  uint32_t context = 1;
  uint32_t stream = 7;
  uint32_t correlation = 0;
  uint32_t value = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t bytes = 0;
  uint16_t memory_kind = 3;  // Device
  uint16_t flags = 0;
};

struct ApiCallSpec {
  uint32_t domain = 1;  // runtime
  uint32_t cbid = 211;  // cudaLaunchKernel
  uint32_t correlation = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string name = "cudaLaunchKernel";
  uint32_t return_value = 0;
};

struct SyncSpec {
  uint32_t type = 3;  // stream synchronize
  uint32_t context = 1;
  uint32_t stream = 7;
  uint32_t cuda_event = 0xffffffffu;
  uint32_t correlation = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

struct MarkerSpec {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t marker_id = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::string name = "marker";
  std::string domain = "";
  uint32_t flags = 0;
};

struct OverheadSpec {
  uint32_t overhead_kind = 1u << 16;  // buffer flush
  uint32_t object_kind = 2;           // thread
  uint32_t object_id[3] = {0, 0, 0};
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t correlation = 0;
};

// Defaults: an H100 SXM.
struct DeviceInfoSpec {
  uint32_t device = 0;
  std::string name = "NVIDIA H100 80GB HBM3";
  uint32_t compute_major = 9;
  uint32_t compute_minor = 0;
  uint32_t sm_count = 132;
  uint32_t max_threads_per_sm = 2048;
  uint32_t max_threads_per_block = 1024;
  uint32_t max_registers_per_sm = 65536;
  uint32_t max_registers_per_block = 65536;
  uint32_t max_shared_memory_per_sm = 233472;
  uint32_t max_shared_memory_per_block = 49152;
  uint32_t max_blocks_per_sm = 32;
  uint32_t warp_size = 32;
  uint64_t global_memory_bytes = 85029158912ull;
  uint64_t global_memory_bandwidth = 3352320000ull;
  uint32_t l2_cache_bytes = 52428800;
  uint32_t core_clock_khz = 1980000;
};

struct CaptureInfoSpec {
  uint32_t flags = 2;          // CUPTI active
  uint32_t activities = 0xef;  // the default set
  uint32_t cupti_version = 130001;
  uint64_t dropped_by_cupti = 0;
  uint64_t dropped_at_cap = 0;
  std::string message = "";
  std::string cupti_path = "/usr/local/cuda/lib64/libcupti.so.13";
};

// Test-only builder of payloads in the record format
// (proto/gpuctl/v1/records.h): header, event section, string section. The
// records are encoded from their field tables (record_codec.h); the tests
// that place bytes at literal offsets are what pin the layout.
class PayloadBuilder {
 public:
  PayloadBuilder(int32_t pid, int64_t window_start_ns, int64_t window_end_ns);

  // Returns the string's index.
  uint32_t AddString(absl::string_view s);
  void AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, uint32_t name, uint32_t depth,
                uint64_t range_id);
  // Convenience: interns `name`.
  void AddRange(uint32_t tid, int64_t start_ns, int64_t end_ns, absl::string_view name,
                uint32_t depth, uint64_t range_id);
  void AddStep(uint32_t tid, int64_t ts_ns, uint64_t step);
  void AddThreadName(uint32_t tid, absl::string_view name);
  void AddKernel(const KernelSpec& k);
  void AddMemcpy(const MemcpySpec& m);
  void AddMemset(const MemsetSpec& m);
  void AddApiCall(const ApiCallSpec& a);
  void AddSync(const SyncSpec& s);
  void AddMarker(const MarkerSpec& m);
  void AddOverhead(const OverheadSpec& o);
  void AddExternalCorrelation(uint32_t external_kind, uint32_t correlation, uint64_t external_id);
  void AddDeviceInfo(const DeviceInfoSpec& d);
  void AddCaptureInfo(const CaptureInfoSpec& c);
  // Any record struct of records.h, every field as given (string fields are
  // indexes from AddString).
  template <typename R>
  void Add(const R& r) {
    const size_t at = events_.size();
    events_.resize(at + records::Layout<R>::kSize);
    records::EncodeRecord(r, events_.data() + at);
    ++event_count_;
  }
  // Any record: `body` follows the 4-byte prefix; size is computed (padded).
  void AddRawRecord(uint16_t kind, const std::vector<uint8_t>& body);

  void set_dropped_events(uint64_t n) { dropped_events_ = n; }
  void set_version(uint16_t major, uint16_t minor) {
    major_ = major;
    minor_ = minor;
  }
  // Extra header bytes beyond records::kHeaderSize.
  void set_extra_header_bytes(uint32_t n) { extra_header_ = n; }

  std::vector<uint8_t> Build() const;
  uint64_t event_count() const { return event_count_; }

 private:
  int32_t pid_;
  int64_t window_start_ns_;
  int64_t window_end_ns_;
  uint16_t major_;
  uint16_t minor_;
  uint32_t extra_header_ = 0;
  uint64_t dropped_events_ = 0;
  uint64_t event_count_ = 0;
  uint64_t string_count_ = 0;
  std::vector<uint8_t> events_;
  std::vector<uint8_t> strings_;
};

void Store16(std::vector<uint8_t>* out, size_t at, uint16_t v);
void Store32(std::vector<uint8_t>* out, size_t at, uint32_t v);
void Store64(std::vector<uint8_t>* out, size_t at, uint64_t v);

}  // namespace gpuctl::testing

#endif  // GPUCTL_DAEMON_CONVERT_TESTING_PAYLOAD_BUILDER_H_
