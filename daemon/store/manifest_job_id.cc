#include "daemon/store/manifest_job_id.h"

#include <cstddef>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace gpuctl::daemon {
namespace {

using Json = nlohmann::json;

// Receives the parser's events and stops it at the top-level job id (or
// at the first thing that rules the text out).
class JobIdFinder final : public nlohmann::json_sax<Json> {
 public:
  enum class Outcome { kNoJobId, kFound, kNotAString, kMalformed };

  Outcome outcome() const { return outcome_; }
  std::string TakeJob() { return std::move(job_); }

  bool null() override { return Found(""); }
  bool boolean(bool) override { return Scalar(); }
  bool number_integer(number_integer_t) override { return Scalar(); }
  bool number_unsigned(number_unsigned_t) override { return Scalar(); }
  bool number_float(number_float_t, const string_t&) override { return Scalar(); }
  bool string(string_t& value) override {
    if (at_job_id_) return Found(std::move(value));
    return Scalar();
  }
  bool binary(binary_t&) override { return Stop(Outcome::kMalformed); }

  bool start_object(std::size_t) override { return Open(); }
  bool end_object() override { return Close(); }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return Stop(Outcome::kMalformed);
    return Open();
  }
  bool end_array() override { return Close(); }
  bool key(string_t& key) override {
    at_job_id_ = depth_ == 1 && (key == "job_id" || key == "jobId");
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return Stop(Outcome::kMalformed);
  }

 private:
  // Only an object is a manifest; the job id's value must be a string.
  bool Scalar() {
    if (depth_ == 0) return Stop(Outcome::kMalformed);
    if (at_job_id_) return Stop(Outcome::kNotAString);
    return true;
  }
  bool Open() {
    if (at_job_id_) return Stop(Outcome::kNotAString);
    if (++depth_ > kMaxManifestJsonDepth + 1) return Stop(Outcome::kMalformed);
    return true;
  }
  bool Close() {
    --depth_;
    return true;
  }
  bool Found(std::string job) {
    if (depth_ == 0) return Stop(Outcome::kMalformed);
    if (!at_job_id_) return true;
    job_ = std::move(job);
    return Stop(Outcome::kFound);
  }
  // Returning false ends the parse.
  bool Stop(Outcome outcome) {
    outcome_ = outcome;
    return false;
  }

  Outcome outcome_ = Outcome::kNoJobId;
  int depth_ = 0;
  bool at_job_id_ = false;
  std::string job_;
};

}  // namespace

absl::StatusOr<std::string> ManifestJobId(absl::string_view json) {
  JobIdFinder finder;
  // Not strict: what follows the top-level object is not looked at.
  const bool complete = Json::sax_parse(json.begin(), json.end(), &finder,
                                        Json::input_format_t::json, /*strict=*/false);
  switch (finder.outcome()) {
    case JobIdFinder::Outcome::kFound:
      return finder.TakeJob();
    case JobIdFinder::Outcome::kNotAString:
      return absl::InvalidArgumentError("manifest job_id is not a string");
    case JobIdFinder::Outcome::kMalformed:
      return absl::InvalidArgumentError("manifest is not a JSON object");
    case JobIdFinder::Outcome::kNoJobId:
      break;
  }
  if (!complete) return absl::InvalidArgumentError("manifest is not a JSON object");
  return std::string();
}

}  // namespace gpuctl::daemon
