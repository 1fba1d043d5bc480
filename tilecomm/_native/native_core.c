/*
 * tilecomm._native_core -- cross-process synchronisation primitives.
 *
 * Every rank of a tilecomm program is its own OS process; windows, signal
 * cells and barriers live in POSIX shared memory mapped MAP_SHARED into each
 * of them.  Python has no atomics and no futex, so this module supplies the
 * few primitives the runtime needs, addressed by raw virtual addresses
 * (Python ints pointing inside an mmap):
 *
 *   load_i32, load_i64, store_i64                 (sequentially consistent)
 *   notify_i32 / wait_i32                         (signal cells + futex sleep)
 *   futex_wake
 *   await_readable                                (poll a descriptor, yielding)
 *   atomic_add_2d                                 (typed element-wise atomic +=)
 *
 * ABI.  The encodings shared with Python -- notify ops, wait comparisons and
 * the dtype codes of atomic_add_2d -- are defined here once and exported as
 * module constants (OP_*, CMP_*, DT_*); Python takes them from the module or
 * is cross-checked against them by a test.
 *
 * Memory model.  All cell operations are __ATOMIC_SEQ_CST.  That is stronger
 * than acquire/release strictly needs for "data, then flag", but the
 * notify/wait sleeper protocol below is a Dekker-style handshake (store A;
 * load B  ||  store B; load A), which is only correct with a single total
 * order over both stores and both loads -- i.e. seq_cst, not acq_rel.  On
 * x86-64 the cost is one locked instruction per notify, which the futex
 * syscall we are trying to avoid dwarfs anyway.
 *
 * Futexes are used WITHOUT FUTEX_PRIVATE_FLAG: the private variant keys the
 * wait queue on (mm, virtual address), which would never match between two
 * processes; the shared variant keys on the backing page (inode, offset), so
 * a waiter in one process and a waker in another meet even when the segment
 * is mapped at different addresses.
 *
 * The functions never validate that an address really lies inside a live
 * mapping (they cannot); they do reject 0 and misaligned addresses, because
 * misaligned atomics fault on aarch64, are split-locked (and may trap) on
 * x86, and futex() requires 4-byte alignment.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || !defined(__ORDER_LITTLE_ENDIAN__)
#error "need GCC byte-order macros"
#endif

/* ------------------------------------------------------------------------ */
/* small helpers                                                            */
/* ------------------------------------------------------------------------ */

#define SEQ __ATOMIC_SEQ_CST
#define RLX __ATOMIC_RELAXED

/* Copies at least this big release the GIL; below it the release/reacquire
 * (two atomic ops plus a possible condvar handoff) costs more than the work. */
#define GIL_RELEASE_BYTES ((Py_ssize_t)16384)

/* Length of the sched_yield() phase of wait_i32, between spinning and
 * sleeping.  Long enough to cover a peer that is about to be scheduled on an
 * oversubscribed machine, short enough not to burn a core. */
#define YIELD_PHASE_NS ((int64_t)50000)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    /* isb stalls for a (short, predictable) pipeline flush; "yield" is a
     * no-op on most cores, which makes the spin loop hammer the line. */
    __asm__ __volatile__("isb" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline long sys_futex_wait(int32_t *addr, int32_t val, const struct timespec *rel)
{
    /* Shared (non-PRIVATE) futex: see header comment.  The relative timeout
     * of FUTEX_WAIT is measured against CLOCK_MONOTONIC. */
    return syscall(SYS_futex, addr, FUTEX_WAIT, val, rel, NULL, 0);
}

static inline long sys_futex_wake(int32_t *addr, int n)
{
    return syscall(SYS_futex, addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* argument parsing                                                         */
/* ------------------------------------------------------------------------ */

static int check_nargs(const char *fname, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", fname,
                     want, nargs);
        return -1;
    }
    return 0;
}

/* Python int (or anything with __index__, e.g. numpy integers) -> long long.
 * Non-integers raise TypeError; values outside [lo, hi] raise OverflowError. */
static int arg_ll(PyObject *o, const char *fname, const char *aname, long long lo, long long hi,
                  long long *out)
{
    long long v;
    int overflow = 0;
    if (PyLong_CheckExact(o)) {
        v = PyLong_AsLongLongAndOverflow(o, &overflow);
    } else {
        PyObject *idx = PyNumber_Index(o);
        if (idx == NULL) {
            PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be an integer, not %.100s",
                         fname, aname, Py_TYPE(o)->tp_name);
            return -1;
        }
        v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
    }
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' out of range [%lld, %lld]", fname,
                     aname, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* An address as a raw uintptr_t (0 allowed). */
static int arg_uptr(PyObject *o, const char *fname, const char *aname, uintptr_t *out)
{
    uintptr_t a;
    if (PyLong_CheckExact(o)) {
        a = (uintptr_t)PyLong_AsUnsignedLongLong(o);
    } else {
        PyObject *idx = PyNumber_Index(o);
        if (idx == NULL) {
            PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be an integer, not %.100s",
                         fname, aname, Py_TYPE(o)->tp_name);
            return -1;
        }
        a = (uintptr_t)PyLong_AsUnsignedLongLong(idx);
        Py_DECREF(idx);
    }
    if (a == (uintptr_t)-1 && PyErr_Occurred())
        return -1; /* negative or > 2**64: OverflowError */
    *out = a;
    return 0;
}

