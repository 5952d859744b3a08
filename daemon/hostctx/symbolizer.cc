#include "daemon/hostctx/symbolizer.h"

#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/common/posix_file.h"
#include "daemon/hostctx/mapped_files.h"
#include "daemon/hostctx/perf_map.h"

namespace gpuctl::hostctx {

// What libdwfl's find_elf callback gets of a process (a module's userdata).
struct SymbolizerModuleContext {
  int root_fd = -1;
  // The daemon's own vDSO image, which is the [vdso] of every 64-bit
  // process on this kernel; empty when unknown.
  std::vector<char>* vdso = nullptr;
};

// One unwinding: what elfutils' thread callbacks read (dwfl_attach_state's
// argument, pointed at the sample being unwound).
struct UnwindInput {
  const CpuSample* sample = nullptr;
};

namespace {

constexpr size_t kMaxPerfMapBytes = 64 << 20;
constexpr size_t kMaxCachedFrames = 1 << 16;
constexpr size_t kMaxLiveMappings = 1 << 16;

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
                  char** file_name, Elf** elfp) {
  const auto* context = static_cast<const SymbolizerModuleContext*>(*userdata);
  if (context == nullptr || modname == nullptr) return -1;
  if (std::strcmp(modname, kVdsoName) == 0 && context->vdso != nullptr && !context->vdso->empty()) {
    *elfp = elf_memory(context->vdso->data(), context->vdso->size());
    return -1;
  }
  if (context->root_fd < 0 || modname[0] != '/') return -1;
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

// One address space of a process (until or from an exec): its mappings,
// reported to libdwfl at the first lookup.
struct Symbolizer::Space {
  Space() = default;
  ~Space() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
  Space(const Space&) = delete;
  Space& operator=(const Space&) = delete;

  uint64_t start_ns = 0;
  std::vector<Mapping> made;  // in the order made; LiveMappings at report
  std::vector<Mapping> mappings;
  bool reported = false;
  Dwfl* dwfl = nullptr;
  bool attached = false;
  bool can_unwind = false;
  absl::flat_hash_map<uint64_t, Frame> cache;
};

class Symbolizer::Process {
 public:
  Process(ProcessImage image, std::vector<char>* vdso) : root_(std::move(image.root)) {
    context_.root_fd = root_ != nullptr ? root_->get() : -1;
    context_.vdso = vdso;
    BuildSpaces(std::move(image.changes));
    if (context_.root_fd >= 0) {
      UniqueFd fd(
          OpenInRoot(context_.root_fd, absl::StrCat("/tmp/perf-", image.namespace_pid, ".map")));
      if (fd.get() >= 0) perf_map_ = PerfMap::Parse(ReadFdUpTo(fd.get(), kMaxPerfMapBytes));
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool loaded() const { return has_mappings_ || perf_map_.size() > 0; }

  // Mappings of the process read now that it still runs: they fill what
  // its records missed (a ring that overflowed in a burst of mmaps) in its
  // last address space, below what was recorded.
  void FillLastSpace(std::vector<Mapping> live) {
    if (live.empty() || spaces_.back()->reported) return;
    has_mappings_ = true;
    std::vector<Mapping>& made = spaces_.back()->made;
    made.insert(made.begin(), std::make_move_iterator(live.begin()),
                std::make_move_iterator(live.end()));
  }

  // The space that held at `time_ns`: the last one started by then.
  uint32_t SpaceAt(uint64_t time_ns) const {
    uint32_t index = 0;
    while (index + 1 < spaces_.size() && spaces_[index + 1]->start_ns <= time_ns) ++index;
    return index;
  }

  std::vector<uint64_t> Unwind(pid_t pid, const CpuSample& sample) {
    std::vector<uint64_t> pcs;
    Space* space = Reported(SpaceAt(sample.time_ns));
    if (space == nullptr || space->dwfl == nullptr || sample.user_regs.size() != kUnwindRegsCount) {
      return pcs;
    }
    if (!space->attached) {
      // Once per Dwfl: the machine comes from the first module's ELF.
      space->attached = true;
      space->can_unwind =
          dwfl_attach_state(space->dwfl, nullptr, pid, &kThreadCallbacks, &unwind_input_);
    }
    if (!space->can_unwind) return pcs;
    unwind_input_.sample = &sample;
    // A chain that stops early (its state beyond the stack copy, a frame
    // with no CFI) still gives the frames found so far.
    dwfl_getthread_frames(space->dwfl, static_cast<pid_t>(sample.tid), CollectFrame, &pcs);
    unwind_input_.sample = nullptr;
    return pcs;
  }

  Frame Symbolize(uint32_t space_index, uint64_t address) {
    Space* space = Reported(space_index);
    if (space == nullptr) return Lookup(nullptr, address);
    if (auto it = space->cache.find(address); it != space->cache.end()) return it->second;
    Frame frame = Lookup(space, address);
    if (space->cache.size() < kMaxCachedFrames) space->cache.emplace(address, frame);
    return frame;
  }

 private:
  // Replays the changes in time order: an exec starts a space; the first
  // space starts at 0, so a sample before any change uses it.
  void BuildSpaces(std::vector<AddressSpaceChange> changes) {
    std::stable_sort(changes.begin(), changes.end(),
                     [](const AddressSpaceChange& a, const AddressSpaceChange& b) {
                       return a.time_ns < b.time_ns;
                     });
    spaces_.push_back(std::make_unique<Space>());
    for (AddressSpaceChange& change : changes) {
      if (change.exec) {
        spaces_.push_back(std::make_unique<Space>());
        spaces_.back()->start_ns = change.time_ns;
      }
      for (Mapping& mapping : change.mappings) {
        has_mappings_ = true;
        spaces_.back()->made.push_back(std::move(mapping));
      }
    }
  }

  Space* Reported(uint32_t index) {
    if (index >= spaces_.size()) return nullptr;
    Space* space = spaces_[index].get();
    if (!space->reported) {
      space->reported = true;
      space->mappings = LiveMappings(std::move(space->made));
      space->made = {};
      space->dwfl = ReportModules(space->mappings);
    }
    return space;
  }

  // The modules of `mappings` (sorted, disjoint): each file's consecutive
  // mappings are one module, as dwfl_linux_proc_maps_report groups them.
  Dwfl* ReportModules(const std::vector<Mapping>& mappings) {
    if (mappings.empty()) return nullptr;
    Dwfl* dwfl = dwfl_begin(&kCallbacks);
    if (dwfl == nullptr) return nullptr;
    dwfl_report_begin(dwfl);
    for (size_t i = 0; i < mappings.size();) {
      const Mapping& first = mappings[i];
      uint64_t high = first.end;
      for (++i; i < mappings.size() && SameFile(mappings[i], first); ++i) high = mappings[i].end;
      if (first.path == kVdsoName) {
        // The daemon's image stands for it when the sizes agree.
        if (context_.vdso != nullptr && high - first.start == context_.vdso->size()) {
          dwfl_report_module(dwfl, kVdsoName, first.start, high);
        }
        continue;
      }
      std::optional<uint64_t> low = ModuleLowAddress(context_.root_fd, first);
      // A module that overlaps one reported is refused; the rest stay.
      if (low && *low < high) dwfl_report_module(dwfl, first.path.c_str(), *low, high);
    }
    dwfl_report_end(dwfl, nullptr, nullptr);
    dwfl_getmodules(dwfl, AttachContext, &context_, 0);
    return dwfl;
  }

  Frame Lookup(Space* space, uint64_t address) {
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
    if (space == nullptr) return frame;
    Dwfl_Module* module = space->dwfl != nullptr ? dwfl_addrmodule(space->dwfl, address) : nullptr;
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
    // A mapping libdwfl has no module for (a [vdso] of another size, a
    // file not reported) still names its frames' place.
    auto after = std::upper_bound(space->mappings.begin(), space->mappings.end(), address,
                                  [](uint64_t a, const Mapping& m) { return a < m.start; });
    if (after != space->mappings.begin() && address < std::prev(after)->end) {
      const Mapping& mapping = *std::prev(after);
      frame.module = mapping.path;
      frame.offset = address - mapping.start + (mapping.path == kVdsoName ? 0 : mapping.pgoff);
    }
    return frame;
  }

  std::shared_ptr<const UniqueFd> root_;
  SymbolizerModuleContext context_;
  bool has_mappings_ = false;
  std::vector<std::unique_ptr<Space>> spaces_;
  UnwindInput unwind_input_;
  PerfMap perf_map_;
};

Symbolizer::Symbolizer(std::string proc_root, absl::flat_hash_map<pid_t, ProcessImage> images)
    : proc_root_(std::move(proc_root)), images_(std::move(images)), vdso_(ReadOwnVdso()) {}

Symbolizer::~Symbolizer() = default;

Symbolizer::Process* Symbolizer::ProcessFor(pid_t pid) {
  auto it = processes_.find(pid);
  if (it != processes_.end()) return it->second.get();
  auto recorded = images_.find(pid);
  if (recorded == images_.end()) {
    // Not recorded by a capture: read now, while it runs.
    ProcessImage live = SnapshotProcess(proc_root_, pid, 0, kMaxLiveMappings, &live_roots_);
    return processes_.emplace(pid, std::make_unique<Process>(std::move(live), &vdso_))
        .first->second.get();
  }
  const uint64_t start_ticks = recorded->second.start_ticks;
  auto process = std::make_unique<Process>(std::move(recorded->second), &vdso_);
  images_.erase(recorded);
  if (start_ticks != 0 && StartTicksOf(proc_root_, pid) == start_ticks) {
    ProcessImage live = SnapshotProcess(proc_root_, pid, 0, kMaxLiveMappings, &live_roots_);
    if (!live.changes.empty()) process->FillLastSpace(std::move(live.changes[0].mappings));
  }
  return processes_.emplace(pid, std::move(process)).first->second.get();
}

bool Symbolizer::LoadProcess(pid_t pid) { return ProcessFor(pid)->loaded(); }

uint32_t Symbolizer::AddressSpaceAt(pid_t pid, uint64_t time_ns) {
  return ProcessFor(pid)->SpaceAt(time_ns);
}

Frame Symbolizer::Symbolize(pid_t pid, uint32_t space, uint64_t address, bool is_return_address) {
  // A return address points after the call: look up the call instruction.
  const uint64_t lookup = is_return_address && address > 0 ? address - 1 : address;
  return ProcessFor(pid)->Symbolize(space, lookup);
}

std::vector<uint64_t> Symbolizer::Unwind(const CpuSample& sample) {
  if (sample.user_stack.empty()) return {};
  const auto pid = static_cast<pid_t>(sample.pid);
  return ProcessFor(pid)->Unwind(pid, sample);
}

void Symbolizer::DropProcess(pid_t pid) { processes_.erase(pid); }

}  // namespace gpuctl::hostctx
