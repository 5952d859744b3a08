// Process labels for Hello.labels, from the environment and a Kubernetes
// downward-API labels file.
//
// Sources, highest precedence first (a key keeps the value of the first
// source that sets it):
//   GPUCTL_LABELS       "key=value,key2=value2"
//   GPUCTL_LABELS_FILE  a file in the downward-API format of
//                       metadata.labels: one `key="value"` per line, the
//                       value quoted with Go escapes (\" \\ \n \t \xHH ...)
//   POD_NAME, POD_NAMESPACE, NODE_NAME  -> k8s.pod, k8s.namespace, k8s.node
// Every pair must follow ipc.proto's rules (key: 1-253 bytes of
// [A-Za-z0-9._/-]; value: at most 253 bytes of printable ASCII; at most 64
// pairs). A pair breaking them, an unreadable file or a malformed line is
// skipped: labels never keep a process from attaching.
#ifndef GPUCTL_CLIENT_LIB_SRC_LABELS_H_
#define GPUCTL_CLIENT_LIB_SRC_LABELS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client_lib/src/process_identity.h"
#include "gpuctl/v1/limits.h"

namespace gpuctl::client {

// ipc.proto's label rules (proto/gpuctl/v1/limits.h).
using ipc::kMaxLabelKeyBytes;
using ipc::kMaxLabels;
using ipc::kMaxLabelValueBytes;
// Larger labels files are read up to this size (the rest is ignored).
inline constexpr size_t kMaxLabelsFileBytes = 64 * 1024;

using LabelPair = std::pair<std::string, std::string>;

bool IsValidLabel(std::string_view key, std::string_view value);

// "k=v,k2=v2" -> pairs; entries are trimmed of spaces and split at their
// first '='. Entries without '=' are skipped; validity is not checked here.
std::vector<LabelPair> ParseLabelList(std::string_view text);

// The downward-API format -> pairs. Lines that are not `key="value"` with
// a well-formed quoted value are skipped; validity is not checked here
// (an escape that yields a non-ASCII character makes the value invalid).
std::vector<LabelPair> ParseDownwardApiLabels(std::string_view text);

// All sources merged as described above, as "key=value" strings.
std::vector<std::string> CollectLabels(const EnvLookup& env);

}  // namespace gpuctl::client

#endif  // GPUCTL_CLIENT_LIB_SRC_LABELS_H_
