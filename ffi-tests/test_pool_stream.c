/* Picture pools over a long stream, fed the way upstream's vmaf tool feeds them: fetch a
 * reference and a distorted picture, fill them, vmaf_read_pictures, repeat. Pools of 1..8
 * pictures (with one picture only the reference is pooled), plain (vmaf_preallocate_pictures)
 * and the HIP extension's HOST and HOST_PINNED, with 0, 1 and 4 worker threads, on the GPU when
 * a device exists (the plain and HOST pools also without one). Every run's per-frame VMAF
 * scores must equal a reference run (vmaf_picture_alloc per frame, CPU, no threads) bit for
 * bit. A watchdog turns a hang (a pool the library never gives back) into a failure. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libvmaf/libvmaf.h>
#include "libvmaf_hip.h"

#include "check.h"

#define W 176
#define H 144
#define FRAMES 100
#define MAX_POOL 8


enum pool_kind { POOL_NONE, POOL_PLAIN, POOL_HIP_HOST, POOL_HIP_PINNED };
static const char *kind_name[] = {"alloc", "plain", "hip-host", "hip-pinned"};

static const char *running = "start";

static void on_alarm(int sig)
{
    (void)sig;
    char msg[160];
    int n = snprintf(msg, sizeof(msg), "test_pool_stream: timed out in %s (a pool ran dry?)\n",
                     running);
    if (write(2, msg, (size_t)n) < 0) _exit(3);
    _exit(2);
}

/* Deterministic content: a pattern that moves one sample a frame (so motion is not 0); the
 * distorted picture is blurred, coarsely quantised and noisy, so scores stay well below 100. */
static unsigned base(unsigned x, unsigned y, unsigned i, int p)
{
    unsigned v = (x + i) * 2 + y * 3 + ((((x + i) >> 3) ^ (y >> 3)) & 3) * 40;
    return 16 + (v + p * 50) % 220;
}

static void fill(VmafPicture *pic, unsigned i, int dist)
{
    uint32_t seed = i * 2654435761u + 12345u;
    for (int p = 0; p < 3; p++) {
        for (unsigned y = 0; y < pic->h[p]; y++) {
            uint8_t *row = (uint8_t *)pic->data[p] + y * pic->stride[p];
            for (unsigned x = 0; x < pic->w[p]; x++) {
                unsigned v = base(x, y, i, p);
                if (dist) {
                    unsigned blur = 0;
                    for (unsigned k = 0; k < 6; k++) blur += base(x + k, y + k / 2, i, p);
                    seed = seed * 1664525u + 1013904223u;
                    v = (blur / 6) / 24 * 24 + (seed >> 28) % 7;
                }
                row[x] = (uint8_t)v;
            }
        }
    }
}

static VmafConfiguration config(unsigned n_threads)
{
    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_WARNING;
    cfg.n_threads = n_threads;
    return cfg;
}

static int fetch(VmafContext *vmaf, enum pool_kind kind, VmafPicture *pic)
{
    switch (kind) {
    case POOL_PLAIN: return vmaf_fetch_preallocated_picture(vmaf, pic);
    case POOL_HIP_HOST:
    case POOL_HIP_PINNED: return vmaf_hip_fetch_preallocated_picture(vmaf, pic);
    default: return vmaf_picture_alloc(pic, VMAF_PIX_FMT_YUV420P, 8, W, H);
    }
}

#define N_SCORES 4
/* What each run reports per frame: the model score and the features it is made of. */
static const char *feature_names[N_SCORES - 1] = {"VMAF_integer_feature_adm2_score", "VMAF_integer_feature_vif_scale0_score",
                                                  "VMAF_integer_feature_motion2_score"};