/* An address that may be 0 (meaning "none"); otherwise a multiple of `align`. */
static int arg_opt_addr(PyObject *o, const char *fname, const char *aname, uintptr_t align,
                        void **out)
{
    uintptr_t a;
    if (arg_uptr(o, fname, aname, &a) < 0)
        return -1;
    if (a & (align - 1)) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' (%p) is not %d-byte aligned", fname,
                     aname, (void *)a, (int)align);
        return -1;
    }
    *out = (void *)a;
    return 0;
}

/* An address that must be non-zero and a multiple of `align`. */
static int arg_addr(PyObject *o, const char *fname, const char *aname, uintptr_t align,
                    void **out)
{
    if (arg_opt_addr(o, fname, aname, align, out) < 0)
        return -1;
    if (*out == NULL) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' is a null address", fname, aname);
        return -1;
    }
    return 0;
}

/* 32-bit values are accepted signed or unsigned ([-2**31, 2**32)) and taken
 * as the bit pattern, so callers using a cell as uint32 can pass 0xFFFFFFFF. */
static int arg_v32(PyObject *o, const char *fname, const char *aname, int32_t *out)
{
    long long v;
    if (arg_ll(o, fname, aname, INT32_MIN, UINT32_MAX, &v) < 0)
        return -1;
    *out = (int32_t)(uint32_t)(unsigned long long)v;
    return 0;
}

/* 64-bit values: [-2**63, 2**64), taken as the bit pattern. */
static int arg_v64(PyObject *o, const char *fname, const char *aname, int64_t *out)
{
    PyObject *idx = PyNumber_Index(o);
    if (idx == NULL) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be an integer, not %.100s", fname,
                     aname, Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(idx);
        return -1;
    }
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(idx);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(idx);
            PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' does not fit in 64 bits",
                         fname, aname);
            return -1;
        }
        v = (long long)u;
    } else if (overflow < 0) {
        Py_DECREF(idx);
        PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' does not fit in 64 bits", fname,
                     aname);
        return -1;
    }
    Py_DECREF(idx);
    *out = (int64_t)v;
    return 0;
}

#define ARG_LL(i, name, lo, hi, dst)                                                         \
    do {                                                                                     \
        long long tmp_;                                                                      \
        if (arg_ll(args[i], FN, name, (lo), (hi), &tmp_) < 0)                                \
            return NULL;                                                                     \
        dst = (__typeof__(dst))tmp_;                                                         \
    } while (0)

/* ------------------------------------------------------------------------ */
/* plain atomics                                                            */
/* ------------------------------------------------------------------------ */

static PyObject *py_load_i32(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "load_i32"
    void *p;
    if (check_nargs(FN, nargs, 1) < 0 || arg_addr(args[0], FN, "addr", 4, &p) < 0)
        return NULL;
    return PyLong_FromLong(__atomic_load_n((int32_t *)p, SEQ));
#undef FN
}

static PyObject *py_load_i64(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "load_i64"
    void *p;
    if (check_nargs(FN, nargs, 1) < 0 || arg_addr(args[0], FN, "addr", 8, &p) < 0)
        return NULL;
    return PyLong_FromLongLong(__atomic_load_n((int64_t *)p, SEQ));
#undef FN
}

static PyObject *py_store_i64(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "store_i64"
    void *p;
    int64_t v;
    if (check_nargs(FN, nargs, 2) < 0 || arg_addr(args[0], FN, "addr", 8, &p) < 0 ||
        arg_v64(args[1], FN, "v", &v) < 0)
        return NULL;
    __atomic_store_n((int64_t *)p, v, SEQ);
    Py_RETURN_NONE;
#undef FN
}

/* ------------------------------------------------------------------------ */
/* notify / wait                                                            */
/* ------------------------------------------------------------------------ */
/*
 * A signal cell is an int32 that waiters poll for a condition (==, >= signed,
 * >= unsigned).  Waiters spin, then yield, then sleep on a futex keyed on the
 * cell itself.  To keep notify cheap when nobody sleeps (the common case in a
 * spinning pipeline) the caller may provide a "sleepers" int32 -- typically
 * one per rank or per window -- that sleeping waiters increment; notifiers
 * only pay for the FUTEX_WAKE syscall when it is nonzero.
 *
 * Why no wake-up can be lost (all four accesses are seq_cst, so they sit in
 * one total order S consistent with each thread's program order):
 *
 *   waiter:   W1 sleepers += 1      notifier:  N1 cell := new (store or add)
 *             W2 v = load(cell)                N2 s = load(sleepers)
 *             W3 futex_wait(cell, v)           N3 if s: futex_wake(cell)
 *
 *   - If N2 precedes W1 in S, then N1 precedes W2 as well, so W2 already
 *     reads the new value (or a later one) and the waiter re-evaluates its
 *     condition without sleeping on the stale value.
 *   - Otherwise W1 precedes N2, so N2 reads s >= 1 and N3 issues a wake.
 *     If the waiter is already queued by then it is woken.  If it is not yet
 *     queued, W3 has not yet performed its check; the kernel compares
 *     *cell == v under the futex bucket lock (with a full barrier) and, the
 *     store N1 being already globally visible, finds it != v (EAGAIN)
 *     unless W2 itself already read the new value -- in which case the
 *     condition was evaluated against it and found unsatisfied, so there was
 *     nothing to wake the waiter for.
 *
 * The only case left is ABA: the cell changes and returns to exactly v
 * before W3; the waiter then sleeps through a transient value, which is
 * inherent to waiting on values and harmless for the monotonic counters and
 * flag stores tilecomm uses.  Sleepers from several cells may share a counter;
 * that only causes spurious wakes, which the waiter loop tolerates.
 */

