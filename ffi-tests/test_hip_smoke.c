/*
 * Smoke test of the libvmaf_hip.h contract.
 *
 * Without a GPU (CI): argument checking, NULL handling and the -ENODEV path;
 * prints "skipped: no device" for the device part and exits 0.
 * With a GPU: opens the default and the first device, imports a state into a
 * context and frees it after vmaf_close(); scores pictures from a page-locked
 * pool (extension) on the GPU and checks them against the CPU bit for bit.
 *
 * Build by hand:
 *   cc -Iinclude/libvmaf ffi-tests/test_hip_smoke.c -Ltarget/debug -lvmaf_hip \
 *      -Wl,-rpath,$PWD/target/debug -o test_hip_smoke
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvmaf_hip.h"

#include "check.h"


static VmafHipConfiguration hip_cfg(int device_index, int flags)
{
    VmafHipConfiguration cfg;
    cfg.device_index = device_index;
    cfg.flags = flags;
    return cfg;
}

/* What must hold whether or not a GPU is present. */
static void test_contract(int n_devices)
{
    VmafHipState *state = NULL;

    CHECK(vmaf_hip_available() == 1);

    CHECK(vmaf_hip_state_init(NULL, hip_cfg(-1, 0)) == -EINVAL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-2, 0)) == -EINVAL);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-1, 1)) == -EINVAL);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(0, 0x100)) == -EINVAL);
    CHECK(state == NULL);

    /* An index past the last device is -ENODEV and leaves the output NULL,
     * even when it held something before. */
    state = (VmafHipState *)&state;
    CHECK(vmaf_hip_state_init(&state, hip_cfg(n_devices, 0)) == -ENODEV);
    CHECK(state == NULL);

    CHECK(vmaf_hip_import_state(NULL, NULL) == -EINVAL);

    vmaf_hip_state_free(NULL);
    vmaf_hip_state_free(&state);
    CHECK(state == NULL);
}

static VmafHipPictureConfiguration pic_cfg(int method, unsigned w, unsigned h, unsigned cnt)
{
    VmafHipPictureConfiguration c;
    memset(&c, 0, sizeof c);
    c.pic_params.w = w;
    c.pic_params.h = h;
    c.pic_params.bpc = 8;
    c.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
    c.pic_prealloc_method = (enum VmafHipPicturePreallocationMethod)method;
    c.pic_cnt = cnt;
    return c;
}

/* Extension contract without an imported state (holds with or without a GPU). */
static void test_prealloc_contract(void)
{
    VmafContext *vmaf = NULL;
    VmafConfiguration cfg = { 0 };
    VmafPicture pics[4];

    CHECK(vmaf_hip_preallocate_pictures(NULL, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST,
                                                      64, 48, 2)) == -EINVAL);
    CHECK(vmaf_init(&vmaf, cfg) == 0);
    if (!vmaf)
        return;
    CHECK(vmaf_hip_preallocate_pictures(
              vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_NONE, 64, 48, 2)) == 0);
    /* NONE made no pool. */
    CHECK(vmaf_hip_fetch_preallocated_picture(vmaf, &pics[0]) == -EINVAL);
    /* Device memory and page-locking need a device: import a state first. */
    CHECK(vmaf_hip_preallocate_pictures(
              vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_DEVICE, 64, 48, 2)) == -EINVAL);
    CHECK(vmaf_hip_preallocate_pictures(
              vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED, 64, 48, 2)) ==
          -EINVAL);
    CHECK(vmaf_hip_preallocate_pictures(vmaf, pic_cfg(7, 64, 48, 2)) == -EINVAL);
    CHECK(vmaf_hip_preallocate_pictures(
              vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST, 0, 48, 2)) == -EINVAL);
    /* A count of 0 picks 2 per worker thread plus 4: 4 without threads. */
    CHECK(vmaf_hip_preallocate_pictures(
              vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST, 64, 48, 0)) == 0);
    for (int i = 0; i < 4; i++) {
        CHECK(vmaf_hip_fetch_preallocated_picture(vmaf, &pics[i]) == 0);
        CHECK(pics[i].w[0] == 64 && pics[i].h[0] == 48 && pics[i].bpc == 8);
    }
    CHECK(vmaf_hip_fetch_preallocated_picture(vmaf, NULL) == -EINVAL);
    CHECK(vmaf_hip_fetch_preallocated_picture(NULL, &pics[0]) == -EINVAL);
    for (int i = 0; i < 4; i++)
        CHECK(vmaf_picture_unref(&pics[i]) == 0);
    CHECK(vmaf_close(vmaf) == 0);
}

/* Deterministic 8-bit test pattern: a moving gradient, distorted by a
 * position-dependent offset. */
static void fill(VmafPicture *pic, int frame, int distorted)
{
    for (int p = 0; p < 3; p++) {
        unsigned char *row = pic->data[p];
        for (unsigned y = 0; y < pic->h[p]; y++, row += pic->stride[p]) {
            for (unsigned x = 0; x < pic->w[p]; x++) {
                int v = (int)((x * 7 + y * 3 + (unsigned)frame * 5 + (x * y) / 17) & 255);
                if (distorted)
                    v = (v + (int)((x ^ y) % 9) - 4) & 255;
                row[x] = (unsigned char)v;
            }
        }
    }
}

/* Scores 3 frames of the pattern with vif, adm and motion; pictures come from
 * a HOST_PINNED pool on the GPU when `state` is given, else from
 * vmaf_picture_alloc() on the CPU. Returns 0 and fills out[frame][feature]. */
