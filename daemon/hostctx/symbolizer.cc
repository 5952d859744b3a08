#include "daemon/hostctx/symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/hostctx/perf_map.h"
#include "daemon/hostctx/proc_tasks.h"

namespace gpuctl::hostctx {

// What libdwfl's find_elf callback gets of a process (a module's userdata).
struct SymbolizerModuleContext {
  int root_fd = -1;
};

// One unwinding: what elfutils' thread callbacks read (dwfl_attach_state's
// argument, pointed at the sample being unwound).
struct UnwindInput {
  const CpuSample* sample = nullptr;
};

namespace {

constexpr size_t kMaxPerfMapBytes = 64 << 20;
constexpr size_t kMaxStatusBytes = 16 << 10;
constexpr size_t kMaxCachedFrames = 1 << 16;

// Opens `path` (absolute inside the process) beneath `root_fd` as if
// `root_fd` were "/": symlinks in a container resolve inside it.
int OpenInRoot(int root_fd, const std::string& path) {
  open_how how{};
  how.flags = O_RDONLY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const int fd = static_cast<int>(syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how)));
  if (fd >= 0 || errno != ENOSYS) return fd;
  // Kernels before 5.6: relative to the root, symlinks unconfined.
  return openat(root_fd, path.c_str() + path.find_first_not_of('/'), O_RDONLY | O_CLOEXEC);
}

