/* SpEED (speed_chroma, speed_temporal) on the GPU (src/feature/speed/gpu.rs).
 *
 * Repeats, sample by sample and in the same order and precision, the float steps of the CPU
 * code in src/feature/speed/scale.rs and gsm.rs up to the 25x25 covariance matrix: samples to
 * float (minus 128), frame differences, optional prescaling (index and weight tables from the
 * host, which also computes the transcendental weights), the anti-aliasing filter evaluated
 * only where decimation by 16 samples it, local mean removal, the window means and the
 * covariances. The host finishes each picture (eigenvalues, GSM solve, entropies, score) with
 * the CPU's own code, so both paths agree bit for bit.
 *
 * Every kernel handles a pair of pictures (reference, distorted): blockIdx.z (or blockIdx.x for
 * vmaf_speed_moments) picks one, and their outputs lie one plane apart.
 *
 * No operation may be contracted into an FMA: nvcc/nvrtc get -fmad=false and the explicitly
 * rounded intrinsics; under HIP the file turns contraction off and uses the operators. */
#include "vmaf_prelude.h"

#if defined(__HIP__)
#pragma clang fp contract(off)
#define SPEED_FADD(a, b) ((a) + (b))
#define SPEED_FSUB(a, b) ((a) - (b))
#define SPEED_FMUL(a, b) ((a) * (b))
#define SPEED_FDIV(a, b) ((a) / (b))
#define SPEED_DADD(a, b) ((a) + (b))
#define SPEED_DSUB(a, b) ((a) - (b))
#define SPEED_DMUL(a, b) ((a) * (b))
#define SPEED_DDIV(a, b) ((a) / (b))
#else
#define SPEED_FADD(a, b) __fadd_rn((a), (b))
#define SPEED_FSUB(a, b) __fsub_rn((a), (b))
#define SPEED_FMUL(a, b) __fmul_rn((a), (b))
#define SPEED_FDIV(a, b) __fdiv_rn((a), (b))
#define SPEED_DADD(a, b) __dadd_rn((a), (b))
#define SPEED_DSUB(a, b) __dsub_rn((a), (b))
#define SPEED_DMUL(a, b) __dmul_rn((a), (b))
#define SPEED_DDIV(a, b) __ddiv_rn((a), (b))
#endif

/* Side of the GSM neighbourhood and entries of its covariance matrix. */
#define SPEED_BLOCK 5
#define SPEED_NB (SPEED_BLOCK * SPEED_BLOCK)
/* Threads of vmaf_speed_moments (at least the 325 covariances of the lower triangle; its
 * launch bounds spell the number). */
#define SPEED_MOMENTS_THREADS 384

/* The CPU's `reflect`: mirrors once at each edge without repeating the edge sample. */
VMAF_DEVICE int speed_reflect(int i, int n)
{
    if (i < 0)
        return -i;
    if (i >= n)
        return 2 * n - i - 2;
    return i;
}

/* i clamped into 0..n-1. */
VMAF_DEVICE int speed_clamp(int i, int n)
{
    return i < 0 ? 0 : (i > n - 1 ? n - 1 : i);
}

/* Sample (x, y) of a picture plane on the 8-bit float scale minus 128, zero outside the
 * w x h picture (the CPU's zeroed buffer). Deeper samples divide by 2^(bpc-8) first (exact);
 * for 8-bit `scaler` is 1, which leaves the value unchanged as the CPU's plain conversion. */
template <typename T>
VMAF_DEVICE float speed_sample(const T *p, int stride, int x, int y, int w, int h, float scaler)
{
    if (x >= w || y >= h)
        return 0.0f;
    const float v = (float)p[(long long)y * stride + x];
    return SPEED_FADD(SPEED_FDIV(v, scaler), -128.0f);
}

/* The float plane the pipeline reads at (x, y): `a`, or `a - b` (frame differences) when b is
 * not null. */
template <typename T>
VMAF_DEVICE float speed_input(const T *a, int sa, const T *b, int sb, int x, int y, int w, int h,
                              float scaler)
{
    const float va = speed_sample<T>(a, sa, x, y, w, h, scaler);
    if (b == 0)
        return va;
    return SPEED_FSUB(va, speed_sample<T>(b, sb, x, y, w, h, scaler));
}