#define N_FRAMES 3
#define N_FEAT 3
static const char *const feature_names[N_FEAT] = {
    "VMAF_integer_feature_vif_scale0_score",
    "VMAF_integer_feature_adm2_score",
    "VMAF_integer_feature_motion2_score",
};

static int score_pattern(VmafHipState *state, double out[N_FRAMES][N_FEAT])
{
    VmafContext *vmaf = NULL;
    VmafConfiguration cfg = { 0 };
    const unsigned w = 256, h = 144;
    int err = 0;

    cfg.n_threads = 2;
    if (vmaf_init(&vmaf, cfg))
        return -1;
    if (state) {
        CHECK(vmaf_hip_import_state(vmaf, state) == 0);
        CHECK(vmaf_hip_preallocate_pictures(
                  vmaf, pic_cfg(VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED, w, h, 0)) ==
              0);
    }
    CHECK(vmaf_use_feature(vmaf, "vif", NULL) == 0);
    CHECK(vmaf_use_feature(vmaf, "adm", NULL) == 0);
    CHECK(vmaf_use_feature(vmaf, "motion", NULL) == 0);
    for (int i = 0; i < N_FRAMES && !err; i++) {
        VmafPicture ref, dis;
        if (state) {
            err |= vmaf_hip_fetch_preallocated_picture(vmaf, &ref);
            err |= vmaf_hip_fetch_preallocated_picture(vmaf, &dis);
        } else {
            err |= vmaf_picture_alloc(&ref, VMAF_PIX_FMT_YUV420P, 8, w, h);
            err |= vmaf_picture_alloc(&dis, VMAF_PIX_FMT_YUV420P, 8, w, h);
        }
        if (err)
            break;
        fill(&ref, i, 0);
        fill(&dis, i, 1);
        err |= vmaf_read_pictures(vmaf, &ref, &dis, (unsigned)i);
    }
    err |= vmaf_read_pictures(vmaf, NULL, NULL, 0);
    for (int i = 0; i < N_FRAMES && !err; i++)
        for (int f = 0; f < N_FEAT; f++)
            err |= vmaf_feature_score_at_index(vmaf, feature_names[f], &out[i][f], (unsigned)i);
    CHECK(vmaf_close(vmaf) == 0);
    return err;
}

static void test_pinned_scores(VmafHipState *state)
{
    double gpu[N_FRAMES][N_FEAT], cpu[N_FRAMES][N_FEAT];
    CHECK(score_pattern(state, gpu) == 0);
    CHECK(score_pattern(NULL, cpu) == 0);
    for (int i = 0; i < N_FRAMES; i++)
        for (int f = 0; f < N_FEAT; f++)
            if (gpu[i][f] != cpu[i][f]) {
                fprintf(stderr, "frame %d %s: GPU %.17g, CPU %.17g\n", i, feature_names[f],
                        gpu[i][f], cpu[i][f]);
                failures++;
            }
    printf("pinned pictures: %d frames scored on the GPU equal the CPU (vif0 %.6f adm2 %.6f)\n",
           N_FRAMES, gpu[1][0], gpu[1][1]);
}

static void test_no_device(void)
{
    VmafHipState *state = NULL;
    CHECK(vmaf_hip_state_init(&state, hip_cfg(-1, 0)) == -ENODEV);
    CHECK(state == NULL);
    CHECK(vmaf_hip_state_init(&state, hip_cfg(0, 0)) == -ENODEV);
    CHECK(state == NULL);
    const char *require = getenv("VMAF_TEST_REQUIRE_GPU");
    if (require && strcmp(require, "1") == 0) {
        fprintf(stderr, "VMAF_TEST_REQUIRE_GPU=1 but no device\n");
        exit(1);
    }
    printf("skipped: no device\n");
}

static void test_device(int n_devices)
{
    VmafHipState *first = NULL, *dev0 = NULL;
    VmafContext *vmaf = NULL;
    VmafConfiguration cfg = { 0 };

    CHECK(n_devices >= 1);
    CHECK(vmaf_hip_state_init(&first, hip_cfg(-1, 0)) == 0);
    CHECK(first != NULL);
    CHECK(vmaf_hip_state_init(&dev0, hip_cfg(0, 0)) == 0);
    CHECK(dev0 != NULL);
    CHECK(first != dev0);

    CHECK(vmaf_init(&vmaf, cfg) == 0);
    CHECK(vmaf != NULL);
    if (vmaf) {
        CHECK(vmaf_hip_import_state(vmaf, NULL) == -EINVAL);
        CHECK(vmaf_hip_import_state(NULL, first) == -EINVAL);
        CHECK(vmaf_hip_import_state(vmaf, first) == 0);
        CHECK(vmaf_close(vmaf) == 0);
    }
    test_pinned_scores(first);

    vmaf_hip_state_free(&first);
    CHECK(first == NULL);
    vmaf_hip_state_free(&dev0);
    CHECK(dev0 == NULL);
    vmaf_hip_state_free(&dev0);
    printf("device part: ok (%d device(s))\n", n_devices);
}

int main(void)
{
    const int n_devices = vmaf_hip_list_devices();
    CHECK(n_devices >= 0);

    test_contract(n_devices);
    test_prealloc_contract();
    if (n_devices == 0)
        test_no_device();
    else
        test_device(n_devices);

    if (failures) {
        fprintf(stderr, "test_hip_smoke: %d check(s) failed\n", failures);
        return 1;
    }
    printf("test_hip_smoke: ok\n");
    return 0;
}
