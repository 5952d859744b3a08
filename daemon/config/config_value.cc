#include "daemon/config/config_value.h"

#include "absl/strings/str_cat.h"
#include "daemon/config/config_values.h"

namespace gpuctl::daemon {
namespace {

// The tags a scalar may carry: "?" plain, "!" quoted or block, and an
// explicit !!str.
constexpr absl::string_view kPlainTag = "?";
constexpr absl::string_view kNonPlainTag = "!";
constexpr absl::string_view kStrTag = "tag:yaml.org,2002:str";

bool IsPlain(const YAML::Node& node) { return node.Tag() == kPlainTag; }

// YAML 1.2's core schema booleans.
bool ParseYamlBool(absl::string_view text, bool* value) {
  if (text == "true" || text == "True" || text == "TRUE") {
    *value = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "FALSE") {
    *value = false;
    return true;
  }
  return false;
}

bool HasControlCharacter(absl::string_view text) {
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

}  // namespace

absl::string_view DescribeNodeType(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "no value";
  }
}

absl::Status ConfigValue::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ":", line_, ": ", key_, ": ", message));
}

std::string ConfigValue::Shown(absl::string_view text) const {
  return secret_ ? std::string("the value") : QuoteConfigText(text);
}

absl::StatusOr<std::string> ConfigValue::ScalarText(absl::string_view expected) const {
  if (!node_.IsScalar()) {
    return Error(absl::StrCat("expected ", expected, ", found ", DescribeNodeType(node_)));
  }
  const std::string& tag = node_.Tag();
  if (tag != kPlainTag && tag != kNonPlainTag && tag != kStrTag) {
    return Error(absl::StrCat("unsupported tag ", QuoteConfigText(tag), "; expected ", expected));
  }
  return node_.Scalar();
}

absl::StatusOr<std::string> ConfigValue::String() const {
  absl::StatusOr<std::string> text = ScalarText("a string");
  if (!text.ok()) {
    if (node_.IsNull()) return Error("has no value (write \"\" for an empty string)");
    return text.status();
  }
  bool ignored;
  if (IsPlain(node_) && ParseYamlBool(*text, &ignored)) {
    return Error(absl::StrCat("expected a string, found the boolean ", *text,
                              " (quote it to mean the text)"));
  }
  if (HasControlCharacter(*text)) {
    return Error(absl::StrCat(Shown(*text), " contains a control character"));
  }
  return text;
}

absl::StatusOr<bool> ConfigValue::Bool() const {
  absl::StatusOr<std::string> text = ScalarText("true or false");
  if (!text.ok()) return text.status();
  bool value = false;
  if (!IsPlain(node_) || !ParseYamlBool(*text, &value)) {
    return Error(absl::StrCat("expected true or false, found ", Shown(*text)));
  }
  return value;
}

absl::StatusOr<absl::Duration> ConfigValue::Duration(ZeroDuration zero) const {
  absl::StatusOr<std::string> text = ScalarText("a duration (100ms, 10s, 10m, 2h, 30d)");
  if (!text.ok()) return text.status();
  absl::StatusOr<absl::Duration> d = ParseConfigDuration(*text);
  if (!d.ok()) return Error(d.status().message());
  if (zero == ZeroDuration::kRefused && *d == absl::ZeroDuration()) {
    return Error(absl::StrCat(QuoteConfigText(*text), " must be more than 0"));
  }
  return d;
}

absl::StatusOr<uint64_t> ConfigValue::Size() const {
  absl::StatusOr<std::string> text = ScalarText("a size (bytes, or 256MiB, 50GiB)");
  if (!text.ok()) return text.status();
  absl::StatusOr<uint64_t> bytes = ParseByteSize(*text);
  if (!bytes.ok()) return Error(bytes.status().message());
  return bytes;
}

absl::StatusOr<uint64_t> ConfigValue::Count(uint64_t min, uint64_t max) const {
  absl::StatusOr<std::string> text = ScalarText("a whole number");
  if (!text.ok()) return text.status();
  absl::StatusOr<uint64_t> value = ParseConfigCount(*text);
  if (!value.ok()) return Error(value.status().message());
  if (*value < min || *value > max) {
    return Error(absl::StrCat(*value, " is out of range (", min, " to ", max, ")"));
  }
  return value;
}

}  // namespace gpuctl::daemon
