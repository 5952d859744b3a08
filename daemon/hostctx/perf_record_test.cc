#include "daemon/hostctx/perf_record.h"

#include <linux/perf_event.h>

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuctl::hostctx {
namespace {

// Builds one record from its header fields and 64-bit words.
class RecordBytes {
 public:
  RecordBytes(uint32_t type, uint16_t misc) : type_(type), misc_(misc) {}
  RecordBytes& U32Pair(uint32_t a, uint32_t b) {
    Append(&a, 4);
    Append(&b, 4);
    return *this;
  }
  RecordBytes& U64(uint64_t v) {
    Append(&v, 8);
    return *this;
  }
  // `text` and its NUL, padded to 8 bytes as the kernel does.
  RecordBytes& Text(const std::string& text) {
    std::vector<uint8_t> padded((text.size() + 8) / 8 * 8, 0);
    std::memcpy(padded.data(), text.data(), text.size());
    Append(padded.data(), padded.size());
    return *this;
  }
  // With the header's size set to the real size plus `size_delta`.
  std::vector<uint8_t> Build(int size_delta = 0) const {
    perf_event_header header{type_, misc_,
                             static_cast<uint16_t>(sizeof(header) + body_.size() + size_delta)};
    std::vector<uint8_t> out(sizeof(header) + body_.size());
    std::memcpy(out.data(), &header, sizeof(header));
    if (!body_.empty()) std::memcpy(out.data() + sizeof(header), body_.data(), body_.size());
    return out;
  }

 private:
  void Append(const void* p, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    body_.insert(body_.end(), bytes, bytes + n);
  }
  uint32_t type_;
  uint16_t misc_;
  std::vector<uint8_t> body_;
};

TEST(ParseRecordTest, SampleKeepsUserFramesAndDropsContextMarkers) {
  const auto bytes = RecordBytes(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER)
                         .U32Pair(10, 11)
                         .U64(123456789)
                         .U64(3)
                         .U64(static_cast<uint64_t>(PERF_CONTEXT_USER))
                         .U64(0x401000)
                         .U64(0x402000)
                         .Build();
  auto record = ParseRecord(bytes);
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& sample = std::get<CpuSample>(*record);
  EXPECT_EQ(sample.pid, 10u);
  EXPECT_EQ(sample.tid, 11u);
  EXPECT_EQ(sample.time_ns, 123456789u);
  EXPECT_EQ(sample.ips, (std::vector<uint64_t>{0x401000, 0x402000}));
}

// A sample with user registers and a stack copy (dwarf unwinding): the
// registers in the mask's order, and the stack cut to what it really held.
TEST(ParseRecordTest, SampleCarriesUserRegistersAndTheStackItHeld) {
  RecordBytes bytes(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
  bytes.U32Pair(10, 11).U64(5).U64(1).U64(0x401000);
  bytes.U64(PERF_SAMPLE_REGS_ABI_64);
  for (uint64_t r = 0; r < kUnwindRegsCount; ++r) bytes.U64(0x1000 + r);
  bytes.U64(24).U64(0xaaaa).U64(0xbbbb).U64(0).U64(16);  // 24 copied, 16 held
  const SampleLayout layout{.user_regs = true, .user_stack = true};
  auto record = ParseRecord(bytes.Build(), layout);
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& sample = std::get<CpuSample>(*record);
  EXPECT_EQ(sample.ips, std::vector<uint64_t>{0x401000});
  ASSERT_EQ(sample.user_regs.size(), kUnwindRegsCount);
  EXPECT_EQ(sample.user_regs[kRegSp], 0x1000u + kRegSp);
  EXPECT_EQ(sample.user_regs[kRegIp], 0x1000u + kRegIp);
  EXPECT_EQ(sample.user_regs[kRegR15], 0x1000u + kRegR15);
  ASSERT_EQ(sample.user_stack.size(), 16u);
  uint64_t first = 0;
  std::memcpy(&first, sample.user_stack.data(), 8);
  EXPECT_EQ(first, 0xaaaau);

  // Without user registers (a sample in the kernel): no stack either, the
  // chain stays.
  RecordBytes kernel(PERF_RECORD_SAMPLE, 0);
  kernel.U32Pair(10, 11).U64(5).U64(1).U64(0x401000).U64(PERF_SAMPLE_REGS_ABI_NONE).U64(0);
  auto bare = ParseRecord(kernel.Build(), layout);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(std::get<CpuSample>(*bare).user_regs.empty());
  EXPECT_TRUE(std::get<CpuSample>(*bare).user_stack.empty());
  EXPECT_EQ(std::get<CpuSample>(*bare).ips.size(), 1u);
}

// The context-switch event's samples are taken in the kernel and carry
// kSwitchStackLayout whatever the cpu-clock's: here the plain one.
TEST(ParseRecordTest, AKernelModeSampleIsASwitchOutInItsOwnLayout) {
  const SampleLayout plain;
  RecordBytes record_bytes(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_KERNEL);
  record_bytes.U32Pair(10, 12).U64(777).U64(3);
  record_bytes.U64(static_cast<uint64_t>(PERF_CONTEXT_USER)).U64(0x401000).U64(0x402000);
  if (kSwitchStackLayout.user_regs) {
    record_bytes.U64(PERF_SAMPLE_REGS_ABI_64);
    for (uint64_t r = 0; r < kUnwindRegsCount; ++r) record_bytes.U64(0x1000 + r);
  }
  if (kSwitchStackLayout.user_stack) record_bytes.U64(16).U64(0xaaaa).U64(0xbbbb).U64(16);
  const auto bytes = record_bytes.Build();
  auto record = ParseRecord(bytes, plain);
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& sample = std::get<CpuSample>(*record);
  EXPECT_TRUE(sample.at_switch);
  EXPECT_EQ(sample.tid, 12u);
  EXPECT_EQ(sample.time_ns, 777u);
  EXPECT_EQ(sample.ips, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(sample.user_stack.size(), kSwitchStackLayout.user_stack ? 16u : 0u);
  EXPECT_EQ(sample.user_regs.size(), kSwitchStackLayout.user_regs ? kUnwindRegsCount : 0u);

  auto user = ParseRecord(RecordBytes(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER)
                              .U32Pair(10, 12)
                              .U64(777)
                              .U64(1)
                              .U64(0x401000)
                              .Build());
  ASSERT_TRUE(user.ok()) << user.status();
  EXPECT_FALSE(std::get<CpuSample>(*user).at_switch);
}

// A CPU-wide event's switch-out: the thread preempted and the task that
// took its CPU.
TEST(ParseRecordTest, CpuWideSwitchNamesTheTaskOnTheOtherSide) {
  auto record =
      ParseRecord(RecordBytes(PERF_RECORD_SWITCH_CPU_WIDE,
                              PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
                      .U32Pair(900, 901)  // next_prev pid, tid
                      .U32Pair(10, 11)
                      .U64(5555)
                      .U32Pair(3, 0)  // cpu, reserved
                      .Build());
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& sw = std::get<CpuSwitch>(*record);
  EXPECT_EQ(sw.pid, 10u);
  EXPECT_EQ(sw.tid, 11u);
  EXPECT_EQ(sw.time_ns, 5555u);
  EXPECT_EQ(sw.cpu, 3u);
  EXPECT_EQ(sw.next_prev_pid, 900u);
  EXPECT_EQ(sw.next_prev_tid, 901u);
  EXPECT_TRUE(sw.out);
  EXPECT_TRUE(sw.preempted);

  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_SWITCH_CPU_WIDE, 0)
                               .U32Pair(900, 901)
                               .U32Pair(10, 11)
                               .U64(5555)
                               .Build())
                   .ok());
}

TEST(ParseRecordTest, RejectsAStackCopyThatDoesNotAddUp) {
  const SampleLayout layout{.user_regs = true, .user_stack = true};
  auto with_stack = [](uint64_t size, int words, bool dyn, uint64_t dyn_size) {
    RecordBytes bytes(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
    bytes.U32Pair(1, 1).U64(5).U64(0).U64(PERF_SAMPLE_REGS_ABI_64);
    for (size_t r = 0; r < kUnwindRegsCount; ++r) bytes.U64(r);
    bytes.U64(size);
    for (int i = 0; i < words; ++i) bytes.U64(0);
    if (dyn) bytes.U64(dyn_size);
    return bytes.Build();
  };
  EXPECT_TRUE(ParseRecord(with_stack(16, 2, true, 16), layout).ok());
  // More held than copied.
  EXPECT_FALSE(ParseRecord(with_stack(16, 2, true, 17), layout).ok());
  // A size past the record, and a record without its dyn_size.
  EXPECT_FALSE(ParseRecord(with_stack(1 << 20, 2, true, 16), layout).ok());
  EXPECT_FALSE(ParseRecord(with_stack(16, 2, false, 0), layout).ok());
  // Registers cut short.
  RecordBytes cut(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
  cut.U32Pair(1, 1).U64(5).U64(0).U64(PERF_SAMPLE_REGS_ABI_64).U64(1).U64(2);
  EXPECT_FALSE(ParseRecord(cut.Build(), layout).ok());
}

TEST(ParseRecordTest, SwitchOutCarriesThePreemptFlag) {
  const auto bytes = RecordBytes(PERF_RECORD_SWITCH,
                                 PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT)
                         .U32Pair(5, 6)
                         .U64(77)
                         .Build();
  auto record = ParseRecord(bytes);
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& sw = std::get<ContextSwitch>(*record);
  EXPECT_TRUE(sw.out);
  EXPECT_TRUE(sw.preempted);
  EXPECT_EQ(sw.tid, 6u);
  EXPECT_EQ(sw.time_ns, 77u);

  auto in = ParseRecord(RecordBytes(PERF_RECORD_SWITCH, 0).U32Pair(5, 6).U64(78).Build());
  ASSERT_TRUE(in.ok());
  EXPECT_FALSE(std::get<ContextSwitch>(*in).out);
}

TEST(ParseRecordTest, LostRecordsAreCounted) {
  auto record = ParseRecord(RecordBytes(PERF_RECORD_LOST, 0).U64(1).U64(42).Build());
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(std::get<LostRecords>(*record).count, 42u);
}

TEST(ParseRecordTest, OtherTypesAreSkipped) {
  auto record = ParseRecord(RecordBytes(PERF_RECORD_EXIT, 0).U64(1).Build());
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(std::get<OtherRecord>(*record).type, static_cast<uint32_t>(PERF_RECORD_EXIT));
}

TEST(ParseRecordTest, ForkRecordNamesTheNewThreadAndItsCreator) {
  auto record = ParseRecord(RecordBytes(PERF_RECORD_FORK, 0)
                                .U32Pair(20, 10)
                                .U32Pair(20, 11)
                                .U64(55)
                                .U32Pair(10, 11)
                                .U64(55)
                                .Build());
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& fork = std::get<ForkRecord>(*record);
  EXPECT_EQ(fork.pid, 20u);
  EXPECT_EQ(fork.ppid, 10u);
  EXPECT_EQ(fork.tid, 20u);
  EXPECT_EQ(fork.ptid, 11u);
  EXPECT_EQ(fork.time_ns, 55u);
  EXPECT_FALSE(
      ParseRecord(RecordBytes(PERF_RECORD_FORK, 0).U32Pair(20, 10).U32Pair(20, 11).U64(55).Build())
          .ok());
}

// PERF_RECORD_MMAP2 up to its file name: pid, tid, addr, len, pgoff,
// maj, min, ino, ino_generation, prot, flags.
RecordBytes Mmap2(const std::string& path) {
  RecordBytes bytes(PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
  bytes.U32Pair(10, 11).U64(0x7f0000001000).U64(0x2000).U64(0x1000).U32Pair(0xfd, 1).U64(4242);
  bytes.U64(7).U32Pair(5, 2).Text(path);
  return bytes;
}

TEST(ParseRecordTest, MmapRecordKeepsTheMappingAndItsTime) {
  auto record = ParseRecord(Mmap2("/usr/lib/libc.so.6").U32Pair(10, 11).U64(99).Build());
  ASSERT_TRUE(record.ok()) << record.status();
  const auto& mmap = std::get<MmapRecord>(*record);
  EXPECT_EQ(mmap.pid, 10u);
  EXPECT_EQ(mmap.tid, 11u);
  EXPECT_EQ(mmap.time_ns, 99u);
  EXPECT_EQ(mmap.start, 0x7f0000001000u);
  EXPECT_EQ(mmap.length, 0x2000u);
  EXPECT_EQ(mmap.pgoff, 0x1000u);
  EXPECT_EQ(mmap.dev_major, 0xfdu);
  EXPECT_EQ(mmap.dev_minor, 1u);
  EXPECT_EQ(mmap.inode, 4242u);
  EXPECT_EQ(mmap.prot, 5u);
  EXPECT_EQ(mmap.path, "/usr/lib/libc.so.6");
}

TEST(ParseRecordTest, RejectsMalformedMmapRecords) {
  // No sample id after the name.
  EXPECT_FALSE(ParseRecord(Mmap2("/a").Build()).ok());
  // An empty name.
  EXPECT_FALSE(ParseRecord(Mmap2("").U32Pair(10, 11).U64(99).Build()).ok());
  // Cut inside the fixed fields.
  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_MMAP2, 0).U32Pair(1, 1).U64(1).Build()).ok());
  // An empty range.
  RecordBytes empty(PERF_RECORD_MMAP2, 0);
  empty.U32Pair(10, 11).U64(0x1000).U64(0).U64(0).U32Pair(1, 1).U64(1).U64(1).U32Pair(5, 2);
  EXPECT_FALSE(ParseRecord(empty.Text("/a").U32Pair(10, 11).U64(99).Build()).ok());
}

TEST(ParseRecordTest, CommRecordOfAnExecIsAnExec) {
  auto exec = ParseRecord(RecordBytes(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC)
                              .U32Pair(10, 10)
                              .Text("python3")
                              .U32Pair(10, 10)
                              .U64(77)
                              .Build());
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(std::get<ExecRecord>(*exec).pid, 10u);
  EXPECT_EQ(std::get<ExecRecord>(*exec).time_ns, 77u);
  EXPECT_EQ(std::get<ExecRecord>(*exec).comm, "python3");
  // A rename (prctl PR_SET_NAME) is not.
  auto rename = ParseRecord(RecordBytes(PERF_RECORD_COMM, 0)
                                .U32Pair(10, 12)
                                .Text("worker")
                                .U32Pair(10, 12)
                                .U64(78)
                                .Build());
  ASSERT_TRUE(rename.ok()) << rename.status();
  EXPECT_EQ(std::get<OtherRecord>(*rename).type, static_cast<uint32_t>(PERF_RECORD_COMM));
  // Without its sample id.
  EXPECT_FALSE(
      ParseRecord(RecordBytes(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC).U32Pair(10, 10).Build())
          .ok());
}

TEST(ParseRecordTest, RejectsMalformedRecords) {
  // Shorter than a header.
  EXPECT_FALSE(ParseRecord(std::vector<uint8_t>{1, 2, 3}).ok());
  // A header whose size is not the record's.
  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_SWITCH, 0).U32Pair(1, 1).U64(1).Build(8)).ok());
  // A switch without its sample id.
  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_SWITCH, 0).U32Pair(1, 1).Build()).ok());
  // A sample whose call chain count runs past the record.
  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_SAMPLE, 0)
                               .U32Pair(1, 1)
                               .U64(1)
                               .U64(1000000)
                               .U64(0x401000)
                               .Build())
                   .ok());
  // A count so large that count * 8 wraps.
  EXPECT_FALSE(
      ParseRecord(
          RecordBytes(PERF_RECORD_SAMPLE, 0).U32Pair(1, 1).U64(1).U64(uint64_t{1} << 61).Build())
          .ok());
  // A lost record without its count.
  EXPECT_FALSE(ParseRecord(RecordBytes(PERF_RECORD_LOST, 0).U64(1).Build()).ok());
}

