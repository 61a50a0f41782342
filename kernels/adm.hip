/* Integer ADM on the GPU, the same integer steps as src/feature/adm/cpu.rs.
 *
 * Per scale, two kernels:
 *  - vmaf_adm_dwt0_{u8,u16} / vmaf_adm_dwt123: one thread per band pixel runs the
 *    wavelet level for both pictures (writing the approximation and the h, v, d
 *    bands), then, inside the CSF window, the decoupling and CSF of that pixel and
 *    stores the per-pixel band sums the masking threshold needs ("maps");
 *  - vmaf_adm_cm: one block per row of the score window sums the denominator and
 *    both contrast-masking numerators over the row, applies the per-row rounding
 *    shift exactly as the CPU does, then adds the row result to the scale totals.
 *    It reads the decoupled parts the wavelet kernel stored (the score window lies
 *    inside the CSF window), so the per-pixel angle test and division run once.
 *
 * `plane` is the element distance between planes of `bands` and `maps`: the band
 * size of the scale being processed.
 *
 * Band planes are int32 at every scale; scale 0 keeps int16 semantics through
 * explicit (vmaf_i16) casts. Wrapping int32 steps of the CPU go through vmaf_u32.
 * The double steps use explicitly rounded operations (no FMA contraction). */
#include "vmaf_prelude.h"

__constant__ vmaf_i32 adm_lo[4] = {15826, 27411, 7345, -4240};
__constant__ vmaf_i32 adm_hi[4] = {-4240, -7345, 27411, -15826};

/* cos(1 degree)^2 rounded to float (0x3f7fec0a), written exactly as a double. */
#define ADM_COS_1DEG_SQ 0.99969542026519775390625

/* Planes of the `maps` buffer: threshold sums of the DLM (num) and AIM passes. */
#define ADM_MAP_FLT_NUM 0
#define ADM_MAP_CEN_NUM 1
#define ADM_MAP_FLT_AIM 2
#define ADM_MAP_CEN_AIM 3

/* Flags of the DWT kernels. */
#define ADM_DO_MAPS 1
#define ADM_DO_AIM 2

#define ADM_CM_BLOCK 256

/* DWT tap source: reflect at the start (-1 -> 1), repeat the edge at the end
 * (n -> n - 1, n + 1 -> n - 2). */
VMAF_DEVICE int adm_tap(int idx, int n)
{
    if (idx < 0)
        return -idx;
    if (idx >= n)
        return 2 * n - idx - 1;
    return idx;
}

VMAF_DEVICE vmaf_i32 adm_wrap_abs(vmaf_i32 x)
{
    return x < 0 ? (vmaf_i32)(0u - (vmaf_u32)x) : x;
}

VMAF_DEVICE vmaf_i64 adm_half(int s)
{
    return s == 0 ? 0 : (1ll << (s - 1));
}

/* Scale-0 horizontal tap sum of int16 vertical outputs (wrapping int32). */
VMAF_DEVICE vmaf_i16 adm_hdot0(const vmaf_i32 *f, const vmaf_i16 *x)
{
    vmaf_u32 acc = 0;
    for (int k = 0; k < 4; k++)
        acc += (vmaf_u32)f[k] * (vmaf_u32)(vmaf_i32)x[k];
    return (vmaf_i16)((vmaf_i32)(acc + 32768u) >> 16);
}

/* The scale-0 wavelet kernel stages, per 32 x 8 block of band pixels (j0, i0), the source
 * rows 2 i0 - 1 .. 2 i0 + 16 and columns 2 j0 - 4 .. 2 j0 + 67 (the taps reach 2 j0 - 1 ..
 * 2 j0 + 64; the window starts 4-sample aligned for vector loads). */
#define ADM_S0_W 72
#define ADM_S0_H 18
/* Scales 1-3 stage the same rows and columns 2 j0 - 1 .. 2 j0 + 64 of int32 planes (odd
 * pitch: a warp's stride-2 column reads then spread over the banks). */
#define ADM_S123_W 67
#define ADM_S123_COLS 66

/* adm_tap for the staging: coordinates the staged window holds beyond one mirror feed no
 * output and are clamped into the plane only to keep reads in bounds. */
