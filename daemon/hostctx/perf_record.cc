#include "daemon/hostctx/perf_record.h"

#include <linux/perf_event.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuctl::hostctx {
namespace {

// Reads fixed-size fields in order, failing once the record runs out.
class FieldReader {
 public:
  explicit FieldReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename T>
  bool Read(T* value) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  size_t remaining() const { return bytes_.size() - pos_; }
  // The next `n` bytes, or false when fewer are left.
  bool Take(size_t n, absl::Span<const uint8_t>* out) {
    if (remaining() < n) return false;
    *out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  absl::Span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

struct SampleId {
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time_ns = 0;
};

bool ReadSampleId(FieldReader* reader, SampleId* id) {
  return reader->Read(&id->pid) && reader->Read(&id->tid) && reader->Read(&id->time_ns);
}

// PERF_SAMPLE_REGS_USER: the ABI (0: no user registers, the sample was
// taken in the kernel with no user context) and, for any other ABI, one
// u64 per bit of the mask.
absl::Status ReadUserRegs(FieldReader* reader, CpuSample* sample) {
  uint64_t abi = 0;
  if (!reader->Read(&abi)) return absl::InvalidArgumentError("sample record ends before its ABI");
  if (abi == PERF_SAMPLE_REGS_ABI_NONE) return absl::OkStatus();
  sample->user_regs.resize(kUnwindRegsCount);
  for (uint64_t& reg : sample->user_regs) {
    if (!reader->Read(&reg)) {
      sample->user_regs.clear();
      return absl::InvalidArgumentError("sample record ends inside its user registers");
    }
  }
  return absl::OkStatus();
}

// PERF_SAMPLE_STACK_USER: the size copied, the bytes, and (when the size
// is not 0) how many of them the stack really held (dyn_size).
absl::Status ReadUserStack(FieldReader* reader, CpuSample* sample) {
  uint64_t size = 0;
  if (!reader->Read(&size)) {
    return absl::InvalidArgumentError("sample record ends before its stack size");
  }
  if (size == 0) return absl::OkStatus();
  absl::Span<const uint8_t> bytes;
  uint64_t dyn_size = 0;
  if (size > reader->remaining() || !reader->Take(size, &bytes) || !reader->Read(&dyn_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample record announces ", size, " bytes of stack and has not that room"));
  }
  if (dyn_size > size) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample record's stack holds ", dyn_size, " of ", size, " bytes copied"));
  }
  sample->user_stack.assign(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(dyn_size));
  return absl::OkStatus();
}

absl::StatusOr<PerfRecord> ParseSample(FieldReader* reader, const SampleLayout& layout) {
  CpuSample sample;
  SampleId id;
  uint64_t nr = 0;
  if (!ReadSampleId(reader, &id) || !reader->Read(&nr)) {
    return absl::InvalidArgumentError("sample record shorter than its fixed fields");
  }
  if (nr > reader->remaining() / sizeof(uint64_t)) {
    return absl::InvalidArgumentError(absl::StrCat("sample record announces ", nr,
                                                   " call chain entries, has room for ",
                                                   reader->remaining() / sizeof(uint64_t)));
  }
  sample.pid = id.pid;
  sample.tid = id.tid;
  sample.time_ns = id.time_ns;
  sample.ips.reserve(std::min<uint64_t>(nr, kMaxCallchainDepth));
  for (uint64_t i = 0; i < nr; ++i) {
    uint64_t ip = 0;
    reader->Read(&ip);
    if (ip >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) continue;  // a context marker
    if (sample.ips.size() < kMaxCallchainDepth) sample.ips.push_back(ip);
  }
  if (layout.user_regs) {
    if (absl::Status s = ReadUserRegs(reader, &sample); !s.ok()) return s;
  }
  if (layout.user_stack) {
    if (absl::Status s = ReadUserStack(reader, &sample); !s.ok()) return s;
  }
  // An unwinder needs both, together.
  if (sample.user_regs.empty() || sample.user_stack.empty()) {
    sample.user_regs.clear();
    sample.user_stack.clear();
  }
  return PerfRecord(std::move(sample));
}

// The sample_id_all trailer of a non-sample record: the last
// kSampleIdBytes, after the record's variable part (`reader`'s rest).
constexpr size_t kSampleIdBytes = 16;  // pid, tid, time

bool ReadTrailingSampleId(FieldReader* reader, absl::Span<const uint8_t>* variable, SampleId* id) {
  if (reader->remaining() < kSampleIdBytes) return false;
  return reader->Take(reader->remaining() - kSampleIdBytes, variable) && ReadSampleId(reader, id);
}

absl::StatusOr<PerfRecord> ParseMmap2(FieldReader* reader) {
  MmapRecord mmap;
  uint64_t inode_generation = 0;
  if (!reader->Read(&mmap.pid) || !reader->Read(&mmap.tid) || !reader->Read(&mmap.start) ||
      !reader->Read(&mmap.length) || !reader->Read(&mmap.pgoff) || !reader->Read(&mmap.dev_major) ||
      !reader->Read(&mmap.dev_minor) || !reader->Read(&mmap.inode) ||
      !reader->Read(&inode_generation) || !reader->Read(&mmap.prot) || !reader->Read(&mmap.flags)) {
    return absl::InvalidArgumentError("mmap record shorter than its fixed fields");
  }
  absl::Span<const uint8_t> name;
  SampleId id;
  if (!ReadTrailingSampleId(reader, &name, &id)) {
    return absl::InvalidArgumentError("mmap record shorter than its sample id");
  }
  const auto* chars = reinterpret_cast<const char*>(name.data());  // NOLINT: bytes as text
  const size_t length = strnlen(chars, name.size());
  if (length == 0 || length > kMaxMmapPathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("mmap record's file name has ", length, " bytes"));
  }
  if (mmap.length == 0 || mmap.start + mmap.length < mmap.start) {
    return absl::InvalidArgumentError("mmap record's range is empty or wraps around");
  }
  mmap.path.assign(chars, length);
  mmap.time_ns = id.time_ns;
  return PerfRecord(std::move(mmap));
}

absl::StatusOr<PerfRecord> ParseComm(FieldReader* reader, uint16_t misc) {
  ExecRecord exec;
  absl::Span<const uint8_t> comm;
  SampleId id;
  if (!reader->Read(&exec.pid) || !reader->Read(&exec.tid) ||
      !ReadTrailingSampleId(reader, &comm, &id)) {
    return absl::InvalidArgumentError("comm record shorter than its fields");
  }
  if ((misc & PERF_RECORD_MISC_COMM_EXEC) == 0) return PerfRecord(OtherRecord{PERF_RECORD_COMM});
  exec.time_ns = id.time_ns;
  const auto* chars = reinterpret_cast<const char*>(comm.data());  // NOLINT: bytes as text
  exec.comm.assign(chars, strnlen(chars, std::min(comm.size(), kMaxCommBytes)));
  return PerfRecord(std::move(exec));
}

}  // namespace

absl::StatusOr<PerfRecord> ParseRecord(absl::Span<const uint8_t> record,
                                       const SampleLayout& layout) {
  perf_event_header header{};
  if (record.size() < sizeof(header)) {
    return absl::InvalidArgumentError(
        absl::StrCat("record of ", record.size(), " bytes is shorter than its header"));
  }
  std::memcpy(&header, record.data(), sizeof(header));
  if (header.size != record.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("record header says ", header.size, " bytes, the record has ", record.size()));
  }
  FieldReader reader(record.subspan(sizeof(header)));
  switch (header.type) {
    case PERF_RECORD_SAMPLE: {
      const bool at_switch =
          (header.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
      absl::StatusOr<PerfRecord> sample =
          ParseSample(&reader, at_switch ? kSwitchStackLayout : layout);
      if (sample.ok() && at_switch) std::get<CpuSample>(*sample).at_switch = true;
      return sample;
    }
    case PERF_RECORD_SWITCH: {
      SampleId id;
      if (!ReadSampleId(&reader, &id)) {
        return absl::InvalidArgumentError("switch record shorter than its sample id");
      }
      ContextSwitch sw;
      sw.pid = id.pid;
      sw.tid = id.tid;
      sw.time_ns = id.time_ns;
      sw.out = (header.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
      sw.preempted = sw.out && (header.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
      return PerfRecord(sw);
    }
    case PERF_RECORD_SWITCH_CPU_WIDE: {
      CpuSwitch sw;
      SampleId id;
      if (!reader.Read(&sw.next_prev_pid) || !reader.Read(&sw.next_prev_tid) ||
          !ReadSampleId(&reader, &id) || !reader.Read(&sw.cpu)) {
        return absl::InvalidArgumentError("CPU-wide switch record shorter than its fields");
      }
      sw.pid = id.pid;
      sw.tid = id.tid;
      sw.time_ns = id.time_ns;
      sw.out = (header.misc & PERF_RECORD_MISC_SWITCH_OUT) != 0;
      sw.preempted = sw.out && (header.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) != 0;
      return PerfRecord(sw);
    }
    case PERF_RECORD_MMAP2:
      return ParseMmap2(&reader);
    case PERF_RECORD_COMM:
      return ParseComm(&reader, header.misc);
    case PERF_RECORD_FORK: {
      ForkRecord fork;
      SampleId id;
      if (!reader.Read(&fork.pid) || !reader.Read(&fork.ppid) || !reader.Read(&fork.tid) ||
          !reader.Read(&fork.ptid) || !reader.Read(&fork.time_ns) || !ReadSampleId(&reader, &id)) {
        return absl::InvalidArgumentError("fork record shorter than its fields");
      }
      return PerfRecord(fork);
    }
    case PERF_RECORD_LOST: {
      uint64_t id = 0;
      LostRecords lost;
      if (!reader.Read(&id) || !reader.Read(&lost.count)) {
        return absl::InvalidArgumentError("lost record shorter than its fields");
      }
      return PerfRecord(lost);
    }
    default:
      return PerfRecord(OtherRecord{header.type});
  }
}

uint64_t DrainRing(absl::Span<const uint8_t> data, uint64_t head, uint64_t tail,
                   absl::FunctionRef<void(absl::Span<const uint8_t>)> on_record,
                   RingDrainStats* stats) {
  const uint64_t size = data.size();
  if (size == 0 || (size & (size - 1)) != 0 || head - tail > size) {
    // Not a ring, or the writer overran the reader: nothing in it can be
    // trusted to start on a record boundary.
    if (head != tail) ++stats->corrupt;
    return head;
  }
  std::vector<uint8_t> record;
  auto copy_out = [&](uint64_t from, size_t n, uint8_t* to) {
    const uint64_t offset = from & (size - 1);
    const size_t first = static_cast<size_t>(std::min<uint64_t>(n, size - offset));
    std::memcpy(to, data.data() + offset, first);
    std::memcpy(to + first, data.data(), n - first);
  };
  while (tail != head) {
    const uint64_t available = head - tail;
    perf_event_header header{};
    if (available < sizeof(header)) {
      ++stats->corrupt;
      return head;
    }
    uint8_t header_bytes[sizeof(header)];
    copy_out(tail, sizeof(header), header_bytes);
    std::memcpy(&header, header_bytes, sizeof(header));
    if (header.size < sizeof(header) || header.size > available) {
      ++stats->corrupt;
      return head;
    }
    record.resize(header.size);
    copy_out(tail, header.size, record.data());
    ++stats->records;
    on_record(record);
    tail += header.size;
  }
  return tail;
}

}  // namespace gpuctl::hostctx