// Writes `records` into a ring of `size` bytes starting at byte `start`.
std::vector<uint8_t> Ring(size_t size, uint64_t start,
                          const std::vector<std::vector<uint8_t>>& records, uint64_t* head) {
  std::vector<uint8_t> ring(size, 0xee);
  uint64_t pos = start;
  for (const auto& record : records) {
    for (uint8_t byte : record) ring[pos++ % size] = byte;
  }
  *head = pos;
  return ring;
}

TEST(DrainRingTest, JoinsARecordThatWrapsAround) {
  const auto a = RecordBytes(PERF_RECORD_SWITCH, 0).U32Pair(1, 2).U64(100).Build();
  const auto b = RecordBytes(PERF_RECORD_LOST, 0).U64(9).U64(3).Build();
  uint64_t head = 0;
  const uint64_t tail = 64 - 12;  // `a` (24 bytes) straddles the end
  const auto ring = Ring(64, tail, {a, b}, &head);
  std::vector<std::vector<uint8_t>> seen;
  RingDrainStats stats;
  const uint64_t new_tail = DrainRing(
      ring, head, tail, [&](absl::Span<const uint8_t> r) { seen.emplace_back(r.begin(), r.end()); },
      &stats);
  EXPECT_EQ(new_tail, head);
  EXPECT_EQ(stats.records, 2u);
  EXPECT_EQ(stats.corrupt, 0u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], a);
  EXPECT_EQ(seen[1], b);
}

