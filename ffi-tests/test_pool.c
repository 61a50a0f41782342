/* Picture pool: preallocated pictures fetched from several threads, returned on unref (the
 * caller's and the library's own after extraction), no deadlock, nothing lost; vmaf_close with a
 * thread blocked in a fetch. A watchdog turns any hang into a failure. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvmaf/libvmaf.h>

#include "check.h"


#define W 96
#define H 64
#define FRAMES 24
#define PRODUCERS 4
#define WINDOW 4 /* frames fetched but not read yet */
/* Queued extraction jobs (2 * n_threads + 1, a pair each) + frames in the producers' window,
 * plus two spare (the library keeps no pooled picture beyond the frames it works on). */
#define POOL_SIZE (2 + 2 * (2 * 2 + 1) + 2 * WINDOW)

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_pool: timed out (deadlock?)\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) _exit(3);
    _exit(2);
}

static VmafConfiguration config(unsigned n_threads)
{
    VmafConfiguration cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.log_level = VMAF_LOG_LEVEL_WARNING;
    cfg.n_threads = n_threads;
    return cfg;
}

static VmafPictureConfiguration pool_config(unsigned cnt)
{
    VmafPictureConfiguration pc;
    memset(&pc, 0, sizeof(pc));
    pc.pic_params.w = W;
    pc.pic_params.h = H;
    pc.pic_params.bpc = 8;
    pc.pic_params.pix_fmt = VMAF_PIX_FMT_YUV420P;
    pc.pic_cnt = cnt;
    return pc;
}

/* Deterministic content of frame `i`, reference (`dist` 0) or distorted (1). */
static void fill(VmafPicture *pic, unsigned i, int dist)
{
    for (int p = 0; p < 3; p++) {
        for (unsigned y = 0; y < pic->h[p]; y++) {
            uint8_t *row = (uint8_t *)pic->data[p] + y * pic->stride[p];
            for (unsigned x = 0; x < pic->w[p]; x++) {
                unsigned v = x * 2 + y * 3 + i * 5 + p * 40;
                if (dist) v += ((x ^ y ^ i) & 7) - 3;
                row[x] = (uint8_t)v;
            }
        }
    }
}

/* ---- Phase 1: many threads, a pool of two pictures ---- */

struct stress_arg {
    VmafContext *vmaf;
    unsigned id;
};

static void *stress(void *p)
{
    struct stress_arg *a = p;
    for (unsigned n = 0; n < 200; n++) {
        VmafPicture pic;
        int err = vmaf_fetch_preallocated_picture(a->vmaf, &pic);
        if (err) {
            EXPECT(err, 0);
            return NULL;
        }
        uint8_t tag = (uint8_t)(a->id * 31 + n);
        memset(pic.data[0], tag, (size_t)pic.stride[0] * pic.h[0]);
        sched_yield();
        const uint8_t *d = pic.data[0];
        for (size_t k = 0; k < (size_t)pic.stride[0] * pic.h[0]; k++) {
            if (d[k] != tag) {
                fprintf(stderr, "picture shared between two threads\n");
                __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
                break;
            }
        }
        EXPECT(vmaf_picture_unref(&pic), 0);
    }
    return NULL;
}

static void phase_stress(void)
{
    VmafContext *vmaf = NULL;
    EXPECT(vmaf_init(&vmaf, config(0)), 0);
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(2)), 0);
    pthread_t t[8];
    struct stress_arg args[8];
    for (unsigned i = 0; i < 8; i++) {
        args[i].vmaf = vmaf;
        args[i].id = i;
        pthread_create(&t[i], NULL, stress, &args[i]);
    }
    for (unsigned i = 0; i < 8; i++) pthread_join(t[i], NULL);
    EXPECT(vmaf_close(vmaf), 0);
}

