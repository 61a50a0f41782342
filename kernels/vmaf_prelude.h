/* vmaf-hip kernel prelude: the one place that knows which GPU compiler is reading.
 *
 * Every kernel source file includes this first. The same text must compile under
 *   hipcc  (__HIP__, offline),     hiprtc (__HIP__ and __HIPCC_RTC__),
 *   nvcc   (__CUDACC__, offline),  nvrtc  (__CUDACC__ and __CUDACC_RTC__),
 *   clang in CUDA mode without CUDA headers (-nocudainc -nocudalib; build.rs uses it
 *   to make PTX for hosts that have the driver but no nvrtc; VMAF_BARE_CLANG_CUDA below),
 * and, for tests only, as plain C++17 on the host with VMAF_HIPCPU defined (the execution
 * model in tests/hipcpu/hip_cpu.h supplies the builtins with 64- or 32-lane waves),
 * so kernels use only what is spelled here plus the builtins all of them share
 * (blockIdx, blockDim, threadIdx, gridDim, warpSize, __syncthreads, __shared__,
 * __constant__) and the few CUDA intrinsics the bare-clang section supplies.
 * Run-time compilers get this file as a named header ("vmaf_prelude.h"). */
#ifndef VMAF_PRELUDE_H
#define VMAF_PRELUDE_H

/* Clang's CUDA mode force-includes its runtime wrapper (which pulls in the CUDA
 * headers) unless -nocudainc is given; without it, nothing but the compiler's
 * own builtins exists, so this section spells the CUDA vocabulary the kernels
 * use. The intrinsics map to clang's __nvvm_* builtins (never to libdevice's
 * __nv_* functions: -nocudalib leaves those unresolved in the PTX). */
#if defined(__clang__) && defined(__CUDA__) && !defined(__HIP__) && \
    !defined(__CLANG_CUDA_RUNTIME_WRAPPER_H__)
#define VMAF_BARE_CLANG_CUDA 1
#include <__clang_cuda_builtin_vars.h>
#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))

#define VMAF_BARE static __device__ __forceinline__
/* Every *_rn builtin rounds to nearest even with denormals kept, as the CUDA
 * intrinsics of the same name; a - b is a + (-b) exactly. */
VMAF_BARE float __fadd_rn(float a, float b) { return __nvvm_add_rn_f(a, b); }
VMAF_BARE float __fsub_rn(float a, float b) { return __nvvm_add_rn_f(a, -b); }
VMAF_BARE float __fmul_rn(float a, float b) { return __nvvm_mul_rn_f(a, b); }
VMAF_BARE float __fdiv_rn(float a, float b) { return __nvvm_div_rn_f(a, b); }
VMAF_BARE double __dadd_rn(double a, double b) { return __nvvm_add_rn_d(a, b); }
VMAF_BARE double __dsub_rn(double a, double b) { return __nvvm_add_rn_d(a, -b); }
VMAF_BARE double __dmul_rn(double a, double b) { return __nvvm_mul_rn_d(a, b); }
VMAF_BARE double __ddiv_rn(double a, double b) { return __nvvm_div_rn_d(a, b); }
VMAF_BARE double __dsqrt_rn(double a) { return __nvvm_sqrt_rn_d(a); }
VMAF_BARE float __int2float_rn(int a) { return __nvvm_i2f_rn(a); }
VMAF_BARE float __ll2float_rn(long long a) { return __nvvm_ll2f_rn(a); }
VMAF_BARE double __fma_rn(double a, double b, double c) { return __nvvm_fma_rn_d(a, b, c); }
VMAF_BARE unsigned __float_as_uint(float a) { return (unsigned)__nvvm_bitcast_f2i(a); }
VMAF_BARE double __longlong_as_double(long long a) { return __nvvm_bitcast_ll2d(a); }
VMAF_BARE long long __double_as_longlong(double a) { return __nvvm_bitcast_d2ll(a); }
/* Leading zeros, 32 (64) for zero like the CUDA intrinsics; the zero test folds
 * into one clz.b32/b64, which is defined at zero. */