enum { CMP_EQ = 0, CMP_GE = 1, CMP_GE_U = 2 };
enum { OP_ADD = 0, OP_SET = 1 };

static inline int cond_ok(int32_t v, int cmp, int32_t expected)
{
    switch (cmp) {
    case CMP_EQ:
        return v == expected;
    case CMP_GE:
        return v >= expected;
    default:
        return (uint32_t)v >= (uint32_t)expected;
    }
}

enum { W_SATISFIED, W_TIMEOUT, W_CHECK_SIGNALS, W_ERROR };

/* Longest uninterrupted futex sleep.  Python signal handlers only run when a
 * thread holding the GIL calls PyErr_CheckSignals(); a signal that arrives
 * while we spin or yield does not interrupt a later futex_wait, so without a
 * cap Ctrl-C could be ignored until the (possibly infinite) timeout. */
#define SLEEP_SLICE_NS ((int64_t)100000000)

/*
 * The blocking part of wait_i32; runs without the GIL.  deadline < 0 means
 * wait forever.  `phases` false skips spin and yield (used when re-entering
 * after a signal check).  Returns W_CHECK_SIGNALS when the sleep was
 * interrupted by a signal or a SLEEP_SLICE_NS slice ran out; *err receives
 * errno on W_ERROR.
 */
static int wait_core(int32_t *cell, int cmp, int32_t expected, int32_t *sleepers,
                     int64_t deadline, long long spin_iters, int phases, int32_t *out, int *err)
{
    int32_t v;
    int64_t t;

    if (phases) {
        /* Phase 1: busy spin.  Cheapest wake-up latency when the peer is
         * running on another core and about to signal. */
        for (long long i = 0; i < spin_iters; i++) {
            cpu_relax();
            v = __atomic_load_n(cell, SEQ);
            if (cond_ok(v, cmp, expected)) {
                *out = v;
                return W_SATISFIED;
            }
            if ((i & 1023) == 1023 && deadline >= 0 && mono_ns() >= deadline) {
                *out = v;
                return W_TIMEOUT;
            }
        }
        /* Phase 2: sched_yield for a bounded time.  Lets the peer run if we
         * share its core (oversubscription) without paying a futex round
         * trip when it signals soon. */
        t = mono_ns();
        int64_t yield_end = t + YIELD_PHASE_NS;
        for (;;) {
            sched_yield();
            v = __atomic_load_n(cell, SEQ);
            if (cond_ok(v, cmp, expected)) {
                *out = v;
                return W_SATISFIED;
            }
            t = mono_ns();
            if (deadline >= 0 && t >= deadline) {
                *out = v;
                return W_TIMEOUT;
            }
            if (t >= yield_end)
                break;
        }
    }

    /* Phase 3: sleep on the futex.  The increment of *sleepers must come
     * before the load of the cell (both seq_cst): see the proof above. */
    int64_t slice_end = mono_ns() + SLEEP_SLICE_NS;
    for (;;) {
        if (sleepers)
            __atomic_fetch_add(sleepers, 1, SEQ);
        v = __atomic_load_n(cell, SEQ);
        *out = v;
        if (cond_ok(v, cmp, expected)) {
            if (sleepers)
                __atomic_fetch_sub(sleepers, 1, SEQ);
            return W_SATISFIED;
        }
        t = mono_ns();
        int64_t wake_at = slice_end;
        int status = W_CHECK_SIGNALS;
        if (deadline >= 0 && deadline <= slice_end) {
            wake_at = deadline;
            status = W_TIMEOUT;
        }
        if (t >= wake_at) {
            if (sleepers)
                __atomic_fetch_sub(sleepers, 1, SEQ);
            return status;
        }
        struct timespec ts;
        ts.tv_sec = (time_t)((wake_at - t) / 1000000000LL);
        ts.tv_nsec = (long)((wake_at - t) % 1000000000LL);
        /* Sleeps only if *cell still equals v when the kernel looks. */
        long r = sys_futex_wait(cell, v, &ts);
        int e = (r == -1) ? errno : 0;
        if (sleepers)
            __atomic_fetch_sub(sleepers, 1, SEQ);
        if (e == 0 || e == EAGAIN || e == ETIMEDOUT)
            continue; /* woken, value changed, or slept long enough: re-check */
        v = __atomic_load_n(cell, SEQ);
        *out = v;
        if (cond_ok(v, cmp, expected))
            return W_SATISFIED;
        if (e == EINTR)
            return W_CHECK_SIGNALS;
        *err = e;
        return W_ERROR;
    }
}

