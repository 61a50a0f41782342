/* The scheduler of hip_cpu.h: fibers per block, barriers, the shuffle engine, the launcher. */
#include "hip_cpu.h"

#include <algorithm>
#include <mutex>
#include <sys/mman.h>
#include <thread>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace hipcpu {

thread_local Block *tl_block = nullptr;
thread_local Lane *tl_lane = nullptr;

/* Fiber stacks: the kernels keep a few KiB of locals; mmap commits only what is touched. */
static const size_t STACK_BYTES = 256 * 1024;

#if defined(__x86_64__)
/* Saves the callee-saved registers on the current stack, stores the stack pointer in *save,
 * switches to `next` and restores its registers (the System V ABI leaves the others to the
 * caller). Also keeps MXCSR and the x87 control word, which are callee-saved too. */
extern "C" void hipcpu_switch(void **save, void *next);
asm(R"(
    .text
    .globl hipcpu_switch
    .type hipcpu_switch, @function
hipcpu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr 8(%rsp)
    fldcw (%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hipcpu_switch, .-hipcpu_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

static void fiber_main();

#if defined(__x86_64__)
/* The first switch into a fiber "returns" into fiber_main with the stack aligned as after a
 * call (rsp + 8 a multiple of 16), a null return address above it. */
static void fiber_init(Lane &l)
{
    char *top = l.stack + STACK_BYTES;
    uint64_t *sp = (uint64_t *)(top - 8); /* the null return address of fiber_main */
    *sp = 0;
    *--sp = (uint64_t)(uintptr_t)&fiber_main;
    for (int i = 0; i < 6; i++)
        *--sp = 0; /* rbp rbx r12-r15 */
    sp -= 2;
    uint32_t mxcsr;
    uint16_t fcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fcw));
    std::memcpy((char *)sp + 8, &mxcsr, 4);
    std::memcpy((char *)sp, &fcw, 2);
    l.sp = sp;
}
static void to_fiber(Block &b, Lane &l) { hipcpu_switch(&b.sched_sp, l.sp); }
static void to_scheduler(Block &b, Lane &l) { hipcpu_switch(&l.sp, b.sched_sp); }
#else
static void fiber_init(Lane &l)
{
    if (!l.uctx)
        l.uctx = new ucontext_t;
    ucontext_t *c = (ucontext_t *)l.uctx;
    getcontext(c);
    c->uc_stack.ss_sp = l.stack;
    c->uc_stack.ss_size = STACK_BYTES;
    c->uc_link = nullptr;
    makecontext(c, (void (*)()) & fiber_main, 0);
}
static void to_fiber(Block &b, Lane &l)
{
    if (!b.sched_uctx)
        b.sched_uctx = new ucontext_t;
    swapcontext((ucontext_t *)b.sched_uctx, (ucontext_t *)l.uctx);
}
static void to_scheduler(Block &b, Lane &l)
{
    swapcontext((ucontext_t *)l.uctx, (ucontext_t *)b.sched_uctx);
}
#endif

static void fiber_main()
{
    Block &b = *tl_block;
    b.launch->body();
    Lane &l = *tl_lane;
    l.state = State::Done;
    to_scheduler(b, l);
    /* A finished fiber is never resumed. */
    __builtin_trap();
}

void yield_to_scheduler() { to_scheduler(*tl_block, *tl_lane); }

[[noreturn]] void fail(const std::string &msg)
{
    Block &b = *tl_block;
    Lane &l = *tl_lane;
    if (b.error.empty())
        b.error = "block (" + std::to_string(b.idx.x) + "," + std::to_string(b.idx.y) + "," +
                  std::to_string(b.idx.z) + ") thread (" + std::to_string(l.tid.x) + "," +
                  std::to_string(l.tid.y) + "," + std::to_string(l.tid.z) + "): " + msg;
    /* The scheduler sees the error and abandons the block; this fiber is never resumed. */
    l.state = State::Done;
    to_scheduler(b, l);
    __builtin_trap();
}

