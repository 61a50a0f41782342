/* cambi on the GPU: the per-pixel stages of src/feature/cambi/cpu.rs (preprocess, spatial_mask,
 * decimate, filter_mode, the c-values of CValueCtx), each out of place.
 *
 *   preprocess   luma -> 10 bits at the processing size (host-computed nearest-neighbour taps),
 *                plus the 2x2 anti-dithering average for encodes below 10 bits
 *   mask         flat-area mask: 7x7 counts of zero-derivative pixels above a threshold
 *   decimate     keep even rows and columns
 *   mode         separable 3x3 mode filter (edge columns and first/last rows kept)
 *   cvalues      per-pixel c-value from counts of nearby luma levels in the window
 *   stats        exact integer statistics of a c-value map (non-zero count, significand sums
 *                per exponent) from which the host can often pool without the map
 *
 * Everything is integer except the c-value product, which is one correctly rounded
 * int->float conversion and one correctly rounded multiply, as on the CPU, so the maps are
 * bit-identical. The CPU's sliding histograms are replaced by counting the window directly:
 * the counts are the same numbers. */
#include "vmaf_prelude.h"

/* Largest window half-width: the host rejects windows whose area exceeds the 4226-entry
 * reciprocal table, so 65x65 is the largest. */
#define CAMBI_MAX_PAD 32
#define CAMBI_MAX_DIFFS 32
#define CAMBI_TILE 16
#define CAMBI_SPAN (CAMBI_TILE + 2 * CAMBI_MAX_PAD)
/* Window value of a pixel that is unmasked, out of the band or outside the picture: far from
 * any band value, so it is never counted. */
#define CAMBI_NONE 0xFFFF

#define CAMBI_MASK_BW 32
#define CAMBI_MASK_BH 8
#define CAMBI_MASK_PAD 3

VMAF_DEVICE vmaf_u32 cambi_to10(vmaf_u32 v, int bpc)
{
    if (bpc >= 10) {
        const int shift = bpc - 10;
        const vmaf_u32 round = shift == 0 ? 0u : (1u << (shift - 1));
        return ((v + round) >> shift) & 0xFFFFu;
    }
    return (v << (10 - bpc)) & 0xFFFFu;
}

/* `taps` holds the source column of each output column (out_w entries) then the source row of
 * each output row (out_h entries); they are clamped so a bad table cannot read outside. */
template <typename T>
VMAF_DEVICE vmaf_u32 cambi_sample(const T *src, int in_w, int in_h, int in_stride,
                                  const vmaf_u32 *taps, int out_w, int i, int j, int bpc)
{
    vmaf_u32 sx = taps[j];
    vmaf_u32 sy = taps[out_w + i];
    if (sx >= (vmaf_u32)in_w)
        sx = in_w - 1;
    if (sy >= (vmaf_u32)in_h)
        sy = in_h - 1;
    return cambi_to10(src[(vmaf_u64)sy * in_stride + sx], bpc);
}

/* The CPU averages in place, but each output reads only itself and pixels right of and below
 * it, which are still unmodified, so averaging the converted samples is the same. */
template <typename T>
VMAF_DEVICE void cambi_preprocess(const T *src, int in_w, int in_h, int in_stride,
                                  const vmaf_u32 *taps, int bpc, int dither, vmaf_u16 *out,
                                  int out_w, int out_h, int out_stride)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= out_h || j >= out_w)
        return;
    const vmaf_u32 c = cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i, j, bpc);
    vmaf_u32 v = c;
    if (dither) {
        const bool right = j + 1 < out_w;
        const bool down = i + 1 < out_h;
        if (right && down) {
            v = (c + cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i, j + 1, bpc) +
                 cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i + 1, j, bpc) +
                 cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i + 1, j + 1, bpc)) >>
                2;
        } else if (down) {
            v = (c + cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i + 1, j, bpc)) >> 1;
        } else if (right) {
            v = (c + cambi_sample(src, in_w, in_h, in_stride, taps, out_w, i, j + 1, bpc)) >> 1;
        }
    }
    out[(vmaf_u64)i * out_stride + j] = (vmaf_u16)v;
}

