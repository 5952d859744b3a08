#include "daemon/convert/cupti_names.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpuctl/v1/records.h"

namespace gpuctl::daemon {

absl::string_view MemcpyKindName(uint32_t copy_kind) {
  static constexpr absl::string_view kNames[] = {
      "<unknown>", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  return copy_kind < std::size(kNames) ? kNames[copy_kind] : "<unknown>";
}

absl::string_view MemoryKindName(uint32_t memory_kind) {
  static constexpr absl::string_view kNames[] = {"Unknown",       "Pageable",      "Pinned",
                                                 "Device",        "Array",         "Managed",
                                                 "Device Static", "Managed Static"};
  return memory_kind < std::size(kNames) ? kNames[memory_kind] : "Unrecognized";
}

absl::string_view SyncTypeName(uint32_t sync_type) {
  switch (sync_type) {
    case 1:
      return "Event Sync";
    case 2:
      return "Stream Wait Event";
    case 3:
      return "Stream Sync";
    case 4:
      return "Context Sync";
    default:
      return "Unknown Sync";
  }
}

absl::string_view OverheadKindName(uint32_t overhead_kind) {
  switch (overhead_kind) {
    case 0:
      return "Unknown";
    case 1:
      return "Driver Compiler";
    case 1u << 16:
      return "Buffer Flush";
    case 2u << 16:
      return "Instrumentation";
    case 3u << 16:
      return "Resource";
    case 4u << 16:
      return "Runtime Triggered Module Loading";
    case 5u << 16:
      return "Lazy Function Loading";
    case 6u << 16:
      return "Command Buffer Full";
    case 7u << 16:
      return "Activity Buffer Request";
    case 8u << 16:
      return "UVM Activity Init";
    default:
      return "Unrecognized";
  }
}

const std::vector<absl::string_view>& ActivityNames() {
  // Index i is bit 1 << i (records.h kActivity*).
  static const std::vector<absl::string_view> kNames = {
      "kernel", "memcpy", "memset", "runtime", "driver", "sync", "nvtx", "overhead", "memory"};
  static_assert(records::kActivityMemory == 1u << 8);
  return kNames;
}

std::string ActivityNameList() { return absl::StrJoin(ActivityNames(), ", "); }

absl::Status ValidateActivityNames(const std::vector<std::string>& names) {
  const auto& valid = ActivityNames();
  for (const std::string& name : names) {
    if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown activity \"", name.substr(0, 64),
                                                     "\"; valid activities: ", ActivityNameList()));
    }
  }
  return absl::OkStatus();
}

std::vector<absl::string_view> ActivityNamesFromBits(uint32_t bits) {
  std::vector<absl::string_view> out;
  const auto& names = ActivityNames();
  for (size_t i = 0; i < names.size(); ++i) {
    if (bits & (1u << i)) out.push_back(names[i]);
  }
  return out;
}

}  // namespace gpuctl::daemon