VMAF_BARE int __clz(int a) { return a == 0 ? 32 : __builtin_clz((unsigned)a); }
VMAF_BARE int __clzll(long long a)
{
    return a == 0 ? 64 : __builtin_clzll((unsigned long long)a);
}
/* The atomicAdd overloads the kernels use (global or shared memory). */
VMAF_BARE unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return (unsigned long long)__nvvm_atom_add_gen_ll((long long *)p, (long long)v);
}
VMAF_BARE unsigned atomicAdd(unsigned *p, unsigned v)
{
    return (unsigned)__nvvm_atom_add_gen_i((int *)p, (int)v);
}
/* shfl.sync.down over the whole warp (clamp 31); 64-bit values move as two halves. */
VMAF_BARE unsigned vmaf_shfl_down_sync(unsigned v, int offset)
{
    return (unsigned)__nvvm_shfl_sync_down_i32(0xffffffffu, (int)v, offset, 0x1f);
}
VMAF_BARE int vmaf_shfl_down_sync(int v, int offset)
{
    return __nvvm_shfl_sync_down_i32(0xffffffffu, v, offset, 0x1f);
}
VMAF_BARE unsigned long long vmaf_shfl_down_sync(unsigned long long v, int offset)
{
    const unsigned lo = vmaf_shfl_down_sync((unsigned)v, offset);
    const unsigned hi = vmaf_shfl_down_sync((unsigned)(v >> 32), offset);
    return ((unsigned long long)hi << 32) | lo;
}
VMAF_BARE long long vmaf_shfl_down_sync(long long v, int offset)
{
    return (long long)vmaf_shfl_down_sync((unsigned long long)v, offset);
}
#undef VMAF_BARE
#endif

/* Tests: the host execution model (never defined by a GPU build). */
#if defined(VMAF_HIPCPU)
#include "hip_cpu.h"
#endif

/* hipcc (at least Debian's 5.2) declares the thread builtins only through this
 * header; hiprtc provides them itself and cannot open system headers. */
#if defined(__HIP__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

/* Fixed-width integers without <stdint.h> (nvrtc has no C library headers).
 * Every target is LP64 on the device side. */
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
#elif defined(VMAF_HIPCPU)
#define VMAF_BOUNDS(threads, blocks)
#else
#define VMAF_BOUNDS(threads, blocks) __launch_bounds__(threads, blocks)
#endif

#define VMAF_DEVICE static __device__ __forceinline__

/* Warp shuffle. HIP 5.x has only the mask-less form; CUDA 9+ requires the
 * _sync form. Callers keep whole warps converged when they shuffle. */
#if defined(__HIP__) || defined(VMAF_HIPCPU)
#define VMAF_SHFL_DOWN(v, offset) __shfl_down((v), (offset))
#elif defined(VMAF_BARE_CLANG_CUDA)
#define VMAF_SHFL_DOWN(v, offset) vmaf_shfl_down_sync((v), (offset))
#else
#define VMAF_SHFL_DOWN(v, offset) __shfl_down_sync(0xffffffffu, (v), (offset))
#endif

/* Set bits of a 32-bit word (one popc instruction on every GPU). */
#if defined(VMAF_BARE_CLANG_CUDA) || defined(VMAF_HIPCPU)
#define VMAF_POPC(v) __builtin_popcount((unsigned)(v))
#else
#define VMAF_POPC(v) __popc((unsigned)(v))
#endif

/* 64-bit integer atomics: the overload exists on every target. */
#define VMAF_ATOMIC_ADD_U64(ptr, v) atomicAdd((ptr), (vmaf_u64)(v))

/* Upper bound on warps in a block (1024 threads / 32 lanes); shared scratch
 * arrays are sized with it so nothing depends on the real warp size. */
#define VMAF_MAX_WARPS 32

/* A launch-geometry assumption: checked (failing the launch) by the host execution model of
 * the tests, no code on GPUs. */
#if defined(VMAF_HIPCPU)
#define VMAF_ASSUME(cond, what) ((cond) ? (void)0 : ::hipcpu::fail(what))
#else
#define VMAF_ASSUME(cond, what) ((void)0)
#endif
static_assert(VMAF_MAX_WARPS * 32 >= 1024, "scratch must hold the waves of a 1024-thread block");

/* `name`: the block's dynamic shared memory as an array of T (the launch sets its size, at
 * most `max_bytes`). The host execution model gives every block a fixed buffer of
 * `max_bytes` instead (its blocks run one at a time per worker thread). */
#if defined(VMAF_HIPCPU)
#define VMAF_DYNAMIC_SHARED(T, name, max_bytes) \
    static thread_local T name[(max_bytes) / sizeof(T)]