struct AdmMirror {
    static __device__ __forceinline__ int at(int i, int n)
    {
        i = adm_tap(i, n);
        return i < 0 ? 0 : (i >= n ? n - 1 : i);
    }
};

/* Where scales 1-3 stage their int32 windows (vmaf_stage_pair_each). */
struct AdmStageI32 {
    vmaf_i32 (*ref)[ADM_S123_W];
    vmaf_i32 (*dis)[ADM_S123_W];
    __device__ __forceinline__ void put1(int r, int c, vmaf_u32 a, vmaf_u32 b) const
    {
        ref[r][c] = (vmaf_i32)a;
        dis[r][c] = (vmaf_i32)b;
    }
};

/* Scale-0 wavelet outputs out = {a, h, v, d} of the band pixel whose 4 x 4 source taps are
 * staged at s[r0 + k][c0 + c] (source row 2i - 1 + k, column 2j - 1 + c). */
VMAF_DEVICE void adm_dwt0_win(const vmaf_u16 (*s)[ADM_S0_W], int r0, int c0, int bpc,
                              vmaf_i32 *out)
{
    const vmaf_u32 round = 1u << (bpc - 1);
    const vmaf_u32 centre = 46342u * round;
    vmaf_i16 lo[4], hi[4];
    for (int c = 0; c < 4; c++) {
        vmaf_u32 vl = 0, vh = 0;
        for (int k = 0; k < 4; k++) {
            const vmaf_u32 v = s[r0 + k][c0 + c];
            vl += (vmaf_u32)adm_lo[k] * v;
            vh += (vmaf_u32)adm_hi[k] * v;
        }
        lo[c] = (vmaf_i16)((vmaf_i32)(vl - centre + round) >> bpc);
        hi[c] = (vmaf_i16)((vmaf_i32)(vh + round) >> bpc);
    }
    out[0] = (vmaf_i32)adm_hdot0(adm_lo, lo);
    out[1] = (vmaf_i32)adm_hdot0(adm_lo, hi);
    out[2] = (vmaf_i32)adm_hdot0(adm_hi, lo);
    out[3] = (vmaf_i32)adm_hdot0(adm_hi, hi);
}

VMAF_DEVICE vmaf_i32 adm_hdot123(const vmaf_i32 *f, const vmaf_i32 *x, vmaf_i64 round, int shift)
{
    vmaf_i64 acc = 0;
    for (int k = 0; k < 4; k++)
        acc += (vmaf_i64)f[k] * (vmaf_i64)x[k];
    return (vmaf_i32)((acc + round) >> shift);
}

/* Wavelet outputs of scales 1-3 (int64 accumulation, no mean removal) of the band pixel
 * whose 4 x 4 taps are staged at s[r0 + k][c0 + c]. */
template <int SCALE>
VMAF_DEVICE void adm_dwt123_win(const vmaf_i32 (*s)[ADM_S123_W], int r0, int c0, vmaf_i32 *out)
{
    const vmaf_i64 rv = SCALE == 1 ? 0 : 32768;
    const int sv = SCALE == 1 ? 0 : 16;
    const vmaf_i64 rh = SCALE == 2 ? 32768 : 16384;
    const int sh = SCALE == 2 ? 16 : 15;
    vmaf_i32 lo[4], hi[4];
#pragma unroll
    for (int c = 0; c < 4; c++) {
        vmaf_i64 vl = 0, vh = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const vmaf_i64 v = s[r0 + k][c0 + c];
            vl += (vmaf_i64)adm_lo[k] * v;
            vh += (vmaf_i64)adm_hi[k] * v;
        }
        lo[c] = (vmaf_i32)((vl + rv) >> sv);
        hi[c] = (vmaf_i32)((vh + rv) >> sv);
    }
    out[0] = adm_hdot123(adm_lo, lo, rh, sh);
    out[1] = adm_hdot123(adm_lo, hi, rh, sh);
    out[2] = adm_hdot123(adm_hi, lo, rh, sh);
    out[3] = adm_hdot123(adm_hi, hi, rh, sh);
}

/* Whether the distorted (h, v) orientation is within one degree of the reference
 * one; the int64 products go through float, then double, as on the CPU. */
