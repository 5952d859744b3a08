#include "daemon/hostctx/perf_map.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace gpuctl::hostctx {
namespace {

bool ParseHex(absl::string_view text, uint64_t* value) {
  if (absl::StartsWithIgnoreCase(text, "0x")) text.remove_prefix(2);
  return !text.empty() && absl::SimpleHexAtoi(text, value);
}

// "START SIZE name with spaces" -> entry.
bool ParseLine(absl::string_view line, PerfMap::Entry* entry) {
  const size_t first = line.find(' ');
  if (first == absl::string_view::npos) return false;
  const size_t second = line.find(' ', first + 1);
  if (second == absl::string_view::npos) return false;
  if (!ParseHex(line.substr(0, first), &entry->start) ||
      !ParseHex(line.substr(first + 1, second - first - 1), &entry->size) || entry->size == 0 ||
      entry->start + entry->size < entry->start) {
    return false;
  }
  absl::string_view name = absl::StripAsciiWhitespace(line.substr(second + 1));
  if (name.empty()) return false;
  entry->name = std::string(name.substr(0, PerfMap::kMaxNameBytes));
  return true;
}

}  // namespace

PerfMap PerfMap::Parse(absl::string_view text) {
  PerfMap map;
  size_t order = 0;
  std::vector<std::pair<size_t, Entry>> numbered;
  while (!text.empty() && numbered.size() < kMaxEntries) {
    const size_t eol = text.find('\n');
    const absl::string_view line = text.substr(0, eol);
    text = eol == absl::string_view::npos ? absl::string_view() : text.substr(eol + 1);
    Entry entry;
    if (ParseLine(line, &entry)) numbered.emplace_back(order++, std::move(entry));
  }
  // By start; among equal starts, the latest line first.
  std::sort(numbered.begin(), numbered.end(), [](const auto& a, const auto& b) {
    if (a.second.start != b.second.start) return a.second.start < b.second.start;
    return a.first > b.first;
  });
  map.entries_.reserve(numbered.size());
  for (auto& [unused, entry] : numbered) {
    if (!map.entries_.empty() && map.entries_.back().start == entry.start) continue;
    map.entries_.push_back(std::move(entry));
  }
  return map;
}

const PerfMap::Entry* PerfMap::Find(uint64_t address) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), address,
                             [](uint64_t a, const Entry& e) { return a < e.start; });
  // Walk back over entries that start below the address: a short earlier
  // entry can sit next to a longer one that holds the address.
  for (int checked = 0; it != entries_.begin() && checked < 8; ++checked) {
    --it;
    if (address - it->start < it->size) return &*it;
  }
  return nullptr;
}

}  // namespace gpuctl::hostctx
