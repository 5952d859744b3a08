/* libgpuctl: the in-process client of gpuctld.
 *
 * Attach by LD_PRELOAD=libgpuctl.so (nothing to call) or by linking and
 * calling gpuctl_init(). Every function is safe to call from any thread, at
 * any time, whether or not a daemon is running; none blocks or fails the
 * caller. Outside a capture window the annotation calls cost one relaxed
 * atomic load and record nothing.
 *
 * Steps: gpuctl_step/gpuctl_step_n always update the process's step
 * counter, which lives in a page shared with gpuctld (a sealed memfd passed
 * when the library registers), so the daemon knows every process's current
 * step, step time and mean step period without a message; this costs a few
 * relaxed atomic operations and a vDSO clock read, never a lock or a system
 * call. A fork child counts on a page of its own from the inherited value.
 * An iteration window (gpuctl trace --iterations N) opens in the call that
 * marks its first step, on the calling thread, so the step's work is
 * captured from its start, and closes in the call that marks the step after
 * its last; only while such a window waits or runs do step calls take a
 * short lock.
 *
 * Environment:
 *   GPUCTL_SOCKET   daemon socket (default /run/gpuctl/gpuctl.sock)
 *   GPUCTL_JOB_ID   job id (else SLURM_JOB_ID, else TORCHELASTIC_RUN_ID)
 *   RANK, LOCAL_RANK, WORLD_SIZE   distributed identity; when unset, from
 *                   Open MPI (OMPI_COMM_WORLD_RANK, _LOCAL_RANK, _SIZE),
 *                   then PMI (PMI_RANK, PMI_SIZE), then Slurm
 *                   (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS)
 *   GPUCTL_LABELS   labels for selection: "key=value,key2=value2"
 *   GPUCTL_LABELS_FILE   labels from a file in the Kubernetes downward-API
 *                   format (one key="value" per line, Go escapes), e.g. a
 *                   volume of metadata.labels
 *   POD_NAME, POD_NAMESPACE, NODE_NAME   labels k8s.pod, k8s.namespace,
 *                   k8s.node
 *     Labels: GPUCTL_LABELS wins over the file, the file over the pod
 *     variables. Keys are 1-253 of [A-Za-z0-9._/-], values at most 253
 *     printable ASCII characters, at most 64 labels; an entry breaking these
 *     rules is skipped (the process still attaches).
 *   GPUCTL_FORCE_INLINE=1   send payloads through the socket, not a memfd
 *   GPUCTL_DISABLE=1   do not start the agent from the preload constructor
 *   GPUCTL_QUIET=1   no stderr line when the daemon stays unreachable (by
 *                   default one line, once per process, after 10 s of
 *                   failing to attach, naming the socket and the error)
 *   GPUCTL_DEBUG=1   one stderr line per attach step (connect, Hello,
 *                   HelloAck, disconnect and why)
 *   GPUCTL_ATTACH_DELAY_MS   how long a process (or fork child) waits
 *                   before attaching, 0-60000 (default 500): what a shell
 *                   or shim execs on the way to the real program is gone
 *                   by then and never reaches the daemon
 *
 * Disconnected (no daemon yet, or it restarted), the library watches the
 * socket's directory and attaches as soon as the socket appears; the
 * backoff between attempts (100 ms doubling to 30 s) is only a fallback.
 */
#ifndef GPUCTL_GPUCTL_H_
#define GPUCTL_GPUCTL_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUCTL_EXPORT __attribute__((visibility("default")))

/* Starts the agent thread (idempotent). Returns 0, or -1 if the agent could
 * not be started (the process is unaffected either way). */
GPUCTL_EXPORT int gpuctl_init(void);

/* Stops the agent thread and closes the connection (idempotent). */
GPUCTL_EXPORT void gpuctl_shutdown(void);

/* Opens a named range on the calling thread; ranges nest. */
GPUCTL_EXPORT void gpuctl_range_push(const char* name);

/* Closes the innermost open range of the calling thread. */
GPUCTL_EXPORT void gpuctl_range_pop(void);

/* Marks the start of the next training step (the library counts from 0).
 * Call it before the step's work is issued. */
GPUCTL_EXPORT void gpuctl_step(void);

/* Marks the start of step `step` (the application's own step number); the
 * count goes on from it. */
GPUCTL_EXPORT void gpuctl_step_n(uint64_t step);

/* Version string of the library, e.g. "0.1.0". */
GPUCTL_EXPORT const char* gpuctl_version(void);

/* 1 while connected to a daemon, else 0. */
GPUCTL_EXPORT int gpuctl_connected(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUCTL_GPUCTL_H_ */
