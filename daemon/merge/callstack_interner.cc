// Perfetto's profiling format interns a sample's callstack as a list of
// frame iids, each frame a function name and a mapping (profile_common.proto);
// trace processor resolves them per sequence, outermost frame first.
#include "daemon/merge/callstack_interner.h"

#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "protos/perfetto/trace/perfetto_trace.pb.h"

namespace gpuctl::merge {
namespace {

namespace pp = ::perfetto::protos;

// Entries per table at most, and frame ids held by all callstacks: a trace
// of endless distinct stacks cannot grow the state without bound.
constexpr size_t kMaxEntries = 1'000'000;
constexpr uint64_t kMaxCallstackFrames = 16'000'000;

}  // namespace

ParsedFrame ParseFrame(const std::string& frame) {
  const size_t plus = frame.rfind("+0x");
  if (plus == std::string::npos || plus == 0) return {};
  const absl::string_view hex = absl::string_view(frame).substr(plus + 3);
  uint64_t offset = 0;
  if (hex.empty() || hex.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos ||
      !absl::SimpleHexAtoi(hex, &offset)) {
    return {};
  }
  return {frame.substr(0, plus), offset};
}

uint64_t CallstackInterner::Intern(const Json& stack, pp::InternedData* added) {
  if (!stack.is_array() || stack.empty()) return 0;
  std::vector<uint64_t> frame_ids;
  frame_ids.reserve(stack.size());
  // args.stack is innermost first; Callstack.frame_ids outermost first.
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    if (!it->is_string()) return 0;
    const uint64_t id = InternFrame(it->get_ref<const std::string&>(), added);
    if (id == 0) return 0;
    frame_ids.push_back(id);
  }
  if (auto it = callstacks_.find(frame_ids); it != callstacks_.end()) return it->second;
  if (callstacks_.size() >= kMaxEntries ||
      callstack_frames_ + frame_ids.size() > kMaxCallstackFrames) {
    return 0;
  }
  const uint64_t iid = callstacks_.size() + 1;
  pp::Callstack* callstack = added->add_callstacks();
  callstack->set_iid(iid);
  for (uint64_t id : frame_ids) callstack->add_frame_ids(id);
  callstack_frames_ += frame_ids.size();
  callstacks_.emplace(std::move(frame_ids), iid);
  return iid;
}

uint64_t CallstackInterner::InternFrame(const std::string& frame, pp::InternedData* added) {
  const ParsedFrame parsed = ParseFrame(frame);
  // The whole string names the frame, "libfoo.so+0x1f3" included, so that
  // the flame graph shows it as the trace's JSON does.
  const uint64_t name = InternString(frame, function_names_, /*function_name=*/true, added);
  const uint64_t mapping = InternMapping(parsed.module, added);
  if (name == 0 || mapping == 0) return 0;
  const std::tuple<uint64_t, uint64_t, uint64_t> key(name, mapping, parsed.offset);
  if (auto it = frames_.find(key); it != frames_.end()) return it->second;
  if (frames_.size() >= kMaxEntries) return 0;
  const uint64_t iid = frames_.size() + 1;
  frames_.emplace(key, iid);
  pp::Frame* entry = added->add_frames();
  entry->set_iid(iid);
  entry->set_function_name_id(name);
  entry->set_mapping_id(mapping);
  if (parsed.offset != 0) entry->set_rel_pc(parsed.offset);
  return iid;
}

uint64_t CallstackInterner::InternMapping(const std::string& module, pp::InternedData* added) {
  if (auto it = mappings_.find(module); it != mappings_.end()) return it->second;
  if (mappings_.size() >= kMaxEntries) return 0;
  // Trace processor joins the path's parts with "/": "/usr/lib/libc.so.6"
  // is written as "usr", "lib", "libc.so.6".
  std::vector<uint64_t> parts;
  for (absl::string_view part : absl::StrSplit(module, '/', absl::SkipEmpty())) {
    const uint64_t id =
        InternString(std::string(part), mapping_paths_, /*function_name=*/false, added);
    if (id == 0) return 0;
    parts.push_back(id);
  }
  const uint64_t iid = mappings_.size() + 1;
  mappings_.emplace(module, iid);
  pp::Mapping* entry = added->add_mappings();
  entry->set_iid(iid);
  for (uint64_t id : parts) entry->add_path_string_ids(id);
  return iid;
}

uint64_t CallstackInterner::InternString(const std::string& text,
                                         absl::flat_hash_map<std::string, uint64_t>& table,
                                         bool function_name, pp::InternedData* added) {
  if (auto it = table.find(text); it != table.end()) return it->second;
  if (table.size() >= kMaxEntries) return 0;
  const uint64_t iid = table.size() + 1;
  table.emplace(text, iid);
  pp::InternedString* entry =
      function_name ? added->add_function_names() : added->add_mapping_paths();
  entry->set_iid(iid);
  entry->set_str(text);
  return iid;
}

}  // namespace gpuctl::merge