VMAF_KERNEL void vmaf_cambi_preprocess_u8(const vmaf_u8 *src, int in_w, int in_h, int in_stride,
                                          const vmaf_u32 *taps, int bpc, int dither,
                                          vmaf_u16 *out, int out_w, int out_h, int out_stride)
{
    cambi_preprocess(src, in_w, in_h, in_stride, taps, bpc, dither, out, out_w, out_h,
                     out_stride);
}

VMAF_KERNEL void vmaf_cambi_preprocess_u16(const vmaf_u16 *src, int in_w, int in_h,
                                           int in_stride, const vmaf_u32 *taps, int bpc,
                                           int dither, vmaf_u16 *out, int out_w, int out_h,
                                           int out_stride)
{
    cambi_preprocess(src, in_w, in_h, in_stride, taps, bpc, dither, out, out_w, out_h,
                     out_stride);
}

/* Whether pixel (r, c) equals its right and lower neighbours (picture edges count as equal);
 * 0 outside the picture. */
VMAF_DEVICE vmaf_u32 cambi_flat(const vmaf_u16 *img, int w, int h, int stride, int r, int c)
{
    if (r < 0 || r >= h || c < 0 || c >= w)
        return 0;
    const vmaf_u16 *p = img + (vmaf_u64)r * stride + c;
    const bool right = c + 1 == w || p[0] == p[1];
    const bool down = r + 1 == h || p[0] == p[stride];
    return (right && down) ? 1u : 0u;
}

/* Launch with CAMBI_MASK_BW x CAMBI_MASK_BH blocks. */
VMAF_KERNEL void vmaf_cambi_mask(const vmaf_u16 *img, int w, int h, int stride,
                                 vmaf_u32 threshold, vmaf_u16 *mask, int mask_stride)
{
    __shared__ vmaf_u8 flat[(CAMBI_MASK_BH + 2 * CAMBI_MASK_PAD)][CAMBI_MASK_BW + 2 * CAMBI_MASK_PAD];
    const int x0 = blockIdx.x * CAMBI_MASK_BW - CAMBI_MASK_PAD;
    const int y0 = blockIdx.y * CAMBI_MASK_BH - CAMBI_MASK_PAD;
    const int tw = CAMBI_MASK_BW + 2 * CAMBI_MASK_PAD;
    const int th = CAMBI_MASK_BH + 2 * CAMBI_MASK_PAD;
    for (int k = threadIdx.y * CAMBI_MASK_BW + threadIdx.x; k < tw * th;
         k += CAMBI_MASK_BW * CAMBI_MASK_BH)
        flat[k / tw][k % tw] = (vmaf_u8)cambi_flat(img, w, h, stride, y0 + k / tw, x0 + k % tw);
    __syncthreads();
    const int c = blockIdx.x * CAMBI_MASK_BW + threadIdx.x;
    const int r = blockIdx.y * CAMBI_MASK_BH + threadIdx.y;
    if (r >= h || c >= w)
        return;
    vmaf_u32 sum = 0;
    for (int dy = 0; dy <= 2 * CAMBI_MASK_PAD; dy++)
        for (int dx = 0; dx <= 2 * CAMBI_MASK_PAD; dx++)
            sum += flat[threadIdx.y + dy][threadIdx.x + dx];
    mask[(vmaf_u64)r * mask_stride + c] = sum > threshold ? 1 : 0;
}

/* out (w x h) = even rows and columns of in. */
VMAF_KERNEL void vmaf_cambi_decimate(const vmaf_u16 *in, int in_stride, vmaf_u16 *out, int w,
                                     int h, int out_stride)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= h || j >= w)
        return;
    out[(vmaf_u64)i * out_stride + j] = in[(vmaf_u64)(2 * i) * in_stride + 2 * j];
}

