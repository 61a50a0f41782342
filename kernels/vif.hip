/* Integer VIF on the GPU: per-scale statistics and the decimating low-pass.
 *
 * Produces, per scale, the four exact integer sums the host turns into scores
 * (num_log, den_log, num_non_log, den_non_log), with the same integer steps as
 * the CPU reference in src/feature/vif/cpu.rs (scale_stats, downsample). Summation
 * order does not matter for integers, so any block layout gives the CPU's result bit
 * for bit. The double steps of the gain term use explicitly rounded operations: no FMA
 * contraction. */
#include "vmaf_prelude.h"

/* Q16 Gaussian filters of the four scales, centred (tap k at offset k - F/2); also as
 * doubles for the FP64 horizontal pass (a conversion per use would cost more than the load). */
#define VIF_TAPS                                                                               \
    {{489, 935, 1640, 2640, 3896, 5274, 6547, 7455, 7784, 7455, 6547, 5274, 3896, 2640, 1640,   \
      935, 489},                                                                               \
     {1244, 3663, 7925, 12590, 14692, 12590, 7925, 3663, 1244},                                \
     {3571, 16004, 26386, 16004, 3571},                                                        \
     {10904, 43728, 10904}}
__constant__ vmaf_u16 vif_filter[4][17] = VIF_TAPS;
__constant__ double vif_filter_f64[4][17] = VIF_TAPS;

/* VIF_F64 1: the horizontal sums of the three second moments run in doubles. Exact: each is an
 * integer below 2^49. Worth it only where FP64 runs at the integer multiply rate on its own
 * pipe, so those multiply-adds leave the integer pipe: NVIDIA GP100/GV100/GA100/GH100/GB100
 * and AMD CDNA 2/3. Elsewhere FP64 is 1/16 to 1/64 rate and the integer path stays. On an
 * H200 it took scale 0 from 84 to 77 us per 1080p frame (the means in doubles too gave 79:
 * their conversions cost more than they free). Build systems may preset it (build.rs does,
 * to 0, for the arch-neutral PTX). */
#ifndef VIF_F64
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 600 || __CUDA_ARCH__ == 700 || \
                               __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 900 || \
                               __CUDA_ARCH__ == 1000)
#define VIF_F64 1
#elif defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define VIF_F64 1
#else
#define VIF_F64 0
#endif
#endif

/* Statistics tile: 32 x 32 outputs per block of 32 x 8 threads. The vertical
 * pass gives each thread four consecutive rows of one column (the 4 + F - 1
 * inputs are read once into registers); the horizontal pass gives each lane of
 * a warp one row and each warp four consecutive columns, so a lane reads its
 * 4 + F - 1 inputs once and the 32 lanes hit 32 distinct banks (odd pitch). */
#define VIF_TW 32
#define VIF_TH 32
#define VIF_BLOCK_H 8
#define VIF_RUN 4
/* Scale 0's statistics tile also yields the 16 x 16 tile of the decimated
 * scale-1 pictures it covers (the 9-tap window fits inside the staged border):
 * VIF_FUSED_W columns of vertically filtered even rows per picture. */
#define VIF_FUSED_H (VIF_TH / 2)
#define VIF_FUSED_W 40
/* Shared memory of the statistics kernel in u64 words: scale 0's staging
 * (2 x 48 x 48 u16), four 32 x 49 u32 tiles and the fused decimation's two
 * 16 x 40 u16 tiles, plus the reduction scratch (four sums per wave). */
#define VIF_SMEM_U64 4736

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

/* vif_reflect for vmaf_stage_pair. */
struct VifMirror {
    static __device__ __forceinline__ int at(int i, int n)
    {
        return vif_reflect(i, n);
    }
};

