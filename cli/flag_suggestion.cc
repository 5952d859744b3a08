#include "cli/flag_suggestion.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/format.h"

namespace gpuctl::cli {
namespace {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// "--duration=5s" -> "--duration".
absl::string_view FlagPart(absl::string_view arg) { return arg.substr(0, arg.find('=')); }

std::vector<std::string> FlagNames(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

}  // namespace

std::string NearestFlag(const CLI::App& command, absl::string_view typed) {
  typed = FlagPart(typed);
  if (!absl::StartsWith(typed, "-")) return "";
  const std::vector<std::string> names = FlagNames(command);
  // A unique long flag that starts with what was typed ("--dur").
  std::vector<std::string> extending;
  for (const std::string& name : names) {
    if (typed.size() >= 4 && absl::StartsWith(name, typed)) extending.push_back(name);
  }
  if (extending.size() == 1) return extending[0];
  std::string best;
  size_t best_distance = typed.size() <= 6 ? 2 : 3;  // more is a different word
  for (const std::string& name : names) {
    const size_t distance = EditDistance(typed, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string UnexpectedArgumentMessage(const CLI::App& command,
                                      const std::vector<std::string>& args) {
  std::vector<std::string> left = command.remaining();
  if (const CLI::App* parent = command.get_parent(); parent != nullptr) {
    std::vector<std::string> more = parent->remaining();
    left.insert(left.end(), more.begin(), more.end());
  }
  const std::set<std::string> unexpected(left.begin(), left.end());
  std::string first_flag;
  std::string first_other;
  for (const std::string& arg : args) {
    if (!unexpected.contains(arg)) continue;
    if (absl::StartsWith(arg, "-")) {
      first_flag = arg;
      break;
    }
    if (first_other.empty()) first_other = arg;
  }
  const std::string prefix = command.get_parent() == nullptr ? "" : command.get_name() + ": ";
  if (first_flag.empty()) {
    if (first_other.empty() && !left.empty()) first_other = left.front();
    return absl::StrCat(prefix, "unexpected argument \"", Printable(first_other), "\"");
  }
  std::string message =
      absl::StrCat(prefix, "unknown flag ", Printable(FlagPart(first_flag).substr(0, 64)));
  if (std::string nearest = NearestFlag(command, first_flag); !nearest.empty()) {
    absl::StrAppend(&message, "; did you mean ", nearest, "?");
  }
  return message;
}

}  // namespace gpuctl::cli
