/* Integer motion on the GPU: SAD of the blurred difference of two consecutive
 * reference luma planes, as in src/feature/motion.rs.
 *
 * The CPU sums each row's absolute values in a wrapping 32-bit counter and the
 * rows in 64 bits. To keep that exactly, blocks add their part of a row into a
 * 64-bit per-row slot, and a second kernel truncates each row to 32 bits before
 * the final 64-bit sum. */
#include "vmaf_prelude.h"

__constant__ vmaf_i64 motion_filter[5] = {3571, 16004, 26386, 16004, 3571};

#define MOTION_BLOCK 256

VMAF_DEVICE int motion_mirror(int i, int n)
{
    if (i < 0)
        return -i;
    if (i >= n)
        return 2 * n - i - 2;
    return i;
}

template <typename T>
VMAF_DEVICE void motion_rows(const T *prev, const T *cur, int w, int h, int stride, int shift,
                             vmaf_u64 *row_sums)
{
    __shared__ vmaf_i32 s_y[MOTION_BLOCK + 4];
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    const int row = blockIdx.y;
    const int x0 = blockIdx.x * MOTION_BLOCK;
    const vmaf_i64 round = 1ll << (shift - 1);

    for (int i = threadIdx.x; i < MOTION_BLOCK + 4; i += blockDim.x) {
        const int col = motion_mirror(x0 - 2 + i, w);
        vmaf_i32 y = 0;
        if (x0 - 2 + i < w + 2) {
            vmaf_i64 acc = 0;
            for (int k = 0; k < 5; k++) {
                const long long r = motion_mirror(row - 2 + k, h);
                acc += motion_filter[k] *
                       ((vmaf_i64)prev[r * stride + col] - (vmaf_i64)cur[r * stride + col]);
            }
            y = (vmaf_i32)((acc + round) >> shift);
        }
        s_y[i] = y;
    }
    __syncthreads();

    vmaf_u64 v = 0;
    const int x = x0 + threadIdx.x;
    if (x < w) {
        vmaf_i64 acc = 0;
        for (int k = 0; k < 5; k++)
            acc += motion_filter[k] * (vmaf_i64)s_y[threadIdx.x + k];
        const vmaf_i32 b = (vmaf_i32)((acc + 32768) >> 16);
        v = (vmaf_u32)(b < 0 ? -b : b);
    }
    const vmaf_u64 total = vmaf_block_sum_u64(v, scratch);
    if (threadIdx.x == 0 && total)
        VMAF_ATOMIC_ADD_U64(&row_sums[row], total);
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