VMAF_DEVICE vmaf_u16 cambi_mode3(vmaf_u16 a, vmaf_u16 b, vmaf_u16 c)
{
    if (a == b || a == c)
        return a;
    if (b == c)
        return b;
    vmaf_u16 m = a < b ? a : b;
    return m < c ? m : c;
}

/* Horizontal mode of row r at column j (edge columns unfiltered). */
VMAF_DEVICE vmaf_u16 cambi_hmode(const vmaf_u16 *in, int w, int stride, int r, int j)
{
    const vmaf_u16 *p = in + (vmaf_u64)r * stride;
    if (j == 0 || j == w - 1)
        return p[j];
    return cambi_mode3(p[j - 1], p[j], p[j + 1]);
}

VMAF_KERNEL void vmaf_cambi_mode(const vmaf_u16 *in, vmaf_u16 *out, int w, int h, int stride)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= h || j >= w)
        return;
    vmaf_u16 v;
    if (i == 0 || i == h - 1)
        v = in[(vmaf_u64)i * stride + j];
    else
        v = cambi_mode3(cambi_hmode(in, w, stride, i - 1, j), cambi_hmode(in, w, stride, i, j),
                        cambi_hmode(in, w, stride, i + 1, j));
    out[(vmaf_u64)i * stride + j] = v;
}

/* Loads the band value (luma - band_base) of every pixel the block's windows cover into
 * `tile` (span x span, span = CAMBI_TILE + 2 * pad). */
VMAF_DEVICE void cambi_load_tile(vmaf_u16 *tile, const vmaf_u16 *img, const vmaf_u16 *mask,
                                 int w, int h, int stride, int pad, int band_base,
                                 int band_size)
{
    const int span = CAMBI_TILE + 2 * pad;
    const int x0 = blockIdx.x * CAMBI_TILE - pad;
    const int y0 = blockIdx.y * CAMBI_TILE - pad;
    for (int k = threadIdx.y * CAMBI_TILE + threadIdx.x; k < span * span;
         k += CAMBI_TILE * CAMBI_TILE) {
        const int r = y0 + k / span;
        const int c = x0 + k % span;
        vmaf_u16 v = CAMBI_NONE;
        if (r >= 0 && r < h && c >= 0 && c < w) {
            const vmaf_u64 idx = (vmaf_u64)r * stride + c;
            const int b = (int)img[idx] - band_base;
            if (mask[idx] != 0 && b >= 0 && b < band_size)
                v = (vmaf_u16)b;
        }
        tile[k] = v;
    }
    __syncthreads();
}

/* The c-value of a pixel from the window counts: counts[nd + d] pixels have the band value
 * center + d. `value` is the "adjusted" luma (luma + nd) the thresholds compare, as on the
 * CPU; the product is one rounded conversion and one rounded multiply. */
VMAF_DEVICE float cambi_c_value(const vmaf_u32 *counts, int nd, int value, int vlt,
                                const vmaf_i32 *params, const float *lut)
{
    float c_value = 0.0f;
    const int p0 = (int)counts[nd];
    for (int d = 0; d < nd; d++) {
        const int step = d + 1;
        if (value <= params[d] && value + step > vlt) {
            const int p1 = (int)counts[nd + step];
            const int p2 = (int)counts[nd - step];
            const int p = p1 > p2 ? p1 : p2;
            const int num = params[nd + d] * p0 * p;
            const float val = __fmul_rn(__int2float_rn(num), lut[p + p0]);
            if (val > c_value)
                c_value = val;
        }
    }
    return c_value;
}

