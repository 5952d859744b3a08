#ifndef GPUCTL_DAEMON_MERGE_CALLSTACK_INTERNER_H_
#define GPUCTL_DAEMON_MERGE_CALLSTACK_INTERNER_H_

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "daemon/merge/event_stream.h"

namespace perfetto::protos {
class InternedData;
}  // namespace perfetto::protos

namespace gpuctl::merge {

// A frame as gpuctl writes it: "function", or "module+0xoffset" for code
// with no symbol (the module's path or file name, the offset in hex).
struct ParsedFrame {
  std::string module;   // empty: no module in the frame
  uint64_t offset = 0;  // into the module
};
ParsedFrame ParseFrame(const std::string& frame);

// The interning state of Perfetto's profiling format for one packet
// sequence: function names, mappings (one per module, and one without a
// path for frames that name no module), frames and callstacks, each given
// iids 1, 2, ... Every table is bounded; past a bound a stack that needs a
// new entry is not interned. Not thread-safe.
class CallstackInterner {
 public:
  // The iid of the callstack of `stack` (frame strings, innermost first, as
  // a cpu_sample's args.stack has them), adding every entry the sequence
  // has not seen to `added`; 0 when `stack` is not a non-empty array of
  // strings or a table is full.
  uint64_t Intern(const Json& stack, perfetto::protos::InternedData* added);

 private:
  uint64_t InternFrame(const std::string& frame, perfetto::protos::InternedData* added);
  uint64_t InternMapping(const std::string& module, perfetto::protos::InternedData* added);
  uint64_t InternString(const std::string& text, absl::flat_hash_map<std::string, uint64_t>& table,
                        bool function_name, perfetto::protos::InternedData* added);

  absl::flat_hash_map<std::string, uint64_t> function_names_, mapping_paths_;
  absl::flat_hash_map<std::string, uint64_t> mappings_;  // by module, "" the pathless one
  // (function name iid, mapping iid, offset) -> frame iid.
  absl::flat_hash_map<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t> frames_;
  absl::flat_hash_map<std::vector<uint64_t>, uint64_t> callstacks_;
  uint64_t callstack_frames_ = 0;  // frame ids held by callstacks_' keys
};

}  // namespace gpuctl::merge

#endif  // GPUCTL_DAEMON_MERGE_CALLSTACK_INTERNER_H_