/* ---- Phase 2: producers fill pooled pictures, the main thread scores them ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned next_claim, next_read;
static int ready[FRAMES];
static VmafPicture slots[FRAMES][2];

static void *producer(void *p)
{
    VmafContext *vmaf = p;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (next_claim < FRAMES && next_claim >= next_read + WINDOW)
            pthread_cond_wait(&cond, &lock);
        if (next_claim >= FRAMES) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        unsigned i = next_claim++;
        pthread_mutex_unlock(&lock);

        VmafPicture r, d;
        EXPECT(vmaf_fetch_preallocated_picture(vmaf, &r), 0);
        EXPECT(vmaf_fetch_preallocated_picture(vmaf, &d), 0);
        fill(&r, i, 0);
        fill(&d, i, 1);

        pthread_mutex_lock(&lock);
        slots[i][0] = r;
        slots[i][1] = d;
        ready[i] = 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
    }
}

static void reference_scores(double *psnr)
{
    VmafContext *vmaf = NULL;
    EXPECT(vmaf_init(&vmaf, config(0)), 0);
    EXPECT(vmaf_use_feature(vmaf, "psnr", NULL), 0);
    for (unsigned i = 0; i < FRAMES; i++) {
        VmafPicture r, d;
        EXPECT(vmaf_picture_alloc(&r, VMAF_PIX_FMT_YUV420P, 8, W, H), 0);
        EXPECT(vmaf_picture_alloc(&d, VMAF_PIX_FMT_YUV420P, 8, W, H), 0);
        fill(&r, i, 0);
        fill(&d, i, 1);
        EXPECT(vmaf_read_pictures(vmaf, &r, &d, i), 0);
    }
    EXPECT(vmaf_read_pictures(vmaf, NULL, NULL, 0), 0);
    for (unsigned i = 0; i < FRAMES; i++)
        EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", &psnr[i], i), 0);
    EXPECT(vmaf_close(vmaf), 0);
}

static void phase_pipeline(void)
{
    double want[FRAMES];
    reference_scores(want);

    VmafContext *vmaf = NULL;
    EXPECT(vmaf_init(&vmaf, config(2)), 0);
    EXPECT(vmaf_use_feature(vmaf, "psnr", NULL), 0);
    EXPECT(vmaf_preallocate_pictures(vmaf, pool_config(POOL_SIZE)), 0);

    pthread_t t[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) pthread_create(&t[i], NULL, producer, vmaf);
    for (unsigned i = 0; i < FRAMES; i++) {
        pthread_mutex_lock(&lock);
        while (!ready[i]) pthread_cond_wait(&cond, &lock);
        VmafPicture r = slots[i][0], d = slots[i][1];
        pthread_mutex_unlock(&lock);
        /* Fetches on other threads run while this one is inside vmaf_read_pictures. */
        EXPECT(vmaf_read_pictures(vmaf, &r, &d, i), 0);
        pthread_mutex_lock(&lock);
        next_read = i + 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
    }
    for (unsigned i = 0; i < PRODUCERS; i++) pthread_join(t[i], NULL);
    EXPECT(vmaf_read_pictures(vmaf, NULL, NULL, 0), 0);

    for (unsigned i = 0; i < FRAMES; i++) {
        double s = -1;
        EXPECT(vmaf_feature_score_at_index(vmaf, "psnr_y", &s, i), 0);
        if (s != want[i]) {
            fprintf(stderr, "frame %u: psnr_y %.17g from pooled pictures, %.17g expected\n", i, s,
                    want[i]);
            failures++;
        }
    }

    /* Every pooled picture came back: all of them can be taken at once without blocking. */
    static VmafPicture all[POOL_SIZE];
    for (unsigned i = 0; i < POOL_SIZE; i++)
        EXPECT(vmaf_fetch_preallocated_picture(vmaf, &all[i]), 0);
    for (unsigned i = 0; i < POOL_SIZE; i++) EXPECT(vmaf_picture_unref(&all[i]), 0);
    EXPECT(vmaf_close(vmaf), 0);
}

/* ---- Phase 3: vmaf_close while a thread waits for a picture ---- */

struct waiter {
    VmafContext *vmaf;
    int rc;
};

static void *blocked_fetch(void *p)
{
    struct waiter *w = p;
    VmafPicture pic;
    w->rc = vmaf_fetch_preallocated_picture(w->vmaf, &pic);
    if (w->rc == 0) vmaf_picture_unref(&pic);
    return NULL;
}

static void phase_close_while_waiting(void)
{
    struct waiter w = { NULL, 1 };
    VmafPicture held[4];
    EXPECT(vmaf_init(&w.vmaf, config(0)), 0);
    EXPECT(vmaf_preallocate_pictures(w.vmaf, pool_config(1)), 0);
    /* A dry pool lends three pictures more (for the previous pictures a context keeps) before
     * a fetch blocks. */
    for (int i = 0; i < 4; i++) EXPECT(vmaf_fetch_preallocated_picture(w.vmaf, &held[i]), 0);

    pthread_t t;
    pthread_create(&t, NULL, blocked_fetch, &w);
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    EXPECT(vmaf_close(w.vmaf), 0);
    pthread_join(t, NULL);
    EXPECT(w.rc, -EINVAL);
    /* The pictures outlive their context and are freed on release. */
    for (int i = 0; i < 4; i++) {
        memset(held[i].data[0], 1, (size_t)held[i].stride[0] * held[i].h[0]);
        EXPECT(vmaf_picture_unref(&held[i]), 0);
    }
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(120);
    phase_stress();
    phase_pipeline();
    phase_close_while_waiting();
    if (failures) {
        fprintf(stderr, "test_pool: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_pool: ok\n");
    return 0;
}
