#ifndef GPUCTL_CLI_DOWNLOAD_PATHS_H_
#define GPUCTL_CLI_DOWNLOAD_PATHS_H_

// Where `gpuctl get` and `gpuctl trace -o DIR` save a trace. Every name that
// comes from a daemon (trace id, file name, host name) or is built from one
// becomes exactly one path component below the output directory, and only
// after IsSafeName accepted it.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuctl::cli {

// A name that is safe as one path component on every host: 1-255 characters
// of [A-Za-z0-9._-], not starting with '.'. Trace ids and file names from
// the daemon must pass before they touch the filesystem.
bool IsSafeName(absl::string_view name);

// A file of a trace as a daemon names it: a safe name other than
// "_gpuctl", or a manifest path "_gpuctl/<host>.json" with a safe <host>
// (gpuctl/v1/trace_layout.h), the one subdirectory a trace has.
bool IsSafeTracePath(absl::string_view path);

// Where a trace's file `path` (IsSafeTracePath) is saved below `directory`:
// in `directory` itself, or in its "_gpuctl" for a manifest, as `name`
// (a safe name). InvalidArgument for any other path.
struct SaveLocation {
  std::string directory;
  std::string name;
};
absl::StatusOr<SaveLocation> LocateSavedFile(absl::string_view directory, absl::string_view path);

// <output_root>/<trace_id>. InvalidArgument when the root is empty or the
// id is not a safe name.
absl::StatusOr<std::string> TraceDirectory(absl::string_view output_root,
                                           absl::string_view trace_id);

// <directory>/<name>, the final path of a downloaded file. InvalidArgument
// when the name is not safe.
absl::StatusOr<std::string> SavedFilePath(absl::string_view directory, absl::string_view name);

// The mkostemp(3) template of the temporary a file is received into, in the
// same directory: its name starts with '.', so it is never a safe name (no
// saved file can be mistaken for it), and stays within the 255 bytes a file
// name may have however long `name` is. InvalidArgument when the name is not
// safe.
absl::StatusOr<std::string> TemporaryFileTemplate(absl::string_view directory,
                                                  absl::string_view name);

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_DOWNLOAD_PATHS_H_