/* Already-float planes (the prescaled path): dense, no conversion, zero outside. */
VMAF_DEVICE float speed_input_f32(const float *a, int x, int y, int w, int h)
{
    if (x >= w || y >= h)
        return 0.0f;
    return a[(long long)y * w + x];
}

/* The anti-aliasing filter (`taps`, odd length) of the sw x sh plane, at (16 i, 16 j): the
 * vertical taps in order for each column the horizontal taps read, then the horizontal taps
 * in order, every sum starting at 0 like the CPU's. `load(x, y)` gives the plane's sample. */
template <typename Load>
VMAF_DEVICE float speed_antialias_at(const Load &load, int i, int j, int sw, int sh,
                                     const float *taps, int ntaps)
{
    const int half = ntaps / 2;
    float acc = 0.0f;
    for (int fj = 0; fj < ntaps; fj++) {
        const int x = speed_reflect(j * 16 - half + fj, sw);
        float v = 0.0f;
        for (int fi = 0; fi < ntaps; fi++) {
            const int y = speed_reflect(i * 16 - half + fi, sh);
            v = SPEED_FADD(v, SPEED_FMUL(taps[fi], load(x, y)));
        }
        acc = SPEED_FADD(acc, SPEED_FMUL(taps[fj], v));
    }
    return acc;
}

template <typename T> struct SpeedPlaneLoad {
    const T *a;
    const T *b;
    int sa, sb, w, h;
    float scaler;
    __device__ __forceinline__ float operator()(int x, int y) const
    {
        return speed_input<T>(a, sa, b, sb, x, y, w, h, scaler);
    }
};

/* Decimated anti-aliased planes of a pair of pictures: picture z (blockIdx.z) is a{z} (minus
 * b{z} when not null), w x h samples read as an sw x sh plane; out + z * dw * dh receives its
 * dw x dh samples. 2-D blocks over the output. */
template <typename T>
VMAF_DEVICE void speed_decimate(const T *a0, int sa0, const T *b0, int sb0, const T *a1, int sa1,
                                const T *b1, int sb1, int w, int h, int sw, int sh, int dw,
                                int dh, float scaler, const float *taps, int ntaps, float *out)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= dw || i >= dh)
        return;
    const int z = blockIdx.z;
    SpeedPlaneLoad<T> load;
    load.a = z == 0 ? a0 : a1;
    load.b = z == 0 ? b0 : b1;
    load.sa = z == 0 ? sa0 : sa1;
    load.sb = z == 0 ? sb0 : sb1;
    load.w = w;
    load.h = h;
    load.scaler = scaler;
    out[(long long)z * dw * dh + (long long)i * dw + j] =
        speed_antialias_at(load, i, j, sw, sh, taps, ntaps);
}

VMAF_KERNEL void vmaf_speed_decimate_u8(const vmaf_u8 *a0, int sa0, const vmaf_u8 *b0, int sb0,
                                        const vmaf_u8 *a1, int sa1, const vmaf_u8 *b1, int sb1,
                                        int w, int h, int sw, int sh, int dw, int dh,
                                        float scaler, const float *taps, int ntaps, float *out)
{
    speed_decimate<vmaf_u8>(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, sw, sh, dw, dh, scaler,
                            taps, ntaps, out);
}

VMAF_KERNEL void vmaf_speed_decimate_u16(const vmaf_u16 *a0, int sa0, const vmaf_u16 *b0,
                                         int sb0, const vmaf_u16 *a1, int sa1,
                                         const vmaf_u16 *b1, int sb1, int w, int h, int sw,
                                         int sh, int dw, int dh, float scaler, const float *taps,
                                         int ntaps, float *out)
{
    speed_decimate<vmaf_u16>(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, sw, sh, dw, dh, scaler,
                             taps, ntaps, out);
}

struct SpeedFloatLoad {
    const float *a;
    int w, h;
    __device__ __forceinline__ float operator()(int x, int y) const
    {
        return speed_input_f32(a, x, y, w, h);
    }
};

