#include "cli/doctor_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/connection.h"
#include "cli/doctor_inspect.h"
#include "cli/format.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/client_context.h"

namespace gpuctl::cli {
namespace {

// The installed library next to this gpuctl ($PREFIX/bin/gpuctl and
// $PREFIX/lib/gpuctl/libgpuctl.so), or the build tree's lib/libgpuctl.so.
std::string LibraryNextToGpuctl() {
  std::string exe(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size());
  if (n > 0 && static_cast<size_t>(n) < exe.size()) {
    exe.resize(static_cast<size_t>(n));
    const std::string bin = exe.substr(0, exe.rfind('/'));
    const std::string prefix = bin.substr(0, bin.rfind('/'));
    for (const std::string& candidate :
         {prefix + "/lib/gpuctl/libgpuctl.so", prefix + "/lib/libgpuctl.so"}) {
      struct stat st {};
      if (stat(candidate.c_str(), &st) == 0) return candidate;
    }
  }
  return "$PREFIX/lib/gpuctl/libgpuctl.so";
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

DaemonFacts AskDaemon(const DoctorOptions& options, const ProcessFacts& process,
                      const CliEnv& env) {
  DaemonFacts facts;
  facts.target = options.target;
  absl::StatusOr<std::unique_ptr<v1::Gpuctl::Stub>> stub = OpenStub(options.target, env);
  grpc::Status rpc;
  v1::GetStatusResponse status;
  v1::ListProcessesResponse list;
  if (stub.ok()) {
    grpc::ClientContext context;
    SetDeadline(context, env.rpc_timeout);
    rpc = (*stub)->GetStatus(&context, {}, &status);
  }
  if (stub.ok() && rpc.ok()) {
    v1::ListProcessesRequest request;
    request.set_include_rejected(true);
    grpc::ClientContext context;
    SetDeadline(context, env.rpc_timeout);
    rpc = (*stub)->ListProcesses(&context, request, &list);
  }
  if (!stub.ok() || !rpc.ok()) {
    facts.error = Printable(stub.ok() ? FromRpcStatus(rpc).message() : stub.status().message());
  } else {
    facts.reached = true;
    facts.host = status.host();
    facts.socket_path = status.socket_path();
    for (const v1::ProcessInfo& p : list.processes()) {
      if (p.pid() == options.pid) facts.attached = p;
    }
    for (const v1::RejectedAttachment& r : list.rejected()) {
      const absl::Time when = absl::FromUnixSeconds(r.time().seconds());
      if (r.pid() == options.pid) {
        // An earlier process with the same pid is not this one.
        if (RefusalMayBeOf(process, when)) facts.refusals.push_back(r);
      } else if (process.status.ok && r.uid() == process.creds.uid) {
        facts.uid_refusals.push_back(r);
      }
    }
  }
  // --socket wins: a daemon in a container reports its own mount's path.
  if (!options.socket.empty()) {
    facts.socket_path = options.socket;
    facts.socket_from_flag = true;
  }
  return facts;
}

std::string DiagnosisJson(const DoctorOptions& options, const ProcessFacts& process,
                          const std::optional<SocketFacts>& socket, const DaemonFacts& daemon,
                          const Diagnosis& d) {
  google::protobuf::Struct doc;
  auto& f = *doc.mutable_fields();
  f["pid"].set_number_value(options.pid);
  f["cause"].set_string_value(DoctorCauseName(d.cause));
  f["verdict"].set_string_value(d.verdict);
  f["fix"].set_string_value(d.fix);
  f["exitCode"].set_number_value(d.exit_code);
  google::protobuf::ListValue* findings = f["findings"].mutable_list_value();
  for (const DoctorFinding& finding : d.findings) {
    auto& item = *findings->add_values()->mutable_struct_value()->mutable_fields();
    item["check"].set_string_value(finding.check);
    item["ok"].set_bool_value(finding.ok);
    item["text"].set_string_value(finding.text);
  }
  f["libraryPath"].set_string_value(process.library_path.value_or(""));
  auto& environment = *f["environment"].mutable_struct_value()->mutable_fields();
  for (const auto& [name, value] : process.environment) {
    environment[name].set_string_value(Printable(value));
  }
  f["socketPath"].set_string_value(socket.has_value() ? socket->path : "");
  f["daemonSocketPath"].set_string_value(daemon.socket_path);
  f["daemonReached"].set_bool_value(daemon.reached);
  return ToJson(doc);
}

}  // namespace

int RunDoctor(const DoctorOptions& options, const CliEnv& env) {
  const ProcessFacts process = InspectProcess(options.pid, options.proc_root);
  std::optional<SocketFacts> socket;
  if (process.exists && !process.zombie) {
    std::optional<ProcessCredentials> creds;
    if (process.status.ok) creds = process.creds;
    socket = InspectSocket(SocketPathOf(process), creds);
  }
  const DaemonFacts daemon = AskDaemon(options, process, env);
  DiagnoseOptions diagnose;
  diagnose.library_hint =
      options.library_hint.empty() ? LibraryNextToGpuctl() : options.library_hint;
  const Diagnosis d = Diagnose(process, socket, daemon, diagnose);
  if (options.json) {
    *env.out << DiagnosisJson(options, process, socket, daemon, d) << "\n";
    return d.exit_code;
  }
  Table table({"RESULT", "CHECK", "FINDING"});
  for (const DoctorFinding& finding : d.findings) {
    table.AddRow({finding.ok ? "ok" : "problem", finding.check, finding.text});
  }
  table.Render(*env.out);
  *env.out << "verdict: " << d.verdict << "\n";
  if (!d.fix.empty()) *env.out << "fix: " << d.fix << "\n";
  return d.exit_code;
}

}  // namespace gpuctl::cli