static PyObject *wait_result(int ok, int32_t v, int cmp)
{
    /* The value is reported in the domain of the comparison: uint32 for the
     * unsigned compare, int32 otherwise. */
    PyObject *val = (cmp == CMP_GE_U) ? PyLong_FromUnsignedLong((uint32_t)v)
                                      : PyLong_FromLong(v);
    if (val == NULL)
        return NULL;
    PyObject *res = PyTuple_Pack(2, ok ? Py_True : Py_False, val);
    Py_DECREF(val);
    return res;
}

static PyObject *py_wait_i32(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "wait_i32"
    void *p, *sp;
    int cmp;
    int32_t expected;
    long long timeout_ns, spin_iters;
    if (check_nargs(FN, nargs, 6) < 0 || arg_addr(args[0], FN, "addr", 4, &p) < 0)
        return NULL;
    ARG_LL(1, "cmp", INT_MIN, INT_MAX, cmp);
    if (arg_v32(args[2], FN, "expected", &expected) < 0 ||
        arg_opt_addr(args[3], FN, "sleepers_addr", 4, &sp) < 0)
        return NULL;
    ARG_LL(4, "timeout_ns", LLONG_MIN, LLONG_MAX, timeout_ns);
    ARG_LL(5, "spin_iters", LLONG_MIN, LLONG_MAX, spin_iters);
    if (cmp < CMP_EQ || cmp > CMP_GE_U) {
        PyErr_Format(PyExc_ValueError, FN "(): unknown cmp %d (0=Eq, 1=Ge, 2=GeUnsigned)", cmp);
        return NULL;
    }
    if (spin_iters < 0)
        spin_iters = 0;
#undef FN

    int32_t *cell = (int32_t *)p;
    int32_t v = __atomic_load_n(cell, SEQ);
    /* Fast path: already satisfied, or a pure poll -- no GIL round trip. */
    if (cond_ok(v, cmp, expected))
        return wait_result(1, v, cmp);
    if (timeout_ns == 0)
        return wait_result(0, v, cmp);

    /* Negative timeout = forever.  Saturate instead of overflowing. */
    int64_t deadline = -1;
    if (timeout_ns > 0) {
        int64_t now = mono_ns();
        deadline = (timeout_ns > INT64_MAX - now) ? INT64_MAX : now + timeout_ns;
    }

    int phases = 1, status, err = 0;
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        status = wait_core(cell, cmp, expected, (int32_t *)sp, deadline, spin_iters, phases, &v,
                           &err);
        Py_END_ALLOW_THREADS
        if (status != W_CHECK_SIGNALS)
            break;
        /* A signal interrupted the sleep or a slice ended: give Python a
         * chance to run its handlers (e.g. raise KeyboardInterrupt), then keep
         * waiting towards the same deadline. */
        if (PyErr_CheckSignals() < 0)
            return NULL;
        phases = 0;
    }
    if (status == W_ERROR) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return wait_result(status == W_SATISFIED, v, cmp);
}

