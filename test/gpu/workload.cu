// The CUDA workload of the GPU validation (test/gpu/run.sh).
//
// Every iteration does the same known set of GPU operations on two streams:
// named kernels (C and C++ template names), pinned and pageable copies both
// ways, a memset, a cross-stream event wait and one launch of a CUDA graph of
// two kernels, inside NVTX ranges. Each iteration ends with
// cudaDeviceSynchronize() and then a gpuctl step mark, so every operation of
// an iteration lies between two step marks and a trace of N iterations must
// hold exactly N times the plan.
//
//   gpuctl_gpu_workload [--seconds S] [--iterations N] [--iter-ms M]
//
// --seconds S     stop after S seconds (default 60)
// --iterations N  stop after N iterations (default: no limit)
// --iter-ms M     target wall time of an iteration, filled with sleep
//                 (default 20)
//
// stdout: one line "WORKLOAD_PLAN <json>" once the GPU is set up (what one
// iteration does, in the names a trace uses), then "WORKLOAD_DONE <json>"
// at the end. SIGTERM/SIGINT end the loop after the current iteration.
// gpuctl's API is looked up at run time (LD_PRELOAD=libgpuctl.so, or
// GPUCTL_LIBRARY naming the file): without it the program runs unmarked.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

constexpr size_t kPinnedBytes = 1u << 20;     // H2D and D2H, pinned
constexpr size_t kPageableInBytes = 512u << 10;
constexpr size_t kPageableOutBytes = 256u << 10;
constexpr size_t kMemsetBytes = 768u << 10;
constexpr int kElems = kPinnedBytes / sizeof(float);
constexpr int kThreads = 256;
constexpr int kBlocks = (kElems + kThreads - 1) / kThreads;

volatile sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

#define CHECK(call)                                                             \
  do {                                                                          \
    cudaError_t err_ = (call);                                                  \
    if (err_ != cudaSuccess) {                                                  \
      fprintf(stderr, "workload: %s failed: %s (%d) at line %d\n", #call,       \
              cudaGetErrorString(err_), static_cast<int>(err_), __LINE__);      \
      exit(3);                                                                  \
    }                                                                           \
  } while (0)

}  // namespace

extern "C" __global__ void wl_fill(float* out, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value + static_cast<float>(i % 7);
}

extern "C" __global__ void wl_saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void wl_reduce(const float* in, float* out, int n) {
  __shared__ float partial[kThreads];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
}

extern "C" __global__ void wl_graph_a(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] * 0.5f + 1.0f;
}

extern "C" __global__ void wl_graph_b(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = data[i] - 0.25f;
}

// A C++ template: CUPTI reports its mangled name.
template <typename T>
__global__ void wl_scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}

namespace {

struct GpuctlApi {
  void (*step)() = nullptr;
};

GpuctlApi LoadGpuctl() {
  GpuctlApi api;
  const char* path = getenv("GPUCTL_LIBRARY");
  if (path != nullptr && *path != '\0' && dlopen(path, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    fprintf(stderr, "workload: GPUCTL_LIBRARY=%s: %s\n", path, dlerror());
  }
  api.step = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gpuctl_step"));
  return api;
}

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool ParseLong(const char* text, long min, long* out) {
  char* end = nullptr;
  long value = strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < min) return false;
  *out = value;
  return true;
}

struct Options {
  long seconds = 60;
  long iterations = -1;
  long iter_ms = 20;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    bool has_value = i + 1 < argc;
    if (strcmp(argv[i], "--seconds") == 0 && has_value) {
      if (!ParseLong(argv[++i], 1, &o->seconds)) return false;
    } else if (strcmp(argv[i], "--iterations") == 0 && has_value) {
      if (!ParseLong(argv[++i], 1, &o->iterations)) return false;
    } else if (strcmp(argv[i], "--iter-ms") == 0 && has_value) {
      if (!ParseLong(argv[++i], 0, &o->iter_ms)) return false;
    } else {
      return false;
    }
  }
  return true;
}

struct Buffers {
  float* h_pinned_in = nullptr;
  float* h_pinned_out = nullptr;
  char* h_pageable_in = nullptr;
  char* h_pageable_out = nullptr;
  float* d_a = nullptr;
  float* d_b = nullptr;
  float* d_c = nullptr;
  float* d_sum = nullptr;
};

Buffers Allocate() {
  Buffers b;
  CHECK(cudaMallocHost(&b.h_pinned_in, kPinnedBytes));
  CHECK(cudaMallocHost(&b.h_pinned_out, kPinnedBytes));
  b.h_pageable_in = static_cast<char*>(malloc(kPageableInBytes));
  b.h_pageable_out = static_cast<char*>(malloc(kPageableOutBytes));
  if (b.h_pageable_in == nullptr || b.h_pageable_out == nullptr) {
    fprintf(stderr, "workload: out of host memory\n");
    exit(3);
  }
  memset(b.h_pageable_in, 1, kPageableInBytes);
  for (int i = 0; i < kElems; ++i) b.h_pinned_in[i] = static_cast<float>(i % 13);
  CHECK(cudaMalloc(&b.d_a, kPinnedBytes));
  CHECK(cudaMalloc(&b.d_b, kPinnedBytes));
  CHECK(cudaMalloc(&b.d_c, kPinnedBytes));
  CHECK(cudaMalloc(&b.d_sum, sizeof(float)));
  return b;
}

cudaGraphExec_t BuildGraph(cudaStream_t stream, float* data) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  wl_graph_a<<<kBlocks, kThreads, 0, stream>>>(data, kElems);
  wl_graph_b<<<kBlocks, kThreads, 0, stream>>>(data, kElems);
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphDestroy(graph));
  return exec;
}