static const char *state_name(State s)
{
    switch (s) {
    case State::Ready:
        return "running";
    case State::Barrier:
        return "at __syncthreads";
    case State::Shuffle:
        return "at a shuffle";
    default:
        return "exited";
    }
}

/* Completes the pending shuffle of the wave holding `l` if every existing lane of the wave has
 * reached it: 1 when completed, 0 while a lane is still running, -1 (with `err`) on a
 * mismatch. Runs in a fiber or in the scheduler, so it reports instead of failing. */
static int complete_wave(Block &b, Lane &l, std::string &err)
{
    auto fail = [&](const std::string &m) {
        err = m;
        return -1;
    };
    const unsigned warp = (unsigned)b.launch->warp;
    const unsigned first = l.rank / warp * warp;
    const unsigned end = std::min(first + warp, b.launch->nthreads);
    for (unsigned r = first; r < end; r++) {
        const Lane &o = b.lanes[r];
        if (o.state == State::Shuffle)
            continue;
        if (o.state == State::Ready)
            return 0; /* still on its way (the scheduler decides about stalls) */
        return fail("shuffle at line " + std::to_string(l.line) + " while lane " +
             std::to_string(r - first) + " of the wave is " + state_name(o.state) +
             " (every lane of the wave must execute the shuffle)");
    }
    for (unsigned r = first; r < end; r++) {
        const Lane &o = b.lanes[r];
        if (o.line != l.line || o.shuffles != l.shuffles || o.width != l.width)
            return fail("lanes of one wave at different shuffles: line " + std::to_string(l.line) +
                 " (#" + std::to_string(l.shuffles) + ", width " + std::to_string(l.width) +
                 ") and line " + std::to_string(o.line) + " (#" + std::to_string(o.shuffles) +
                 ", width " + std::to_string(o.width) + ") in lane " +
                 std::to_string(r - first));
    }
    for (unsigned r = first; r < end; r++) {
        Lane &o = b.lanes[r];
        if (o.src < 0) {
            o.out = o.in;
        } else {
            const unsigned s = first + (unsigned)o.src;
            if (s >= end)
                return fail("lane " + std::to_string(r - first) + " reads lane " +
                     std::to_string(o.src) +
                     ", which does not exist: the block is not a whole number of waves");
            o.out = b.lanes[s].in;
        }
    }
    for (unsigned r = first; r < end; r++)
        b.lanes[r].state = State::Ready;
    return 1;
}

uint64_t shuffle(uint64_t bits, long src, int width, int line)
{
    Block &b = *tl_block;
    Lane &l = *tl_lane;
    l.in = bits;
    l.src = src;
    l.width = width;
    l.line = line;
    l.shuffles++;
    l.state = State::Shuffle;
    std::string err;
    const int done = complete_wave(b, l, err);
    if (done < 0)
        fail(err);
    if (done == 0)
        to_scheduler(b, l);
    return l.out;
}

void syncthreads(int line)
{
    Lane &l = *tl_lane;
    l.barrier_line = line;
    l.state = State::Barrier;
    yield_to_scheduler();
    l.barriers++;
}

