/* Float SSIM and MS-SSIM on the GPU (src/feature/ssim/gpu.rs).
 *
 * Every float step of the CPU code (src/feature/ssim/tools.rs) is repeated per
 * pixel in the same order and precision: samples to float, mirrored
 * decimation, the separable 11-tap Gaussian (each tap a float product added to
 * a double) and the SSIM terms. Only the final sums over the map run in a
 * different order (fixed tree per row, rows finished on the host), which can
 * move those double sums by a few ulps before the host rounds them to float.
 *
 * No operation may be contracted into an FMA. nvcc/nvrtc get -fmad=false and
 * the explicitly rounded intrinsics below. HIP's __fmul_rn & co. are plain
 * operators (clang may still fuse them once inlined), so under HIP the file
 * turns contraction off and uses the operators directly. */
#include "vmaf_prelude.h"

#if defined(__HIP__)
#pragma clang fp contract(off)
#define SSIM_FADD(a, b) ((a) + (b))
#define SSIM_FSUB(a, b) ((a) - (b))
#define SSIM_FMUL(a, b) ((a) * (b))
#define SSIM_FDIV(a, b) ((a) / (b))
#define SSIM_DADD(a, b) ((a) + (b))
#define SSIM_DMUL(a, b) ((a) * (b))
#define SSIM_DDIV(a, b) ((a) / (b))
#define SSIM_DSQRT(a) __dsqrt_rn(a)
#else
#define SSIM_FADD(a, b) __fadd_rn((a), (b))
#define SSIM_FSUB(a, b) __fsub_rn((a), (b))
#define SSIM_FMUL(a, b) __fmul_rn((a), (b))
#define SSIM_FDIV(a, b) __fdiv_rn((a), (b))
#define SSIM_DADD(a, b) __dadd_rn((a), (b))
#define SSIM_DMUL(a, b) __dmul_rn((a), (b))
#define SSIM_DDIV(a, b) __ddiv_rn((a), (b))
#define SSIM_DSQRT(a) __dsqrt_rn(a)
#endif

/* Taps of the Gaussian window; the host passes the values. */
#define SSIM_GAUSS_LEN 11
/* Threads of the row-reduction kernel (power of two, multiple of every warp size). */
#define SSIM_ROW_BLOCK 256

/* The CPU's symmetric boundary: one reflection repeating the edge sample, then a
 * clamp (reached only for tiny images; it also keeps every read in bounds). */
VMAF_DEVICE int ssim_reflect(int i, int n)
{
    int r = i;
    if (i < 0)
        r = -1 - i;
    else if (i >= n)
        r = 2 * n - i - 1;
    if (r < 0)
        r = 0;
    if (r > n - 1)
        r = n - 1;
    return r;
}

/* Luma samples of a w x h plane (rows `stride` apart) to dense floats divided by
 * `scaler` (a power of two: 1 for 8-bit, so the division is exact). */
template <typename T>
VMAF_DEVICE void ssim_to_float(const T *ref, const T *dis, int w, int h, int stride, float scaler,
                               float *out_ref, float *out_dis)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    const long long i = (long long)y * stride + x;
    const long long o = (long long)y * w + x;
    out_ref[o] = SSIM_FDIV((float)ref[i], scaler);
    out_dis[o] = SSIM_FDIV((float)dis[i], scaler);
}

VMAF_KERNEL void vmaf_ssim_to_float_u8(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h,
                                       int stride, float scaler, float *out_ref, float *out_dis)
{
    ssim_to_float<vmaf_u8>(ref, dis, w, h, stride, scaler, out_ref, out_dis);
}

VMAF_KERNEL void vmaf_ssim_to_float_u16(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                        int stride, float scaler, float *out_ref, float *out_dis)
{
    ssim_to_float<vmaf_u16>(ref, dis, w, h, stride, scaler, out_ref, out_dis);
}

/* Decimation by `factor`: output (x, y) is the size x size kernel (taps from
 * -size/2 to size/2, one fewer on the high side for even sizes, row-major) centred
 * at (x * factor, y * factor) with mirrored samples; each tap a float product added
 * to a double, in kernel order. Both images of the pair in one launch. */
VMAF_KERNEL void vmaf_ssim_decimate(const float *src_ref, const float *src_dis, int w, int h,
                                    const float *taps, int size, int factor, float *dst_ref,
                                    float *dst_dis, int dw, int dh)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= dh)
        return;
    const int half = size / 2;
    const int hi = half - (size % 2 == 0 ? 1 : 0);
    const int xs = x * factor, ys = y * factor;
    double ar = 0.0, ad = 0.0;
    int k = 0;
    for (int v = -half; v <= hi; v++) {
        const long long row = (long long)ssim_reflect(ys + v, h) * w;
        for (int u = -half; u <= hi; u++) {
            const long long i = row + ssim_reflect(xs + u, w);
            const float t = taps[k++];
            ar = SSIM_DADD(ar, (double)SSIM_FMUL(src_ref[i], t));
            ad = SSIM_DADD(ad, (double)SSIM_FMUL(src_dis[i], t));
        }
    }
    const long long o = (long long)y * dw + x;
    dst_ref[o] = (float)ar;
    dst_dis[o] = (float)ad;
}

