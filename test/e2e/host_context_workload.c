/* The workload of test_host_context.py: a process whose CPU time and
 * blocking are known, traced with --activities cpu,sched.
 *
 *  - its main thread ("hot") spins in gpuctl_e2e_hot_loop;
 *  - thread "blocker" reads a pipe that thread "sleeper" writes one byte
 *    to after each nanosleep of --block-ms: both are off the CPU for that
 *    long, over and over;
 *  - a forked child ("helper", not attached to gpuctl) spins in
 *    gpuctl_e2e_helper_loop, as a DataLoader worker would;
 *  - with --short-workers, thread "spawner" forks a worker every
 *    SPAWN_MS that spins SHORT_MS in gpuctl_e2e_short_worker_loop and
 *    exits, as a compiler subprocess would; every other one then execs
 *    this program (--exec-spin, without libgpuctl.so) to spin SHORT_MS
 *    more in gpuctl_e2e_execed_loop. Each is gone well before the window
 *    ends.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_MS 200
#define SHORT_MS 150

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

__attribute__((noinline)) unsigned long gpuctl_e2e_short_worker_loop(unsigned long seed) {
  volatile unsigned long x = seed;
  for (int i = 0; i < 200000; ++i) x = x * 3202034522624059733UL + 1;
  return x;
}

__attribute__((noinline)) unsigned long gpuctl_e2e_execed_loop(unsigned long seed) {
  volatile unsigned long x = seed;
  for (int i = 0; i < 200000; ++i) x = x * 4354685564936845319UL + 1;
  return x;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long spin_for(unsigned long (*loop)(unsigned long), int ms) {
  const long long end = now_ms() + ms;
  unsigned long x = 1;
  while (now_ms() < end) x = loop(x);
  return x;
}

static const char* self_path;

static void* spawner(void* arg) {
  (void)arg;
  prctl(PR_SET_NAME, "spawner");
  for (int n = 0;; ++n) {
    pid_t worker = fork();
    if (worker == 0) {
      spin_for(gpuctl_e2e_short_worker_loop, SHORT_MS);
      if (n % 2 == 1) {
        char ms[16];
        char* const no_env[] = {NULL};
        snprintf(ms, sizeof(ms), "%d", SHORT_MS);
        execle(self_path, self_path, "--exec-spin", ms, (char*)NULL, no_env);
        _exit(127);
      }
      _exit(0);
    }
    sleep_ms(SPAWN_MS);
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
  }
  return NULL;
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
  int short_workers = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--short-workers") == 0) short_workers = 1;
    if (i + 1 >= argc) continue;
    if (strcmp(argv[i], "--block-ms") == 0) block_ms = atoi(argv[++i]);
    if (strcmp(argv[i], "--exec-spin") == 0) {
      spin_for(gpuctl_e2e_execed_loop, atoi(argv[++i]));
      return 0;
    }
  }
  self_path = "/proc/self/exe";
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
  pthread_t threads[3];
  if (pthread_create(&threads[0], NULL, sleeper, NULL) != 0 ||
      pthread_create(&threads[1], NULL, blocker, NULL) != 0 ||
      (short_workers && pthread_create(&threads[2], NULL, spawner, NULL) != 0)) {
    return 2;
  }
  printf("ready\n");
  fflush(stdout);
  unsigned long x = 1;
  for (;;) x = gpuctl_e2e_hot_loop(x);
}
