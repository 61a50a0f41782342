/* Integer motion on the GPU: SAD of the blurred difference of two consecutive
 * reference luma planes, as in src/feature/motion/cpu.rs (blurred_diff_sad).
 *
 * The CPU sums each row's absolute values in a wrapping 32-bit counter and the
 * rows in 64 bits. To keep that exactly, blocks add their part of a row into a
 * 64-bit per-row slot, and a second kernel truncates each row to 32 bits before
 * the final 64-bit sum. */
#include "vmaf_prelude.h"

__constant__ vmaf_i32 motion_filter[5] = {3571, 16004, 26386, 16004, 3571};

/* One block of 32 x 8 threads covers a 32 x 32 tile: the difference plane is
 * staged with a mirrored border (4 columns on the left, so rows start 4-sample
 * aligned for vector loads), the vertical pass writes the rounded column sums to
 * shared memory, then each lane finishes four outputs of one row (lane = row,
 * warp = four columns), the eight partial row sums meet in shared memory and one
 * lane per row adds the row total into the row's slot. */
#define MOTION_TW 32
#define MOTION_TH 32
#define MOTION_BH 8
/* Staged columns: x0 - 4 .. x0 + 36 (the filter needs x0 - 2 .. x0 + 34). */
#define MOTION_SW (MOTION_TW + 8)
#define MOTION_SH (MOTION_TH + 4)
/* Vertical outputs per thread in the main pass. */
#define MOTION_RUN (MOTION_TH / MOTION_BH)
/* Threads of the one-block reduction kernel. */
#define MOTION_BLOCK 256

VMAF_DEVICE int motion_mirror(int i, int n)
{
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * n - i - 2;
    /* Staging beyond the mirrored border feeds no output; stay in bounds. */
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return i;
}

/* 8-bit differences fit 32-bit vertical sums; deeper ones need 64 bits. */
template <typename T> struct MotionAcc {
    typedef vmaf_i64 type;
};
template <> struct MotionAcc<vmaf_u8> {
    typedef vmaf_i32 type;
};

/* Window samples into prev - cur (vmaf_stage_pair's sink). */
struct MotionDiff {
    vmaf_i32 (*d)[MOTION_SW];
    __device__ __forceinline__ void put4(int r, int c, vmaf_u64 a, vmaf_u64 b) const
    {
        for (int l = 0; l < 4; l++)
            d[r][c + l] = (vmaf_i32)((a >> (16 * l)) & 0xffffu) -
                          (vmaf_i32)((b >> (16 * l)) & 0xffffu);
    }
    __device__ __forceinline__ void put1(int r, int c, vmaf_u32 a, vmaf_u32 b) const
    {
        d[r][c] = (vmaf_i32)a - (vmaf_i32)b;
    }
};

/* motion_mirror for vmaf_stage_pair. */
struct MotionMirror {
    static __device__ __forceinline__ int at(int i, int n)
    {
        return motion_mirror(i, n);
    }
};

