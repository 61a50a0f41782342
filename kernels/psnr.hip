/* PSNR on the GPU: the integer sum of squared differences of one plane.
 *
 * The host turns the sums into PSNR exactly as the CPU path does; integer
 * accumulation makes the result independent of the reduction order, so it is
 * bit-identical to the CPU sum. Launch with a 1-D block (any size up to 1024)
 * and a 2-D grid: x tiles a row, y walks rows; both loops are grid-strided so
 * any grid size is correct. `out` must be zeroed before the first launch. */
#include "vmaf_prelude.h"

/* Squared difference of two samples; fits 32 bits for 16-bit input. */
VMAF_DEVICE vmaf_u64 vmaf_sq_diff(vmaf_u32 a, vmaf_u32 b)
{
    const vmaf_i64 d = (vmaf_i64)a - (vmaf_i64)b;
    return (vmaf_u64)(d * d);
}

VMAF_KERNEL void vmaf_psnr_sse_u8(const vmaf_u8 *ref, const vmaf_u8 *dis,
                                  vmaf_u32 w, vmaf_u32 h,
                                  vmaf_u32 ref_stride, vmaf_u32 dis_stride,
                                  vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    vmaf_u64 acc = 0;
    for (vmaf_u32 y = blockIdx.y; y < h; y += gridDim.y) {
        const vmaf_u8 *r = ref + (vmaf_u64)y * ref_stride;
        const vmaf_u8 *d = dis + (vmaf_u64)y * dis_stride;
        for (vmaf_u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < w;
             x += blockDim.x * gridDim.x)
            acc += vmaf_sq_diff(r[x], d[x]);
    }
    const vmaf_u64 total = vmaf_block_sum_u64(acc, scratch);
    if (threadIdx.x == 0 && total != 0)
        VMAF_ATOMIC_ADD_U64(out, total);
}

VMAF_KERNEL void vmaf_psnr_sse_u16(const vmaf_u16 *ref, const vmaf_u16 *dis,
                                   vmaf_u32 w, vmaf_u32 h,
                                   vmaf_u32 ref_stride, vmaf_u32 dis_stride,
                                   vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    vmaf_u64 acc = 0;
    for (vmaf_u32 y = blockIdx.y; y < h; y += gridDim.y) {
        const vmaf_u16 *r = ref + (vmaf_u64)y * ref_stride;
        const vmaf_u16 *d = dis + (vmaf_u64)y * dis_stride;
        for (vmaf_u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < w;
             x += blockDim.x * gridDim.x)
            acc += vmaf_sq_diff(r[x], d[x]);
    }
    const vmaf_u64 total = vmaf_block_sum_u64(acc, scratch);
    if (threadIdx.x == 0 && total != 0)
        VMAF_ATOMIC_ADD_U64(out, total);
}