/* Horizontal Gaussian pass over the window's valid columns of a w x h pair: writes
 * five (w - 10) x h planes, `plane` floats apart: ref, dis, ref², dis², ref·dis
 * (the squares and the product rounded to float before the taps, as on the CPU). */
VMAF_KERNEL void vmaf_ssim_hconv(const float *ref, const float *dis, int w, int h,
                                 const float *gauss, float *out, long long plane)
{
    const int dw = w - (SSIM_GAUSS_LEN - 1);
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= dw || y >= h)
        return;
    const float *r = ref + (long long)y * w + x;
    const float *d = dis + (long long)y * w + x;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0;
    for (int u = 0; u < SSIM_GAUSS_LEN; u++) {
        const float a = r[u], b = d[u], g = gauss[u];
        s0 = SSIM_DADD(s0, (double)SSIM_FMUL(a, g));
        s1 = SSIM_DADD(s1, (double)SSIM_FMUL(b, g));
        s2 = SSIM_DADD(s2, (double)SSIM_FMUL(SSIM_FMUL(a, a), g));
        s3 = SSIM_DADD(s3, (double)SSIM_FMUL(SSIM_FMUL(b, b), g));
        s4 = SSIM_DADD(s4, (double)SSIM_FMUL(SSIM_FMUL(a, b), g));
    }
    const long long o = (long long)y * dw + x;
    out[o] = (float)s0;
    out[plane + o] = (float)s1;
    out[2 * plane + o] = (float)s2;
    out[3 * plane + o] = (float)s3;
    out[4 * plane + o] = (float)s4;
}

/* Vertical Gaussian pass and the SSIM terms of output row blockIdx.x (of h - 10),
 * given the five planes of vmaf_ssim_hconv (dw x h each). Adds the row's
 * ssim, l, c and s terms in a fixed order (per-thread strided sums, then a
 * tree) and writes them to row_sums[4 * row ..]. Launch SSIM_ROW_BLOCK threads. */
VMAF_KERNEL void vmaf_ssim_rows(const float *hbuf, int dw, int h, long long plane,
                                const float *gauss, float c1, float c2, float c3,
                                double *row_sums)
{
    __shared__ double part[4][SSIM_ROW_BLOCK];
    const int y = blockIdx.x;
    const int tid = threadIdx.x;
    double t_ssim = 0.0, t_l = 0.0, t_c = 0.0, t_s = 0.0;
    for (int x = tid; x < dw; x += SSIM_ROW_BLOCK) {
        float m[5];
        for (int k = 0; k < 5; k++) {
            const float *col = hbuf + k * plane + (long long)y * dw + x;
            double a = 0.0;
            for (int v = 0; v < SSIM_GAUSS_LEN; v++)
                a = SSIM_DADD(a, (double)SSIM_FMUL(col[(long long)v * dw], gauss[v]));
            m[k] = (float)a;
        }
        const float mr = m[0], md = m[1];
        float vr = SSIM_FSUB(m[2], SSIM_FMUL(mr, mr));
        float vd = SSIM_FSUB(m[3], SSIM_FMUL(md, md));
        float cv = SSIM_FSUB(m[4], SSIM_FMUL(mr, md));
        /* MAX(0, v) keeping NaN, as the CPU. */
        if (0.0f > vr)
            vr = 0.0f;
        if (0.0f > vd)
            vd = 0.0f;
        const float sd = (float)SSIM_DSQRT((double)SSIM_FMUL(vr, vd));
        const double l = SSIM_DDIV(SSIM_DADD(SSIM_DMUL(SSIM_DMUL(2.0, (double)mr), (double)md),
                                             (double)c1),
                                   (double)SSIM_FADD(SSIM_FADD(SSIM_FMUL(mr, mr), SSIM_FMUL(md, md)),
                                                     c1));
        const double c = SSIM_DDIV(SSIM_DADD(SSIM_DMUL(2.0, (double)sd), (double)c2),
                                   (double)SSIM_FADD(SSIM_FADD(vr, vd), c2));
        if (cv < 0.0f && sd <= 0.0f)
            cv = 0.0f;
        const double s = (double)SSIM_FDIV(SSIM_FADD(cv, c3), SSIM_FADD(sd, c3));
        t_ssim = SSIM_DADD(t_ssim, SSIM_DMUL(SSIM_DMUL(l, c), s));
        t_l = SSIM_DADD(t_l, l);
        t_c = SSIM_DADD(t_c, c);
        t_s = SSIM_DADD(t_s, s);
    }
    part[0][tid] = t_ssim;
    part[1][tid] = t_l;
    part[2][tid] = t_c;
    part[3][tid] = t_s;
    __syncthreads();
    for (int n = SSIM_ROW_BLOCK / 2; n > 0; n /= 2) {
        if (tid < n) {
            for (int k = 0; k < 4; k++)
                part[k][tid] = SSIM_DADD(part[k][tid], part[k][tid + n]);
        }
        __syncthreads();
    }
    if (tid < 4)
        row_sums[4 * (long long)y + tid] = part[tid][0];
}
