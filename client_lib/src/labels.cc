#include "client_lib/src/labels.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace gpuctl::client {
namespace {

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '/' || c == '-';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `digits` digits of `base` at *pos; nullopt if malformed.
std::optional<uint32_t> ReadNumber(std::string_view s, size_t* pos, size_t digits, int base) {
  if (s.size() - *pos < digits) return std::nullopt;
  uint32_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const int d = HexValue(s[*pos + i]);
    if (d < 0 || d >= base) return std::nullopt;
    value = value * static_cast<uint32_t>(base) + static_cast<uint32_t>(d);
  }
  *pos += digits;
  return value;
}

// Decodes the body of a Go-quoted string (strconv.Quote), without its
// quotes. Characters outside ASCII come out as 0x80 so the value fails
// validation rather than being mangled. nullopt when malformed.
std::optional<std::string> UnquoteGo(std::string_view body) {
  std::string out;
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i++];
    if (c == '"') return std::nullopt;  // an unescaped quote inside
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i == body.size()) return std::nullopt;
    const char e = body[i++];
    std::optional<uint32_t> code;
    switch (e) {
      case 'a':
        code = 0x07;
        break;
      case 'b':
        code = 0x08;
        break;
      case 'f':
        code = 0x0c;
        break;
      case 'n':
        code = 0x0a;
        break;
      case 'r':
        code = 0x0d;
        break;
      case 't':
        code = 0x09;
        break;
      case 'v':
        code = 0x0b;
        break;
      case '\\':
        code = '\\';
        break;
      case '"':
        code = '"';
        break;
      case '\'':
        code = '\'';
        break;
      case 'x':
        code = ReadNumber(body, &i, 2, 16);
        break;
      case 'u':
        code = ReadNumber(body, &i, 4, 16);
        break;
      case 'U':
        code = ReadNumber(body, &i, 8, 16);
        break;
      default:
        if (e >= '0' && e <= '7') {
          --i;
          code = ReadNumber(body, &i, 3, 8);
        }
        break;
    }
    if (!code.has_value()) return std::nullopt;
    out.push_back(*code < 0x80 ? static_cast<char>(*code) : static_cast<char>(0x80));
  }
  return out;
}

void AddAll(std::vector<LabelPair> pairs, std::vector<LabelPair>* labels) {
  for (LabelPair& pair : pairs) {
    if (labels->size() >= kMaxLabels) return;
    if (!IsValidLabel(pair.first, pair.second)) continue;
    const bool taken = std::any_of(labels->begin(), labels->end(),
                                   [&](const LabelPair& l) { return l.first == pair.first; });
    if (!taken) labels->push_back(std::move(pair));
  }
}

}  // namespace

bool IsValidLabel(std::string_view key, std::string_view value) {
  if (key.empty() || key.size() > kMaxLabelKeyBytes || value.size() > kMaxLabelValueBytes) {
    return false;
  }
  return std::all_of(key.begin(), key.end(), IsKeyChar) &&
         std::all_of(value.begin(), value.end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
}

std::vector<LabelPair> ParseLabelList(std::string_view text) {
  std::vector<LabelPair> pairs;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view entry = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    pairs.emplace_back(std::string(Trim(entry.substr(0, eq))),
                       std::string(Trim(entry.substr(eq + 1))));
  }
  return pairs;
}

std::vector<LabelPair> ParseDownwardApiLabels(std::string_view text) {
  std::vector<LabelPair> pairs;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = Trim(text.substr(0, newline));
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view quoted = line.substr(eq + 1);
    if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') continue;
    std::optional<std::string> value = UnquoteGo(quoted.substr(1, quoted.size() - 2));
    if (!value.has_value()) continue;
    pairs.emplace_back(std::string(line.substr(0, eq)), std::move(*value));
  }
  return pairs;
}

std::vector<std::string> CollectLabels(const EnvLookup& env) {
  std::vector<LabelPair> labels;
  if (std::optional<std::string> list = env("GPUCTL_LABELS"))
    AddAll(ParseLabelList(*list), &labels);
  if (std::optional<std::string> path = env("GPUCTL_LABELS_FILE"); path && !path->empty()) {
    AddAll(ParseDownwardApiLabels(ReadSmallFile(*path, kMaxLabelsFileBytes)), &labels);
  }
  static constexpr std::pair<const char*, const char*> kPodVariables[] = {
      {"POD_NAME", "k8s.pod"}, {"POD_NAMESPACE", "k8s.namespace"}, {"NODE_NAME", "k8s.node"}};
  for (const auto& [variable, key] : kPodVariables) {
    std::optional<std::string> value = env(variable);
    if (value.has_value() && !value->empty()) AddAll({{key, std::move(*value)}}, &labels);
  }
  std::vector<std::string> out;
  out.reserve(labels.size());
  for (const LabelPair& label : labels) out.push_back(label.first + "=" + label.second);
  return out;
}

}  // namespace gpuctl::client
