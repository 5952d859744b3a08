#ifndef GPUCTL_CLI_FLAG_SUGGESTION_H_
#define GPUCTL_CLI_FLAG_SUGGESTION_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuctl::cli {

// The option of `command` nearest to `typed` ("--durration" -> "--duration"),
// as typed on a command line; empty when none is near enough to be what was
// meant.
std::string NearestFlag(const CLI::App& command, absl::string_view typed);

// The message for arguments `command` did not expect (CLI11's ExtrasError),
// naming the first of them as typed in `args` (the command line, in order):
//   trace: unknown flag --durration; did you mean --duration?
//   trace: unexpected argument "extra"
std::string UnexpectedArgumentMessage(const CLI::App& command,
                                      const std::vector<std::string>& args);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_FLAG_SUGGESTION_H_
