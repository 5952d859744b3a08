// The kernels of bench/trace_workload.cc's training step: CUPTI's names of
// real PyTorch, cuBLAS, flash-attention and NCCL kernels (their lengths are
// much of a trace's bytes), launch configurations and H100 durations.
#ifndef GPUCTL_BENCH_TRACE_KERNELS_H_
#define GPUCTL_BENCH_TRACE_KERNELS_H_

#include <cstdint>
#include <string_view>

namespace gpuctl::bench {

// A kernel as a PyTorch training step launches it: CUPTI's (demangled)
// name, its launch configuration and a typical duration on an H100.
struct KernelKind {
  std::string_view name;
  int64_t dur_us;
  int32_t grid_x, grid_y;
  int32_t block_x;
  uint32_t registers;
  uint32_t static_shared, dynamic_shared;
};

inline constexpr std::string_view kLayerNormName =
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
    "float*, c10::BFloat16*)";
inline constexpr KernelKind kLayerNorm{kLayerNormName, 18, 8192, 1, 256, 40, 0, 0};
inline constexpr std::string_view kGemmFwdName =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
inline constexpr KernelKind kGemmFwd{kGemmFwdName, 140, 132, 1, 384, 168, 0, 232448};
inline constexpr std::string_view kFlashFwdName =
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, "
    "4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, "
    "cutlass::bfloat16_t> >, false, true, false, false, false, true, false, false>"
    "(pytorch_flash::Flash_fwd_params)";
inline constexpr KernelKind kFlashFwd{kFlashFwdName, 210, 16, 256, 128, 255, 0, 49152};
inline constexpr std::string_view kAddName =
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>"
    ", std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul>)";
inline constexpr KernelKind kAdd{kAddName, 22, 16384, 1, 128, 26, 0, 0};
inline constexpr std::string_view kGeluName =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
    "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::"
    "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()"
    "() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, "
    "2ul>)";
inline constexpr KernelKind kGelu{kGeluName, 41, 65536, 1, 128, 30, 0, 0};
inline constexpr std::string_view kLogSoftmaxName =
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, "
    "float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, "
    "c10::BFloat16 const*, int)";
inline constexpr KernelKind kLogSoftmax{kLogSoftmaxName, 95, 8192, 1, 1024, 38, 0, 128};
inline constexpr std::string_view kNllLossName =
    "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, "
    "long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)";
inline constexpr KernelKind kNllLoss{kNllLossName, 12, 1, 1, 32, 32, 512, 0};
inline constexpr std::string_view kGemmDgradName =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
inline constexpr KernelKind kGemmDgrad{kGemmDgradName, 150, 132, 1, 384, 168, 0, 232448};
inline constexpr std::string_view kGemmWgradName =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
inline constexpr KernelKind kGemmWgrad{kGemmWgradName, 135, 132, 1, 128, 154, 0, 164864};
inline constexpr std::string_view kFlashBwdName =
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_"
    "kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, pytorch_flash::"
    "Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, "
    "false, false>(pytorch_flash::Flash_bwd_params)";
inline constexpr KernelKind kFlashBwd{kFlashBwdName, 520, 16, 256, 256, 255, 0, 147456};
inline constexpr std::string_view kGeluBwdName =
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl"
    "(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::"
    "{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, "
    "std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::"
    "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}"
    "::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)";
inline constexpr KernelKind kGeluBwd{kGeluBwdName, 58, 65536, 1, 128, 32, 0, 0};
inline constexpr std::string_view kLayerNormBwdName =
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::"
    "BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, "
    "c10::BFloat16 const*, c10::BFloat16*, int)";
inline constexpr KernelKind kLayerNormBwd{kLayerNormBwdName, 31, 8192, 1, 256, 48, 0, 0};
inline constexpr std::string_view kReduceSumName =
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
    "func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::"
    "TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::"
    "ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
    "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)";
inline constexpr KernelKind kReduceSum{kReduceSumName, 16, 96, 4, 512, 40, 0, 4112};
inline constexpr std::string_view kAllReduceName =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";
inline constexpr KernelKind kAllReduce{kAllReduceName, 380, 24, 1, 640, 96, 0, 0};
inline constexpr std::string_view kAdamWName =
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
    "namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor"
    "<c10::BFloat16, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, "
    "double, double, bool const*, float const*>(at::native::(anonymous namespace)::"
    "TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::"
    "BFloat16, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, "
    "double, bool const*, float const*)";
inline constexpr KernelKind kAdamW{kAdamWName, 240, 320, 1, 512, 64, 0, 0};

inline constexpr std::string_view kCopyName =
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
    "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
    "const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}"
    ">(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::"
    "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::"
    "{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::"
    "TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#12}::operator()() const::"
    "{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})";
inline constexpr KernelKind kCopy{kCopyName, 27, 32768, 1, 128, 24, 0, 0};
inline constexpr std::string_view kMulScalarName =
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, "
    "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
    "std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
    "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)";
inline constexpr KernelKind kMulScalar{kMulScalarName, 14, 16384, 1, 128, 22, 0, 0};

inline constexpr KernelKind kForwardLayer[] = {kLayerNorm, kCopy, kGemmFwd, kCopy, kMulScalar,
                                               kFlashFwd,  kCopy, kGemmFwd, kAdd,  kLayerNorm,
                                               kGemmFwd,   kGelu, kGemmFwd, kAdd};
inline constexpr KernelKind kBackwardLayer[] = {
    kGemmDgrad, kGemmWgrad, kReduceSum, kGeluBwd,      kGemmDgrad, kGemmWgrad, kLayerNormBwd,
    kAdd,       kCopy,      kGemmDgrad, kGemmWgrad,    kMulScalar, kFlashBwd,  kCopy,
    kGemmDgrad, kGemmWgrad, kCopy,      kLayerNormBwd, kAdd};

}  // namespace gpuctl::bench

#endif  // GPUCTL_BENCH_TRACE_KERNELS_H_