VMAF_DEVICE bool adm_angle(vmaf_i64 oh, vmaf_i64 ov, vmaf_i64 th, vmaf_i64 tv)
{
    const double dp = (double)__ll2float_rn(oh * th + ov * tv) / 4096.0;
    const double om = (double)__ll2float_rn(oh * oh + ov * ov) / 4096.0;
    const double tm = (double)__ll2float_rn(th * th + tv * tv) / 4096.0;
    return dp >= 0.0 && __dmul_rn(dp, dp) >= __dmul_rn(__dmul_rn(ADM_COS_1DEG_SQ, om), tm);
}

/* Enhancement clamp of a restored coefficient (double, truncated by the caller). */
VMAF_DEVICE double adm_enhance(vmaf_i64 rst, bool o_pos, vmaf_i64 t, double egl)
{
    const double g = __dmul_rn((double)rst, egl);
    const double td = (double)t;
    if (o_pos)
        return g < td ? g : td;
    return g > td ? g : td;
}

/* Decoupling of one coefficient pair into restored (*r) and additive (*a) parts. */
VMAF_DEVICE void adm_split(int scale, vmaf_i32 o, vmaf_i32 t, bool angle, double egl,
                           const vmaf_i32 *lut, vmaf_i32 *r, vmaf_i32 *a)
{
    const vmaf_u32 abs_o = o < 0 ? 0u - (vmaf_u32)o : (vmaf_u32)o;
    if (scale == 0) {
        vmaf_i32 k = 32768;
        if (o != 0) {
            vmaf_i64 q = (vmaf_i64)lut[abs_o] * (vmaf_i64)t;
            if (o < 0)
                q = -q;
            k = (vmaf_i32)((q + 16384) >> 15);
        }
        k = k < 0 ? 0 : (k > 32768 ? 32768 : k);
        vmaf_i16 rst = (vmaf_i16)((k * o + 16384) >> 15);
        if (angle && k > 0 && o != 0)
            rst = (vmaf_i16)(vmaf_i32)adm_enhance(rst, o > 0, t, egl);
        *r = rst;
        *a = (vmaf_i16)(t - (vmaf_i32)rst);
    } else {
        vmaf_i64 k = 32768;
        if (o != 0) {
            vmaf_u32 m = abs_o;
            int sh = 0;
            if (abs_o >= 32768) {
                sh = 17 - __clz((int)abs_o);
                m = (abs_o + (1u << (sh - 1))) >> sh;
            }
            vmaf_i64 q = (vmaf_i64)lut[m] * (vmaf_i64)t;
            if (o < 0)
                q = -q;
            k = (q + (1ll << (14 + sh))) >> (15 + sh);
        }
        k = k < 0 ? 0 : (k > 32768 ? 32768 : k);
        vmaf_i32 rst = (vmaf_i32)((k * (vmaf_i64)o + 16384) >> 15);
        if (angle && k > 0 && o != 0)
            rst = (vmaf_i32)adm_enhance(rst, o > 0, t, egl);
        *r = rst;
        *a = (vmaf_i32)((vmaf_u32)t - (vmaf_u32)rst);
    }
}

/* CSF of one coefficient of band b: *flt is its masking contribution (~|dst|/30),
 * *cen the centre term (~|dst|/15) the threshold adds at the pixel itself. */
VMAF_DEVICE void adm_csf(int scale, int b, vmaf_u32 irf, vmaf_i32 s, vmaf_i32 *flt, vmaf_i32 *cen)
{
    if (scale == 0) {
        /* The diagonal weight is Q23 (2 more bits of shift) and rounds with 65535. */
        const int shift = b == 2 ? 17 : 15;
        const vmaf_u32 round = b == 2 ? 65535u : 16384u;
        const vmaf_i16 v = (vmaf_i16)((vmaf_i32)(irf * (vmaf_u32)s + round) >> shift);
        const vmaf_i32 m = v < 0 ? -(vmaf_i32)v : (vmaf_i32)v;
        *flt = (vmaf_i16)((4369 * m + 2048) >> 12);
        *cen = (vmaf_i16)((8738 * m + 2048) >> 12);
    } else {
        const vmaf_i32 v = (vmaf_i32)(((vmaf_i64)irf * (vmaf_i64)s + (1ll << 27)) >> 28);
        const vmaf_i64 m = v < 0 ? -(vmaf_i64)v : (vmaf_i64)v;
        /* Upstream's "1u << 31" rounding constant wraps to -2^31 in an int32. */
        *flt = (vmaf_i32)((143165577ll * m - 2147483648ll) >> 32);
        *cen = (vmaf_i32)((286331153ll * m - 2147483648ll) >> 32);
    }
}