template <typename T>
VMAF_DEVICE void motion_rows(const T *prev, const T *cur, int w, int h, int stride, int shift,
                             vmaf_u64 *row_sums)
{
    typedef typename MotionAcc<T>::type A;
    __shared__ vmaf_i32 s_d[MOTION_SH][MOTION_SW];
    /* Column c holds the vertical output at x0 - 2 + c; odd pitch for the row-wise reads. */
    __shared__ vmaf_i32 s_y[MOTION_TH][MOTION_TW + 5];
    __shared__ vmaf_u32 s_part[MOTION_TH][MOTION_BH + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * MOTION_TW + tx;
    const int x0 = blockIdx.x * MOTION_TW, y0 = blockIdx.y * MOTION_TH;
    const A round = (A)1 << (shift - 1);

    const MotionDiff sink = {s_d};
    vmaf_stage_pair<T, MOTION_SW, MOTION_SH, MOTION_TW, MOTION_BH, MotionMirror>(
        prev, cur, w, h, stride, x0 - 4, y0 - 2, sink, tid);
    __syncthreads();

    /* Vertical pass: columns 0..31 in runs of MOTION_RUN rows, then the four right-hand
     * columns one output per thread. Staged column c + 2 is output column c. */
    {
        const int r0 = ty * MOTION_RUN;
        A acc[MOTION_RUN];
#pragma unroll
        for (int o = 0; o < MOTION_RUN; o++)
            acc[o] = 0;
#pragma unroll
        for (int j = 0; j < MOTION_RUN + 4; j++) {
            const A v = (A)s_d[r0 + j][tx + 2];
#pragma unroll
            for (int o = 0; o < MOTION_RUN; o++) {
                const int k = j - o;
                if (k >= 0 && k < 5)
                    acc[o] += (A)motion_filter[k] * v;
            }
        }
#pragma unroll
        for (int o = 0; o < MOTION_RUN; o++)
            s_y[r0 + o][tx] = (vmaf_i32)((acc[o] + round) >> shift);
        if (tid < 4 * MOTION_TH) {
            const int c = MOTION_TW + tid % 4, r = tid / 4;
            A a = 0;
#pragma unroll
            for (int k = 0; k < 5; k++)
                a += (A)motion_filter[k] * (A)s_d[r + k][c + 2];
            s_y[r][c] = (vmaf_i32)((a + round) >> shift);
        }
    }
    __syncthreads();

    /* Horizontal pass: lane = row, warp = four output columns. */
    {
        const int row = tx, c0 = ty * 4;
        vmaf_i32 y[8];
#pragma unroll
        for (int k = 0; k < 8; k++)
            y[k] = s_y[row][c0 + k];
        vmaf_u32 part = 0;
#pragma unroll
        for (int o = 0; o < 4; o++) {
            /* Vertical results reach 2^16 at every depth: 64-bit sums here. */
            vmaf_i64 acc = 0;
#pragma unroll
            for (int k = 0; k < 5; k++)
                acc += (vmaf_i64)motion_filter[k] * y[o + k];
            const vmaf_i32 b = (vmaf_i32)((acc + 32768) >> 16);
            if (x0 + c0 + o < w)
                part += (vmaf_u32)(b < 0 ? -b : b);
        }
        s_part[row][ty] = part;
    }
    __syncthreads();
    /* 32 values below 2^17 fit 32 bits. */
    if (tid < MOTION_TH && y0 + tid < h) {
        vmaf_u32 v = 0;
#pragma unroll
        for (int k = 0; k < MOTION_BH; k++)
            v += s_part[tid][k];
        if (v)
            VMAF_ATOMIC_ADD_U64(&row_sums[y0 + tid], v);
    }
}

VMAF_KERNEL void vmaf_motion_rows_u8(const vmaf_u8 *prev, const vmaf_u8 *cur, int w, int h,
                                     int stride, int shift, vmaf_u64 *row_sums)
{
    motion_rows<vmaf_u8>(prev, cur, w, h, stride, shift, row_sums);
}

VMAF_KERNEL void vmaf_motion_rows_u16(const vmaf_u16 *prev, const vmaf_u16 *cur, int w, int h,
                                      int stride, int shift, vmaf_u64 *row_sums)
{
    motion_rows<vmaf_u16>(prev, cur, w, h, stride, shift, row_sums);
}

/* One block: out[0] = sum over rows of (u32)row_sums[row]. */
VMAF_KERNEL void vmaf_motion_reduce(const vmaf_u64 *row_sums, int h, vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    vmaf_u64 v = 0;
    for (int i = threadIdx.x; i < h; i += blockDim.x)
        v += (vmaf_u32)row_sums[i];
    const vmaf_u64 total = vmaf_block_sum_u64(v, scratch);
    if (threadIdx.x == 0)
        out[0] = total;
}
