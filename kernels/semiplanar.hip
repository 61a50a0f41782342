/* Semi-planar decoder frames (NV12, P010, P012, P016) turned into the planar
 * planes the feature kernels read.
 *
 * A semi-planar 4:2:0 frame is a luma plane followed by one plane of
 * interleaved (Cb, Cr) pairs. P01x store each sample in the high bits of a
 * 16-bit word: `shift` (6 for P010, 4 for P012, 0 for P016) brings it back to
 * its value, so the planes equal those of the yuv420p10le/12le/16le frame the
 * CPU scores. Launch with a 1-D block (any size up to 1024) and a 2-D grid: x
 * tiles a row, y walks rows; both loops are grid-strided, so any grid size
 * covers the plane. Pitches are in samples. */
#include "vmaf_prelude.h"

/* dst (dense, w per row) = src >> shift, for P010/P012 luma. */
VMAF_KERNEL void vmaf_semiplanar_luma_u16(const vmaf_u16 *src, vmaf_u32 src_pitch,
                                          vmaf_u16 *dst, vmaf_u32 w, vmaf_u32 h,
                                          vmaf_u32 shift)
{
    for (vmaf_u32 y = blockIdx.y; y < h; y += gridDim.y) {
        const vmaf_u16 *s = src + (vmaf_u64)y * src_pitch;
        vmaf_u16 *d = dst + (vmaf_u64)y * w;
        for (vmaf_u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < w;
             x += blockDim.x * gridDim.x)
            d[x] = (vmaf_u16)(s[x] >> shift);
    }
}

/* The (Cb, Cr) pairs of an 8-bit chroma plane, cw pairs per row, split into
 * two dense planes. */
VMAF_KERNEL void vmaf_semiplanar_chroma_u8(const vmaf_u8 *src, vmaf_u32 src_pitch,
                                           vmaf_u8 *u, vmaf_u8 *v, vmaf_u32 cw,
                                           vmaf_u32 ch)
{
    for (vmaf_u32 y = blockIdx.y; y < ch; y += gridDim.y) {
        const vmaf_u8 *s = src + (vmaf_u64)y * src_pitch;
        const vmaf_u64 row = (vmaf_u64)y * cw;
        for (vmaf_u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < cw;
             x += blockDim.x * gridDim.x) {
            u[row + x] = s[2 * x];
            v[row + x] = s[2 * x + 1];
        }
    }
}

/* As vmaf_semiplanar_chroma_u8 for 16-bit words, each shifted down by shift. */
VMAF_KERNEL void vmaf_semiplanar_chroma_u16(const vmaf_u16 *src, vmaf_u32 src_pitch,
                                            vmaf_u16 *u, vmaf_u16 *v, vmaf_u32 cw,
                                            vmaf_u32 ch, vmaf_u32 shift)
{
    for (vmaf_u32 y = blockIdx.y; y < ch; y += gridDim.y) {
        const vmaf_u16 *s = src + (vmaf_u64)y * src_pitch;
        const vmaf_u64 row = (vmaf_u64)y * cw;
        for (vmaf_u32 x = blockIdx.x * blockDim.x + threadIdx.x; x < cw;
             x += blockDim.x * gridDim.x) {
            u[row + x] = (vmaf_u16)(s[2 * x] >> shift);
            v[row + x] = (vmaf_u16)(s[2 * x + 1] >> shift);
        }
    }
}
