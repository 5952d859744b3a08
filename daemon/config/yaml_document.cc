#include "daemon/config/yaml_document.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/depthguard.h"
#include "yaml-cpp/eventhandler.h"

namespace gpuctl::daemon {
namespace {

// Records where each document starts; nothing else is needed to count them.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> marks;
};

absl::Status ErrorAt(absl::string_view file, const YAML::Mark& mark, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(file, ":", mark.line + 1, ":", mark.column + 1, ": ", what));
}

}  // namespace

absl::StatusOr<YAML::Node> LoadSingleYamlDocument(absl::string_view text, absl::string_view file) {
  std::string input(text);
  try {
    std::istringstream stream(input);
    YAML::Parser parser(stream);
    DocumentStarts starts;
    // yaml-cpp 0.7 meets a token it cannot place at the top level (a ',')
    // by starting an empty document there, again and again without end
    // (YAML::LoadAll would never return): a start that does not move on is
    // that error. Two documents are enough to refuse the file.
    while (starts.marks.size() < 2 && parser.HandleNextDocument(starts)) {
      size_t n = starts.marks.size();
      if (n >= 2 && starts.marks[n - 1].pos == starts.marks[n - 2].pos) {
        const YAML::Mark& stuck = starts.marks[n - 1];
        std::string token = static_cast<size_t>(stuck.pos) < input.size()
                                ? absl::CHexEscape(input.substr(stuck.pos, 1))
                                : "end of file";
        return ErrorAt(file, stuck, absl::StrCat("invalid YAML: unexpected \"", token, "\""));
      }
    }
    if (starts.marks.size() >= 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ":", starts.marks[1].line + 1,
                       ": a second YAML document; the configuration is a single one"));
    }
    if (starts.marks.empty()) return YAML::Node();
    return YAML::Load(input);
  } catch (const YAML::DeepRecursion& e) {
    return ErrorAt(file, e.mark, "nested too deeply");
  } catch (const YAML::Exception& e) {
    return ErrorAt(file, e.mark, absl::StrCat("invalid YAML: ", e.msg));
  }
}

}  // namespace gpuctl::daemon