/* Q11 log2 of i in 2^15..2^16 - 1. Upstream's 64 K-entry table rises by 0 or 1 from one
 * entry to the next, so each run of 32 entries packs into one word (host: log2_steps in
 * src/feature/vif/gpu.rs): its first value in the high half and, in bit j of the low
 * half, whether entry j is one above entry j - 1: 8 KB to keep in L1 beside the staging
 * loads instead of the 64 KB of entries indexed. On an H100, scale 0 of a 1080p frame: 71.9
 * us against 73.0 with the plain table; a per-block copy in shared memory took 78.6. */
#define VIF_LOG2_WORDS 1024
VMAF_DEVICE vmaf_i64 vif_log2_16(const vmaf_u64 *steps, vmaf_u32 i)
{
    const vmaf_u64 word = steps[(i >> 5) - VIF_LOG2_WORDS];
    return (vmaf_i64)(vmaf_u32)(word >> 32) + VMAF_POPC((vmaf_u32)word << (31 - (i & 31)));
}

/* log2 in Q11 of a 32-bit value >= 2^17 from its 16 most significant bits. */
VMAF_DEVICE vmaf_i64 vif_log2_32(const vmaf_u64 *steps, vmaf_u32 v)
{
    const int k = 16 - __clz((int)v);
    return vif_log2_16(steps, v >> k) + 2048 * k;
}

VMAF_DEVICE vmaf_i64 vif_log2_64(const vmaf_u64 *steps, vmaf_u64 v)
{
    const int k = 48 - __clzll((long long)v);
    return vif_log2_16(steps, (vmaf_u32)(v >> k)) + 2048 * k;
}

/* Filter width of a scale, at compile time. */
template <int SCALE> struct VifTaps {
    static const int F = SCALE == 0 ? 17 : SCALE == 1 ? 9 : SCALE == 2 ? 5 : 3;
};

/* Horizontal pass of one statistic for VIF_RUN consecutive outputs of a row:
 * out[o] = sum_k filter[k] * row[o + k], in the accumulator type A. */
template <int SCALE, typename A>
VMAF_DEVICE void vif_hrun(const vmaf_u32 *row, A out[VIF_RUN])
{
    const int F = VifTaps<SCALE>::F;
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++)
        out[o] = 0;
#pragma unroll
    for (int j = 0; j < F + VIF_RUN - 1; j++) {
        const vmaf_u32 v = row[j];
#pragma unroll
        for (int o = 0; o < VIF_RUN; o++) {
            const int k = j - o;
            if (k >= 0 && k < F)
                out[o] += (A)vif_filter[SCALE][k] * v;
        }
    }
}

/* The same for the packed means: mu1 from the low, mu2 from the high halves. */
template <int SCALE>
VMAF_DEVICE void vif_hrun_mu(const vmaf_u32 *row, vmaf_u32 mu1[VIF_RUN], vmaf_u32 mu2[VIF_RUN])
{
    const int F = VifTaps<SCALE>::F;
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++)
        mu1[o] = mu2[o] = 0;
#pragma unroll
    for (int j = 0; j < F + VIF_RUN - 1; j++) {
        const vmaf_u32 v = row[j];
        const vmaf_u32 lo = v & 0xffffu, hi = v >> 16;
#pragma unroll
        for (int o = 0; o < VIF_RUN; o++) {
            const int k = j - o;
            if (k >= 0 && k < F) {
                mu1[o] += (vmaf_u32)vif_filter[SCALE][k] * lo;
                mu2[o] += (vmaf_u32)vif_filter[SCALE][k] * hi;
            }
        }
    }
}

/* vif_hrun of a second moment in 64-bit integers, rounded: (sum + 2^15) >> 16. */
template <int SCALE> VMAF_DEVICE void vif_hrun_u32(const vmaf_u32 *row, vmaf_u32 out[VIF_RUN])
{
    vmaf_u64 sum[VIF_RUN];
    vif_hrun<SCALE, vmaf_u64>(row, sum);
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++)
        out[o] = (vmaf_u32)((sum[o] + 32768) >> 16);
}