/* Writes the approximation of (i, j) and, inside the CSF window, what the masking kernel
 * reads there: the reference bands, the decoupled restored and additive parts (so that kernel
 * need not decouple again) and the maps. Scale 0's parts are int16, packed in one word
 * (restored low, additive high); later scales keep them in planes 3-5 and 6-8. */
VMAF_DEVICE void adm_finish_pixel(int scale, int i, int j, int bw, long long plane,
                                  const vmaf_i32 *oref, const vmaf_i32 *odis, vmaf_i32 *approx_ref,
                                  vmaf_i32 *approx_dis, vmaf_i32 *bands, vmaf_i32 *maps,
                                  const vmaf_i32 *lut, int cl, int cr, int ct, int cb, int flags,
                                  vmaf_u32 irf_h, vmaf_u32 irf_v, vmaf_u32 irf_d, double egl)
{
    const long long p = (long long)i * bw + j;
    approx_ref[p] = oref[0];
    approx_dis[p] = odis[0];
    if (!(flags & ADM_DO_MAPS) || j < cl || j >= cr || i < ct || i >= cb)
        return;
    const bool angle = adm_angle(oref[1], oref[2], odis[1], odis[2]);
    const vmaf_u32 irf[3] = {irf_h, irf_v, irf_d};
    vmaf_u32 fn = 0, cn = 0, fa = 0, ca = 0;
    for (int b = 0; b < 3; b++) {
        vmaf_i32 r, a, f, c;
        adm_split(scale, oref[1 + b], odis[1 + b], angle, egl, lut, &r, &a);
        bands[b * plane + p] = oref[1 + b];
        if (scale == 0) {
            bands[(3 + b) * plane + p] = (vmaf_i32)((vmaf_u32)(vmaf_u16)r | ((vmaf_u32)a << 16));
        } else {
            bands[(3 + b) * plane + p] = r;
            bands[(6 + b) * plane + p] = a;
        }
        /* DLM masks the restored bands with the CSF of the additive ones; AIM swaps. */
        adm_csf(scale, b, irf[b], a, &f, &c);
        fn += (vmaf_u32)f;
        cn += (vmaf_u32)c;
        if (flags & ADM_DO_AIM) {
            adm_csf(scale, b, irf[b], r, &f, &c);
            fa += (vmaf_u32)f;
            ca += (vmaf_u32)c;
        }
    }
    maps[ADM_MAP_FLT_NUM * plane + p] = (vmaf_i32)fn;
    maps[ADM_MAP_CEN_NUM * plane + p] = (vmaf_i32)cn;
    if (flags & ADM_DO_AIM) {
        maps[ADM_MAP_FLT_AIM * plane + p] = (vmaf_i32)fa;
        maps[ADM_MAP_CEN_AIM * plane + p] = (vmaf_i32)ca;
    }
}

template <typename T>
VMAF_DEVICE void adm_dwt0(const T *ref, const T *dis, int w, int h, int stride, int bpc,
                          vmaf_i32 *approx_ref, vmaf_i32 *approx_dis, vmaf_i32 *bands,
                          vmaf_i32 *maps, int plane, const vmaf_i32 *lut, int cl, int cr, int ct,
                          int cb, int flags, vmaf_u32 irf_h, vmaf_u32 irf_v, vmaf_u32 irf_d,
                          double egl)
{
    __shared__ vmaf_u16 s_ref[ADM_S0_H][ADM_S0_W];
    __shared__ vmaf_u16 s_dis[ADM_S0_H][ADM_S0_W];
    VMAF_ASSUME(blockDim.x == 32 && blockDim.y == 8 && blockDim.z == 1,
                "adm_dwt0: blocks of 32 x 8 threads");
    const int bw = (w + 1) / 2, bh = (h + 1) / 2;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int j0 = blockIdx.x * 32, i0 = blockIdx.y * 8;
    const VmafStageU16<ADM_S0_W> sink = {s_ref, s_dis};
    vmaf_stage_pair<T, ADM_S0_W, ADM_S0_H, 32, 8, AdmMirror>(ref, dis, w, h, stride, 2 * j0 - 4,
                                                             2 * i0 - 1, sink, ty * 32 + tx);
    __syncthreads();
    const int i = i0 + ty, j = j0 + tx;
    if (i >= bh || j >= bw)
        return;
    vmaf_i32 oref[4], odis[4];
    adm_dwt0_win(s_ref, 2 * ty, 2 * tx + 3, bpc, oref);
    adm_dwt0_win(s_dis, 2 * ty, 2 * tx + 3, bpc, odis);
    adm_finish_pixel(0, i, j, bw, plane, oref, odis, approx_ref, approx_dis, bands, maps, lut, cl,
                     cr, ct, cb, flags, irf_h, irf_v, irf_d, egl);
}