std::string ReadFd(int fd, size_t max_bytes) {
  std::string out;
  char buffer[64 << 10];
  while (out.size() < max_bytes) {
    const ssize_t n = read(fd, buffer, std::min(sizeof(buffer), max_bytes - out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// The process's pid in its own pid namespace (the last NSpid field), which
// names its perf map.
pid_t NamespacePid(const std::string& proc_root, pid_t pid) {
  const std::string status =
      ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/status"), kMaxStatusBytes);
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "NSpid:")) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int value = 0;
    if (!fields.empty() && absl::SimpleAtoi(fields.back(), &value) && value > 0) return value;
  }
  return pid;
}

// C++ names as written in the source; others as they are.
std::string Demangle(const char* name) {
  if (name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return name;
  std::string out = demangled;
  free(demangled);  // NOLINT(cppcoreguidelines-no-malloc): __cxa_demangle's contract
  return out;
}

// libdwfl's find_elf: the module's file, opened inside the process's root.
int FindElfInRoot(Dwfl_Module* /*mod*/, void** userdata, const char* modname, Dwarf_Addr /*base*/,
                  char** file_name, Elf** /*elfp*/) {
  const auto* context = static_cast<const SymbolizerModuleContext*>(*userdata);
  if (context == nullptr || context->root_fd < 0 || modname == nullptr || modname[0] != '/') {
    return -1;  // [vdso], [heap], anonymous: nothing to open
  }
  const int fd = OpenInRoot(context->root_fd, modname);
  if (fd < 0) return -1;
  *file_name = strdup(modname);
  return fd;
}

int AttachContext(Dwfl_Module* /*mod*/, void** userdata, const char* /*name*/, Dwarf_Addr /*start*/,
                  void* arg) {
  *userdata = arg;
  return DWARF_CB_OK;
}

const Dwfl_Callbacks kCallbacks = {
    .find_elf = FindElfInRoot,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

pid_t NextThread(Dwfl* /*dwfl*/, void* dwfl_arg, void** thread_argp) {
  auto* input = static_cast<UnwindInput*>(dwfl_arg);
  if (*thread_argp != nullptr || input->sample == nullptr) return 0;  // one thread
  *thread_argp = input;
  return static_cast<pid_t>(input->sample->tid);
}

bool GetThread(Dwfl* /*dwfl*/, pid_t tid, void* dwfl_arg, void** thread_argp) {
  auto* input = static_cast<UnwindInput*>(dwfl_arg);
  if (input->sample == nullptr || tid != static_cast<pid_t>(input->sample->tid)) return false;
  *thread_argp = input;
  return true;
}

// Reads a word of the sampled stack: only what the sample copied, from its
// stack pointer up.
bool ReadStackWord(Dwfl* /*dwfl*/, Dwarf_Addr address, Dwarf_Word* result, void* dwfl_arg) {
  const CpuSample* sample = static_cast<UnwindInput*>(dwfl_arg)->sample;
  if (sample == nullptr || sample->user_regs.size() != kUnwindRegsCount) return false;
  const uint64_t sp = sample->user_regs[kRegSp];
  if (address < sp) return false;
  const uint64_t offset = address - sp;
  if (offset > sample->user_stack.size() ||
      sample->user_stack.size() - offset < sizeof(Dwarf_Word)) {
    return false;
  }
  std::memcpy(result, sample->user_stack.data() + offset, sizeof(Dwarf_Word));
  return true;
}

// The sampled registers in x86-64's DWARF numbering: rax, rdx, rcx, rbx,
// rsi, rdi, rbp, rsp, r8-r15, then the return address column (rip).
bool SetInitialRegisters(Dwfl_Thread* thread, void* thread_arg) {
  const CpuSample* sample = static_cast<UnwindInput*>(thread_arg)->sample;
  if (sample == nullptr || sample->user_regs.size() != kUnwindRegsCount) return false;
  const std::vector<uint64_t>& r = sample->user_regs;
  const Dwarf_Word dwarf[] = {r[kRegAx],  r[kRegDx],  r[kRegCx],  r[kRegBx],  r[kRegSi],
                              r[kRegDi],  r[kRegBp],  r[kRegSp],  r[kRegR8],  r[kRegR9],
                              r[kRegR10], r[kRegR11], r[kRegR12], r[kRegR13], r[kRegR14],
                              r[kRegR15], r[kRegIp]};
  if (!dwfl_thread_state_registers(thread, 0, std::size(dwarf), dwarf)) return false;
  dwfl_thread_state_register_pc(thread, r[kRegIp]);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = NextThread,
    .get_thread = GetThread,
    .memory_read = ReadStackWord,
    .set_initial_registers = SetInitialRegisters,
    .detach = nullptr,
    .thread_detach = nullptr,
};

int CollectFrame(Dwfl_Frame* frame, void* arg) {
  auto* pcs = static_cast<std::vector<uint64_t>*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(frame, &pc, &activation) || pc == 0) return DWARF_CB_ABORT;
  pcs->push_back(pc);
  return pcs->size() < kMaxCallchainDepth ? DWARF_CB_OK : DWARF_CB_ABORT;
}

}  // namespace

std::vector<uint64_t> SpliceCallChains(const std::vector<uint64_t>& unwound,
                                       const std::vector<uint64_t>& walked) {
  const std::vector<uint64_t>& deeper = unwound.size() > walked.size() ? unwound : walked;
  if (walked.empty()) return deeper;
  for (size_t k = unwound.size(); k-- > 1;) {
    auto at = std::find(walked.begin() + 1, walked.end(), unwound[k]);
    if (at == walked.end()) continue;
    std::vector<uint64_t> out(unwound.begin(), unwound.begin() + static_cast<ptrdiff_t>(k) + 1);
    out.insert(out.end(), at + 1, walked.end());
    return out.size() >= deeper.size() ? out : deeper;
  }
  return deeper;
}

std::vector<uint64_t> BestCallChain(const CpuSample& sample, FrameSymbolizer* symbolizer) {
  if (!sample.user_stack.empty() && symbolizer != nullptr) {
    std::vector<uint64_t> unwound = symbolizer->Unwind(sample);
    if (!unwound.empty()) return SpliceCallChains(unwound, sample.ips);
  }
  return sample.ips;
}

std::string FrameLabel(const Frame& frame, uint64_t address) {
  if (!frame.function.empty()) return frame.function;
  if (!frame.module.empty()) return absl::StrCat(frame.module, "+0x", absl::Hex(frame.offset));
  return absl::StrCat("0x", absl::Hex(address));
}

class Symbolizer::Process {
 public:
  Process(const std::string& proc_root, pid_t pid) {
    const std::string root = absl::StrCat(proc_root, "/", pid, "/root");
    context_.root_fd = open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    LoadModules(absl::StrCat(proc_root, "/", pid, "/maps"));
    if (context_.root_fd >= 0) {
      const int fd = OpenInRoot(context_.root_fd,
                                absl::StrCat("/tmp/perf-", NamespacePid(proc_root, pid), ".map"));
      if (fd >= 0) {
        perf_map_ = PerfMap::Parse(ReadFd(fd, kMaxPerfMapBytes));
        close(fd);
      }
    }
  }
  ~Process() {
    if (dwfl_ != nullptr) dwfl_end(dwfl_);
    if (context_.root_fd >= 0) close(context_.root_fd);
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool loaded() const { return dwfl_ != nullptr || perf_map_.size() > 0; }

  std::vector<uint64_t> Unwind(pid_t pid, const CpuSample& sample) {
    std::vector<uint64_t> pcs;
    if (dwfl_ == nullptr || sample.user_regs.size() != kUnwindRegsCount) return pcs;
    if (!attached_) {
      // Once per Dwfl: the machine comes from the first module's ELF.
      attached_ = true;
      can_unwind_ = dwfl_attach_state(dwfl_, nullptr, pid, &kThreadCallbacks, &unwind_input_);
    }
    if (!can_unwind_) return pcs;
    unwind_input_.sample = &sample;
    // A chain that stops early (its state beyond the stack copy, a frame
    // with no CFI) still gives the frames found so far.
    dwfl_getthread_frames(dwfl_, static_cast<pid_t>(sample.tid), CollectFrame, &pcs);
    unwind_input_.sample = nullptr;
    return pcs;
  }

  Frame Symbolize(uint64_t address) {
    if (auto it = cache_.find(address); it != cache_.end()) return it->second;
    Frame frame = Lookup(address);
    if (cache_.size() < kMaxCachedFrames) cache_.emplace(address, frame);
    return frame;
  }

 private:
  void LoadModules(const std::string& maps_path) {
    FILE* maps = fopen(maps_path.c_str(), "re");
    if (maps == nullptr) return;
    dwfl_ = dwfl_begin(&kCallbacks);
    if (dwfl_ != nullptr) {
      dwfl_report_begin(dwfl_);
      const int failed = dwfl_linux_proc_maps_report(dwfl_, maps);
      dwfl_report_end(dwfl_, nullptr, nullptr);
      if (failed != 0) {
        dwfl_end(dwfl_);
        dwfl_ = nullptr;
      } else {
        dwfl_getmodules(dwfl_, AttachContext, &context_, 0);
      }
    }
    fclose(maps);
  }

  Frame Lookup(uint64_t address) {
    Frame frame;
    // The perf map first: a JIT's code can lie inside the span libdwfl
    // gives a module (Node's code space sits between the segments of
    // /usr/bin/node), and the runtime knows what it compiled there.
    if (const PerfMap::Entry* entry = perf_map_.Find(address)) {
      frame.function = entry->name;
      frame.module = "[jit]";
      frame.offset = address - entry->start;
      return frame;
    }
    Dwfl_Module* module = dwfl_ != nullptr ? dwfl_addrmodule(dwfl_, address) : nullptr;
    if (module != nullptr) {
      Dwarf_Addr start = 0;
      const char* name =
          dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
      frame.module = name != nullptr ? name : "";
      frame.offset = address - start;
      GElf_Off symbol_offset = 0;
      GElf_Sym symbol;
      const char* function =
          dwfl_module_addrinfo(module, address, &symbol_offset, &symbol, nullptr, nullptr, nullptr);
      if (function != nullptr && function[0] != '\0') {
        frame.function = Demangle(function);
        frame.offset = symbol_offset;
      }
      return frame;
    }
    return frame;
  }

  SymbolizerModuleContext context_;
  Dwfl* dwfl_ = nullptr;
  bool attached_ = false;
  bool can_unwind_ = false;
  UnwindInput unwind_input_;
  PerfMap perf_map_;
  absl::flat_hash_map<uint64_t, Frame> cache_;
};

Symbolizer::Symbolizer(std::string proc_root) : proc_root_(std::move(proc_root)) {}

Symbolizer::~Symbolizer() = default;

Symbolizer::Process* Symbolizer::ProcessFor(pid_t pid) {
  auto [it, inserted] = processes_.try_emplace(pid);
  if (inserted) it->second = std::make_unique<Process>(proc_root_, pid);
  return it->second.get();
}

bool Symbolizer::LoadProcess(pid_t pid) { return ProcessFor(pid)->loaded(); }

Frame Symbolizer::Symbolize(pid_t pid, uint64_t address, bool is_return_address) {
  // A return address points after the call: look up the call instruction.
  const uint64_t lookup = is_return_address && address > 0 ? address - 1 : address;
  Frame frame = ProcessFor(pid)->Symbolize(lookup);
  return frame;
}

std::vector<uint64_t> Symbolizer::Unwind(const CpuSample& sample) {
  if (sample.user_stack.empty()) return {};
  const auto pid = static_cast<pid_t>(sample.pid);
  return ProcessFor(pid)->Unwind(pid, sample);
}

void Symbolizer::DropProcess(pid_t pid) { processes_.erase(pid); }

}  // namespace gpuctl::hostctx