/* 2^52: an integer below it, added to it, sits in the low mantissa bits. */
#define VIF_TWO52 4503599627370496.0

/* u32 to double exactly, with an add instead of a (slow) conversion instruction. */
VMAF_DEVICE double vif_u32_f64(vmaf_u32 v)
{
    return __dsub_rn(__longlong_as_double(0x4330000000000000ll | (long long)v), VIF_TWO52);
}

/* The bits of v + 2^52 for an integer 0 <= v < 2^52: v in the low 52. */
VMAF_DEVICE vmaf_u64 vif_f64_bits(double v)
{
    return (vmaf_u64)__double_as_longlong(__dadd_rn(v, VIF_TWO52));
}

/* vif_hrun for the second moments in doubles, rounded as the integer path: (sum + 2^15) >> 16. */
template <int SCALE> VMAF_DEVICE void vif_hrun_f64(const vmaf_u32 *row, vmaf_u32 out[VIF_RUN])
{
    const int F = VifTaps<SCALE>::F;
    double acc[VIF_RUN];
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++)
        acc[o] = 32768.0;
#pragma unroll
    for (int j = 0; j < F + VIF_RUN - 1; j++) {
        const double v = vif_u32_f64(row[j]);
#pragma unroll
        for (int o = 0; o < VIF_RUN; o++) {
            const int k = j - o;
            if (k >= 0 && k < F)
                acc[o] = __fma_rn(vif_filter_f64[SCALE][k], v, acc[o]);
        }
    }
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++)
        out[o] = (vmaf_u32)(vif_f64_bits(acc[o]) >> 16);
}

/* Vertical pass of R consecutive outputs (rows r0.., column c of the tile) for all five
 * statistics, with the per-scale rounding of the CPU path, into the shared tiles. */
