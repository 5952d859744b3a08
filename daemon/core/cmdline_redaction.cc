#include "daemon/core/cmdline_redaction.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpuctl::daemon {
namespace {

// Words before "key" that make it a credential (`--api-key`), and whole
// words that are one (`--apikey`).
constexpr absl::string_view kKeyQualifiers[] = {"api",  "access",     "secret",  "private",
                                                "auth", "encryption", "signing", "client"};
constexpr absl::string_view kCredentialWords[] = {"credential", "credentials", "apikey",
                                                  "accesskey",  "secretkey",   "privatekey"};
constexpr absl::string_view kCredentialSuffixes[] = {"password", "passwd", "passphrase", "token"};
// In NAME=value, case-insensitive substrings of NAME.
constexpr absl::string_view kSensitiveNameParts[] = {"PASSWORD", "PASSWD", "SECRET",
                                                     "TOKEN",    "KEY",    "CREDENTIAL"};

template <size_t N>
bool OneOf(absl::string_view word, const absl::string_view (&set)[N]) {
  for (absl::string_view candidate : set) {
    if (word == candidate) return true;
  }
  return false;
}

bool IsCredentialFlagName(absl::string_view name) {
  std::vector<std::string> words =
      absl::StrSplit(absl::AsciiStrToLower(name), absl::ByAnyChar("-_."), absl::SkipEmpty());
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (absl::StartsWith(word, "secret") || OneOf(word, kCredentialWords)) return true;
    for (absl::string_view suffix : kCredentialSuffixes) {
      if (absl::EndsWith(word, suffix)) return true;
    }
    if (word == "key" && i > 0 && OneOf(words[i - 1], kKeyQualifiers)) return true;
  }
  return false;
}

bool IsCredentialVariableName(absl::string_view name) {
  if (name.empty() || !(absl::ascii_isalpha(name[0]) || name[0] == '_')) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  }
  const std::string upper = absl::AsciiStrToUpper(name);
  for (absl::string_view part : kSensitiveNameParts) {
    if (absl::StrContains(upper, part)) return true;
  }
  return false;
}

// NAME=value with a credential NAME -> NAME=***.
std::string RedactAssignment(absl::string_view text) {
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos || !IsCredentialVariableName(text.substr(0, eq))) {
    return std::string(text);
  }
  return absl::StrCat(text.substr(0, eq + 1), kRedacted);
}

// scheme://user:password@host -> scheme://user:***@host, every URL in `arg`.
void RedactUrlPasswords(std::string* arg) {
  size_t pos = 0;
  while ((pos = arg->find("://", pos)) != std::string::npos) {
    const size_t start = pos + 3;
    size_t end = arg->find_first_of("/?# \t", start);
    if (end == std::string::npos) end = arg->size();
    const size_t at = arg->rfind('@', end == 0 ? 0 : end - 1);
    pos = start;
    if (at == std::string::npos || at < start) continue;
    const size_t colon = arg->find(':', start);
    if (colon == std::string::npos || colon > at) continue;
    arg->replace(colon + 1, at - colon - 1, kRedacted.data(), kRedacted.size());
    pos = colon + 1 + kRedacted.size() + 1;
  }
}

bool IsFlag(absl::string_view arg) { return arg.size() > 1 && arg[0] == '-' && arg != "--"; }

}  // namespace

std::vector<std::string> RedactCommandLine(std::vector<std::string> args) {
  bool value_follows = false;
  for (std::string& arg : args) {
    if (value_follows) {
      value_follows = false;
      if (!IsFlag(arg)) {
        arg = std::string(kRedacted);
        continue;
      }
    }
    if (IsFlag(arg)) {
      const size_t name_start = arg.find_first_not_of('-');
      const size_t eq = arg.find('=');
      absl::string_view name = absl::string_view(arg).substr(
          name_start, eq == std::string::npos ? std::string::npos : eq - name_start);
      if (IsCredentialFlagName(name)) {
        if (eq == std::string::npos) {
          value_follows = true;
        } else {
          arg = absl::StrCat(arg.substr(0, eq + 1), kRedacted);
        }
        continue;
      }
      if (eq != std::string::npos) {
        arg = absl::StrCat(arg.substr(0, eq + 1), RedactAssignment(arg.substr(eq + 1)));
      }
    } else {
      arg = RedactAssignment(arg);
    }
    RedactUrlPasswords(&arg);
  }
  return args;
}

}  // namespace gpuctl::daemon