#else
#define VMAF_DYNAMIC_SHARED(T, name, max_bytes) extern __shared__ T name[]
#endif
/* The bytes of dynamic shared memory the launch gave (checked by the host execution model;
 * GPU code gets `max_bytes`, the most the kernel is ever launched with). */
#if defined(VMAF_HIPCPU)
#define VMAF_DYNAMIC_SHARED_BYTES(max_bytes) ((int)::hipcpu::dynamic_shared_bytes())
#else
#define VMAF_DYNAMIC_SHARED_BYTES(max_bytes) (max_bytes)
#endif

/* Linear index of the calling thread in its block (x fastest, as warps are formed). */
VMAF_DEVICE unsigned vmaf_thread_rank(void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/* Sums N values per thread over the block with one barrier: returns, in the thread of rank
 * q < N, the total of value q (zero elsewhere), so the N totals are finished side by side
 * rather than one after another in one thread. `scratch` must hold N * VMAF_MAX_WARPS
 * values. Every thread of the block must call it. */
template <int N> VMAF_DEVICE vmaf_u64 vmaf_block_sums_u64(vmaf_u64 v[N], vmaf_u64 *scratch)
{
    const unsigned rank = vmaf_thread_rank();
    const unsigned lane = rank % warpSize;
    const unsigned warp = rank / warpSize;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        for (int j = 0; j < N; j++)
            v[j] += VMAF_SHFL_DOWN(v[j], offset);
    }
    if (lane == 0) {
        for (int j = 0; j < N; j++)
            scratch[N * warp + j] = v[j];
    }
    __syncthreads();
    vmaf_u64 total = 0;
    if (rank < (unsigned)N) {
        const unsigned n_threads = blockDim.x * blockDim.y * blockDim.z;
        const unsigned n_warps = (n_threads + warpSize - 1) / warpSize;
        VMAF_ASSUME(n_warps <= VMAF_MAX_WARPS, "block sum: more waves than scratch slots");
        for (unsigned i = 0; i < n_warps; i++)
            total += scratch[N * i + rank];
    }
    return total;
}

/* Sums `v` over the block (1-, 2- or 3-dimensional); the total is valid in the thread of rank
 * 0 only. `scratch` must hold VMAF_MAX_WARPS values. Every thread of the block must call it. */
VMAF_DEVICE vmaf_u64 vmaf_block_sum_u64(vmaf_u64 v, vmaf_u64 *scratch)
{
    return vmaf_block_sums_u64<1>(&v, scratch);
}

/* Four consecutive samples in one load: u8 -> u32, u16 -> u64 (little endian, sample 0 in
 * the low bits). Callers check alignment with vmaf_vec4_aligned. */
template <typename T> struct VmafVec4;
template <> struct VmafVec4<vmaf_u8> {
    typedef vmaf_u32 type;
};
template <> struct VmafVec4<vmaf_u16> {
    typedef vmaf_u64 type;
};

/* Whether rows of both planes, read from column xs on, move in 4-sample vectors. */
template <typename T>
VMAF_DEVICE bool vmaf_vec4_aligned(const T *a, const T *b, int stride, int xs)
{
    const vmaf_u64 bits = (vmaf_u64)a | (vmaf_u64)b |
                          (vmaf_u64)((long long)stride * (long long)sizeof(T)) |
                          (vmaf_u64)((long long)xs * (long long)sizeof(T));
    return bits % sizeof(typename VmafVec4<T>::type) == 0;
}

/* A vector access; through a byte copy on the host model (no aliasing assumptions). */
template <typename V> VMAF_DEVICE V vmaf_load_vec(const void *p)
{
#if defined(VMAF_HIPCPU)
    V v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
#else
    return *(const V *)p;
#endif
}

VMAF_DEVICE void vmaf_store_u64(void *p, vmaf_u64 v)
{
#if defined(VMAF_HIPCPU)
    __builtin_memcpy(p, &v, sizeof v);
#else
    *(vmaf_u64 *)p = v;
#endif
}

/* The four samples of a vector as four u16 lanes of a u64. */
VMAF_DEVICE vmaf_u64 vmaf_widen4(vmaf_u32 v)
{
    const vmaf_u32 lo = (v & 0xffu) | ((v & 0xff00u) << 8);
    const vmaf_u32 hi = ((v >> 16) & 0xffu) | ((v >> 8) & 0xff0000u);
    return (vmaf_u64)lo | ((vmaf_u64)hi << 32);
}
VMAF_DEVICE vmaf_u64 vmaf_widen4(vmaf_u64 v)
{
    return v;
}