template <typename T, int SCALE, int R, int IN_W>
VMAF_DEVICE void vif_vert(const vmaf_u16 (*s_ref)[IN_W], const vmaf_u16 (*s_dis)[IN_W], int r0,
                          int c, int bpc, vmaf_u32 *t_mu, vmaf_u32 *t_xx, vmaf_u32 *t_yy,
                          vmaf_u32 *t_xy, int pitch)
{
    const int F = VifTaps<SCALE>::F;
    if (sizeof(T) == 1 && SCALE == 0) {
        /* 8-bit: the filter sums to 2^16, so every sum fits 32 bits, and the means fit 24:
         * one 64-bit multiply-add carries both (x in bits 0-23, y from bit 24; 2.5% faster
         * at scale 0 on an H200 than two 32-bit ones). Each input's products are formed once
         * and added to the R outputs it feeds. */
        vmaf_u64 mu[R];
        vmaf_u32 sxx[R], syy[R], sxy[R];
#pragma unroll
        for (int o = 0; o < R; o++) {
            mu[o] = 0;
            sxx[o] = syy[o] = sxy[o] = 0;
        }
#pragma unroll
        for (int j = 0; j < F + R - 1; j++) {
            const vmaf_u32 x = s_ref[r0 + j][c], y = s_dis[r0 + j][c];
            const vmaf_u32 xx = x * x, yy = y * y, xy = x * y, xy_packed = x | (y << 24);
#pragma unroll
            for (int o = 0; o < R; o++) {
                const int k = j - o;
                if (k >= 0 && k < F) {
                    const vmaf_u32 f = vif_filter[SCALE][k];
                    mu[o] += (vmaf_u64)f * xy_packed;
                    sxx[o] += f * xx;
                    syy[o] += f * yy;
                    sxy[o] += f * xy;
                }
            }
        }
#pragma unroll
        for (int o = 0; o < R; o++) {
            const int t = (r0 + o) * pitch + c;
            const vmaf_u32 mu1 = (vmaf_u32)mu[o] & 0xffffffu, mu2 = (vmaf_u32)(mu[o] >> 24);
            /* 8-bit samples: bpc is 8, so the squares need no rounding shift. */
            t_mu[t] = (vmaf_u32)(vmaf_u16)((mu1 + 128) >> 8) |
                      ((vmaf_u32)(vmaf_u16)((mu2 + 128) >> 8) << 16);
            t_xx[t] = sxx[o];
            t_yy[t] = syy[o];
            t_xy[t] = sxy[o];
        }
        return;
    }
    vmaf_u32 mu_round, mu_shift, sq_shift;
    vmaf_u64 sq_round;
    if (SCALE == 0) {
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
    /* Inputs outer, outputs inner, as the 8-bit path: only the R outputs' sums stay live
     * (holding all F + R - 1 inputs of both pictures instead spilled registers at scale 0). */
    vmaf_u32 a_mu1[R], a_mu2[R];
    vmaf_u64 a_xx[R], a_yy[R], a_xy[R];
#pragma unroll
    for (int o = 0; o < R; o++) {
        a_mu1[o] = a_mu2[o] = 0;
        a_xx[o] = a_yy[o] = a_xy[o] = 0;
    }
#pragma unroll
    for (int j = 0; j < F + R - 1; j++) {
        const vmaf_u32 x = s_ref[r0 + j][c], y = s_dis[r0 + j][c];
#pragma unroll
        for (int o = 0; o < R; o++) {
            const int k = j - o;
            if (k >= 0 && k < F) {
                const vmaf_u32 f = vif_filter[SCALE][k];
                const vmaf_u32 fx = f * x, fy = f * y;
                a_mu1[o] += fx;
                a_mu2[o] += fy;
                a_xx[o] += (vmaf_u64)fx * x;
                a_yy[o] += (vmaf_u64)fy * y;
                a_xy[o] += (vmaf_u64)fx * y;
            }
        }
    }
#pragma unroll
    for (int o = 0; o < R; o++) {
        const int t = (r0 + o) * pitch + c;
        t_mu[t] = (vmaf_u32)(vmaf_u16)((a_mu1[o] + mu_round) >> mu_shift) |
                  ((vmaf_u32)(vmaf_u16)((a_mu2[o] + mu_round) >> mu_shift) << 16);
        t_xx[t] = (vmaf_u32)((a_xx[o] + sq_round) >> sq_shift);
        t_yy[t] = (vmaf_u32)((a_yy[o] + sq_round) >> sq_shift);
        t_xy[t] = (vmaf_u32)((a_xy[o] + sq_round) >> sq_shift);
    }
}

/* One block computes a VIF_TW x VIF_TH tile of per-pixel statistics and adds
 * its four sums to acc[0..3] (two's complement in u64). `bpc` is the sample
 * depth at scale 0; later scales are always 16-bit. */
template <typename T, int SCALE, int F64>
VMAF_DEVICE void vif_stats(const T *ref, const T *dis, int w, int h, int stride, int bpc,
                           const vmaf_u64 *log2_steps, double egl, vmaf_u64 *acc, vmaf_u64 *smem,
                           vmaf_u16 *down_ref, vmaf_u16 *down_dis, int down_stride)
{
    const int F = VifTaps<SCALE>::F;
    const int HALF = F / 2;
    const int IN_W = VIF_TW + 2 * HALF;
    const int IN_H = VIF_TH + 2 * HALF;
    const int PITCH = IN_W | 1;
    static_assert((2 * IN_H * IN_W * 2 + 4 * VIF_TH * PITCH * 4 +
                   2 * VIF_FUSED_H * VIF_FUSED_W * 2) / 8 + 4 * VMAF_MAX_WARPS <=
                      VIF_SMEM_U64,
                  "VIF shared buffer too small");
    const int x0 = blockIdx.x * VIF_TW;
    const int y0 = blockIdx.y * VIF_TH;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * VIF_TW + tx;
    const int nthreads = VIF_TW * VIF_BLOCK_H;

    /* Carved from the entry's one shared buffer: per-scale static arrays would
     * all be allocated at once in a kernel that instantiates every scale. */
    vmaf_u16(*s_ref)[IN_W] = (vmaf_u16(*)[IN_W])smem;
    vmaf_u16(*s_dis)[IN_W] = (vmaf_u16(*)[IN_W])((vmaf_u16 *)smem + IN_H * IN_W);
    /* Both 16-bit means in one word (mu1 low, mu2 high): one load serves both. */
    vmaf_u32 *t_mu = (vmaf_u32 *)((vmaf_u16 *)smem + 2 * IN_H * IN_W);
    vmaf_u32 *t_xx = t_mu + VIF_TH * PITCH;
    vmaf_u32 *t_yy = t_xx + VIF_TH * PITCH;
    vmaf_u32 *t_xy = t_yy + VIF_TH * PITCH;
    vmaf_u16(*d_ref)[VIF_FUSED_W] = (vmaf_u16(*)[VIF_FUSED_W])(t_xy + VIF_TH * PITCH);
    vmaf_u16(*d_dis)[VIF_FUSED_W] = d_ref + VIF_FUSED_H;
    vmaf_u64 *scratch = smem + VIF_SMEM_U64 - 4 * VMAF_MAX_WARPS;

    const VmafStageU16<IN_W> sink = {s_ref, s_dis};
    vmaf_stage_pair<T, IN_W, IN_H, VIF_TW, VIF_BLOCK_H, VifMirror>(ref, dis, w, h, stride, x0 - HALF,
                                                                  y0 - HALF, sink, tid);
    __syncthreads();

    /* Vertical pass: items of VIF_RUN rows of one column. (Splitting the last round's items
     * in halves to balance the threads was tried: 2% slower at scale 0 on an H200.) */
    for (int i = tid; i < IN_W * (VIF_TH / VIF_RUN); i += nthreads)
        vif_vert<T, SCALE, VIF_RUN, IN_W>(s_ref, s_dis, (i / IN_W) * VIF_RUN, i % IN_W, bpc, t_mu,
                                          t_xx, t_yy, t_xy, PITCH);
    __syncthreads();

    /* Horizontal pass: lane = row, warp = group of VIF_RUN columns. */
    const int row = tx;
    const int col0 = ty * VIF_RUN;
    const int base = row * PITCH + col0;
    vmaf_u32 mu1[VIF_RUN], mu2[VIF_RUN], xx[VIF_RUN], yy[VIF_RUN], xy[VIF_RUN];
    vif_hrun_mu<SCALE>(t_mu + base, mu1, mu2);
    if (F64) {
        vif_hrun_f64<SCALE>(t_xx + base, xx);
        vif_hrun_f64<SCALE>(t_yy + base, yy);
        vif_hrun_f64<SCALE>(t_xy + base, xy);
    } else {
        vif_hrun_u32<SCALE>(t_xx + base, xx);
        vif_hrun_u32<SCALE>(t_yy + base, yy);
        vif_hrun_u32<SCALE>(t_xy + base, xy);
    }

    vmaf_i64 num_log = 0, den_log = 0, num_non_log = 0, den_non_log = 0;
    const bool row_in = y0 + row < h;
#pragma unroll
    for (int o = 0; o < VIF_RUN; o++) {
        if (!row_in || x0 + col0 + o >= w)
            continue;
        const vmaf_u32 mu1_sq = (vmaf_u32)(((vmaf_u64)mu1[o] * mu1[o] + 2147483648ull) >> 32);
        const vmaf_u32 mu2_sq = (vmaf_u32)(((vmaf_u64)mu2[o] * mu2[o] + 2147483648ull) >> 32);
        const vmaf_u32 mu1_mu2 = (vmaf_u32)(((vmaf_u64)mu1[o] * mu2[o] + 2147483648ull) >> 32);
        const vmaf_u32 xx_f = xx[o], yy_f = yy[o], xy_f = xy[o];
        const vmaf_i32 sigma1_sq = (vmaf_i32)(xx_f - mu1_sq);
        vmaf_i32 sigma2_sq = (vmaf_i32)(yy_f - mu2_sq);
        const vmaf_i32 sigma12 = (vmaf_i32)(xy_f - mu1_mu2);
        const vmaf_i32 sigma_nsq = 65536 << 1;
        if (sigma2_sq < 0)
            sigma2_sq = 0;
        if (sigma1_sq >= sigma_nsq) {
            den_log += vif_log2_32(log2_steps, (vmaf_u32)(sigma_nsq + sigma1_sq)) - 2048 * 17;
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
                num_log += vif_log2_64(log2_steps, (vmaf_u64)numer1_tmp) -
                           vif_log2_64(log2_steps, (vmaf_u64)numer1);
            }
        } else {
            num_non_log += sigma2_sq;
            den_non_log += 1;
        }
    }

    if (SCALE == 0 && down_ref) {
        /* Decimation to scale 1 from the staged tile: the vertical 9-tap pass on
         * the even rows, then the horizontal pass on the even columns, with the
         * rounding of vif_down. Staged row/column 4 + 2i + k is tap k of output i. */
        const int F1 = VifTaps<1>::F;
        const vmaf_u32 v_shift = bpc, v_round = 1u << (bpc - 1);
        for (int i = tid; i < VIF_FUSED_H * (2 * VIF_FUSED_H + F1 - 1); i += nthreads) {
            const int r = i / (2 * VIF_FUSED_H + F1 - 1), c = i % (2 * VIF_FUSED_H + F1 - 1);
            vmaf_u32 a_ref = 0, a_dis = 0;
#pragma unroll
            for (int k = 0; k < F1; k++) {
                const vmaf_u32 f = vif_filter[1][k];
                a_ref += f * (vmaf_u32)s_ref[HALF - F1 / 2 + 2 * r + k][HALF - F1 / 2 + c];
                a_dis += f * (vmaf_u32)s_dis[HALF - F1 / 2 + 2 * r + k][HALF - F1 / 2 + c];
            }
            d_ref[r][c] = (vmaf_u16)((a_ref + v_round) >> v_shift);
            d_dis[r][c] = (vmaf_u16)((a_dis + v_round) >> v_shift);
        }
        __syncthreads();
        const int ox_l = tid % VIF_FUSED_H, oy_l = tid / VIF_FUSED_H;
        const int ox = x0 / 2 + ox_l, oy = y0 / 2 + oy_l;
        if (oy_l < VIF_FUSED_H && ox < w / 2 && oy < h / 2) {
            vmaf_u32 h_ref = 0, h_dis = 0;
#pragma unroll
            for (int k = 0; k < F1; k++) {
                const vmaf_u32 f = vif_filter[1][k];
                h_ref += f * (vmaf_u32)d_ref[oy_l][2 * ox_l + k];
                h_dis += f * (vmaf_u32)d_dis[oy_l][2 * ox_l + k];
            }
            down_ref[(long long)oy * down_stride + ox] = (vmaf_u16)((h_ref + 32768) >> 16);
            down_dis[(long long)oy * down_stride + ox] = (vmaf_u16)((h_dis + 32768) >> 16);
        }
    }

    vmaf_u64 sums[4] = {(vmaf_u64)num_log, (vmaf_u64)den_log, (vmaf_u64)num_non_log,
                        (vmaf_u64)den_non_log};
    const vmaf_u64 total = vmaf_block_sums_u64<4>(sums, scratch);
    if (tid < 4 && total)
        VMAF_ATOMIC_ADD_U64(&acc[tid], total);
}

