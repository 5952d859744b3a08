#include "daemon/convert/kernel_occupancy.h"

#include <algorithm>
#include <cmath>

namespace gpuctl::daemon {
namespace {

constexpr uint64_t kRegisterAllocationUnit = 256;      // registers, per warp
constexpr uint64_t kSharedMemoryAllocationUnit = 128;  // bytes, per block

uint64_t RoundUp(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

// What one SM can hold at once; the formulas are in the header.
uint64_t ActiveBlocksPerSm(const KernelRecord& k, const DeviceInfoRecord& d, uint64_t threads) {
  const uint64_t warp = d.warp_size;
  if (d.max_threads_per_block != 0 && threads > d.max_threads_per_block) return 0;
  const uint64_t warps_per_block = (threads + warp - 1) / warp;
  uint64_t limit = d.max_threads_per_sm / warp / warps_per_block;
  if (d.max_blocks_per_sm != 0) limit = std::min<uint64_t>(limit, d.max_blocks_per_sm);
  if (k.registers_per_thread != 0 && d.max_registers_per_sm != 0) {
    const uint64_t regs_per_warp =
        RoundUp(uint64_t{k.registers_per_thread} * warp, kRegisterAllocationUnit);
    const uint64_t regs_per_block = regs_per_warp * warps_per_block;
    if (d.max_registers_per_block != 0 && regs_per_block > d.max_registers_per_block) return 0;
    limit = std::min(limit, d.max_registers_per_sm / regs_per_block);
  }
  const uint64_t shared =
      uint64_t{k.static_shared_memory} + k.dynamic_shared_memory + ReservedSharedMemoryPerBlock(d);
  const uint64_t capacity =
      k.shared_memory_executed != 0 ? k.shared_memory_executed : d.max_shared_memory_per_sm;
  if (shared != 0 && capacity != 0) {
    limit = std::min(limit, capacity / RoundUp(shared, kSharedMemoryAllocationUnit));
  }
  return limit;
}

}  // namespace

uint32_t ReservedSharedMemoryPerBlock(const DeviceInfoRecord& device) {
  return device.compute_major >= 8 ? 1024 : 0;
}

std::optional<KernelOccupancy> EstimateOccupancy(const KernelRecord& kernel,
                                                 const DeviceInfoRecord& device) {
  if (device.sm_count == 0 || device.warp_size == 0 || device.max_threads_per_sm == 0) {
    return std::nullopt;
  }
  // The reader bounds every dimension, so these products fit.
  const uint64_t threads =
      uint64_t(kernel.block[0]) * uint64_t(kernel.block[1]) * uint64_t(kernel.block[2]);
  const double grid_blocks =
      double(kernel.grid[0]) * double(kernel.grid[1]) * double(kernel.grid[2]);
  KernelOccupancy out;
  out.blocks_per_sm = grid_blocks / device.sm_count;
  out.warps_per_sm = out.blocks_per_sm * double(threads) / device.warp_size;
  const uint64_t active = ActiveBlocksPerSm(kernel, device, threads);
  out.active_blocks_per_sm = static_cast<uint32_t>(std::min<uint64_t>(active, UINT32_MAX));
  const double resident = std::min(out.blocks_per_sm, double(active));
  const double fraction = resident * double(threads) / device.max_threads_per_sm;
  out.occupancy_percent = static_cast<int>(std::lround(std::clamp(fraction, 0.0, 1.0) * 100.0));
  return out;
}

}  // namespace gpuctl::daemon
