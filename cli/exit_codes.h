#ifndef GPUCTL_CLI_EXIT_CODES_H_
#define GPUCTL_CLI_EXIT_CODES_H_

// Process exit codes of `gpuctl`. Scripts depend on these; they are part of
// the CLI's contract and are listed in docs/cli.md and the README. For the
// fleet commands (trace, ps) they summarize the hosts (FleetExitCode).
namespace gpuctl::cli {

// Every selected process delivered a trace and every download succeeded;
// for the other commands: the request succeeded.
inline constexpr int kExitOk = 0;
// The daemon answered, but some process did not deliver a trace (any result
// other than ok, or a selected process without a result), or a download
// failed (I/O error, a malformed or unsafe file from the daemon).
inline constexpr int kExitPartialFailure = 1;
// Bad usage: unknown or malformed flags, a bad duration, a missing required
// flag. Nothing was sent to the daemon.
inline constexpr int kExitUsage = 2;
// Nothing matched: the daemon answered NOT_FOUND (no attached process
// matched the selection, or no such trace), on every host. Its message is
// printed.
inline constexpr int kExitNothingMatched = 3;
// No daemon took the request: each could not be reached (connection
// refused, timed out), broke the stream before answering, or refused the
// request (INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, any other
// error).
inline constexpr int kExitDaemonError = 4;
// The user interrupted the command (Ctrl-C or SIGTERM); a running trace was
// cancelled on every daemon. 128 + SIGINT, as shells report it.
inline constexpr int kExitInterrupted = 130;

}  // namespace gpuctl::cli

#endif  // GPUCTL_CLI_EXIT_CODES_H_