/* vmaf_speed_decimate_* for prescaled float planes: picture z is src + z * sw * sh (dense). */
VMAF_KERNEL void vmaf_speed_decimate_f32(const float *src, int sw, int sh, int dw, int dh,
                                         const float *taps, int ntaps, float *out)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (j >= dw || i >= dh)
        return;
    const int z = blockIdx.z;
    SpeedFloatLoad load;
    load.a = src + (long long)z * sw * sh;
    load.w = sw;
    load.h = sh;
    out[(long long)z * dw * dh + (long long)i * dw + j] =
        speed_antialias_at(load, i, j, sw, sh, taps, ntaps);
}

/* The prescaling path's input: the whole w x h float plane of picture z (a{z}, minus b{z} when
 * not null), dense, at out + z * w * h. */
template <typename T>
VMAF_DEVICE void speed_to_float(const T *a0, int sa0, const T *b0, int sb0, const T *a1, int sa1,
                                const T *b1, int sb1, int w, int h, float scaler, float *out)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    const int z = blockIdx.z;
    const float v = z == 0 ? speed_input<T>(a0, sa0, b0, sb0, x, y, w, h, scaler)
                           : speed_input<T>(a1, sa1, b1, sb1, x, y, w, h, scaler);
    out[(long long)z * w * h + (long long)y * w + x] = v;
}

VMAF_KERNEL void vmaf_speed_to_float_u8(const vmaf_u8 *a0, int sa0, const vmaf_u8 *b0, int sb0,
                                        const vmaf_u8 *a1, int sa1, const vmaf_u8 *b1, int sb1,
                                        int w, int h, float scaler, float *out)
{
    speed_to_float<vmaf_u8>(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, scaler, out);
}

VMAF_KERNEL void vmaf_speed_to_float_u16(const vmaf_u16 *a0, int sa0, const vmaf_u16 *b0,
                                         int sb0, const vmaf_u16 *a1, int sa1,
                                         const vmaf_u16 *b1, int sb1, int w, int h, float scaler,
                                         float *out)
{
    speed_to_float<vmaf_u16>(a0, sa0, b0, sb0, a1, sa1, b1, sb1, w, h, scaler, out);
}

/* Prescaling methods, as the host numbers them. */
#define SPEED_NEAREST 0
#define SPEED_BILINEAR 1
#define SPEED_BICUBIC 2
#define SPEED_LANCZOS4 3

/* Resamples picture z of `src` (dense w x h) to dst + z * sw * sh (dense sw x sh). Per output
 * column x the host gives `taps` source columns xi[x * taps + k] (mirrored and clamped as the
 * CPU's reads) and weights xw[x * taps + k], likewise per row; bilinear keeps its fractional
 * offset in weight 0, nearest has one index and no weight. The sums run in the CPU's order. */
VMAF_KERNEL void vmaf_speed_resample(const float *src, int w, int h, int sw, int sh, int method,
                                     int taps, const int *xi, const float *xw, const int *yi,
                                     const float *yw, float *dst)
{
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= sw || y >= sh)
        return;
    const int z = blockIdx.z;
    const float *s = src + (long long)z * w * h;
    const int *cx = xi + (long long)x * taps;
    const int *cy = yi + (long long)y * taps;
    const float *wx = xw + (long long)x * taps;
    const float *wy = yw + (long long)y * taps;
/* Clamped again here so no table content can read outside the plane (the host's are). */
#define SPEED_AT(c, r) s[(long long)speed_clamp((r), h) * w + speed_clamp((c), w)]
    float v;
    if (method == SPEED_NEAREST) {
        v = SPEED_AT(cx[0], cy[0]);
    } else if (method == SPEED_BILINEAR) {
        const float dx = wx[0], dy = wy[0];
        const float ex = SPEED_FSUB(1.0f, dx), ey = SPEED_FSUB(1.0f, dy);
        v = SPEED_FMUL(SPEED_FMUL(ey, ex), SPEED_AT(cx[0], cy[0]));
        v = SPEED_FADD(v, SPEED_FMUL(SPEED_FMUL(ey, dx), SPEED_AT(cx[1], cy[0])));
        v = SPEED_FADD(v, SPEED_FMUL(SPEED_FMUL(dy, ex), SPEED_AT(cx[0], cy[1])));
        v = SPEED_FADD(v, SPEED_FMUL(SPEED_FMUL(dy, dx), SPEED_AT(cx[1], cy[1])));
    } else {
        float acc = 0.0f, wsum = 0.0f;
        for (int r = 0; r < taps; r++) {
            for (int c = 0; c < taps; c++) {
                const float weight = SPEED_FMUL(wx[c], wy[r]);
                wsum = SPEED_FADD(wsum, weight);
                acc = SPEED_FADD(acc, SPEED_FMUL(SPEED_AT(cx[c], cy[r]), weight));
            }
        }
        v = method == SPEED_LANCZOS4 ? SPEED_FDIV(acc, wsum) : acc;
    }