VMAF_KERNEL void vmaf_adm_dwt0_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h, int stride,
                                  int bpc, vmaf_i32 *approx_ref, vmaf_i32 *approx_dis,
                                  vmaf_i32 *bands, vmaf_i32 *maps, int plane, const vmaf_i32 *lut,
                                  int cl, int cr, int ct, int cb, int flags, vmaf_u32 irf_h,
                                  vmaf_u32 irf_v, vmaf_u32 irf_d, double egl)
{
    adm_dwt0<vmaf_u8>(ref, dis, w, h, stride, bpc, approx_ref, approx_dis, bands, maps, plane, lut,
                      cl, cr, ct, cb, flags, irf_h, irf_v, irf_d, egl);
}

VMAF_KERNEL void vmaf_adm_dwt0_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                   int stride, int bpc, vmaf_i32 *approx_ref, vmaf_i32 *approx_dis,
                                   vmaf_i32 *bands, vmaf_i32 *maps, int plane, const vmaf_i32 *lut,
                                   int cl, int cr, int ct, int cb, int flags, vmaf_u32 irf_h,
                                   vmaf_u32 irf_v, vmaf_u32 irf_d, double egl)
{
    adm_dwt0<vmaf_u16>(ref, dis, w, h, stride, bpc, approx_ref, approx_dis, bands, maps, plane,
                       lut, cl, cr, ct, cb, flags, irf_h, irf_v, irf_d, egl);
}

/* One wavelet level of scales 1-3 on the previous approximation planes (w x h): a block of
 * 32 x 8 band pixels stages its 18 x 66 source window of both pictures first (all loads
 * before any store), so each tap is read from memory once instead of by four threads. */
template <int SCALE>
VMAF_DEVICE void adm_dwt123(const vmaf_i32 *ref, const vmaf_i32 *dis, int w, int h, int stride,
                            vmaf_i32 *approx_ref, vmaf_i32 *approx_dis, vmaf_i32 *bands,
                            vmaf_i32 *maps, int plane, const vmaf_i32 *lut, int cl, int cr, int ct,
                            int cb, int flags, vmaf_u32 irf_h, vmaf_u32 irf_v, vmaf_u32 irf_d,
                            double egl, vmaf_i32 (*s_ref)[ADM_S123_W],
                            vmaf_i32 (*s_dis)[ADM_S123_W])
{
    const int bw = (w + 1) / 2, bh = (h + 1) / 2;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int j0 = blockIdx.x * 32, i0 = blockIdx.y * 8;
    const AdmStageI32 sink = {s_ref, s_dis};
    vmaf_stage_pair_each<vmaf_i32, ADM_S123_COLS, ADM_S0_H, 32, 8, AdmMirror>(
        ref, dis, w, h, stride, 2 * j0 - 1, 2 * i0 - 1, sink, ty * 32 + tx);
    __syncthreads();
    const int i = i0 + ty, j = j0 + tx;
    if (i >= bh || j >= bw)
        return;
    vmaf_i32 oref[4], odis[4];
    adm_dwt123_win<SCALE>(s_ref, 2 * ty, 2 * tx, oref);
    adm_dwt123_win<SCALE>(s_dis, 2 * ty, 2 * tx, odis);
    adm_finish_pixel(SCALE, i, j, bw, plane, oref, odis, approx_ref, approx_dis, bands, maps, lut,
                     cl, cr, ct, cb, flags, irf_h, irf_v, irf_d, egl);
}

