/* Every kernel of kernels/<name>.hip compiled for the host execution model (hip_cpu.h), plus a few
 * kernels that test the model itself, behind one C entry point the Rust tests load:
 *
 *   int hipcpu_launch(name, grid[3], block[3], warp, shmem, args, nargs, err, err_len)
 *
 * `args` points at the argument values in order, as hipModuleLaunchKernel takes them; returns
 * 0, or -1 (unknown kernel or wrong argument count) / -2 (the launch failed) with a message in
 * err. Build: c++ -std=c++17 -O2 -ffp-contract=off -fPIC -shared -DVMAF_HIPCPU
 * -Itests/hipcpu -Ikernels tests/hipcpu/kernels.cpp tests/hipcpu/hip_cpu.cpp. */
#include "vmaf_prelude.h"

#include "adm.hip"
#include "cambi.hip"
#include "float_ssim.hip"
#include "motion.hip"
#include "psnr.hip"
#include "psnr_hvs.hip"
#include "semiplanar.hip"
#include "speed.hip"
#include "vif.hip"

#include <utility>

/* VIF statistics with the other horizontal-sum variant (integer or FP64 second moments) than
 * vif.hip picks for this build, so the model checks both. */
VMAF_KERNEL void vmaf_vif_stats_u8_alt(const vmaf_u8 *ref, const vmaf_u8 *dis, int w, int h,
                                       int stride, int scale, int bpc, const vmaf_u64 *log2_steps,
                                       double egl, vmaf_u64 *acc, vmaf_u16 *down_ref,
                                       vmaf_u16 *down_dis, int down_stride)
{
    vif_stats_any<vmaf_u8, 1 - VIF_F64>(ref, dis, w, h, stride, scale, bpc, log2_steps, egl, acc,
                                        down_ref, down_dis, down_stride);
}

VMAF_KERNEL void vmaf_vif_stats_u16_alt(const vmaf_u16 *ref, const vmaf_u16 *dis, int w, int h,
                                        int stride, int scale, int bpc,
                                        const vmaf_u64 *log2_steps, double egl, vmaf_u64 *acc,
                                        vmaf_u16 *down_ref, vmaf_u16 *down_dis, int down_stride)
{
    vif_stats_any<vmaf_u16, 1 - VIF_F64>(ref, dis, w, h, stride, scale, bpc, log2_steps, egl,
                                         acc, down_ref, down_dis, down_stride);
}

/* ---- Kernels that check the model (src/gpu/hipcpu.rs). ---- */

/* out[rank * 4 + k]: __shfl_down/__shfl_up/__shfl_xor/__shfl of (rank * 3 + 1) with the
 * given delta/mask/source lane and width. */
VMAF_KERNEL void hipcpu_test_shuffles(int delta, int width, vmaf_u64 *out)
{
    const unsigned rank = vmaf_thread_rank();
    const vmaf_u64 v = (vmaf_u64)rank * 3 + 1 + ((vmaf_u64)rank << 40);
    out[rank * 4 + 0] = __shfl_down(v, delta, width);
    out[rank * 4 + 1] = __shfl_up(v, delta, width);
    out[rank * 4 + 2] = __shfl_xor(v, delta, width);
    out[rank * 4 + 3] = __shfl(v, delta, width);
}

/* The bug class the model exists for: lanes past `n` return before a full-wave reduction. */
VMAF_KERNEL void hipcpu_test_early_return(int n, vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    if ((int)threadIdx.x >= n)
        return;
    const vmaf_u64 total = vmaf_block_sum_u64(1, scratch);
    if (threadIdx.x == 0)
        out[0] = total;
}

/* A block-wide sum (launched with a block that is not a whole number of waves, it must fail). */
VMAF_KERNEL void hipcpu_test_block_sum(vmaf_u64 *out)
{
    __shared__ vmaf_u64 scratch[VMAF_MAX_WARPS];
    const vmaf_u64 total = vmaf_block_sum_u64(vmaf_thread_rank() + 1, scratch);
    if (vmaf_thread_rank() == 0)
        out[blockIdx.x] = total;
}

/* Half the block waits at a second barrier the other half never reaches. */
VMAF_KERNEL void hipcpu_test_divergent_barrier(vmaf_u64 *out)
{
    __syncthreads();
    if (threadIdx.x % 2 == 0) {
        __syncthreads();
        out[threadIdx.x] = 1;
    } else {
        out[threadIdx.x] = 2;
        __syncthreads();
    }
}

/* ---- The entry point. ---- */

