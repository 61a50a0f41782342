/* vmaf-hip kernel prelude: the one place that knows which GPU compiler is reading.
 *
 * Every kernel source file includes this first. The same text must compile under
 *   hipcc  (__HIP__, offline),     hiprtc (__HIP__ and __HIPCC_RTC__),
 *   nvcc   (__CUDACC__, offline),  nvrtc  (__CUDACC__ and __CUDACC_RTC__),
 * so kernels use only what is spelled here plus the builtins all four share
 * (blockIdx, blockDim, threadIdx, gridDim, warpSize, __syncthreads, __shared__).
 * Run-time compilers get this file as a named header ("vmaf_prelude.h"). */
#ifndef VMAF_PRELUDE_H
#define VMAF_PRELUDE_H

/* hipcc (at least Debian's 5.2) declares the thread builtins only through this
 * header; hiprtc provides them itself and cannot open system headers. */
#if defined(__HIP__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

/* Fixed-width integers without <stdint.h> (nvrtc has no C library headers).
 * All four targets are LP64 on the device side. */
typedef signed char vmaf_i8;
typedef unsigned char vmaf_u8;
typedef short vmaf_i16;
typedef unsigned short vmaf_u16;
typedef int vmaf_i32;
typedef unsigned int vmaf_u32;
typedef long long vmaf_i64;
typedef unsigned long long vmaf_u64;

/* Entry points keep unmangled names so the host can look them up by string. */
#define VMAF_KERNEL extern "C" __global__

/* Launch bounds: at most `threads` per block and (NVIDIA) at least `blocks`
 * resident per multiprocessor, which caps registers. HIP's second argument
 * means something else (waves per execution unit), so AMD gets only the first. */
#if defined(__HIP__)
#define VMAF_BOUNDS(threads, blocks) __launch_bounds__(threads)
#else
#define VMAF_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#endif

#define VMAF_DEVICE static __device__ __forceinline__

/* Warp shuffle. HIP 5.x has only the mask-less form; CUDA 9+ requires the
 * _sync form. Callers keep whole warps converged when they shuffle. */
#if defined(__HIP__)
#define VMAF_SHFL_DOWN(v, offset) __shfl_down((v), (offset))
#else
#define VMAF_SHFL_DOWN(v, offset) __shfl_down_sync(0xffffffffu, (v), (offset))
#endif

/* 64-bit integer atomics: the overload exists on every target. */
#define VMAF_ATOMIC_ADD_U64(ptr, v) atomicAdd((ptr), (vmaf_u64)(v))

/* Upper bound on warps in a block (1024 threads / 32 lanes); shared scratch
 * arrays are sized with it so nothing depends on the real warp size. */
#define VMAF_MAX_WARPS 32

/* Linear index of the calling thread in its block (x fastest, as warps are formed). */
VMAF_DEVICE unsigned vmaf_thread_rank(void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/* Sums `v` over the block (1-, 2- or 3-dimensional); the total is valid in the thread of rank
 * 0 only. `scratch` must hold VMAF_MAX_WARPS values. Every thread of the block must call it. */
VMAF_DEVICE vmaf_u64 vmaf_block_sum_u64(vmaf_u64 v, vmaf_u64 *scratch)
{
    const unsigned rank = vmaf_thread_rank();
    const unsigned lane = rank % warpSize;
    const unsigned warp = rank / warpSize;
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += VMAF_SHFL_DOWN(v, offset);
    if (lane == 0)
        scratch[warp] = v;
    __syncthreads();
    vmaf_u64 total = 0;
    if (rank == 0) {
        const unsigned n_threads = blockDim.x * blockDim.y * blockDim.z;
        const unsigned n_warps = (n_threads + warpSize - 1) / warpSize;
        for (unsigned i = 0; i < n_warps; i++)
            total += scratch[i];
    }
    return total;
}

#endif /* VMAF_PRELUDE_H */
