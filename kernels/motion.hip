/* Integer motion on the GPU: SAD of the blurred difference of two consecutive
 * reference luma planes, as in src/feature/motion/mod.rs.
 *
 * The CPU sums each row's absolute values in a wrapping 32-bit counter and the
 * rows in 64 bits. To keep that exactly, blocks add their part of a row into a
 * 64-bit per-row slot, and a second kernel truncates each row to 32 bits before
 * the final 64-bit sum. */
#include "vmaf_prelude.h"

__constant__ vmaf_i32 motion_filter[5] = {3571, 16004, 26386, 16004, 3571};

/* One block of 32 x 8 threads covers a 32 x 32 tile: the difference plane is
 * staged with a 2-sample mirrored border, the vertical pass writes the rounded
 * column sums to shared memory, and each warp finishes one row of 32 outputs
 * at a time and adds its row total into the row's slot. */
#define MOTION_TW 32
#define MOTION_TH 32
#define MOTION_BH 8
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

template <typename T>
VMAF_DEVICE void motion_rows(const T *prev, const T *cur, int w, int h, int stride, int shift,
                             vmaf_u64 *row_sums)
{
    typedef typename MotionAcc<T>::type A;
    __shared__ vmaf_i32 s_d[MOTION_TH + 4][MOTION_TW + 4];
    __shared__ vmaf_i32 s_y[MOTION_TH][MOTION_TW + 5];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x0 = blockIdx.x * MOTION_TW, y0 = blockIdx.y * MOTION_TH;
    const A round = (A)1 << (shift - 1);

    for (int r = ty; r < MOTION_TH + 4; r += MOTION_BH) {
        const long long row = (long long)motion_mirror(y0 - 2 + r, h) * stride;
        for (int c = tx; c < MOTION_TW + 4; c += MOTION_TW) {
            const long long off = row + motion_mirror(x0 - 2 + c, w);
            s_d[r][c] = (vmaf_i32)prev[off] - (vmaf_i32)cur[off];
        }
    }
    __syncthreads();

    for (int i = ty * MOTION_TW + tx; i < MOTION_TH * (MOTION_TW + 4); i += MOTION_TW * MOTION_BH) {
        const int r = i / (MOTION_TW + 4), c = i % (MOTION_TW + 4);
        A acc = 0;
#pragma unroll
        for (int k = 0; k < 5; k++)
            acc += (A)motion_filter[k] * (A)s_d[r + k][c];
        s_y[r][c] = (vmaf_i32)((acc + round) >> shift);
    }
    __syncthreads();

    const int x = x0 + tx;
    for (int r = ty; r < MOTION_TH; r += MOTION_BH) {
        vmaf_u32 v = 0;
        if (x < w) {
            /* Vertical results reach 2^16 at every depth: 64-bit sums here. */
            vmaf_i64 acc = 0;
#pragma unroll
            for (int k = 0; k < 5; k++)
                acc += (vmaf_i64)motion_filter[k] * s_y[r][tx + k];
            const vmaf_i32 b = (vmaf_i32)((acc + 32768) >> 16);
            v = (vmaf_u32)(b < 0 ? -b : b);
        }
        /* Sum the 32 lanes of this row (offsets below 32 keep a 64-wide
         * wavefront's two rows apart); 32 values below 2^17 fit 32 bits. */
        for (int offset = 16; offset > 0; offset /= 2)
            v += VMAF_SHFL_DOWN(v, offset);
        if (tx == 0 && y0 + r < h && v)
            VMAF_ATOMIC_ADD_U64(&row_sums[y0 + r], v);
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