// One iteration; the plan printed at start-up must list exactly this.
void Iteration(const Buffers& b, cudaStream_t s0, cudaStream_t s1, cudaEvent_t ready,
               cudaGraphExec_t graph) {
  nvtxRangePushA("wl_iteration");

  nvtxRangePushA("wl_copies_in");
  CHECK(cudaMemcpyAsync(b.d_a, b.h_pinned_in, kPinnedBytes, cudaMemcpyHostToDevice, s0));
  CHECK(cudaMemcpy(b.d_b, b.h_pageable_in, kPageableInBytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemsetAsync(b.d_c, 0, kMemsetBytes, s1));
  nvtxRangePop();

  nvtxRangePushA("wl_compute");
  wl_fill<<<kBlocks, kThreads, 0, s1>>>(b.d_c, 2.0f, kElems);
  wl_scale<float><<<kBlocks, kThreads, 0, s1>>>(b.d_c, 1.5f, kElems);
  CHECK(cudaEventRecord(ready, s1));
  CHECK(cudaStreamWaitEvent(s0, ready, 0));
  wl_saxpy<<<kBlocks, kThreads, 0, s0>>>(b.d_a, b.d_c, 2.0f, kElems);
  wl_saxpy<<<kBlocks, kThreads, 0, s0>>>(b.d_a, b.d_c, -1.0f, kElems);
  CHECK(cudaMemsetAsync(b.d_sum, 0, sizeof(float), s0));
  wl_reduce<<<kBlocks, kThreads, 0, s0>>>(b.d_a, b.d_sum, kElems);
  CHECK(cudaGetLastError());
  nvtxMarkA("wl_mark");
  nvtxRangePop();

  nvtxRangePushA("wl_graph");
  CHECK(cudaGraphLaunch(graph, s1));
  nvtxRangePop();

  nvtxRangePushA("wl_copies_out");
  CHECK(cudaMemcpyAsync(b.h_pinned_out, b.d_a, kPinnedBytes, cudaMemcpyDeviceToHost, s0));
  CHECK(cudaMemcpy(b.h_pageable_out, b.d_b, kPageableOutBytes, cudaMemcpyDeviceToHost));
  nvtxRangePop();

  CHECK(cudaDeviceSynchronize());
  nvtxRangePop();
}

void PrintPlan(unsigned long long s0_id, unsigned long long s1_id) {
  // Names as the trace writes them (docs/trace-format.md); kernels by the
  // base name of the demangled name (no return type, no parameters).
  printf("WORKLOAD_PLAN {\"kernels\": {\"wl_fill\": 1, \"wl_scale<float>\": 1, "
         "\"wl_saxpy\": 2, \"wl_reduce\": 1, \"wl_graph_a\": 1, \"wl_graph_b\": 1}, "
         "\"graph_kernels\": [\"wl_graph_a\", \"wl_graph_b\"], \"graph_launches\": 1, "
         "\"memcpy\": {\"Memcpy HtoD (Pinned -> Device)\": [1, %zu], "
         "\"Memcpy HtoD (Pageable -> Device)\": [1, %zu], "
         "\"Memcpy DtoH (Device -> Pinned)\": [1, %zu], "
         "\"Memcpy DtoH (Device -> Pageable)\": [1, %zu]}, "
         "\"memset\": {\"Memset (Device)\": [2, %zu]}, "
         "\"nvtx_ranges\": {\"wl_iteration\": 1, \"wl_copies_in\": 1, \"wl_compute\": 1, "
         "\"wl_graph\": 1, \"wl_copies_out\": 1}, \"nvtx_marks\": {\"wl_mark\": 1}, "
         "\"streams\": [%llu, %llu], \"pid\": %d}\n",
         kPinnedBytes, kPageableInBytes, kPinnedBytes, kPageableOutBytes,
         kMemsetBytes + sizeof(float), s0_id, s1_id, static_cast<int>(getpid()));
  fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    fprintf(stderr, "usage: %s [--seconds S] [--iterations N] [--iter-ms M]\n", argv[0]);
    return 2;
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  GpuctlApi gpuctl = LoadGpuctl();

  CHECK(cudaSetDevice(0));
  Buffers b = Allocate();
  cudaStream_t s0, s1;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaEvent_t ready;
  CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  cudaGraphExec_t graph = BuildGraph(s1, b.d_c);
  CHECK(cudaDeviceSynchronize());
  unsigned long long s0_id = 0, s1_id = 0;
  CHECK(cudaStreamGetId(s0, &s0_id));
  CHECK(cudaStreamGetId(s1, &s1_id));
  PrintPlan(s0_id, s1_id);

  const double start = NowSeconds();
  long done = 0;
  while (!g_stop && (o.iterations < 0 || done < o.iterations) &&
         NowSeconds() - start < static_cast<double>(o.seconds)) {
    const double iter_start = NowSeconds();
    Iteration(b, s0, s1, ready, graph);
    ++done;
    if (gpuctl.step != nullptr) gpuctl.step();
    const double left = o.iter_ms / 1000.0 - (NowSeconds() - iter_start);
    if (left > 0) usleep(static_cast<useconds_t>(left * 1e6));
  }

  CHECK(cudaGraphExecDestroy(graph));
  CHECK(cudaEventDestroy(ready));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaStreamDestroy(s1));
  printf("WORKLOAD_DONE {\"iterations\": %ld, \"gpuctl_steps\": %s, \"seconds\": %.3f}\n", done,
         gpuctl.step != nullptr ? "true" : "false", NowSeconds() - start);
  fflush(stdout);
  return 0;
}