/* Scores FRAMES frames; returns 0 and the per-frame scores in `out`, or -1. */
static int run(VmafModel *model, VmafHipState *hip, enum pool_kind kind, unsigned pool_cnt,
               unsigned n_threads, double *out)
{
    VmafContext *vmaf = NULL;
    if (vmaf_init(&vmaf, config(n_threads))) return -1;
    int rc = 0;
    if (hip && vmaf_hip_import_state(vmaf, hip)) rc = -1;
    if (!rc && vmaf_use_features_from_model(vmaf, model)) rc = -1;
    if (!rc && kind == POOL_PLAIN) {
        VmafPictureConfiguration pc;
        memset(&pc, 0, sizeof(pc));
        pc.pic_params.w = W;
        pc.pic_params.h = H;
        pc.pic_params.bpc = 8;
        pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
        pc.pic_cnt = pool_cnt;
        if (vmaf_preallocate_pictures(vmaf, pc)) rc = -1;
    }
    if (!rc && (kind == POOL_HIP_HOST || kind == POOL_HIP_PINNED)) {
        VmafHipPictureConfiguration pc;
        memset(&pc, 0, sizeof(pc));
        pc.pic_params.w = W;
        pc.pic_params.h = H;
        pc.pic_params.bpc = 8;
        pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
        pc.pic_prealloc_method = kind == POOL_HIP_HOST ? VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST
                                                       : VMAF_HIP_PICTURE_PREALLOCATION_METHOD_HOST_PINNED;
        pc.pic_cnt = pool_cnt;
        if (vmaf_hip_preallocate_pictures(vmaf, pc)) rc = -1;
    }
    for (unsigned i = 0; !rc && i < FRAMES; i++) {
        VmafPicture ref, dist;
        if (fetch(vmaf, kind, &ref)) {
            rc = -1;
            break;
        }
        /* A pool of one picture holds the reference; the distorted one is allocated. */
        int err = pool_cnt >= 2 ? fetch(vmaf, kind, &dist)
                                : vmaf_picture_alloc(&dist, VMAF_PIX_FMT_YUV420P, 8, W, H);
        if (err) {
            vmaf_picture_unref(&ref);
            rc = -1;
            break;
        }
        fill(&ref, i, 0);
        fill(&dist, i, 1);
        if (vmaf_read_pictures(vmaf, &ref, &dist, i)) rc = -1;
    }
    if (!rc && vmaf_read_pictures(vmaf, NULL, NULL, 0)) rc = -1;
    for (unsigned i = 0; !rc && i < FRAMES; i++) {
        if (vmaf_score_at_index(vmaf, model, &out[i * N_SCORES], i)) rc = -1;
        for (int f = 0; !rc && f < N_SCORES - 1; f++)
            if (vmaf_feature_score_at_index(vmaf, feature_names[f], &out[i * N_SCORES + 1 + f], i))
                rc = -1;
    }
    if (vmaf_close(vmaf)) rc = -1;
    return rc;
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(900);

    VmafModel *model = NULL;
    VmafModelConfig mcfg;
    memset(&mcfg, 0, sizeof(mcfg));
    CHECK(vmaf_model_load(&model, &mcfg, "vmaf_v0.6.1") == 0);
    if (!model) return 1;

    static double want[FRAMES * N_SCORES], got[FRAMES * N_SCORES];
    running = "reference run";
    CHECK(run(model, NULL, POOL_NONE, 2, 0, want) == 0);

    VmafHipState *hip = NULL;
    VmafHipConfiguration hcfg = {.device_index = -1, .flags = 0};
    int have_gpu = vmaf_hip_state_init(&hip, hcfg) == 0;
    const char *require = getenv("VMAF_TEST_REQUIRE_GPU");
    if (!have_gpu && require && strcmp(require, "1") == 0) {
        fprintf(stderr, "VMAF_TEST_REQUIRE_GPU=1 but no device\n");
        return 1;
    }

    static const unsigned threads[] = {0, 1, 4};
    unsigned runs = 0;
    for (int kind = POOL_PLAIN; kind <= POOL_HIP_PINNED; kind++) {
        if (kind == POOL_HIP_PINNED && !have_gpu) continue;
        for (unsigned cnt = 1; cnt <= MAX_POOL; cnt++) {
            for (unsigned t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
                char what[96];
                snprintf(what, sizeof(what), "%s pool of %u, %u threads, %s", kind_name[kind], cnt,
                         threads[t], have_gpu ? "GPU" : "CPU");
                running = what;
                memset(got, 0, sizeof(got));
                int rc = run(model, have_gpu ? hip : NULL, kind, cnt, threads[t], got);
                if (rc != 0 || memcmp(got, want, sizeof(want)) != 0) {
                    fprintf(stderr, "FAILED: %s: rc %d\n", what, rc);
                    for (unsigned i = 0; i < FRAMES * N_SCORES; i++)
                        if (got[i] != want[i]) {
                            fprintf(stderr, "  first difference at frame %u score %u: %.17g vs %.17g\n",
                                    i / N_SCORES, i % N_SCORES, got[i], want[i]);
                            break;
                        }
                    failures++;
                }
                runs++;
            }
        }
    }
    vmaf_hip_state_free(&hip);
    vmaf_model_destroy(model);
    /* The comparison means something only if the scores are not saturated. */
    const double *mid = &want[FRAMES / 2 * N_SCORES];
    CHECK(mid[0] > 1.0 && mid[0] < 99.0);
    CHECK(mid[3] > 0.5);
    printf("test_pool_stream: %u runs of %d frames on the %s; frame %d: vmaf %.6f adm2 %.6f "
           "vif_scale0 %.6f motion2 %.6f: %s\n",
           runs, FRAMES, have_gpu ? "GPU" : "CPU", FRAMES / 2, mid[0], mid[1], mid[2], mid[3],
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
