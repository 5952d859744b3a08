#ifndef GPUCTL_DAEMON_CONVERT_CUPTI_NAMES_H_
#define GPUCTL_DAEMON_CONVERT_CUPTI_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuctl::daemon {

// Display names for CUPTI enum values, as kineto writes them
// (libkineto/src/cupti_strings.cpp). Values a newer CUPTI may add map to
// kineto's fallbacks ("<unknown>", "Unrecognized", "Unknown Sync").
absl::string_view MemcpyKindName(uint32_t copy_kind);        // "HtoD", "PtoP"
absl::string_view MemoryKindName(uint32_t memory_kind);      // "Pinned", "Device"
absl::string_view SyncTypeName(uint32_t sync_type);          // "Stream Sync"
absl::string_view OverheadKindName(uint32_t overhead_kind);  // "Buffer Flush"

// The GPU activity names of StartCapture.activities / TraceRequest.activities
// (ipc.proto, docs/cupti.md), in records::kActivity* bit order.
const std::vector<absl::string_view>& ActivityNames();
// "kernel, memcpy, ..." for messages.
std::string ActivityNameList();
// INVALID_ARGUMENT naming the first unknown name and listing the valid ones.
absl::Status ValidateActivityNames(const std::vector<std::string>& names);
// The names of the bits set in `bits` (records::kActivity*), in bit order.
std::vector<absl::string_view> ActivityNamesFromBits(uint32_t bits);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_CUPTI_NAMES_H_