static PyObject *py_notify_i32(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "notify_i32"
    void *p, *sp;
    int op;
    int32_t value, newv;
    if (check_nargs(FN, nargs, 4) < 0 || arg_addr(args[0], FN, "addr", 4, &p) < 0)
        return NULL;
    ARG_LL(1, "op", INT_MIN, INT_MAX, op);
    if (arg_v32(args[2], FN, "value", &value) < 0 ||
        arg_opt_addr(args[3], FN, "sleepers_addr", 4, &sp) < 0)
        return NULL;
    if (op == OP_ADD) {
        newv = (int32_t)__atomic_add_fetch((uint32_t *)p, (uint32_t)value, SEQ);
    } else if (op == OP_SET) {
        __atomic_store_n((int32_t *)p, value, SEQ);
        newv = value;
    } else {
        PyErr_Format(PyExc_ValueError, FN "(): unknown op %d (0=add, 1=set)", op);
        return NULL;
    }
#undef FN
    /* The update above is seq_cst and precedes this seq_cst load: the
     * notifier half of the handshake described before wait_core(). */
    if (sp == NULL || __atomic_load_n((int32_t *)sp, SEQ) != 0) {
        if (sys_futex_wake((int32_t *)p, INT_MAX) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLong(newv);
}

/*
 * One barrier generation of a collective in a single call: add `value` to
 * every cell of `outs` (a flat tuple addr0, sleepers0, addr1, sleepers1, ...:
 * my cell in each peer's signal, with that peer's sleepers counter), waking
 * each receiver exactly as notify_i32 does, then wait for every cell of `ins`
 * (this rank's own cells) to reach >= expected, each with the spin / yield /
 * sleep phases of wait_i32 bounded by timeout_ns.  Returns -1 when every wait
 * is satisfied, else the index in `ins` of the first one that is not (the
 * caller takes over from there with a published, blocking wait).
 *
 * Same memory-order argument as notify_i32 + wait_i32: every add is seq_cst
 * and precedes the sleepers load that decides the wake; every wait counts
 * itself in *sleepers before its load of the cell.
 */
static PyObject *py_arrive_wait_i32(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "arrive_wait_i32"
    int32_t value, expected;
    void *sp;
    long long timeout_ns, spin_iters;
    if (check_nargs(FN, nargs, 7) < 0)
        return NULL;
    PyObject *outs = args[0], *ins = args[1];
    if (!PyTuple_Check(outs) || (PyTuple_GET_SIZE(outs) & 1) || !PyTuple_Check(ins)) {
        PyErr_SetString(PyExc_TypeError, FN "(): outs must be a tuple of (addr, sleepers) "
                                            "pairs, flattened, and ins a tuple of addrs");
        return NULL;
    }
    if (arg_v32(args[2], FN, "value", &value) < 0 || arg_v32(args[3], FN, "expected", &expected) < 0 ||
        arg_opt_addr(args[4], FN, "sleepers_addr", 4, &sp) < 0)
        return NULL;
    ARG_LL(5, "timeout_ns", LLONG_MIN, LLONG_MAX, timeout_ns);
    ARG_LL(6, "spin_iters", LLONG_MIN, LLONG_MAX, spin_iters);
    if (spin_iters < 0)
        spin_iters = 0;
#undef FN
    Py_ssize_t nout = PyTuple_GET_SIZE(outs) / 2, nin = PyTuple_GET_SIZE(ins);
    for (Py_ssize_t i = 0; i < nout; i++) {
        void *p, *ps;
        if (arg_addr(PyTuple_GET_ITEM(outs, 2 * i), "arrive_wait_i32", "outs addr", 4, &p) < 0 ||
            arg_opt_addr(PyTuple_GET_ITEM(outs, 2 * i + 1), "arrive_wait_i32", "outs sleepers",
                         4, &ps) < 0)
            return NULL;
        __atomic_add_fetch((uint32_t *)p, (uint32_t)value, SEQ);
        if (ps == NULL || __atomic_load_n((int32_t *)ps, SEQ) != 0) {
            if (sys_futex_wake((int32_t *)p, INT_MAX) < 0)
                return PyErr_SetFromErrno(PyExc_OSError);
        }
    }
    for (Py_ssize_t i = 0; i < nin; i++) {
        void *p;
        if (arg_addr(PyTuple_GET_ITEM(ins, i), "arrive_wait_i32", "ins addr", 4, &p) < 0)
            return NULL;
        int32_t *cell = (int32_t *)p;
        int32_t v = __atomic_load_n(cell, SEQ);
        if (cond_ok(v, CMP_GE, expected))
            continue;
        if (timeout_ns == 0)
            return PyLong_FromSsize_t(i);
        int64_t now = mono_ns();
        int64_t deadline = (timeout_ns < 0) ? -1
                           : (timeout_ns > INT64_MAX - now) ? INT64_MAX : now + timeout_ns;
        int status, err = 0;
        Py_BEGIN_ALLOW_THREADS
        status = wait_core(cell, CMP_GE, expected, (int32_t *)sp, deadline, spin_iters, 1, &v,
                           &err);
        Py_END_ALLOW_THREADS
        if (status == W_ERROR) {
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (status != W_SATISFIED)
            return PyLong_FromSsize_t(i); /* the caller blocks from here (and handles signals) */
    }
    return PyLong_FromLong(-1);
}

static PyObject *py_futex_wake(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "futex_wake"
    void *p;
    int n;
    if (check_nargs(FN, nargs, 2) < 0 || arg_addr(args[0], FN, "addr", 4, &p) < 0)
        return NULL;
    ARG_LL(1, "n", INT_MIN, INT_MAX, n);
#undef FN
    if (n < 0)
        n = INT_MAX; /* convenience: negative = everybody */
    long r = sys_futex_wake((int32_t *)p, n);
    if (r < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLong(r);
}

/*
 * await_readable: poll one descriptor without blocking, yielding the CPU
 * between polls, for up to window_ns.  A rank that has just finished a run
 * calls it before it blocks in a read of its channel: on a virtual machine a
 * process blocked on a CPU the hypervisor has halted wakes tens of
 * microseconds after the write that readies it, while one that keeps its CPU
 * busy (yielding to whatever else is runnable there) sees the message at its
 * next poll.  True once the descriptor is readable or hung up.
 */
static PyObject *py_await_readable(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "await_readable"
    int fd;
    long long window_ns;
    if (check_nargs(FN, nargs, 2) < 0)
        return NULL;
    ARG_LL(0, "fd", 0, INT_MAX, fd);
    ARG_LL(1, "window_ns", 0, LLONG_MAX, window_ns);
#undef FN
    int ready = 0, err = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t end = mono_ns() + window_ns;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&pfd, 1, 0);
        if (r > 0) {
            ready = 1;
            break;
        }
        if (r < 0 && errno != EINTR) {
            err = errno;
            break;
        }
        if (mono_ns() >= end)
            break;
        sched_yield();
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyBool_FromLong(ready);
}

/* ------------------------------------------------------------------------ */
/* float16 / bfloat16 conversions                                           */
/* ------------------------------------------------------------------------ */
/*
 * Written out by hand rather than with _Float16 so that the results are the
 * same on every target and compiler, and bit-identical to numpy's
 * float32 -> float16 cast and ml_dtypes' float32 -> bfloat16 cast
 * (round to nearest, ties to even; overflow to inf; NaN stays NaN).
 */

static inline uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        /* zero or subnormal: man * 2^-24, exact in float32 */
        float f = (float)man * 0x1p-24f;
        return u2f(sign | f2u(f));
    }
    if (exp == 31)
        return u2f(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    return u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t float_to_half(float f)
{
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;

    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u)
            return sign | 0x7c00u;
        /* NaN: keep the top payload bits, force the quiet bit so it can't
         * collapse into inf. */
        return sign | 0x7c00u | 0x0200u | (uint16_t)((ax >> 13) & 0x3ffu);
    }
    if (ax >= 0x477ff000u) /* >= 65520 = halfway between 65504 and 2^16 */
        return sign | 0x7c00u;
    if (ax < 0x38800000u) { /* below 2^-14: half subnormal (units of 2^-24) */
        if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 ties to even 0) */
            return sign;
        uint32_t e = ax >> 23;                    /* 102 .. 112 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u; /* value = m * 2^(e-150) */
        uint32_t shift = 126u - e;                /* 14 .. 24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++; /* may carry into 0x400 = smallest normal: still correct */
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent 127 -> 15, keep 10 mantissa bits, round on 13 */
    uint32_t h = (ax >> 13) - (112u << 10);
    uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* carries propagate into the exponent; cannot reach inf here */
    return sign | (uint16_t)h;
}

static inline float bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

static inline uint16_t float_to_bf16(float f)
{
    uint32_t x = f2u(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, keep it quiet */
        return (uint16_t)((x >> 16) | 0x0040u);
    /* round to nearest even on the low 16 bits; overflow rounds to inf */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* ------------------------------------------------------------------------ */
/* atomic_add_2d                                                            */
/* ------------------------------------------------------------------------ */
/*
 * dst[r, c] += src[r, c], each element updated atomically because other
 * processes may be adding into the same elements concurrently.  Per-element
 * RMWs are relaxed: only their atomicity matters for concurrent adders, and
 * publication to readers is done by the caller's later seq_cst notify
 * (a release) plus the seq_cst fence at the end of the call.
 *
 * 8- and 16-bit elements are updated with a CAS on the naturally aligned
 * 32-bit word that contains them.  That word never crosses a page (4 | 4096)
 * so it is mapped whenever the element is.  A concurrent plain store to the
 * neighbouring bytes only makes our CAS fail and retry; it is never undone.
 */

enum {
    DT_F32 = 0,
    DT_F16 = 1,
    DT_BF16 = 2,
    DT_I32 = 3,
    DT_I16 = 4,
    DT_I8 = 5,
    DT_F64 = 6,
    DT_I64 = 7,
};

static const int dtype_size[8] = {4, 2, 2, 4, 2, 1, 8, 8};

/* Bit offset of the element at `p` inside its containing aligned word. */
static inline unsigned lane_shift(uintptr_t p, unsigned elem_bytes)
{
    unsigned byte_off = (unsigned)(p & 3u);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    (void)elem_bytes;
    return byte_off * 8u;
#else
    return (4u - elem_bytes - byte_off) * 8u;
#endif
}

typedef uint32_t (*narrow_op)(uint32_t old_lane, uint32_t src_lane);

static inline uint32_t op_f16(uint32_t a, uint32_t b)
{
    return float_to_half(half_to_float((uint16_t)a) + half_to_float((uint16_t)b));
}
static inline uint32_t op_bf16(uint32_t a, uint32_t b)
{
    return float_to_bf16(bf16_to_float((uint16_t)a) + bf16_to_float((uint16_t)b));
}
static inline uint32_t op_iadd(uint32_t a, uint32_t b) { return a + b; }

/* CAS loop on the containing 32-bit word.  `op` is inlined at each call site
 * (always_inline + constant function pointer). */
static inline __attribute__((always_inline)) void
narrow_add(uint8_t *elem, unsigned elem_bytes, uint32_t src_lane, narrow_op op)
{
    uintptr_t p = (uintptr_t)elem;
    uint32_t *word = (uint32_t *)(p & ~(uintptr_t)3);
    unsigned sh = lane_shift(p, elem_bytes);
    uint32_t mask = (elem_bytes == 1 ? 0xffu : 0xffffu) << sh;
    uint32_t old = __atomic_load_n(word, RLX), nw;
    do {
        uint32_t lane = (old & mask) >> sh;
        uint32_t res = op(lane, src_lane) & (mask >> sh);
        nw = (old & ~mask) | (res << sh);
    } while (!__atomic_compare_exchange_n(word, &old, nw, 1, RLX, RLX));
}

static void add_rows(int code, uint8_t *dst, Py_ssize_t dstride, const uint8_t *src,
                     Py_ssize_t sstride, Py_ssize_t rows, Py_ssize_t cols)
{
    for (Py_ssize_t r = 0; r < rows; r++, dst += dstride, src += sstride) {
        switch (code) {
        case DT_F32:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint32_t *d = (uint32_t *)(dst + 4 * c);
                float s;
                memcpy(&s, src + 4 * c, 4);
                uint32_t old = __atomic_load_n(d, RLX), nw;
                do {
                    nw = f2u(u2f(old) + s);
                } while (!__atomic_compare_exchange_n(d, &old, nw, 1, RLX, RLX));
            }
            break;
        case DT_F64:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint64_t *d = (uint64_t *)(dst + 8 * c);
                double s, od;
                memcpy(&s, src + 8 * c, 8);
                uint64_t old = __atomic_load_n(d, RLX), nw;
                do {
                    memcpy(&od, &old, 8);
                    od += s;
                    memcpy(&nw, &od, 8);
                } while (!__atomic_compare_exchange_n(d, &old, nw, 1, RLX, RLX));
            }
            break;
        case DT_I32:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint32_t s;
                memcpy(&s, src + 4 * c, 4);
                __atomic_fetch_add((uint32_t *)(dst + 4 * c), s, RLX);
            }
            break;
        case DT_I64:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint64_t s;
                memcpy(&s, src + 8 * c, 8);
                __atomic_fetch_add((uint64_t *)(dst + 8 * c), s, RLX);
            }
            break;
        case DT_F16:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint16_t s;
                memcpy(&s, src + 2 * c, 2);
                narrow_add(dst + 2 * c, 2, s, op_f16);
            }
            break;
        case DT_BF16:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint16_t s;
                memcpy(&s, src + 2 * c, 2);
                narrow_add(dst + 2 * c, 2, s, op_bf16);
            }
            break;
        case DT_I16:
            for (Py_ssize_t c = 0; c < cols; c++) {
                uint16_t s;
                memcpy(&s, src + 2 * c, 2);
                narrow_add(dst + 2 * c, 2, s, op_iadd);
            }
            break;
        case DT_I8:
            for (Py_ssize_t c = 0; c < cols; c++)
                narrow_add(dst + c, 1, src[c], op_iadd);
            break;
        }
    }
}