VMAF_KERNEL void vmaf_adm_dwt123(const vmaf_i32 *ref, const vmaf_i32 *dis, int w, int h,
                                 int stride, int scale, vmaf_i32 *approx_ref,
                                 vmaf_i32 *approx_dis, vmaf_i32 *bands, vmaf_i32 *maps, int plane,
                                 const vmaf_i32 *lut, int cl, int cr, int ct, int cb, int flags,
                                 vmaf_u32 irf_h, vmaf_u32 irf_v, vmaf_u32 irf_d, double egl)
{
    __shared__ vmaf_i32 s_ref[ADM_S0_H][ADM_S123_W];
    __shared__ vmaf_i32 s_dis[ADM_S0_H][ADM_S123_W];
    VMAF_ASSUME(blockDim.x == 32 && blockDim.y == 8 && blockDim.z == 1,
                "adm_dwt123: blocks of 32 x 8 threads");
    /* The scale picks compile-time rounding (the branch is uniform). */
    switch (scale) {
    case 1:
        adm_dwt123<1>(ref, dis, w, h, stride, approx_ref, approx_dis, bands, maps, plane, lut, cl,
                      cr, ct, cb, flags, irf_h, irf_v, irf_d, egl, s_ref, s_dis);
        break;
    case 2:
        adm_dwt123<2>(ref, dis, w, h, stride, approx_ref, approx_dis, bands, maps, plane, lut, cl,
                      cr, ct, cb, flags, irf_h, irf_v, irf_d, egl, s_ref, s_dis);
        break;
    default:
        adm_dwt123<3>(ref, dis, w, h, stride, approx_ref, approx_dis, bands, maps, plane, lut, cl,
                      cr, ct, cb, flags, irf_h, irf_v, irf_d, egl, s_ref, s_dis);
        break;
    }
}

/* Masking threshold at (i, j): 3x3 sum of the flt map minus its centre plus the
 * centre map (wrapping int32). Outside the band row/column -1 reads 1 and
 * bh/bw reads bh-1/bw-1. Indices fit int: the band holds fewer than 2^31 pixels. */
VMAF_DEVICE vmaf_i32 adm_threshold(const vmaf_i32 *flt, const vmaf_i32 *cen, int bw, int bh, int i,
                                   int j)
{
    const int up = i == 0 ? 1 : i - 1;
    const int dn = i + 1 == bh ? bh - 1 : i + 1;
    const int lf = j == 0 ? 1 : j - 1;
    const int rt = j + 1 == bw ? bw - 1 : j + 1;
    const int ys[3] = {up, i, dn};
    const int xs[3] = {lf, j, rt};
    vmaf_u32 acc = 0;
#pragma unroll
    for (int a = 0; a < 3; a++) {
        const vmaf_i32 *row = flt + ys[a] * bw;
#pragma unroll
        for (int b = 0; b < 3; b++)
            acc += (vmaf_u32)row[xs[b]];
    }
    const int p = i * bw + j;
    acc = acc - (vmaf_u32)flt[p] + (vmaf_u32)cen[p];
    return (vmaf_i32)acc;
}

/* Contrast-masked cube of source coefficient s of band b under threshold thr. */
VMAF_DEVICE vmaf_i64 adm_cm_pixel(int scale, int b, vmaf_u32 irf, vmaf_i32 s, vmaf_i32 thr,
                                  int cube)
{
    vmaf_i32 x;
    vmaf_i32 xsq;
    if (scale == 0) {
        const int sub = b == 2 ? 12 : 10;
        const int sq = b == 2 ? 30 : 29;
        x = (vmaf_i32)((vmaf_u32)s * irf);
        x = (vmaf_i32)((vmaf_u32)adm_wrap_abs(x) - ((vmaf_u32)thr << sub));
        if (x < 0)
            x = 0;
        xsq = (vmaf_i32)(((vmaf_i64)x * x + (1ll << (sq - 1))) >> sq);
    } else {
        x = (vmaf_i32)(((vmaf_i64)s * (vmaf_i64)irf + (1ll << 27)) >> 28);
        x = (vmaf_i32)((vmaf_u32)adm_wrap_abs(x) - (vmaf_u32)thr);
        if (x < 0)
            x = 0;
        xsq = (vmaf_i32)(((vmaf_i64)x * x + (1ll << 29)) >> 30);
    }
    return ((vmaf_i64)xsq * x + adm_half(cube)) >> cube;
}

