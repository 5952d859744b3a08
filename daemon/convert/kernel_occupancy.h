#ifndef GPUCTL_DAEMON_CONVERT_KERNEL_OCCUPANCY_H_
#define GPUCTL_DAEMON_CONVERT_KERNEL_OCCUPANCY_H_

#include <cstdint>
#include <optional>

#include "daemon/convert/record_reader.h"

namespace gpuctl::daemon {

// Kineto's per-kernel occupancy figures (libkineto/src/DeviceProperties.cpp),
// computed from the kernel record and its device's kDeviceInfo:
//
//   threads        = block.x * block.y * block.z
//   blocks per SM  = grid.x * grid.y * grid.z / sm_count
//   warps per SM   = blocks per SM * threads / warp_size
//   est. achieved occupancy % =
//       round(100 * min(blocks per SM, active blocks) * threads
//             / max_threads_per_sm)
//
// "active blocks" is what one SM can hold at once (kineto asks
// cudaOccMaxActiveBlocksPerMultiprocessor); here it is the smallest of
//   - max_blocks_per_sm;
//   - warps: floor(max_threads_per_sm / warp_size / ceil(threads / warp_size));
//   - registers: floor(max_registers_per_sm / (warps per block *
//     roundup(registers_per_thread * warp_size, 256)));
//   - shared memory: floor(capacity / roundup(static + dynamic + reserved,
//     128)), where capacity is the kernel's shared_memory_executed (the
//     carveout the driver configured) or else max_shared_memory_per_sm, and
//     reserved is the 1 KiB the driver keeps per block from compute
//     capability 8.0 on;
// and 0 when the block exceeds max_threads_per_block or the registers per
// block exceed max_registers_per_block. The register allocation unit is
// per warp, not per SM sub-partition as in cudaOcc, so the register limit
// can be a block higher than CUDA's own calculator.
struct KernelOccupancy {
  double blocks_per_sm;
  double warps_per_sm;
  uint32_t active_blocks_per_sm;
  int occupancy_percent;  // 0..100
};

// nullopt when the device info lacks what the formulas divide by (sm_count,
// warp_size or max_threads_per_sm is 0).
std::optional<KernelOccupancy> EstimateOccupancy(const KernelRecord& kernel,
                                                 const DeviceInfoRecord& device);

// The 1 KiB per block of shared memory the driver reserves from compute
// capability 8.0 on (0 before).
uint32_t ReservedSharedMemoryPerBlock(const DeviceInfoRecord& device);

}  // namespace gpuctl::daemon

#endif  // GPUCTL_DAEMON_CONVERT_KERNEL_OCCUPANCY_H_