static PyObject *py_atomic_add_2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
#define FN "atomic_add_2d"
    Py_ssize_t dstride, sstride, rows, cols;
    int code;
    if (check_nargs(FN, nargs, 7) < 0)
        return NULL;
    ARG_LL(1, "dst_row_stride_bytes", PY_SSIZE_T_MIN, PY_SSIZE_T_MAX, dstride);
    ARG_LL(3, "src_row_stride_bytes", PY_SSIZE_T_MIN, PY_SSIZE_T_MAX, sstride);
    ARG_LL(4, "rows", PY_SSIZE_T_MIN, PY_SSIZE_T_MAX, rows);
    ARG_LL(5, "cols", PY_SSIZE_T_MIN, PY_SSIZE_T_MAX, cols);
    ARG_LL(6, "dtype_code", INT_MIN, INT_MAX, code);
    if (code < DT_F32 || code > DT_I64) {
        PyErr_Format(PyExc_ValueError, FN "(): unknown dtype code %d", code);
        return NULL;
    }
    if (rows < 0 || cols < 0) {
        PyErr_SetString(PyExc_ValueError, FN "(): rows and cols must be >= 0");
        return NULL;
    }
    int esz = dtype_size[code];
    void *dst, *src;
    if (rows == 0 || cols == 0)
        Py_RETURN_NONE; /* nothing to touch: addresses may legitimately be 0 */
    /* dst must be naturally aligned (atomicity); src is read with memcpy. */
    if (arg_addr(args[0], FN, "dst_addr", (uintptr_t)esz, &dst) < 0 ||
        arg_addr(args[2], FN, "src_addr", 1, &src) < 0)
        return NULL;
    if (rows > 1 && dstride % esz != 0) {
        PyErr_Format(PyExc_ValueError,
                     FN "(): dst_row_stride_bytes %zd is not a multiple of the element size %d",
                     dstride, esz);
        return NULL;
    }
    if (cols > PY_SSIZE_T_MAX / esz / (rows ? rows : 1)) {
        PyErr_SetString(PyExc_OverflowError, FN "(): region too large");
        return NULL;
    }
