/* libgpuctl: the in-process client of gpuctld.
 *
 * Attach by LD_PRELOAD=libgpuctl.so (nothing to call) or by linking and
 * calling gpuctl_init(). Every function is safe to call from any thread, at
 * any time, whether or not a daemon is running; none blocks or fails the
 * caller. Outside a capture window the annotation calls cost one relaxed
 * atomic load and record nothing.
 *
 * Environment:
 *   GPUCTL_SOCKET   daemon socket (default /run/gpuctl/gpuctl.sock)
 *   GPUCTL_JOB_ID   job id (else SLURM_JOB_ID, else TORCHELASTIC_RUN_ID)
 *   RANK, LOCAL_RANK, WORLD_SIZE   distributed identity
 *   GPUCTL_DISABLE=1   do not start the agent from the preload constructor
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

/* Marks the start of the next training step (the library counts). */
GPUCTL_EXPORT void gpuctl_step(void);

/* Marks the start of step `step` (the application's own step number). */
GPUCTL_EXPORT void gpuctl_step_n(uint64_t step);

/* Version string of the library, e.g. "0.1.0". */
GPUCTL_EXPORT const char* gpuctl_version(void);

/* 1 while connected to a daemon, else 0. */
GPUCTL_EXPORT int gpuctl_connected(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUCTL_GPUCTL_H_ */