#undef SPEED_AT
    dst[(long long)z * sw * sh + (long long)y * sw + x] = v;
}

/* Local mean removal and second moments of picture blockIdx.x (0 or 1) of `dec` (dense
 * dw x dh planes, one after the other): writes the normalised plane (sample minus its
 * `mtaps`-filtered local mean, the CPU's separable filter with mirrored edges) to
 * norm + z * dw * dh, then the 25 window means over the subw x subh windows (float sums in
 * sample order) and their covariances (double sums in sample order, rounded to float) to
 * cov + z * 625, both triangles. One block of SPEED_MOMENTS_THREADS threads per picture. */
VMAF_KERNEL void VMAF_BOUNDS(384, 1)
    vmaf_speed_moments(const float *dec, int dw, int dh, const float *mtaps, int nm, int subw,
                       int subh, float *norm, float *cov)
{
    __shared__ float means[SPEED_NB];
    const int z = blockIdx.x;
    const float *src = dec + (long long)z * dw * dh;
    float *out = norm + (long long)z * dw * dh;
    const int tid = threadIdx.x;
    const int half = nm / 2;
    for (int idx = tid; idx < dw * dh; idx += blockDim.x) {
        const int i = idx / dw, j = idx % dw;
        float acc = 0.0f;
        for (int fj = 0; fj < nm; fj++) {
            const int x = speed_reflect(j - half + fj, dw);
            float v = 0.0f;
            for (int fi = 0; fi < nm; fi++) {
                const int y = speed_reflect(i - half + fi, dh);
                v = SPEED_FADD(v, SPEED_FMUL(mtaps[fi], src[(long long)y * dw + x]));
            }
            acc = SPEED_FADD(acc, SPEED_FMUL(mtaps[fj], v));
        }
        out[idx] = SPEED_FSUB(src[idx], acc);
    }
    __syncthreads();
    const int n = subw * subh;
    if (tid < SPEED_NB) {
        const int r0 = tid / SPEED_BLOCK, c0 = tid % SPEED_BLOCK;
        float acc = 0.0f;
        for (int i = 0; i < subh; i++) {
            const float *row = out + (long long)(r0 + i) * dw + c0;
            for (int j = 0; j < subw; j++)
                acc = SPEED_FADD(acc, row[j]);
        }
        means[tid] = SPEED_FDIV(acc, (float)n);
    }
    __syncthreads();
    for (int p = tid; p < SPEED_NB * (SPEED_NB + 1) / 2; p += blockDim.x) {
        /* p enumerates the lower triangle row by row: (xi, yi) with yi <= xi. */
        int xi = 0;
        while ((xi + 1) * (xi + 2) / 2 <= p)
            xi++;
        const int yi = p - xi * (xi + 1) / 2;
        const double mx = (double)means[xi], my = (double)means[yi];
        const float *px = out + (long long)(xi / SPEED_BLOCK) * dw + xi % SPEED_BLOCK;
        const float *py = out + (long long)(yi / SPEED_BLOCK) * dw + yi % SPEED_BLOCK;
        double acc = 0.0;
        for (int i = 0; i < subh; i++) {
            const float *rx = px + (long long)i * dw;
            const float *ry = py + (long long)i * dw;
            for (int j = 0; j < subw; j++)
                acc = SPEED_DADD(acc, SPEED_DMUL(SPEED_DSUB((double)rx[j], mx),
                                                 SPEED_DSUB((double)ry[j], my)));
        }
        const float c = (float)SPEED_DDIV(acc, (double)n);
        float *k = cov + (long long)z * SPEED_NB * SPEED_NB;
        k[xi * SPEED_NB + yi] = c;
        k[yi * SPEED_NB + xi] = c;
    }
}
