/* The workload of test_host_context.py: a process whose CPU time and
 * blocking are known, traced with --activities cpu,sched.
 *
 *  - its main thread ("hot") spins in gpuctl_e2e_hot_loop;
 *  - thread "blocker" reads a pipe that thread "sleeper" writes one byte
 *    to after each nanosleep of --block-ms: both are off the CPU for that
 *    long, over and over;
 *  - a forked child ("helper", not attached to gpuctl) spins in
 *    gpuctl_e2e_helper_loop, as a DataLoader worker would.
 *
 * Built with frame pointers and without inlining (test/CMakeLists.txt), so
 * the sampled call chains name these functions. Prints "helper <pid>" and
 * "ready" on stdout. Runs until killed (the helper dies with it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int block_ms = 300;
static int pipe_fds[2];

__attribute__((noinline)) unsigned long gpuctl_e2e_hot_loop(unsigned long seed) {
  volatile unsigned long x = seed;
  for (int i = 0; i < 2000000; ++i) x = x * 6364136223846793005UL + 1442695040888963407UL;
  return x;
}

__attribute__((noinline)) unsigned long gpuctl_e2e_helper_loop(unsigned long seed) {
  volatile unsigned long x = seed;
  for (int i = 0; i < 2000000; ++i) x = x * 2862933555777941757UL + 3037000493UL;
  return x;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void* sleeper(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "sleeper");
  for (;;) {
    sleep_ms(block_ms);
    char byte = 1;
    if (write(pipe_fds[1], &byte, 1) != 1) abort();
  }
  return NULL;
}

static void* blocker(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "blocker");
  for (;;) {
    char byte;
    if (read(pipe_fds[0], &byte, 1) != 1) abort();
  }
  return NULL;
}

int main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], "--block-ms") == 0) block_ms = atoi(argv[++i]);
  }
  if (block_ms <= 0 || pipe(pipe_fds) != 0) return 2;
  pid_t helper = fork();
  if (helper < 0) return 2;
  if (helper == 0) {
    prctl(PR_SET_NAME, "helper");
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    unsigned long x = 1;
    /* Half of a CPU: the machine running the tests is small. */
    for (;;) {
      for (int i = 0; i < 5; ++i) x = gpuctl_e2e_helper_loop(x);
      sleep_ms(5);
    }
  }
  printf("helper %d\n", (int)helper);
  prctl(PR_SET_NAME, "hot");
  pthread_t threads[2];
  if (pthread_create(&threads[0], NULL, sleeper, NULL) != 0 ||
      pthread_create(&threads[1], NULL, blocker, NULL) != 0) {
    return 2;
  }
  printf("ready\n");
  fflush(stdout);
  unsigned long x = 1;
  for (;;) x = gpuctl_e2e_hot_loop(x);
}