/* Runs every fiber of block `b` to completion; false (with b.error) on a failure. */
static bool run_block(Block &b)
{
    for (Lane &l : b.lanes) {
        l.state = State::Ready;
        l.barriers = l.shuffles = 0;
        fiber_init(l);
    }
    for (;;) {
        bool ran = false;
        for (Lane &l : b.lanes) {
            if (l.state != State::Ready)
                continue;
            ran = true;
            tl_lane = &l;
            to_fiber(b, l);
            if (!b.error.empty())
                return false;
        }
        if (ran)
            continue;
        /* Nothing can run: all done, a barrier to release, or a stuck shuffle. */
        bool any_barrier = false;
        const Lane *barrier_lane = nullptr;
        for (Lane &l : b.lanes) {
            tl_lane = &l;
            if (l.state == State::Shuffle) {
                /* Some wave-mate is at a barrier or exited (else it would have completed). */
                std::string err = "internal: a stuck shuffle that is not diagnosed";
                complete_wave(b, l, err);
                b.error = "block (" + std::to_string(b.idx.x) + "," + std::to_string(b.idx.y) +
                          "," + std::to_string(b.idx.z) + ") thread (" +
                          std::to_string(l.tid.x) + "," + std::to_string(l.tid.y) + "," +
                          std::to_string(l.tid.z) + "): " + err;
                return false;
            }
            if (l.state == State::Barrier) {
                if (barrier_lane && (barrier_lane->barriers != l.barriers ||
                                     barrier_lane->barrier_line != l.barrier_line)) {
                    b.error = "threads wait at different __syncthreads (line " +
                              std::to_string(barrier_lane->barrier_line) + " #" +
                              std::to_string(barrier_lane->barriers) + " and line " +
                              std::to_string(l.barrier_line) + " #" +
                              std::to_string(l.barriers) + ")";
                    return false;
                }
                barrier_lane = &l;
                any_barrier = true;
            }
        }
        if (!any_barrier)
            return true;
        for (Lane &l : b.lanes)
            if (l.state == State::Barrier)
                l.state = State::Ready;
    }
}

std::string run(dim3 grid, dim3 block, int warp, size_t shmem, std::function<void()> body)
{
    if (warp != 32 && warp != 64)
        return "warp size must be 32 or 64";
    const unsigned long long n = (unsigned long long)block.x * block.y * block.z;
    if (n == 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0)
        return "bad launch geometry";
    Launch launch{grid, block, warp, (unsigned)n, shmem, std::move(body)};
    const unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    unsigned workers = std::max(1u, std::thread::hardware_concurrency());
    if (const char *e = std::getenv("HIPCPU_THREADS"))
        workers = std::max(1, std::atoi(e));
    workers = (unsigned)std::min<unsigned long long>(workers, blocks);

    std::atomic<unsigned long long> next{0};
    std::mutex err_lock;
    std::string first_error;
    auto worker = [&]() {
        Block b;
        b.launch = &launch;
        b.lanes.resize(launch.nthreads);
        const size_t bytes = STACK_BYTES * launch.nthreads;
        void *mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                         MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED) {
            std::lock_guard<std::mutex> g(err_lock);
            first_error = "cannot map fiber stacks";
            return;
        }
        for (unsigned r = 0; r < launch.nthreads; r++) {
            Lane &l = b.lanes[r];
            l.stack = (char *)mem + r * STACK_BYTES;
            l.rank = r;
            l.tid = {r % block.x, r / block.x % block.y, r / (block.x * block.y)};
        }
        tl_block = &b;
        for (;;) {
            const unsigned long long i = next.fetch_add(1);
            if (i >= blocks)
                break;
            b.idx = {(unsigned)(i % grid.x), (unsigned)(i / grid.x % grid.y),
                     (unsigned)(i / ((unsigned long long)grid.x * grid.y))};
            if (!run_block(b)) {
                std::lock_guard<std::mutex> g(err_lock);
                if (first_error.empty())
                    first_error = b.error;
                next.store(blocks);
                break;
            }
        }
        tl_block = nullptr;
        tl_lane = nullptr;
        munmap(mem, bytes);
#if !defined(__x86_64__)
        for (Lane &l : b.lanes)
            delete (ucontext_t *)l.uctx;
        delete (ucontext_t *)b.sched_uctx;
#endif
    };
    std::vector<std::thread> pool;
    for (unsigned t = 1; t < workers; t++)
        pool.emplace_back(worker);
    worker();
    for (std::thread &t : pool)
        t.join();
    return first_error;
}

} // namespace hipcpu
