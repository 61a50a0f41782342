/* Integer VIF on the GPU: per-scale statistics and the decimating low-pass.
 *
 * Produces, per scale, the four exact integer sums the host turns into scores
 * (num_log, den_log, num_non_log, den_non_log), with the same integer steps as
 * the CPU reference in src/feature/vif.rs. Summation order does not matter for
 * integers, so any block layout gives the CPU's result bit for bit. The double
 * steps of the gain term use explicitly rounded operations: no FMA contraction. */
#include "vmaf_prelude.h"

/* Q16 Gaussian filters of the four scales, centred (tap k at offset k - F/2). */
__constant__ vmaf_u16 vif_filter[4][17] = {
    {489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640, 935, 489},
    {1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244},
    {3571, 16004, 26386, 16004, 3571},
    {10904, 43728, 10904},
};
__constant__ int vif_filter_width[4] = {17, 9, 5, 3};

#define VIF_TILE_W 32
#define VIF_TILE_H 16 /* two output rows per thread of a 32x8 block */
#define VIF_BLOCK_H 8
#define VIF_MAX_HALF 8

/* Mirror without repeating the edge sample: -1 -> 1, n -> n - 2. Staging loads of
 * a block's edge tiles can reach past one mirror; those samples feed no output,
 * so they are clamped into the plane only to keep every read in bounds. */
VMAF_DEVICE int vif_reflect(int i, int n)
{
    if (i < 0)
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    if (i < 0)
        i = 0;
    if (i >= n)
        i = n - 1;
    return i;
}

/* log2 in Q11 of a 32-bit value >= 2^17 through the 2^15..2^16 table. */
VMAF_DEVICE vmaf_i64 vif_log2_32(const vmaf_u16 *table, vmaf_u32 v)
{
    const int k = 16 - __clz((int)v);
    return (vmaf_i64)table[v >> k] + 2048 * k;
}

VMAF_DEVICE vmaf_i64 vif_log2_64(const vmaf_u16 *table, vmaf_u64 v)
{
    const int k = 48 - __clzll((long long)v);
    return (vmaf_i64)table[v >> k] + 2048 * k;
}

/* One block computes a VIF_TILE_W x VIF_TILE_H tile of per-pixel statistics
 * and adds its four sums to acc[0..3] (two's complement in u64).
 * `bpc` is the sample depth at scale 0; later scales are always 16-bit. */
