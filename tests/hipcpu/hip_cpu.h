/* hip_cpu.h: a small CPU execution model of the HIP built-ins kernels/<name>.hip use, so the
 * kernels compile as plain C++17 (g++/clang++ with -DVMAF_HIPCPU; kernels/vmaf_prelude.h
 * includes this header in that mode) and run on the host with 64- or 32-lane wavefront
 * semantics. Written for this project's tests (src/gpu/hipcpu.rs, which each feature's
 * hipcpu_tests.rs launches through); not a HIP runtime.
 *
 * Model:
 *  - every GPU thread of a block is a fiber with its own stack; one OS thread runs one block
 *    at a time, switching fibers only at __syncthreads and warp shuffles, so code that relies
 *    on lanes running in lockstep without a synchronisation point is not hidden;
 *  - blocks run in any order on a few OS threads (global atomics are real atomics);
 *  - __shared__ is static thread_local storage: per OS thread, hence per running block;
 *  - waves are ranks [k * warpSize, (k + 1) * warpSize) of the block's linear thread rank
 *    (x fastest), warpSize being chosen per launch (64 or 32);
 *  - a shuffle completes only when every lane of the wave that exists in the block has
 *    reached the same shuffle (same source line, same count of shuffles so far, same width);
 *    a lane that exited, waits at a barrier or reads a lane absent from the block fails the
 *    launch with a message instead of returning garbage: that is the bug class (a lane
 *    returning early before a full-wave shuffle, a block size that is not a multiple of the
 *    wave) that never shows on 32-lane NVIDIA hardware;
 *  - __syncthreads releases when every thread that has not exited waits at a barrier, and
 *    fails the launch if they wait at different barriers (call site or count so far).
 * Launch errors come back as a message; nothing aborts the process. */
#ifndef VMAF_HIP_CPU_H
#define VMAF_HIP_CPU_H

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};

namespace hipcpu {

enum class State : unsigned char { Ready, Barrier, Shuffle, Done };

/* One GPU thread. */
struct Lane {
    void *sp = nullptr; /* saved stack pointer (x86-64 switch) */
    void *uctx = nullptr; /* ucontext_t (other targets) */
    char *stack = nullptr;
    uint3 tid{0, 0, 0};
    unsigned rank = 0;
    State state = State::Ready;
    unsigned barriers = 0; /* __syncthreads passed */
    int barrier_line = 0; /* call site of the barrier waited at */
    unsigned shuffles = 0; /* shuffles started */
    /* The pending shuffle: operand bits, source lane (-1: keep own), call site, width. */
    uint64_t in = 0, out = 0;
    long src = -1;
    int line = 0;
    int width = 0;
};

/* Per-launch constants every fiber of the launch reads. */
struct Launch {
    dim3 grid, block;
    int warp;
    unsigned nthreads;
    /* The launch's dynamic shared memory, which VMAF_DYNAMIC_SHARED_BYTES reports. */
    size_t shmem;
    std::function<void()> body;
};

/* One running block (per OS worker thread). */
struct Block {
    const Launch *launch = nullptr;
    uint3 idx{0, 0, 0};
    std::vector<Lane> lanes;
    void *sched_sp = nullptr;
    void *sched_uctx = nullptr;
    std::string error;
};

extern thread_local Block *tl_block;
extern thread_local Lane *tl_lane;

/* Fails the running block with `msg` (the launch reports it) and never returns to the caller:
 * the fiber is abandoned. */
[[noreturn]] void fail(const std::string &msg);
/* Back to the scheduler until the scheduler resumes this fiber. */
void yield_to_scheduler();
/* Shuffle engine: records the operand and waits for the wave; returns the source lane's bits. */
uint64_t shuffle(uint64_t bits, long src, int width, int line);
void syncthreads(int line);

/* Runs body over the grid; "" on success, else the first failure. */
std::string run(dim3 grid, dim3 block, int warp, size_t shmem, std::function<void()> body);

inline int warp_size() { return tl_block->launch->warp; }
inline size_t dynamic_shared_bytes() { return tl_block->launch->shmem; }

inline unsigned lane_id() { return tl_lane->rank % (unsigned)warp_size(); }

/* Width checks shared by the shuffles: a power of two no larger than the wave. */
inline int check_width(int width)
{
    if (width <= 0 || width > warp_size() || (width & (width - 1)) != 0)
        fail("shuffle width " + std::to_string(width) + " is not a power of two <= warpSize");
    return width;
}

template <typename T> inline uint64_t to_bits(T v)
{
    static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 8, "shuffle operand");
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    return b;
}
template <typename T> inline T from_bits(uint64_t b)
{
    T v;
    std::memcpy(&v, &b, sizeof(T));
    return v;
}