TEST(DrainRingTest, StopsAtASizeThatCannotBeARecord) {
  for (int delta : {-100, 200}) {  // under a header; past the written data
    auto bad = RecordBytes(PERF_RECORD_SWITCH, 0).U32Pair(1, 2).U64(100).Build();
    const uint16_t size = static_cast<uint16_t>(
        static_cast<int>(bad.size()) + delta < 0 ? 4 : static_cast<int>(bad.size()) + delta);
    std::memcpy(bad.data() + 6, &size, sizeof(size));
    const auto good = RecordBytes(PERF_RECORD_LOST, 0).U64(9).U64(3).Build();
    uint64_t head = 0;
    const auto ring = Ring(128, 0, {good, bad}, &head);
    int calls = 0;
    RingDrainStats stats;
    EXPECT_EQ(DrainRing(
                  ring, head, 0, [&](absl::Span<const uint8_t>) { ++calls; }, &stats),
              head);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(stats.corrupt, 1u);
  }
}

TEST(DrainRingTest, RejectsAnOverrunOrAPartialHeader) {
  std::vector<uint8_t> ring(64, 0);
  RingDrainStats stats;
  int calls = 0;
  auto count = [&](absl::Span<const uint8_t>) { ++calls; };
  EXPECT_EQ(DrainRing(ring, 1000, 0, count, &stats), 1000u);                   // head - tail > size
  EXPECT_EQ(DrainRing(ring, 4, 0, count, &stats), 4u);                         // under a header
  EXPECT_EQ(DrainRing(std::vector<uint8_t>(48, 0), 8, 0, count, &stats), 8u);  // not 2^n
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(stats.corrupt, 3u);
  EXPECT_EQ(DrainRing(ring, 5, 5, count, &stats), 5u);  // empty
  EXPECT_EQ(stats.corrupt, 3u);
}

}  // namespace
}  // namespace gpuctl::hostctx