#undef FN
    if (rows * cols * esz >= GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        add_rows(code, dst, dstride, src, sstride, rows, cols);
        __atomic_thread_fence(SEQ);
        Py_END_ALLOW_THREADS
    } else {
        add_rows(code, dst, dstride, src, sstride, rows, cols);
        __atomic_thread_fence(SEQ);
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* buffer addresses                                                         */
/* ------------------------------------------------------------------------ */

/* The address of the first byte of a buffer (an ndarray, strided or not): the
 * recorder asks it of every operand it may record, and numpy's own route
 * (__array_interface__) builds a dict per call. */
static PyObject *py_address(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "address(obj) takes one argument");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_STRIDES) < 0)
        return NULL;
    void *buf = view.buf;
    PyBuffer_Release(&view);
    return PyLong_FromVoidPtr(buf);
}

/* ------------------------------------------------------------------------ */
/* module                                                                   */
/* ------------------------------------------------------------------------ */

#define FASTCALL(name, doc) {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    FASTCALL(load_i32, "load_i32(addr) -> int\n\nSeq-cst load of the int32 at addr."),
    FASTCALL(load_i64, "load_i64(addr) -> int\n\nSeq-cst load of the int64 at addr."),
    FASTCALL(store_i64, "store_i64(addr, v) -> None\n\nSeq-cst store of int64 v."),
    FASTCALL(notify_i32,
             "notify_i32(addr, op, value, sleepers_addr) -> int\n\n"
             "op 0: atomic add value, op 1: atomic store value (seq_cst); then futex-wake all\n"
             "waiters on addr if sleepers_addr is 0 or the int32 there is nonzero.\n"
             "Returns the new value (int32)."),
    FASTCALL(wait_i32,
             "wait_i32(addr, cmp, expected, sleepers_addr, timeout_ns, spin_iters)\n"
             "    -> (satisfied, value)\n\n"
             "Wait until the int32 at addr satisfies cmp (0: ==, 1: >= signed,\n"
             "2: >= unsigned) against expected.  Spins spin_iters times, yields for ~50 us,\n"
             "then sleeps on a futex (counting itself in the int32 at sleepers_addr if\n"
             "nonzero).  timeout_ns < 0 waits forever, 0 polls once.  The GIL is released\n"
             "while waiting.  value is the last value observed (uint32 for cmp 2)."),
    FASTCALL(arrive_wait_i32,
             "arrive_wait_i32(outs, ins, value, expected, sleepers_addr, timeout_ns, spin_iters)\n"
             "    -> int\n\n"
             "Atomically add value to every int32 of outs (flat (addr, sleepers_addr) pairs,\n"
             "waking as notify_i32 does), then wait as wait_i32 (cmp >=) for each int32 of\n"
             "ins to reach expected.  Returns -1 if all did, else the index of the first\n"
             "that did not within timeout_ns."),
    FASTCALL(futex_wake, "futex_wake(addr, n) -> int\n\nWake up to n (n < 0: all) futex "
                         "waiters on addr; returns how many were woken."),
    FASTCALL(await_readable,
             "await_readable(fd, window_ns) -> bool\n\n"
             "Poll fd for input without blocking, yielding the CPU between polls, for up\n"
             "to window_ns; True once it is readable or hung up.  The GIL is released."),
    FASTCALL(atomic_add_2d,
             "atomic_add_2d(dst_addr, dst_row_stride_bytes, src_addr, src_row_stride_bytes,\n"
             "              rows, cols, dtype_code) -> None\n\n"
             "dst[r, c] += src[r, c], each element atomically.  dtype codes: 0 float32,\n"
             "1 float16, 2 bfloat16, 3 int32, 4 int16, 5 int8, 6 float64, 7 int64."),
    FASTCALL(address, "address(obj) -> int\n\nThe address of the first byte of buffer obj "
                      "(an ndarray, contiguous or not)."),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    "tilecomm._native_core",
    "Cross-process atomics, futex wait/notify and typed atomic-add loops for tilecomm.",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__native_core(void)
{
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "CMP_EQ", CMP_EQ) < 0 ||
        PyModule_AddIntConstant(m, "CMP_GE", CMP_GE) < 0 ||
        PyModule_AddIntConstant(m, "CMP_GE_U", CMP_GE_U) < 0 ||
        PyModule_AddIntConstant(m, "OP_ADD", OP_ADD) < 0 ||
        PyModule_AddIntConstant(m, "OP_SET", OP_SET) < 0 ||
        PyModule_AddIntConstant(m, "DT_F32", DT_F32) < 0 ||
        PyModule_AddIntConstant(m, "DT_F16", DT_F16) < 0 ||
        PyModule_AddIntConstant(m, "DT_BF16", DT_BF16) < 0 ||
        PyModule_AddIntConstant(m, "DT_I32", DT_I32) < 0 ||
        PyModule_AddIntConstant(m, "DT_I16", DT_I16) < 0 ||
        PyModule_AddIntConstant(m, "DT_I8", DT_I8) < 0 ||
        PyModule_AddIntConstant(m, "DT_F64", DT_F64) < 0 ||
        PyModule_AddIntConstant(m, "DT_I64", DT_I64) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