/* HIP/CUDA semantics within segments of `width` lanes: down reads lane + delta unless that
 * leaves the segment; up reads lane - delta likewise; xor reads lane ^ mask unless that is in
 * a later segment; idx reads lane src of the own segment. */
template <typename T> inline T shfl_down(T v, unsigned delta, int width, int line)
{
    const unsigned w = (unsigned)check_width(width), lane = lane_id();
    const long src = (lane % w) + delta < w ? (long)(lane + delta) : -1;
    return from_bits<T>(shuffle(to_bits(v), src, width, line));
}
template <typename T> inline T shfl_up(T v, unsigned delta, int width, int line)
{
    const unsigned w = (unsigned)check_width(width), lane = lane_id();
    const long src = lane % w >= delta ? (long)(lane - delta) : -1;
    return from_bits<T>(shuffle(to_bits(v), src, width, line));
}
template <typename T> inline T shfl_xor(T v, int mask, int width, int line)
{
    const unsigned w = (unsigned)check_width(width), lane = lane_id();
    const unsigned s = lane ^ (unsigned)mask;
    const long src = s < (lane & ~(w - 1)) + w ? (long)s : -1;
    return from_bits<T>(shuffle(to_bits(v), src, width, line));
}
template <typename T> inline T shfl_idx(T v, int src_lane, int width, int line)
{
    const unsigned w = (unsigned)check_width(width), lane = lane_id();
    const long src = (long)((lane & ~(w - 1)) + ((unsigned)src_lane & (w - 1)));
    return from_bits<T>(shuffle(to_bits(v), src, width, line));
}

/* launch(kernel, grid, block, shmem, args...): "" on success, else why the launch failed. */
template <typename... P, typename... A>
std::string launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, int warp,
                   A... args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    return run(grid, block, warp, shmem, [=]() { kernel(static_cast<P>(args)...); });
}

} // namespace hipcpu

/* ---- The HIP vocabulary, as the kernels spell it. ---- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__ static
#define __shared__ static thread_local
#define __launch_bounds__(...)

#define threadIdx (::hipcpu::tl_lane->tid)
#define blockIdx (::hipcpu::tl_block->idx)
#define blockDim (::hipcpu::tl_block->launch->block)
#define gridDim (::hipcpu::tl_block->launch->grid)
#define warpSize (::hipcpu::warp_size())

#define __syncthreads() ::hipcpu::syncthreads(__LINE__)

/* Width defaults to the wave, as in HIP; the line identifies the call site. */
#define __shfl_down(v, ...) ::hipcpu::shfl_down_at(__LINE__, (v), __VA_ARGS__)
#define __shfl_up(v, ...) ::hipcpu::shfl_up_at(__LINE__, (v), __VA_ARGS__)
#define __shfl_xor(v, ...) ::hipcpu::shfl_xor_at(__LINE__, (v), __VA_ARGS__)
#define __shfl(v, ...) ::hipcpu::shfl_idx_at(__LINE__, (v), __VA_ARGS__)
namespace hipcpu {
template <typename T> inline T shfl_down_at(int line, T v, unsigned d, int w = 0)
{
    return shfl_down(v, d, w ? w : warp_size(), line);
}
template <typename T> inline T shfl_up_at(int line, T v, unsigned d, int w = 0)
{
    return shfl_up(v, d, w ? w : warp_size(), line);
}
template <typename T> inline T shfl_xor_at(int line, T v, int m, int w = 0)
{
    return shfl_xor(v, m, w ? w : warp_size(), line);
}
template <typename T> inline T shfl_idx_at(int line, T v, int s, int w = 0)
{
    return shfl_idx(v, s, w ? w : warp_size(), line);
}
} // namespace hipcpu

/* Atomics: real ones, since blocks run on several OS threads. */
inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

/* Correctly rounded arithmetic: the host's IEEE operations, built with -ffp-contract=off. */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __int2float_rn(int a) { return (float)a; }
inline float __ll2float_rn(long long a) { return (float)a; }
inline unsigned __float_as_uint(float a)
{
    unsigned u;
    std::memcpy(&u, &a, 4);
    return u;
}
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double __longlong_as_double(long long a)
{
    double d;
    std::memcpy(&d, &a, 8);
    return d;
}
inline long long __double_as_longlong(double a)
{
    long long l;
    std::memcpy(&l, &a, 8);
    return l;
}
inline int __clz(int a) { return a == 0 ? 32 : __builtin_clz((unsigned)a); }
inline int __clzll(long long a) { return a == 0 ? 64 : __builtin_clzll((unsigned long long)a); }

#endif /* VMAF_HIP_CPU_H */
