// Turns CUPTI activity records (the structs of cupti_activity.h) into
// gpuctl's GPU records, keeping them until the window's end.
//
// Threads: Add() runs on whichever thread CUPTI completes a buffer on;
// everything else on the agent thread. The owner serializes them (one
// mutex around the translator).
#ifndef GPUCTL_CLIENT_LIB_SRC_CUPTI_ACTIVITY_TRANSLATOR_H_
#define GPUCTL_CLIENT_LIB_SRC_CUPTI_ACTIVITY_TRANSLATOR_H_

#include <cupti.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "client_lib/src/record_writer.h"

namespace gpuctl::client::cupti {

class ActivityTranslator {
 public:
  // Name of a runtime/driver function by CUPTI callback id ("" unknown).
  using CallbackNameFn = std::function<std::string(CUpti_CallbackDomain, uint32_t cbid)>;

  ActivityTranslator() = default;
  ActivityTranslator(const ActivityTranslator&) = delete;
  ActivityTranslator& operator=(const ActivityTranslator&) = delete;

  // Starts a window: forgets everything, keeps at most `max_bytes` of
  // encoded records (and their strings), adds `clock_offset_ns` to every
  // CUPTI timestamp (0 when CUPTI already uses the library's clock).
  void Reset(uint64_t max_bytes, int64_t clock_offset_ns, CallbackNameFn callback_name);

  // Translates one record; kinds gpuctl does not use are skipped, noise
  // API calls filtered, records past the cap dropped and counted.
  void Add(const CUpti_Activity* record);

  // Appends the records that overlap [window_start_ns, window_end_ns] to
  // `writer` (NVTX ranges still open end at window_end_ns) and forgets
  // them.
  void Emit(RecordWriter& writer, int64_t window_start_ns, int64_t window_end_ns);

  uint64_t dropped_at_cap() const { return dropped_at_cap_; }
  uint64_t skipped_unknown() const { return skipped_unknown_; }
  uint64_t filtered_calls() const { return filtered_calls_; }
  uint64_t clipped() const { return clipped_; }

  // True for a runtime/driver call kineto also leaves out (cheap queries
  // called thousands of times per step).
  static bool IsNoiseCall(CUpti_CallbackDomain domain, uint32_t cbid);

 private:
  using Record = std::variant<KernelRecord, MemcpyRecord, MemsetRecord, ApiCallRecord, SyncRecord,
                              MarkerRecord, OverheadRecord, ExternalCorrelationRecord,
                              DeviceInfoRecord, MemoryRecord, MemoryPoolRecord>;

  // Reserves room for a record of `size` bytes; false (and counted) past
  // the cap.
  bool Reserve(uint64_t size);
  uint32_t Intern(std::string_view s);
  int64_t Ts(uint64_t cupti_ns) const;
  void AddKernel(const CUpti_ActivityKernel10& k);
  void AddMemcpy(const CUpti_ActivityMemcpy6& m);
  void AddPeerMemcpy(const CUpti_ActivityMemcpyPtoP4& m);
  void AddMemset(const CUpti_ActivityMemset4& m);
  void AddApi(const CUpti_ActivityAPI& a, CUpti_CallbackDomain domain);
  void AddSync(const CUpti_ActivitySynchronization2& s);
  void AddMarker(const CUpti_ActivityMarker2& m);
  void AddOverhead(const CUpti_ActivityOverhead3& o);
  void AddExternalCorrelation(const CUpti_ActivityExternalCorrelation& e);
  void AddDevice(const CUpti_ActivityDevice5& d);
  // activity_translator_memory.cc.
  void AddMemory(const CUpti_ActivityMemory4& m);
  void AddMemoryPool(const CUpti_ActivityMemoryPool3& p);

  uint64_t bytes_left_ = 0;
  int64_t clock_offset_ns_ = 0;
  CallbackNameFn callback_name_;
  std::vector<Record> records_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> string_index_;
  std::unordered_map<uint64_t, uint32_t> api_names_;         // (domain << 32 | cbid) -> string
  std::unordered_map<uint32_t, MarkerRecord> open_markers_;  // by marker id
  std::unordered_set<uint32_t> devices_;
  uint64_t dropped_at_cap_ = 0;
  uint64_t skipped_unknown_ = 0;
  uint64_t filtered_calls_ = 0;
  uint64_t clipped_ = 0;
};

}  // namespace gpuctl::client::cupti

#endif  // GPUCTL_CLIENT_LIB_SRC_CUPTI_ACTIVITY_TRANSLATOR_H_