namespace {

typedef std::string (*Thunk)(dim3, dim3, int, size_t, void **);

template <typename... P, size_t... I>
std::string call(void (*k)(P...), dim3 g, dim3 b, int warp, size_t shmem, void **args,
                 std::index_sequence<I...>)
{
    return hipcpu::launch(k, g, b, shmem, warp, *static_cast<P *>(args[I])...);
}

template <typename... P> constexpr unsigned arity(void (*)(P...)) { return sizeof...(P); }

template <auto K> std::string thunk(dim3 g, dim3 b, int warp, size_t shmem, void **args)
{
    return call(K, g, b, warp, shmem, args, std::make_index_sequence<arity(K)>());
}

struct Entry {
    const char *name;
    Thunk thunk;
    unsigned nargs;
};

#define HIPCPU_KERNEL(k) {#k, &thunk<&k>, arity(&k)}
const Entry ENTRIES[] = {
    HIPCPU_KERNEL(vmaf_psnr_sse_u8),
    HIPCPU_KERNEL(vmaf_psnr_sse_u16),
    HIPCPU_KERNEL(vmaf_psnr_hvs_terms_u8),
    HIPCPU_KERNEL(vmaf_psnr_hvs_terms_u16),
    HIPCPU_KERNEL(vmaf_psnr_hvs_sum),
    HIPCPU_KERNEL(vmaf_semiplanar_luma_u16),
    HIPCPU_KERNEL(vmaf_semiplanar_chroma_u8),
    HIPCPU_KERNEL(vmaf_semiplanar_chroma_u16),
    HIPCPU_KERNEL(vmaf_motion_rows_u8),
    HIPCPU_KERNEL(vmaf_motion_rows_u16),
    HIPCPU_KERNEL(vmaf_motion_reduce),
    HIPCPU_KERNEL(vmaf_vif_stats_u8),
    HIPCPU_KERNEL(vmaf_vif_stats_u16),
    HIPCPU_KERNEL(vmaf_vif_stats_u8_alt),
    HIPCPU_KERNEL(vmaf_vif_stats_u16_alt),
    HIPCPU_KERNEL(vmaf_vif_down_u8),
    HIPCPU_KERNEL(vmaf_vif_down_u16),
    HIPCPU_KERNEL(vmaf_adm_dwt0_u8),
    HIPCPU_KERNEL(vmaf_adm_dwt0_u16),
    HIPCPU_KERNEL(vmaf_adm_dwt123),
    HIPCPU_KERNEL(vmaf_adm_cm),
    HIPCPU_KERNEL(vmaf_ssim_to_float_u8),
    HIPCPU_KERNEL(vmaf_ssim_to_float_u16),
    HIPCPU_KERNEL(vmaf_ssim_decimate),
    HIPCPU_KERNEL(vmaf_ssim_hconv),
    HIPCPU_KERNEL(vmaf_ssim_rows),
    HIPCPU_KERNEL(vmaf_speed_decimate_u8),
    HIPCPU_KERNEL(vmaf_speed_decimate_u16),
    HIPCPU_KERNEL(vmaf_speed_decimate_f32),
    HIPCPU_KERNEL(vmaf_speed_to_float_u8),
    HIPCPU_KERNEL(vmaf_speed_to_float_u16),
    HIPCPU_KERNEL(vmaf_speed_resample),
    HIPCPU_KERNEL(vmaf_speed_moments),
    HIPCPU_KERNEL(vmaf_cambi_preprocess_u8),
    HIPCPU_KERNEL(vmaf_cambi_preprocess_u16),
    HIPCPU_KERNEL(vmaf_cambi_range_u8),
    HIPCPU_KERNEL(vmaf_cambi_range_u16),
    HIPCPU_KERNEL(vmaf_cambi_mask),
    HIPCPU_KERNEL(vmaf_cambi_scale),
    HIPCPU_KERNEL(vmaf_cambi_cvalues),
    HIPCPU_KERNEL(vmaf_cambi_cvalues_slide),
    HIPCPU_KERNEL(vmaf_cambi_cvalues_slide_big),
    HIPCPU_KERNEL(vmaf_cambi_cvalues_wide),
    HIPCPU_KERNEL(hipcpu_test_shuffles),
    HIPCPU_KERNEL(hipcpu_test_early_return),
    HIPCPU_KERNEL(hipcpu_test_block_sum),
    HIPCPU_KERNEL(hipcpu_test_divergent_barrier),
};

void put_error(char *err, size_t len, const std::string &msg)
{
    if (!err || len == 0)
        return;
    const size_t n = std::min(len - 1, msg.size());
    std::memcpy(err, msg.data(), n);
    err[n] = 0;
}

} // namespace

extern "C" int hipcpu_launch(const char *name, const unsigned *grid, const unsigned *block,
                             int warp, size_t shmem, void **args, unsigned nargs, char *err,
                             size_t err_len)
{
    for (const Entry &e : ENTRIES) {
        if (std::strcmp(e.name, name) != 0)
            continue;
        if (e.nargs != nargs) {
            put_error(err, err_len, std::string(name) + ": " + std::to_string(e.nargs) +
                                        " parameters, " + std::to_string(nargs) + " given");
            return -1;
        }
        const std::string r = e.thunk(dim3(grid[0], grid[1], grid[2]),
                                      dim3(block[0], block[1], block[2]), warp, shmem, args);
        if (r.empty())
            return 0;
        put_error(err, err_len, std::string(name) + ": " + r);
        return -2;
    }
    put_error(err, err_len, std::string("unknown kernel ") + name);
    return -1;
}