template <typename T>
VMAF_DEVICE void vif_stats(const T *ref, const T *dis, int w, int h, int stride, int scale, int bpc,
                           const vmaf_u16 *log2_table, double egl, vmaf_u64 *acc)
{
    const int fw = vif_filter_width[scale];
    const int half = fw / 2;
    const int x0 = blockIdx.x * VIF_TILE_W;
    const int y0 = blockIdx.y * VIF_TILE_H;
    const int tid = threadIdx.y * VIF_TILE_W + threadIdx.x;
    const int nthreads = VIF_TILE_W * VIF_BLOCK_H;
    const int in_w = VIF_TILE_W + 2 * half;
    const int in_h = VIF_TILE_H + 2 * half;

    __shared__ vmaf_u16 s_ref[VIF_TILE_H + 2 * VIF_MAX_HALF][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u16 s_dis[VIF_TILE_H + 2 * VIF_MAX_HALF][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u32 t_mu1[VIF_TILE_H][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u32 t_mu2[VIF_TILE_H][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u32 t_xx[VIF_TILE_H][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u32 t_yy[VIF_TILE_H][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u32 t_xy[VIF_TILE_H][VIF_TILE_W + 2 * VIF_MAX_HALF];
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];

    for (int i = tid; i < in_w * in_h; i += nthreads) {
        const int r = i / in_w, c = i % in_w;
        const int gy = vif_reflect(y0 - half + r, h);
        const int gx = vif_reflect(x0 - half + c, w);
        s_ref[r][c] = (vmaf_u16)ref[(long long)gy * stride + gx];
        s_dis[r][c] = (vmaf_u16)dis[(long long)gy * stride + gx];
    }
    __syncthreads();

    /* Vertical pass with the per-scale rounding of the CPU path. */
    vmaf_u32 mu_round, mu_shift, sq_shift;
    vmaf_u64 sq_round;
    if (scale == 0) {
        mu_shift = bpc;
        mu_round = 1u << (bpc - 1);
        sq_shift = (bpc - 8) * 2;
        sq_round = bpc == 8 ? 0 : (1ull << (sq_shift - 1));
    } else {
        mu_shift = 16;
        mu_round = 32768;
        sq_shift = 16;
        sq_round = 32768;
    }
    for (int i = tid; i < VIF_TILE_H * in_w; i += nthreads) {
        const int r = i / in_w, c = i % in_w;
        vmaf_u32 a_mu1 = 0, a_mu2 = 0;
        vmaf_u64 a_xx = 0, a_yy = 0, a_xy = 0;
        if (sizeof(T) == 1) {
            /* 8-bit squares: the filter sums to 2^16, so every sum fits 32 bits. */
            vmaf_u32 xx32 = 0, yy32 = 0, xy32 = 0;
            for (int k = 0; k < fw; k++) {
                const vmaf_u32 f = vif_filter[scale][k];
                const vmaf_u32 x = s_ref[r + k][c];
                const vmaf_u32 y = s_dis[r + k][c];
                const vmaf_u32 fx = f * x, fy = f * y;
                a_mu1 += fx;
                a_mu2 += fy;
                xx32 += fx * x;
                yy32 += fy * y;
                xy32 += fx * y;
            }
            a_xx = xx32;
            a_yy = yy32;
            a_xy = xy32;
        } else {
            for (int k = 0; k < fw; k++) {
                const vmaf_u32 f = vif_filter[scale][k];
                const vmaf_u32 x = s_ref[r + k][c];
                const vmaf_u32 y = s_dis[r + k][c];
                const vmaf_u32 fx = f * x, fy = f * y;
                a_mu1 += fx;
                a_mu2 += fy;
                a_xx += (vmaf_u64)fx * x;
                a_yy += (vmaf_u64)fy * y;
                a_xy += (vmaf_u64)fx * y;
            }
        }
        t_mu1[r][c] = (vmaf_u16)((a_mu1 + mu_round) >> mu_shift);
        t_mu2[r][c] = (vmaf_u16)((a_mu2 + mu_round) >> mu_shift);
        t_xx[r][c] = (vmaf_u32)((a_xx + sq_round) >> sq_shift);
        t_yy[r][c] = (vmaf_u32)((a_yy + sq_round) >> sq_shift);
        t_xy[r][c] = (vmaf_u32)((a_xy + sq_round) >> sq_shift);
    }
    __syncthreads();

    vmaf_i64 num_log = 0, den_log = 0, num_non_log = 0, den_non_log = 0;
    const int tx = threadIdx.x;
    for (int ty = threadIdx.y; ty < VIF_TILE_H; ty += VIF_BLOCK_H) {
    if (x0 + tx < w && y0 + ty < h) {
        vmaf_u32 mu1 = 0, mu2 = 0;
        vmaf_u64 xx = 0, yy = 0, xy = 0;
        for (int k = 0; k < fw; k++) {
            const vmaf_u32 f = vif_filter[scale][k];
            mu1 += f * t_mu1[ty][tx + k];
            mu2 += f * t_mu2[ty][tx + k];
            xx += (vmaf_u64)f * t_xx[ty][tx + k];
            yy += (vmaf_u64)f * t_yy[ty][tx + k];
            xy += (vmaf_u64)f * t_xy[ty][tx + k];
        }
        const vmaf_u32 mu1_sq = (vmaf_u32)(((vmaf_u64)mu1 * mu1 + 2147483648ull) >> 32);
        const vmaf_u32 mu2_sq = (vmaf_u32)(((vmaf_u64)mu2 * mu2 + 2147483648ull) >> 32);
        const vmaf_u32 mu1_mu2 = (vmaf_u32)(((vmaf_u64)mu1 * mu2 + 2147483648ull) >> 32);
        const vmaf_u32 xx_f = (vmaf_u32)((xx + 32768) >> 16);
        const vmaf_u32 yy_f = (vmaf_u32)((yy + 32768) >> 16);
        const vmaf_u32 xy_f = (vmaf_u32)((xy + 32768) >> 16);
        const vmaf_i32 sigma1_sq = (vmaf_i32)(xx_f - mu1_sq);
        vmaf_i32 sigma2_sq = (vmaf_i32)(yy_f - mu2_sq);
        const vmaf_i32 sigma12 = (vmaf_i32)(xy_f - mu1_mu2);
        const vmaf_i32 sigma_nsq = 65536 << 1;
        if (sigma2_sq < 0)
            sigma2_sq = 0;
        if (sigma1_sq >= sigma_nsq) {
            den_log += vif_log2_32(log2_table, (vmaf_u32)(sigma_nsq + sigma1_sq)) - 2048 * 17;
            if (sigma12 > 0 && sigma2_sq > 0) {
                const double eps = 65536 * 1.0e-10;
                double g = __ddiv_rn((double)sigma12, __dadd_rn((double)sigma1_sq, eps));
                vmaf_i32 sv_sq = (vmaf_i32)__dsub_rn((double)sigma2_sq, __dmul_rn(g, (double)sigma12));
                if (sv_sq < 0)
                    sv_sq = 0;
                if (!(g < egl))
                    g = egl;
                const vmaf_u32 numer1 = (vmaf_u32)(sv_sq + sigma_nsq);
                const vmaf_i64 numer1_tmp =
                    (vmaf_i64)__dmul_rn(__dmul_rn(g, g), (double)sigma1_sq) + numer1;
                num_log += vif_log2_64(log2_table, (vmaf_u64)numer1_tmp) -
                           vif_log2_64(log2_table, (vmaf_u64)numer1);
            }
        } else {
            num_non_log += sigma2_sq;
            den_non_log += 1;
        }
    }
    }

    vmaf_u64 s;
    s = vmaf_block_sum_u64((vmaf_u64)num_log, scratch);
    if (tid == 0 && s) VMAF_ATOMIC_ADD_U64(&acc[0], s);
    __syncthreads();
    s = vmaf_block_sum_u64((vmaf_u64)den_log, scratch);
    if (tid == 0 && s) VMAF_ATOMIC_ADD_U64(&acc[1], s);
    __syncthreads();
    s = vmaf_block_sum_u64((vmaf_u64)num_non_log, scratch);
    if (tid == 0 && s) VMAF_ATOMIC_ADD_U64(&acc[2], s);
    __syncthreads();
    s = vmaf_block_sum_u64((vmaf_u64)den_non_log, scratch);
    if (tid == 0 && s) VMAF_ATOMIC_ADD_U64(&acc[3], s);
}

VMAF_KERNEL void vmaf_vif_stats_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h, int stride,
                                   int scale, int bpc, const vmaf_u16 *log2_table, double egl,
                                   vmaf_u64 *acc)
{
    vif_stats<vmaf_u8>(ref, dis, w, h, stride, scale, bpc, log2_table, egl, acc);
}

VMAF_KERNEL void vmaf_vif_stats_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                    int stride, int scale, int bpc, const vmaf_u16 *log2_table,
                                    double egl, vmaf_u64 *acc)
{
    vif_stats<vmaf_u16>(ref, dis, w, h, stride, scale, bpc, log2_table, egl, acc);
}

/* Low-pass with the next scale's filter and keep even rows and columns:
 * out is (w/2) x (h/2), dense with pitch out_stride samples. `scale` is the
 * scale being left (0..2); `bpc` matters only when leaving scale 0.
 * A block of VIF_DOWN_W x VIF_DOWN_H outputs stages its input window in shared
 * memory, runs the vertical pass only on the even rows it keeps, then the
 * horizontal pass on the even columns. */
#define VIF_DOWN_W 32
#define VIF_DOWN_H 8
#define VIF_DOWN_HALF 4 /* half width of the widest decimation filter (9 taps) */
#define VIF_DOWN_IN_W (2 * VIF_DOWN_W + 2 * VIF_DOWN_HALF)
#define VIF_DOWN_IN_H (2 * VIF_DOWN_H + 2 * VIF_DOWN_HALF)

template <typename T>
VMAF_DEVICE void vif_down(const T *ref, const T *dis, int w, int h, int stride, int scale, int bpc,
                          vmaf_u16 *out_ref, vmaf_u16 *out_dis, int out_stride)
{
    __shared__ vmaf_u16 s_ref[VIF_DOWN_IN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 s_dis[VIF_DOWN_IN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 v_ref[VIF_DOWN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 v_dis[VIF_DOWN_H][VIF_DOWN_IN_W];
    const int next = scale + 1;
    const int fw = vif_filter_width[next];
    const int half = fw / 2;
    const int ox0 = blockIdx.x * VIF_DOWN_W, oy0 = blockIdx.y * VIF_DOWN_H;
    /* Input window origin: row/column of tap 0 for the block's first output. */
    const int x0 = 2 * ox0 - half, y0 = 2 * oy0 - half;
    const int in_w = 2 * (VIF_DOWN_W - 1) + fw, in_h = 2 * (VIF_DOWN_H - 1) + fw;
    const int tid = vmaf_thread_rank();
    const int nthreads = blockDim.x * blockDim.y;

    for (int i = tid; i < in_w * in_h; i += nthreads) {
        const int r = i / in_w, c = i % in_w;
        const long long off = (long long)vif_reflect(y0 + r, h) * stride + vif_reflect(x0 + c, w);
        s_ref[r][c] = (vmaf_u16)ref[off];
        s_dis[r][c] = (vmaf_u16)dis[off];
    }
    __syncthreads();

    vmaf_u32 v_round, v_shift;
    if (scale == 0) {
        v_shift = bpc;
        v_round = 1u << (bpc - 1);
    } else {
        v_shift = 16;
        v_round = 32768;
    }
    for (int i = tid; i < VIF_DOWN_H * in_w; i += nthreads) {
        const int r = i / in_w, c = i % in_w;
        vmaf_u32 a_ref = 0, a_dis = 0;
        for (int k = 0; k < fw; k++) {
            const vmaf_u32 f = vif_filter[next][k];
            a_ref += f * (vmaf_u32)s_ref[2 * r + k][c];
            a_dis += f * (vmaf_u32)s_dis[2 * r + k][c];
        }
        v_ref[r][c] = (vmaf_u16)((a_ref + v_round) >> v_shift);
        v_dis[r][c] = (vmaf_u16)((a_dis + v_round) >> v_shift);
    }
    __syncthreads();

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int ox = ox0 + tx, oy = oy0 + ty;
    if (ox >= w / 2 || oy >= h / 2)
        return;
    vmaf_u32 h_ref = 0, h_dis = 0;
    for (int k = 0; k < fw; k++) {
        const vmaf_u32 f = vif_filter[next][k];
        h_ref += f * (vmaf_u32)v_ref[ty][2 * tx + k];
        h_dis += f * (vmaf_u32)v_dis[ty][2 * tx + k];
    }
    out_ref[(long long)oy * out_stride + ox] = (vmaf_u16)((h_ref + 32768) >> 16);
    out_dis[(long long)oy * out_stride + ox] = (vmaf_u16)((h_dis + 32768) >> 16);
}

VMAF_KERNEL void vmaf_vif_down_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h, int stride,
                                  int scale, int bpc, vmaf_u16 *out_ref, vmaf_u16 *out_dis,
                                  int out_stride)
{
    vif_down<vmaf_u8>(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride);
}

VMAF_KERNEL void vmaf_vif_down_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                   int stride, int scale, int bpc, vmaf_u16 *out_ref,
                                   vmaf_u16 *out_dis, int out_stride)
{
    vif_down<vmaf_u16>(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride);
}