/* Where vmaf_stage_pair puts window samples: both planes as u16. A sink takes four
 * consecutive samples of each plane as u16 lanes of a u64 (put4, column c a multiple of 4) or
 * one sample of each (put1), at window row r, column c. */
template <int W> struct VmafStageU16 {
    vmaf_u16 (*ref)[W];
    vmaf_u16 (*dis)[W];
    __device__ __forceinline__ void put4(int r, int c, vmaf_u64 a, vmaf_u64 b) const
    {
        vmaf_store_u64(&ref[r][c], a);
        vmaf_store_u64(&dis[r][c], b);
    }
    __device__ __forceinline__ void put1(int r, int c, vmaf_u32 a, vmaf_u32 b) const
    {
        ref[r][c] = (vmaf_u16)a;
        dis[r][c] = (vmaf_u16)b;
    }
};

/* Stages the IN_W x IN_H window at (xs, ys) of two planes into `sink` sample by sample, with
 * a block of BW x BH threads (tid: rank in the block), each coordinate mapped into the plane
 * through M::at(i, n); every thread issues all its loads before its first store. Works for
 * any window, alignment and sample type the sink's put1 takes (ADM's int32 planes too). */
template <typename T, int IN_W, int IN_H, int BW, int BH, typename M, typename S>
VMAF_DEVICE void vmaf_stage_pair_each(const T *ref, const T *dis, int w, int h, int stride,
                                      int xs, int ys, const S &sink, int tid)
{
    const int RPT = (IN_H + BH - 1) / BH, CPT = (IN_W + BW - 1) / BW;
    const int tx = tid % BW, ty = tid / BW;
    vmaf_u32 a[RPT][CPT], b[RPT][CPT];
    int col[CPT];
#pragma unroll
    for (int c = 0; c < CPT; c++)
        col[c] = M::at(xs + tx + c * BW, w);
#pragma unroll
    for (int r = 0; r < RPT; r++) {
        if (ty + r * BH >= IN_H)
            continue;
        const long long row = (long long)M::at(ys + ty + r * BH, h) * stride;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            if (tx + c * BW < IN_W) {
                a[r][c] = (vmaf_u32)ref[row + col[c]];
                b[r][c] = (vmaf_u32)dis[row + col[c]];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RPT; r++) {
        if (ty + r * BH >= IN_H)
            continue;
#pragma unroll
        for (int c = 0; c < CPT; c++) {
            if (tx + c * BW < IN_W)
                sink.put1(ty + r * BH, tx + c * BW, a[r][c], b[r][c]);
        }
    }
}

/* Stages the IN_W x IN_H window at (xs, ys) of two 8- or 16-bit planes into `sink` (shared
 * memory), with a block of BW x BH threads (tid: rank in the block), the block waiting for
 * global memory once rather than once per row: a window inside the plane with 4-sample
 * alignment moves in 4-sample vectors, others through vmaf_stage_pair_each. */
template <typename T, int IN_W, int IN_H, int BW, int BH, typename M, typename S>
VMAF_DEVICE void vmaf_stage_pair(const T *ref, const T *dis, int w, int h, int stride, int xs,
                                 int ys, const S &sink, int tid)
{
    const int NT = BW * BH;
    typedef typename VmafVec4<T>::type V;
    const bool inside = xs >= 0 && ys >= 0 && xs + IN_W <= w && ys + IN_H <= h;
    if (IN_W % 4 == 0 && inside && vmaf_vec4_aligned(ref, dis, stride, xs)) {
        const int VPR = IN_W / 4, NV = IN_H * VPR, PER = (NV + NT - 1) / NT;
        V a[PER], b[PER];
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int i = tid + k * NT;
            if (i < NV) {
                const long long off = (long long)(ys + i / VPR) * stride + xs + 4 * (i % VPR);
                a[k] = vmaf_load_vec<V>(ref + off);
                b[k] = vmaf_load_vec<V>(dis + off);
            }
        }
#pragma unroll
        for (int k = 0; k < PER; k++) {
            const int i = tid + k * NT;
            if (i < NV) {
                sink.put4(i / VPR, 4 * (i % VPR), vmaf_widen4(a[k]), vmaf_widen4(b[k]));
            }
        }
        return;
    }
    vmaf_stage_pair_each<T, IN_W, IN_H, BW, BH, M>(ref, dis, w, h, stride, xs, ys, sink, tid);
}

#endif /* VMAF_PRELUDE_H */
