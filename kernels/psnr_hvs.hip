/* psnr_hvs on the GPU (src/feature/psnr_hvs/gpu.rs).
 *
 *   terms   one thread per 8x8 block of the 7-sample grid: both blocks' variance ratios, their
 *           integer DCTs, the masking level and the block's 64 weighted squared errors, each
 *           in the CPU's (src/feature/psnr_hvs/mod.rs) operations, order and precision
 *   sum     one wave per plane adds a plane's terms in raster order in one float, as the CPU
 *
 * The CPU sums every term of a plane into one f32 in order, so that sum has no parallel form
 * with the same rounding: it stays sequential, on the device. No operation may be contracted
 * into an FMA: nvcc/nvrtc get -fmad=false and the rounded intrinsics below; under HIP the file
 * turns contraction off and uses the operators. */
#include "vmaf_prelude.h"

#if defined(__HIP__)
#pragma clang fp contract(off)
#define HVS_FADD(a, b) ((a) + (b))
#define HVS_FSUB(a, b) ((a) - (b))
#define HVS_FMUL(a, b) ((a) * (b))
#define HVS_FDIV(a, b) ((a) / (b))
#define HVS_DDIV(a, b) ((a) / (b))
#else
#define HVS_FADD(a, b) __fadd_rn((a), (b))
#define HVS_FSUB(a, b) __fsub_rn((a), (b))
#define HVS_FMUL(a, b) __fmul_rn((a), (b))
#define HVS_FDIV(a, b) __fdiv_rn((a), (b))
#define HVS_DDIV(a, b) __ddiv_rn((a), (b))
#endif

#define HVS_BLOCK_THREADS 64

/* Daala's unbiased halving (rounds towards zero). */
VMAF_DEVICE vmaf_i32 hvs_half(vmaf_i32 a)
{
    return (vmaf_i32)(((vmaf_u32)a >> 31) + (vmaf_u32)a) >> 1;
}

/* (a * c + 2^(s-1)) >> s in wrapping 32-bit arithmetic. */
VMAF_DEVICE vmaf_i32 hvs_lift(vmaf_i32 a, vmaf_i32 c, int s)
{
    return (vmaf_i32)((vmaf_u32)a * (vmaf_u32)c + (1u << (s - 1))) >> s;
}

VMAF_DEVICE vmaf_i32 hvs_add(vmaf_i32 a, vmaf_i32 b) { return (vmaf_i32)((vmaf_u32)a + (vmaf_u32)b); }
VMAF_DEVICE vmaf_i32 hvs_sub(vmaf_i32 a, vmaf_i32 b) { return (vmaf_i32)((vmaf_u32)a - (vmaf_u32)b); }

/* Daala's 8-point forward DCT of x[0], x[step], ... x[7 * step], in place. */
VMAF_DEVICE void hvs_fdct8(vmaf_i32 *x, int step)
{
    vmaf_i32 t0 = x[0], t4 = x[step], t2 = x[2 * step], t6 = x[3 * step];
    vmaf_i32 t7 = x[4 * step], t3 = x[5 * step], t5 = x[6 * step], t1 = x[7 * step];
    t1 = hvs_sub(t0, t1);
    const vmaf_i32 t1h = hvs_half(t1);
    t0 = hvs_sub(t0, t1h);
    t4 = hvs_add(t4, t5);
    const vmaf_i32 t4h = hvs_half(t4);
    t5 = hvs_sub(t5, t4h);
    t3 = hvs_sub(t2, t3);
    t2 = hvs_sub(t2, hvs_half(t3));
    t6 = hvs_add(t6, t7);
    const vmaf_i32 t6h = hvs_half(t6);
    t7 = hvs_sub(t6h, t7);
    t0 = hvs_add(t0, t6h);
    t6 = hvs_sub(t0, t6);
    t2 = hvs_sub(t4h, t2);
    t4 = hvs_sub(t2, t4);
    t0 = hvs_sub(t0, hvs_lift(t4, 13573, 15));
    t4 = hvs_add(t4, hvs_lift(t0, 11585, 14));
    t0 = hvs_sub(t0, hvs_lift(t4, 13573, 15));
    t6 = hvs_sub(t6, hvs_lift(t2, 21895, 15));
    t2 = hvs_add(t2, hvs_lift(t6, 15137, 14));
    t6 = hvs_sub(t6, hvs_lift(t2, 21895, 15));
    t3 = hvs_add(t3, hvs_lift(t5, 19195, 15));
    t5 = hvs_add(t5, hvs_lift(t3, 11585, 14));
    t3 = hvs_sub(t3, hvs_lift(t5, 7489, 13));
    t7 = hvs_sub(hvs_half(t5), t7);
    t5 = hvs_sub(t5, t7);
    t3 = hvs_sub(t1h, t3);
    t1 = hvs_sub(t1, t3);
    t7 = hvs_add(t7, hvs_lift(t1, 3227, 15));
    t1 = hvs_sub(t1, hvs_lift(t7, 6393, 15));
    t7 = hvs_add(t7, hvs_lift(t1, 3227, 15));
    t5 = hvs_add(t5, hvs_lift(t3, 2485, 13));
    t3 = hvs_sub(t3, hvs_lift(t5, 18205, 15));
    t5 = hvs_add(t5, hvs_lift(t3, 2485, 13));
    x[0] = t0;
    x[step] = t1;
    x[2 * step] = t2;
    x[3 * step] = t3;
    x[4 * step] = t4;
    x[5 * step] = t5;
    x[6 * step] = t6;
    x[7 * step] = t7;
}

