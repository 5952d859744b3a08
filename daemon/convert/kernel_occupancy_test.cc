#include "daemon/convert/kernel_occupancy.h"

#include "gtest/gtest.h"

namespace gpuctl::daemon {
namespace {

// An H100 SXM as CUPTI describes it.
DeviceInfoRecord H100() {
  DeviceInfoRecord d{};
  d.compute_major = 9;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_block = 1024;
  d.max_registers_per_sm = 65536;
  d.max_registers_per_block = 65536;
  d.max_shared_memory_per_sm = 233472;
  d.max_shared_memory_per_block = 49152;
  d.max_blocks_per_sm = 32;
  d.warp_size = 32;
  return d;
}

KernelRecord Kernel(int32_t grid_x, int32_t block_x, uint32_t registers, uint32_t static_shared = 0,
                    uint32_t dynamic_shared = 0) {
  KernelRecord k{};
  k.grid[0] = grid_x;
  k.grid[1] = k.grid[2] = 1;
  k.block[0] = block_x;
  k.block[1] = k.block[2] = 1;
  k.registers_per_thread = registers;
  k.static_shared_memory = static_shared;
  k.dynamic_shared_memory = dynamic_shared;
  return k;
}

TEST(KernelOccupancyTest, GridSmallerThanWhatFitsLimitsOccupancy) {
  // 2 blocks per SM of 8 warps; 8 would fit (warps: 64 / 8).
  auto o = EstimateOccupancy(Kernel(264, 256, 32), H100());
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->blocks_per_sm, 2.0);
  EXPECT_DOUBLE_EQ(o->warps_per_sm, 16.0);
  EXPECT_EQ(o->active_blocks_per_sm, 8u);
  EXPECT_EQ(o->occupancy_percent, 25);  // 2 * 256 / 2048
}

TEST(KernelOccupancyTest, RegistersLimitActiveBlocks) {
  // 128 registers * 32 threads = 4096 per warp, 4 warps per block:
  // 65536 / 16384 = 4 blocks.
  auto o = EstimateOccupancy(Kernel(13200, 128, 128), H100());
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->blocks_per_sm, 100.0);
  EXPECT_EQ(o->active_blocks_per_sm, 4u);
  EXPECT_EQ(o->occupancy_percent, 25);  // 4 * 128 / 2048
}

TEST(KernelOccupancyTest, SharedMemoryLimitsActiveBlocks) {
  // 48 KiB static + 16 KiB dynamic + 1 KiB reserved = 66560 bytes per
  // block: 233472 / 66560 = 3 blocks; 3 * 256 / 2048 = 37.5 -> 38.
  KernelRecord k = Kernel(1320, 256, 0, 49152, 16384);
  auto o = EstimateOccupancy(k, H100());
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->active_blocks_per_sm, 3u);
  EXPECT_EQ(o->occupancy_percent, 38);
  // The carveout the driver chose for this kernel, when known, is the
  // capacity instead: 135168 / 66560 = 2 blocks.
  k.shared_memory_executed = 135168;
  o = EstimateOccupancy(k, H100());
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->active_blocks_per_sm, 2u);
  EXPECT_EQ(o->occupancy_percent, 25);
}

TEST(KernelOccupancyTest, NoReservedSharedMemoryBeforeAmpere) {
  DeviceInfoRecord v100 = H100();
  v100.compute_major = 7;
  v100.sm_count = 80;
  v100.max_shared_memory_per_sm = 98304;
  EXPECT_EQ(ReservedSharedMemoryPerBlock(v100), 0u);
  EXPECT_EQ(ReservedSharedMemoryPerBlock(H100()), 1024u);
  // 98304 / 49152 = 2 blocks of 32 warps: the whole SM.
  auto o = EstimateOccupancy(Kernel(160, 1024, 0, 49152), v100);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->active_blocks_per_sm, 2u);
  EXPECT_EQ(o->occupancy_percent, 100);
}

TEST(KernelOccupancyTest, PartialWarpsAndBlockLimit) {
  // 48 threads take 2 warps; 32 blocks per SM at most; 64 asked.
  auto o = EstimateOccupancy(Kernel(132 * 64, 48, 0), H100());
  ASSERT_TRUE(o.has_value());
  EXPECT_DOUBLE_EQ(o->warps_per_sm, 96.0);  // kineto: blocks * threads / warp
  EXPECT_EQ(o->active_blocks_per_sm, 32u);
  EXPECT_EQ(o->occupancy_percent, 75);  // 32 * 48 / 2048
}

TEST(KernelOccupancyTest, ImpossibleBlocksHaveZeroOccupancy) {
  EXPECT_EQ(EstimateOccupancy(Kernel(132, 2048, 0), H100())->occupancy_percent, 0);
  DeviceInfoRecord small_regs = H100();
  small_regs.max_registers_per_block = 1024;
  EXPECT_EQ(EstimateOccupancy(Kernel(132, 256, 64), small_regs)->active_blocks_per_sm, 0u);
}

TEST(KernelOccupancyTest, MissingDeviceFiguresGiveNothing) {
  for (auto clear : {&DeviceInfoRecord::sm_count, &DeviceInfoRecord::warp_size,
                     &DeviceInfoRecord::max_threads_per_sm}) {
    DeviceInfoRecord d = H100();
    d.*clear = 0;
    EXPECT_FALSE(EstimateOccupancy(Kernel(132, 256, 32), d).has_value());
  }
}

}  // namespace
}  // namespace gpuctl::daemon
