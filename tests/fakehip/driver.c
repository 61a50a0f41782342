/*
 * Drives libvmaf_hip through its C API against the fake HIP runtime (tests/hip_fake.rs runs one
 * scenario per process, so each gets its own environment and its own loaded runtime).
 *
 *   driver list                  vmaf_hip_list_devices()
 *   driver init                  vmaf_hip_state_init() for the first and for device 0
 *   driver score THREADS FRAMES  vif, adm and motion on FRAMES frames of a 256x144 pattern
 *   driver score2 THREADS FRAMES the same on two states and contexts at once, from two threads
 *                                (keys prefixed a_ and b_)
 *   driver semiplanar THREADS FRAMES
 *                                adm and psnr on FRAMES P010 frames in the fake's device memory
 *                                (vmaf_hip_picture_wrap_device_semiplanar: the luma shifted and the
 *                                chroma split on the device), buffers freed once released
 *
 * Prints "key=value" lines for the test to check, then the fake's object summary
 * ("fake: dev_allocs=... bad=...") once everything is freed, and the fake hiprtc's
 * ("fakertc: programs=... bad=...", or "fakertc: not loaded"). Exits 0 unless the process could
 * not run the scenario at all: error codes are printed, not judged, here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libvmaf.h"
#include "libvmaf_hip.h"

static VmafHipConfiguration hip_cfg(int device_index)
{
    VmafHipConfiguration cfg;
    cfg.device_index = device_index;
    cfg.flags = 0;
    return cfg;
}

/* `label: <summary()>` of the library `env` names, if our library loaded it. */
static void print_summary(const char *label, const char *env, const char *fn)
{
    const char *path = getenv(env);
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    const char *(*summary)(void) = NULL;
    if (h)
        *(void **)&summary = dlsym(h, fn);
    printf("%s: %s\n", label, summary ? summary() : "not loaded");
    if (h)
        dlclose(h);
}

/* The fakes' own summaries of live objects, from the copies our library loaded. */
static void print_fake_summary(void)
{
    print_summary("fake", "VMAF_HIP_AMDHIP_LIBNAME", "fakehip_summary");
    print_summary("fakertc", "VMAF_HIP_HIPRTC_LIBNAME", "fakehiprtc_summary");
}

static void fill(VmafPicture *pic, int frame, int distorted)
{
    for (int p = 0; p < 3; p++) {
        unsigned char *row = pic->data[p];
        for (unsigned y = 0; y < pic->h[p]; y++, row += pic->stride[p])
            for (unsigned x = 0; x < pic->w[p]; x++) {
                int v = (int)((x * 5 + y * 3 + (unsigned)frame * 7) & 255);
                row[x] = (unsigned char)(distorted ? (v + (int)(x % 5)) & 255 : v);
            }
    }
}

/* A state on the first device imported into a new context of `threads` threads, printing
 * `init` and `import` with `pre` in front. Returns 0; -1 when the state could not be made (the
 * scenario ends there, not failed); 1 when the scenario could not run. */
static int open_context(const char *pre, int threads, VmafHipState **state, VmafContext **vmaf)
{
    int rc = vmaf_hip_state_init(state, hip_cfg(-1));
    printf("%sinit=%d\n", pre, rc);
    if (rc)
        return -1;
    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_threads = (unsigned)threads;
    cfg.log_level = VMAF_LOG_LEVEL_NONE;
    if (vmaf_init(vmaf, cfg)) {
        printf("vmaf_init failed\n");
        return 1;
    }
    printf("%simport=%d\n", pre, vmaf_hip_import_state(*vmaf, *state));
    return 0;
}

/* One scoring run on its own state; keys are printed with `pre` in front. Returns 0, or 1 when
 * the scenario could not run. Leaves the fake summary to the caller. */
static int score_on(const char *pre, int threads, int frames)
{
    VmafHipState *state = NULL;
    VmafContext *vmaf = NULL;
    int rc = open_context(pre, threads, &state, &vmaf);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("%suse=%d\n", pre,
           vmaf_use_feature(vmaf, "vif", NULL) | vmaf_use_feature(vmaf, "adm", NULL) |
               vmaf_use_feature(vmaf, "motion", NULL));
    const unsigned w = 256, h = 144;
    int first_err = 0;
    for (int i = 0; i < frames; i++) {
        VmafPicture ref, dis;
        if (vmaf_picture_alloc(&ref, VMAF_PIX_FMT_YUV420P, 8, w, h) ||
            vmaf_picture_alloc(&dis, VMAF_PIX_FMT_YUV420P, 8, w, h)) {
            printf("picture alloc failed\n");
            return 1;
        }
        fill(&ref, i, 0);
        fill(&dis, i, 1);
        rc = vmaf_read_pictures(vmaf, &ref, &dis, (unsigned)i);
        printf("%sread%d=%d\n", pre, i, rc);
        if (rc) {
            /* As FFmpeg does: the pictures stay ours when the call fails. */
            vmaf_picture_unref(&ref);
            vmaf_picture_unref(&dis);
            if (!first_err)
                first_err = rc;
            break;
        }
    }
    rc = vmaf_read_pictures(vmaf, NULL, NULL, 0);
    printf("%sflush=%d\n", pre, rc);
    if (!first_err)
        first_err = rc;
    printf("%sfirst_error=%d\n", pre, first_err);
    double s = 0;
    rc = vmaf_feature_score_at_index(vmaf, "VMAF_integer_feature_adm2_score", &s, 0);
    printf("%sadm2_at_0=%d\n", pre, rc);
    printf("%sclose=%d\n", pre, vmaf_close(vmaf));
    vmaf_hip_state_free(&state);
    return 0;
}