/* The CPU's 2-D DCT: b is row-major; each column transformed and stored as a row of the
 * intermediate, twice, so out[v * 8 + u] holds vertical frequency v, horizontal u. */
VMAF_DEVICE void hvs_fdct8x8(const vmaf_i32 *b, vmaf_i32 *out)
{
    vmaf_i32 tmp[64];
    for (int c = 0; c < 8; c++) {
        for (int r = 0; r < 8; r++)
            tmp[c * 8 + r] = b[r * 8 + c];
        hvs_fdct8(tmp + c * 8, 1);
    }
    for (int c = 0; c < 8; c++) {
        for (int r = 0; r < 8; r++)
            out[c * 8 + r] = tmp[r * 8 + c];
        hvs_fdct8(out + c * 8, 1);
    }
}

VMAF_DEVICE int hvs_quadrant(int i, int j) { return (i >> 2) + ((j >> 2) << 1); }

/* The ratio of the summed quadrant variances to the block's variance (the raw variance when
 * that is not positive), in the CPU's float operations. */
VMAF_DEVICE float hvs_variance_ratio(const vmaf_i32 *b)
{
    float gmean = 0.0f;
    float means[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            const float v = (float)b[i * 8 + j];
            gmean = HVS_FADD(gmean, v);
            means[hvs_quadrant(i, j)] = HVS_FADD(means[hvs_quadrant(i, j)], v);
        }
    gmean = HVS_FDIV(gmean, 64.0f);
    for (int q = 0; q < 4; q++)
        means[q] = HVS_FDIV(means[q], 16.0f);
    float gvar = 0.0f;
    float vars[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            const float v = (float)b[i * 8 + j];
            const int q = hvs_quadrant(i, j);
            const float dg = HVS_FSUB(v, gmean);
            const float dq = HVS_FSUB(v, means[q]);
            gvar = HVS_FADD(gvar, HVS_FMUL(dg, dg));
            vars[q] = HVS_FADD(vars[q], HVS_FMUL(dq, dq));
        }
    gvar = HVS_FMUL(gvar, HVS_FMUL(HVS_FDIV(1.0f, 63.0f), 64.0f));
    const float k15 = HVS_FMUL(HVS_FDIV(1.0f, 15.0f), 16.0f);
    for (int q = 0; q < 4; q++)
        vars[q] = HVS_FMUL(vars[q], k15);
    if (gvar > 0.0f)
        gvar = HVS_FDIV(HVS_FADD(HVS_FADD(HVS_FADD(vars[0], vars[1]), vars[2]), vars[3]), gvar);
    return gvar;
}

/* Masking strength of a transformed block. */
VMAF_DEVICE float hvs_mask_level(const vmaf_i32 *dct, const float *mask, float ratio)
{
    float energy = 0.0f;
    for (int i = 0; i < 8; i++)
        for (int j = i == 0 ? 1 : 0; j < 8; j++) {
            const vmaf_i32 c = dct[i * 8 + j];
            const vmaf_i32 c2 = (vmaf_i32)((vmaf_u32)c * (vmaf_u32)c);
            energy = HVS_FADD(energy, HVS_FMUL(__int2float_rn(c2), mask[i * 8 + j]));
        }
    const double e = (double)HVS_FMUL(energy, ratio);
    return (float)HVS_DDIV(__dsqrt_rn(e), 32.0);
}

/* The 64 terms of every block of a w x h plane pair into terms[(by * nbx + bx) * 64 + k];
 * `tables` holds the masking weights then the CSF (64 floats each). Launch with
 * HVS_BLOCK_THREADS threads, one per 8x8 block (nbx * nby of them). */