/* One block per score-window row (row = top + blockIdx.x). Adds to out[0..9]:
 * den h, v, d (u64), DLM numerator h, v, d and AIM numerator h, v, d (int64 as
 * two's complement), each row rounded and shifted before it is added. */
VMAF_KERNEL void VMAF_BOUNDS(256, 4) vmaf_adm_cm(const vmaf_i32 *bands, const vmaf_i32 *maps, int plane, int bw,
                             int bh, int scale, int left, int right, int top, int den_row,
                             int den_cube, int cube_h, int cube_v, int cube_d, int cm_row,
                             vmaf_u32 irf_h, vmaf_u32 irf_v, vmaf_u32 irf_d, int do_aim,
                             vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[9 * VMAF_MAX_WARPS];
    VMAF_ASSUME(blockDim.y == 1 && blockDim.z == 1, "adm_cm: 1-D blocks only");
    const int i = top + blockIdx.x;
    const long long pl = plane;
    const vmaf_u32 irf[3] = {irf_h, irf_v, irf_d};
    const int cube[3] = {cube_h, cube_v, cube_d};
    const int ssq = scale == 2 ? 30 : 31;
    /* Plane bases once; per-pixel indices then stay in int. */
    const vmaf_i32 *orig[3] = {bands, bands + pl, bands + 2 * pl};
    const vmaf_i32 *part[3] = {bands + 3 * pl, bands + 4 * pl, bands + 5 * pl};
    const vmaf_i32 *add[3] = {bands + 6 * pl, bands + 7 * pl, bands + 8 * pl};
    const vmaf_i32 *flt_num = maps + ADM_MAP_FLT_NUM * pl, *cen_num = maps + ADM_MAP_CEN_NUM * pl;
    const vmaf_i32 *flt_aim = maps + ADM_MAP_FLT_AIM * pl, *cen_aim = maps + ADM_MAP_CEN_AIM * pl;
    vmaf_u64 v[9];
    for (int q = 0; q < 9; q++)
        v[q] = 0;
    for (int j = left + threadIdx.x; j < right; j += blockDim.x) {
        const int p = i * bw + j;
        vmaf_i32 r[3], a[3];
#pragma unroll
        for (int b = 0; b < 3; b++) {
            const vmaf_i32 o = orig[b][p];
            const vmaf_u64 m = o < 0 ? 0ull - (vmaf_u64)(vmaf_i64)o : (vmaf_u64)o;
            if (scale == 0) {
                v[b] += m * m * m;
                const vmaf_i32 ra = part[b][p];
                r[b] = (vmaf_i16)ra;
                a[b] = ra >> 16;
            } else {
                v[b] += ((((m * m + (1ull << ssq)) >> ssq) * m) + (vmaf_u64)adm_half(den_cube)) >>
                        den_cube;
                r[b] = part[b][p];
                a[b] = do_aim ? add[b][p] : 0;
            }
        }
        const vmaf_i32 thr_num = adm_threshold(flt_num, cen_num, bw, bh, i, j);
        const vmaf_i32 thr_aim = do_aim ? adm_threshold(flt_aim, cen_aim, bw, bh, i, j) : 0;
#pragma unroll
        for (int b = 0; b < 3; b++) {
            v[3 + b] += (vmaf_u64)adm_cm_pixel(scale, b, irf[b], r[b], thr_num, cube[b]);
            if (do_aim)
                v[6 + b] += (vmaf_u64)adm_cm_pixel(scale, b, irf[b], a[b], thr_aim, cube[b]);
        }
    }
    /* Thread q < 9 rounds and adds total q: out[q] is den (q < 3) or a numerator. */
    const int q = threadIdx.x;
    const vmaf_u64 total = vmaf_block_sums_u64<9>(v, scratch);
    if (q < 3) {
        const vmaf_u64 d = (total + (vmaf_u64)adm_half(den_row)) >> den_row;
        if (d)
            VMAF_ATOMIC_ADD_U64(&out[q], d);
    } else if (q < 9) {
        const vmaf_i64 n = ((vmaf_i64)total + adm_half(cm_row)) >> cm_row;
        if (n)
            VMAF_ATOMIC_ADD_U64(&out[q], (vmaf_u64)n);
    }
}