static int score(int threads, int frames)
{
    int rc = score_on("", threads, frames);
    print_fake_summary();
    return rc;
}

static int released;

static void on_release(void *opaque)
{
    (void)opaque;
    __atomic_add_fetch(&released, 1, __ATOMIC_SEQ_CST);
}

/* Semi-planar P010 frames in the fake's device memory, handed over in place. */
static int semiplanar(int threads, int frames)
{
    const char *path = getenv("VMAF_HIP_AMDHIP_LIBNAME");
    void *rt = path ? dlopen(path, RTLD_NOW) : NULL;
    int (*hip_malloc)(void **, size_t) = NULL;
    int (*hip_free)(void *) = NULL;
    if (rt) {
        *(void **)&hip_malloc = dlsym(rt, "hipMalloc");
        *(void **)&hip_free = dlsym(rt, "hipFree");
    }
    if (!hip_malloc || !hip_free) {
        printf("no fake runtime to allocate from\n");
        return 1;
    }
    VmafHipState *state = NULL;
    VmafContext *vmaf = NULL;
    int rc = open_context("", threads, &state, &vmaf);
    if (rc)
        return rc < 0 ? 0 : rc;
    printf("use=%d\n", vmaf_use_feature(vmaf, "adm", NULL) | vmaf_use_feature(vmaf, "psnr", NULL));
    const unsigned w = 256, h = 144;
    const size_t pitch = 2 * w + 64, len = pitch * (h + h / 2);
    void *mem[64] = {0};
    int first_err = 0, n = frames < 32 ? frames : 32;
    for (int i = 0; i < n && !first_err; i++) {
        VmafPicture pic[2];
        for (int k = 0; k < 2; k++) {
            if (hip_malloc(&mem[2 * i + k], len)) {
                printf("hipMalloc failed\n");
                return 1;
            }
            void *data[2] = {mem[2 * i + k], (char *)mem[2 * i + k] + pitch * h};
            const ptrdiff_t stride[2] = {(ptrdiff_t)pitch, (ptrdiff_t)pitch};
            rc = vmaf_hip_picture_wrap_device_semiplanar(vmaf, &pic[k], VMAF_HIP_SEMIPLANAR_P010,
                                                         w, h, data, stride, on_release, NULL);
            printf("wrap%d_%d=%d\n", i, k, rc);
            if (rc) {
                first_err = rc;
                if (k)
                    vmaf_picture_unref(&pic[0]);
            }
        }
        if (first_err)
            break;
        rc = vmaf_read_pictures(vmaf, &pic[0], &pic[1], (unsigned)i);
        printf("read%d=%d\n", i, rc);
        if (rc) {
            vmaf_picture_unref(&pic[0]);
            vmaf_picture_unref(&pic[1]);
            first_err = rc;
        }
    }
    rc = vmaf_read_pictures(vmaf, NULL, NULL, 0);
    printf("flush=%d\n", rc);
    printf("first_error=%d\n", first_err ? first_err : rc);
    printf("close=%d\n", vmaf_close(vmaf));
    vmaf_hip_state_free(&state);
    printf("released=%d\n", __atomic_load_n(&released, __ATOMIC_SEQ_CST));
    for (int i = 0; i < 2 * n; i++)
        if (mem[i])
            hip_free(mem[i]);
    print_fake_summary();
    dlclose(rt);
    return 0;
}

struct job {
    const char *pre;
    int threads, frames, rc;
};

static void *score_job(void *arg)
{
    struct job *j = arg;
    j->rc = score_on(j->pre, j->threads, j->frames);
    return NULL;
}

/* Two states and contexts scoring at once: their first kernel loads (and any run-time
 * compiles) race. */
static int score2(int threads, int frames)
{
    struct job jobs[2] = {{"a_", threads, frames, 0}, {"b_", threads, frames, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, score_job, &jobs[i])) {
            printf("pthread_create failed\n");
            return 1;
        }
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    print_fake_summary();
    return jobs[0].rc | jobs[1].rc;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *what = argc > 1 ? argv[1] : "";
    if (!strcmp(what, "list")) {
        printf("devices=%d\n", vmaf_hip_list_devices());
        return 0;
    }
    if (!strcmp(what, "init")) {
        VmafHipState *a = NULL, *b = NULL;
        printf("init=%d\n", vmaf_hip_state_init(&a, hip_cfg(-1)));
        printf("init0=%d\n", vmaf_hip_state_init(&b, hip_cfg(0)));
        VmafHipState *c = NULL;
        /* One device: ordinal 1 is past the last. */
        printf("init1=%d\n", vmaf_hip_state_init(&c, hip_cfg(1)));
        printf("null=%d\n", a == NULL);
        vmaf_hip_state_free(&a);
        vmaf_hip_state_free(&b);
        print_fake_summary();
        return 0;
    }
    if (!strcmp(what, "score") && argc == 4)
        return score(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(what, "score2") && argc == 4)
        return score2(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(what, "semiplanar") && argc == 4)
        return semiplanar(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: driver list | init | score THREADS FRAMES | score2 THREADS FRAMES | "
                    "semiplanar THREADS FRAMES\n");
    return 2;
}