template <typename T>
VMAF_DEVICE void hvs_terms(const T *ref, int ref_stride, const T *dis, int dis_stride, int nbx,
                           int nby, const float *tables, float *terms)
{
    const int blk = blockIdx.x * blockDim.x + threadIdx.x;
    if (blk >= nbx * nby)
        return;
    const int x = (blk % nbx) * 7;
    const int y = (blk / nbx) * 7;
    vmaf_i32 s[64], d[64];
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            s[i * 8 + j] = ref[(vmaf_u64)(y + i) * ref_stride + x + j];
            d[i * 8 + j] = dis[(vmaf_u64)(y + i) * dis_stride + x + j];
        }
    const float s_ratio = hvs_variance_ratio(s);
    const float d_ratio = hvs_variance_ratio(d);
    vmaf_i32 ds[64], dd[64];
    hvs_fdct8x8(s, ds);
    hvs_fdct8x8(d, dd);
    const float *mask = tables;
    const float *csf = tables + 64;
    const float s_mask = hvs_mask_level(ds, mask, s_ratio);
    const float d_mask = hvs_mask_level(dd, mask, d_ratio);
    const float m = d_mask > s_mask ? d_mask : s_mask;
    float *out = terms + (vmaf_u64)blk * 64;
    for (int k = 0; k < 64; k++) {
        const vmaf_u32 diff = (vmaf_u32)ds[k] - (vmaf_u32)dd[k];
        const vmaf_i32 a = (vmaf_i32)diff < 0 ? (vmaf_i32)(0u - diff) : (vmaf_i32)diff;
        float err = __int2float_rn(a);
        if (k != 0) {
            const float thr = HVS_FDIV(m, mask[k]);
            err = err < thr ? 0.0f : HVS_FSUB(err, thr);
        }
        const float e = HVS_FMUL(err, csf[k]);
        out[k] = HVS_FMUL(e, e);
    }
}

VMAF_KERNEL void vmaf_psnr_hvs_terms_u8(const vmaf_u8 *ref, int ref_stride, const vmaf_u8 *dis,
                                        int dis_stride, int nbx, int nby, const float *tables,
                                        float *terms)
{
    hvs_terms(ref, ref_stride, dis, dis_stride, nbx, nby, tables, terms);
}

VMAF_KERNEL void vmaf_psnr_hvs_terms_u16(const vmaf_u16 *ref, int ref_stride,
                                         const vmaf_u16 *dis, int dis_stride, int nbx, int nby,
                                         const float *tables, float *terms)
{
    hvs_terms(ref, ref_stride, dis, dis_stride, nbx, nby, tables, terms);
}

#define HVS_SUM_THREADS 256
#define HVS_SUM_CHUNK 1024

/* out[p] = the float sum, in index order, of terms[s_p .. s_(p+1)]: block p (0..2) adds
 * plane p. All threads stage the next chunk of terms in shared memory while thread 0 adds the
 * current one, so the one sequential chain never waits on global memory. Launch with
 * HVS_SUM_THREADS threads and three blocks. */
VMAF_KERNEL void vmaf_psnr_hvs_sum(const float *terms, vmaf_u32 s0, vmaf_u32 s1, vmaf_u32 s2,
                                   vmaf_u32 s3, float *out)
{
    __shared__ float chunk[2][HVS_SUM_CHUNK];
    const int p = blockIdx.x;
    const vmaf_u32 lo = p == 0 ? s0 : p == 1 ? s1 : s2;
    const vmaf_u32 hi = p == 0 ? s1 : p == 1 ? s2 : s3;
    float ret = 0.0f;
    for (int k = threadIdx.x; k < HVS_SUM_CHUNK; k += HVS_SUM_THREADS)
        chunk[0][k] = lo + k < hi ? terms[lo + k] : 0.0f;
    __syncthreads();
    int cur = 0;
    for (vmaf_u32 base = lo; base < hi; base += HVS_SUM_CHUNK) {
        const vmaf_u32 next = base + HVS_SUM_CHUNK;
        for (int k = threadIdx.x; k < HVS_SUM_CHUNK; k += HVS_SUM_THREADS)
            chunk[cur ^ 1][k] = next + k < hi ? terms[next + k] : 0.0f;
        if (threadIdx.x == 0) {
            const vmaf_u32 n = hi - base < HVS_SUM_CHUNK ? hi - base : HVS_SUM_CHUNK;
            const float *c = chunk[cur];
            // Sixteen loads issued before their additions, so the chain of additions (the
            // same order as one at a time) does not wait on shared-memory latency per term.
            vmaf_u32 k = 0;
            for (; k + 16 <= n; k += 16) {
                float v[16];
#pragma unroll
                for (int j = 0; j < 16; j++)
                    v[j] = c[k + j];
#pragma unroll
                for (int j = 0; j < 16; j++)
                    ret = HVS_FADD(ret, v[j]);
            }
            for (; k < n; k++)
                ret = HVS_FADD(ret, c[k]);
        }
        __syncthreads();
        cur ^= 1;
    }
    if (threadIdx.x == 0)
        out[p] = ret;
}