/* The scale picks a compile-time filter width (the branch is uniform). */
template <typename T, int F64>
VMAF_DEVICE void vif_stats_any(const T *ref, const T *dis, int w, int h, int stride, int scale,
                               int bpc, const vmaf_u64 *log2_steps, double egl, vmaf_u64 *acc,
                               vmaf_u16 *down_ref, vmaf_u16 *down_dis, int down_stride)
{
    __shared__ vmaf_u64 smem[VIF_SMEM_U64];
    switch (scale) {
    case 0:
        vif_stats<T, 0, F64>(ref, dis, w, h, stride, bpc, log2_steps, egl, acc, smem, down_ref,
                        down_dis, down_stride);
        break;
    case 1:
        vif_stats<T, 1, F64>(ref, dis, w, h, stride, bpc, log2_steps, egl, acc, smem, 0, 0, 0);
        break;
    case 2:
        vif_stats<T, 2, F64>(ref, dis, w, h, stride, bpc, log2_steps, egl, acc, smem, 0, 0, 0);
        break;
    default:
        vif_stats<T, 3, F64>(ref, dis, w, h, stride, bpc, log2_steps, egl, acc, smem, 0, 0, 0);
        break;
    }
}

/* down_ref/down_dis (with pitch down_stride), when not NULL at scale 0, receive
 * the decimated (w/2) x (h/2) scale-1 pictures as vmaf_vif_down would. */