/* c-values of a w x h scale into cv (dense, w wide). `params` holds tvi[0..nd] (adjusted
 * thresholds) then the contrast weights[0..nd]; `lut` the reciprocal table (> (2*pad+1)^2
 * entries). Launch with CAMBI_TILE x CAMBI_TILE blocks; pad <= CAMBI_MAX_PAD,
 * nd <= CAMBI_MAX_DIFFS. The counts live in a thread-local array: on an H200 that measured
 * faster than counts unrolled into registers. */
VMAF_KERNEL void vmaf_cambi_cvalues(const vmaf_u16 *img, const vmaf_u16 *mask, int w, int h,
                                    int stride, int pad, int band_base, int band_size, int nd,
                                    int vlt, const vmaf_i32 *params, const float *lut,
                                    float *cv)
{
    __shared__ vmaf_u16 tile[CAMBI_SPAN * CAMBI_SPAN];
    cambi_load_tile(tile, img, mask, w, h, stride, pad, band_base, band_size);
    const int span = CAMBI_TILE + 2 * pad;
    const int col = blockIdx.x * CAMBI_TILE + threadIdx.x;
    const int row = blockIdx.y * CAMBI_TILE + threadIdx.y;
    if (row >= h || col >= w)
        return;
    const int center = tile[(threadIdx.y + pad) * span + threadIdx.x + pad];
    float c_value = 0.0f;
    if (center != CAMBI_NONE) {
        vmaf_u32 counts[2 * CAMBI_MAX_DIFFS + 1];
        for (int k = 0; k <= 2 * nd; k++)
            counts[k] = 0;
        const vmaf_u32 range = 2 * nd;
        const int side = 2 * pad + 1;
        for (int dy = 0; dy < side; dy++) {
            const vmaf_u16 *t = tile + (threadIdx.y + dy) * span + threadIdx.x;
            for (int dx = 0; dx < side; dx++) {
                const vmaf_u32 d = (vmaf_u32)((int)t[dx] - center + nd);
                if (d <= range)
                    counts[d]++;
            }
        }
        const int value = (int)img[(vmaf_u64)row * stride + col] + nd;
        c_value = cambi_c_value(counts, nd, value, vlt, params, lut);
    }
    cv[(vmaf_u64)row * w + col] = c_value;
}

#define CAMBI_STATS_BLOCK 256
#define CAMBI_STATS_BUCKETS 256

/* Exact statistics of n non-negative c-values for the host's pooling shortcut: out[0] += the
 * count of non-zero values; out[1 + e] += the integer significands (implicit bit included) of
 * the values whose biased exponent is e, subnormals counted under e = 1 (the same scale).
 * Integer sums, so the result does not depend on the order. Launch with CAMBI_STATS_BLOCK
 * threads; `out` (257 entries) must be zeroed first. */
VMAF_KERNEL void vmaf_cambi_stats(const float *cv, int n, vmaf_u64 *out)
{
    __shared__ vmaf_u64 buckets[CAMBI_STATS_BUCKETS];
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    for (int b = threadIdx.x; b < CAMBI_STATS_BUCKETS; b += blockDim.x)
        buckets[b] = 0;
    __syncthreads();
    vmaf_u64 nonzero = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        const vmaf_u32 bits = __float_as_uint(cv[i]);
        if (bits == 0)
            continue;
        nonzero++;
        vmaf_u32 e = (bits >> 23) & 0xFFu;
        vmaf_u32 m = bits & 0x7FFFFFu;
        if (e == 0)
            e = 1;
        else
            m |= 0x800000u;
        atomicAdd(&buckets[e], (vmaf_u64)m);
    }
    const vmaf_u64 total = vmaf_block_sum_u64(nonzero, scratch);
    if (threadIdx.x == 0 && total != 0)
        VMAF_ATOMIC_ADD_U64(out, total);
    __syncthreads();
    for (int b = threadIdx.x; b < CAMBI_STATS_BUCKETS; b += blockDim.x)
        if (buckets[b] != 0)
            VMAF_ATOMIC_ADD_U64(out + 1 + b, buckets[b]);
}