/* Four blocks per multiprocessor (registers capped at 64) hide more latency. */
VMAF_KERNEL void VMAF_BOUNDS(256, 4) vmaf_vif_stats_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h, int stride,
                                   int scale, int bpc, const vmaf_u64 *log2_steps, double egl,
                                   vmaf_u64 *acc, vmaf_u16 *down_ref, vmaf_u16 *down_dis,
                                   int down_stride)
{
    vif_stats_any<vmaf_u8, VIF_F64>(ref, dis, w, h, stride, scale, bpc, log2_steps, egl, acc, down_ref,
                           down_dis, down_stride);
}

VMAF_KERNEL void VMAF_BOUNDS(256, 4) vmaf_vif_stats_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                    int stride, int scale, int bpc, const vmaf_u64 *log2_steps,
                                    double egl, vmaf_u64 *acc, vmaf_u16 *down_ref,
                                    vmaf_u16 *down_dis, int down_stride)
{
    vif_stats_any<vmaf_u16, VIF_F64>(ref, dis, w, h, stride, scale, bpc, log2_steps, egl, acc, down_ref,
                            down_dis, down_stride);
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

template <typename T, int NEXT>
VMAF_DEVICE void vif_down(const T *ref, const T *dis, int w, int h, int stride, int bpc,
                          vmaf_u16 *out_ref, vmaf_u16 *out_dis, int out_stride,
                          vmaf_u16 (*s_ref)[VIF_DOWN_IN_W], vmaf_u16 (*s_dis)[VIF_DOWN_IN_W],
                          vmaf_u16 (*v_ref)[VIF_DOWN_IN_W], vmaf_u16 (*v_dis)[VIF_DOWN_IN_W])
{
    const int F = VifTaps<NEXT>::F;
    const int HALF = F / 2;
    const int IN_W = 2 * (VIF_DOWN_W - 1) + F, IN_H = 2 * (VIF_DOWN_H - 1) + F;
    const int ox0 = blockIdx.x * VIF_DOWN_W, oy0 = blockIdx.y * VIF_DOWN_H;
    /* Input window origin: row/column of tap 0 for the block's first output. */
    const int x0 = 2 * ox0 - HALF, y0 = 2 * oy0 - HALF;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * VIF_DOWN_W + tx;
    const int nthreads = VIF_DOWN_W * VIF_DOWN_H;

    for (int r = ty; r < IN_H; r += VIF_DOWN_H) {
        const long long row = (long long)vif_reflect(y0 + r, h) * stride;
        for (int c = tx; c < IN_W; c += VIF_DOWN_W) {
            const long long off = row + vif_reflect(x0 + c, w);
            s_ref[r][c] = (vmaf_u16)ref[off];
            s_dis[r][c] = (vmaf_u16)dis[off];
        }
    }
    __syncthreads();

    vmaf_u32 v_round, v_shift;
    if (NEXT == 1) {
        v_shift = bpc;
        v_round = 1u << (bpc - 1);
    } else {
        v_shift = 16;
        v_round = 32768;
    }
    for (int i = tid; i < VIF_DOWN_H * IN_W; i += nthreads) {
        const int r = i / IN_W, c = i % IN_W;
        vmaf_u32 a_ref = 0, a_dis = 0;
#pragma unroll
        for (int k = 0; k < F; k++) {
            const vmaf_u32 f = vif_filter[NEXT][k];
            a_ref += f * (vmaf_u32)s_ref[2 * r + k][c];
            a_dis += f * (vmaf_u32)s_dis[2 * r + k][c];
        }
        v_ref[r][c] = (vmaf_u16)((a_ref + v_round) >> v_shift);
        v_dis[r][c] = (vmaf_u16)((a_dis + v_round) >> v_shift);
    }
    __syncthreads();

    const int ox = ox0 + tx, oy = oy0 + ty;
    if (ox >= w / 2 || oy >= h / 2)
        return;
    vmaf_u32 h_ref = 0, h_dis = 0;
#pragma unroll
    for (int k = 0; k < F; k++) {
        const vmaf_u32 f = vif_filter[NEXT][k];
        h_ref += f * (vmaf_u32)v_ref[ty][2 * tx + k];
        h_dis += f * (vmaf_u32)v_dis[ty][2 * tx + k];
    }
    out_ref[(long long)oy * out_stride + ox] = (vmaf_u16)((h_ref + 32768) >> 16);
    out_dis[(long long)oy * out_stride + ox] = (vmaf_u16)((h_dis + 32768) >> 16);
}

/* `scale` is the scale being left (0..2); one set of shared arrays serves all. */
template <typename T>
VMAF_DEVICE void vif_down_any(const T *ref, const T *dis, int w, int h, int stride, int scale,
                              int bpc, vmaf_u16 *out_ref, vmaf_u16 *out_dis, int out_stride)
{
    __shared__ vmaf_u16 s_ref[VIF_DOWN_IN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 s_dis[VIF_DOWN_IN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 v_ref[VIF_DOWN_H][VIF_DOWN_IN_W];
    __shared__ vmaf_u16 v_dis[VIF_DOWN_H][VIF_DOWN_IN_W];
    switch (scale) {
    case 0:
        vif_down<T, 1>(ref, dis, w, h, stride, bpc, out_ref, out_dis, out_stride, s_ref, s_dis,
                       v_ref, v_dis);
        break;
    case 1:
        vif_down<T, 2>(ref, dis, w, h, stride, bpc, out_ref, out_dis, out_stride, s_ref, s_dis,
                       v_ref, v_dis);
        break;
    default:
        vif_down<T, 3>(ref, dis, w, h, stride, bpc, out_ref, out_dis, out_stride, s_ref, s_dis,
                       v_ref, v_dis);
        break;
    }
}

VMAF_KERNEL void vmaf_vif_down_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h, int stride,
                                  int scale, int bpc, vmaf_u16 *out_ref, vmaf_u16 *out_dis,
                                  int out_stride)
{
    vif_down_any<vmaf_u8>(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride);
}

VMAF_KERNEL void vmaf_vif_down_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                   int stride, int scale, int bpc, vmaf_u16 *out_ref,
                                   vmaf_u16 *out_dis, int out_stride)
{
    vif_down_any<vmaf_u16>(ref, dis, w, h, stride, scale, bpc, out_ref, out_dis, out_stride);
}
