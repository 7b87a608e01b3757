/*
 * A fake libnvidia-ml.so.1 for tests: the real pynvml binds to it through ctypes exactly as it binds to the
 * driver's library, so the exporter's NVML code runs unchanged against scripted hardware.
 *
 * The hardware is described by a scenario file (path in FAKE_NVML_SCENARIO), re-read whenever the file
 * changes, so one process can walk through several scenarios. The format is one directive per line, written
 * by tests/fakes/nvml/scenario.py (the Python side is the documented interface; this parser is its twin):
 *
 *   epoch <unix seconds>                     time zero of every timeline below
 *   driver <version>                         nvmlSystemGetDriverVersion
 *   init_error <nvml return code>            nvmlInit fails with it (e.g. 9: driver not loaded)
 *   generation <n>                           a change after nvmlInit means "driver reloaded": calls answer
 *                                            NVML_ERROR_UNINITIALIZED until the caller re-initialises
 *   sample_period_us <n>                     the driver's process-sampling tick (default 100000)
 *   gpu <uuid> <minor> <fb_total_mib> <fb_reserved_mib> <power_mw> <temp_c> <sm_mhz> <mig 0|1> <name...>
 *   mig <gpu index> <uuid> <gi> <ci> <fb_total_mib> <name...>
 *   proc <gpu index> <pid> <used bytes, -1 = not available> <gi> <ci>
 *   util <gpu index> <pid> <from s> <to s> <sm %> <mem %>
 *   lost <gpu index> [from s]                every call on the GPU answers NVML_ERROR_GPU_IS_LOST
 *   unsupported <gpu index> <function>       that function answers NVML_ERROR_NOT_SUPPORTED on the GPU
 *   xid <gpu index> <at s> <code>            an XID critical-error event
 *
 * Compiled with -DFAKE_NVML_OLD_DRIVER the library lacks nvmlDeviceGetComputeRunningProcesses_v3, like a
 * driver older than the bindings.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 128
#define MAX_MIGS 8
#define MAX_PROCS 4096
#define MAX_UTILS 8192
#define MAX_UNSUPPORTED 256
#define MAX_XIDS 256
#define NAME_LEN 96
#define UUID_LEN 96
#define EVENT_XID 0x8ULL
#define NO_INSTANCE 0xFFFFFFFFu

struct device;
typedef struct device *nvmlDevice_t;

struct device {
    int gpu;            /* index of the physical GPU */
    int mig_slot;       /* -1 for the physical GPU */
    char uuid[UUID_LEN];
    char name[NAME_LEN];
    unsigned gi, ci;
    unsigned long long fb_total_mib;
};

struct gpu {
    struct device dev;
    struct device migs[MAX_MIGS];
    int mig_count;
    int mig_enabled;
    unsigned minor;
    unsigned long long fb_reserved_mib;
    unsigned power_mw, temp_c, sm_mhz;
    int lost;
    double lost_from;
};

struct proc { int gpu; unsigned pid; long long used; unsigned gi, ci; };
struct util { int gpu; unsigned pid; double from, to; unsigned sm, mem; };
struct unsupported { int gpu; char fn[80]; };
struct xid { int gpu; double at; unsigned long long code; };

struct scenario {
    double epoch;
    char driver[80];
    int init_error;
    long generation;
    unsigned long long period_us;
    struct gpu gpus[MAX_GPUS];
    int gpu_count;
    struct proc procs[MAX_PROCS];
    int proc_count;
    struct util utils[MAX_UTILS];
    int util_count;
    struct unsupported unsupported[MAX_UNSUPPORTED];
    int unsupported_count;
    struct xid xids[MAX_XIDS];
    int xid_count;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct scenario sc;
static struct timespec loaded_mtime;
static off_t loaded_size = -1;
static ino_t loaded_inode;
static int initialised;
static long initialised_generation;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rest_of_line(const char *line, int skip_fields, char *out, size_t size) {
    const char *p = line;
    for (int i = 0; i < skip_fields; i++) {
        while (*p == ' ') p++;
        while (*p && *p != ' ') p++;
    }
    while (*p == ' ') p++;
    snprintf(out, size, "%s", p);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r')) out[--n] = 0;
}

static void parse(FILE *f) {
    static struct scenario next;
    memset(&next, 0, sizeof next);
    next.epoch = now_s();
    next.period_us = 100000;
    snprintf(next.driver, sizeof next.driver, "570.00.00");
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char kw[32] = {0};
        if (sscanf(line, "%31s", kw) != 1 || kw[0] == '#') continue;
        if (!strcmp(kw, "epoch")) {
            sscanf(line, "%*s %lf", &next.epoch);
        } else if (!strcmp(kw, "driver")) {
            rest_of_line(line, 1, next.driver, sizeof next.driver);
        } else if (!strcmp(kw, "init_error")) {
            sscanf(line, "%*s %d", &next.init_error);
        } else if (!strcmp(kw, "generation")) {
            sscanf(line, "%*s %ld", &next.generation);
        } else if (!strcmp(kw, "sample_period_us")) {
            sscanf(line, "%*s %llu", &next.period_us);
        } else if (!strcmp(kw, "gpu") && next.gpu_count < MAX_GPUS) {
            struct gpu *g = &next.gpus[next.gpu_count];
            if (sscanf(line, "%*s %95s %u %llu %llu %u %u %u %d", g->dev.uuid, &g->minor, &g->dev.fb_total_mib,
                       &g->fb_reserved_mib, &g->power_mw, &g->temp_c, &g->sm_mhz, &g->mig_enabled) != 8)
                continue;
            rest_of_line(line, 9, g->dev.name, sizeof g->dev.name);
            g->dev.gpu = next.gpu_count;
            g->dev.mig_slot = -1;
            g->dev.gi = g->dev.ci = NO_INSTANCE;
            next.gpu_count++;
        } else if (!strcmp(kw, "mig")) {
            int gi_index;
            struct device m = {0};
            if (sscanf(line, "%*s %d %95s %u %u %llu", &gi_index, m.uuid, &m.gi, &m.ci, &m.fb_total_mib) != 5)
                continue;
            if (gi_index < 0 || gi_index >= next.gpu_count || next.gpus[gi_index].mig_count >= MAX_MIGS) continue;
            rest_of_line(line, 6, m.name, sizeof m.name);
            struct gpu *g = &next.gpus[gi_index];
            m.gpu = gi_index;
            m.mig_slot = g->mig_count;
            g->migs[g->mig_count++] = m;
        } else if (!strcmp(kw, "proc") && next.proc_count < MAX_PROCS) {
            struct proc *p = &next.procs[next.proc_count];
            if (sscanf(line, "%*s %d %u %lld %u %u", &p->gpu, &p->pid, &p->used, &p->gi, &p->ci) == 5)
                next.proc_count++;
        } else if (!strcmp(kw, "util") && next.util_count < MAX_UTILS) {
            struct util *u = &next.utils[next.util_count];
            if (sscanf(line, "%*s %d %u %lf %lf %u %u", &u->gpu, &u->pid, &u->from, &u->to, &u->sm, &u->mem) == 6)
                next.util_count++;
        } else if (!strcmp(kw, "lost")) {
            int gi_index;
            double from = -1e18;
            if (sscanf(line, "%*s %d %lf", &gi_index, &from) >= 1 && gi_index >= 0 && gi_index < next.gpu_count) {
                next.gpus[gi_index].lost = 1;
                next.gpus[gi_index].lost_from = from;
            }
        } else if (!strcmp(kw, "unsupported") && next.unsupported_count < MAX_UNSUPPORTED) {
            struct unsupported *u = &next.unsupported[next.unsupported_count];
            if (sscanf(line, "%*s %d %79s", &u->gpu, u->fn) == 2) next.unsupported_count++;
        } else if (!strcmp(kw, "xid") && next.xid_count < MAX_XIDS) {
            struct xid *x = &next.xids[next.xid_count];
            if (sscanf(line, "%*s %d %lf %llu", &x->gpu, &x->at, &x->code) == 3) next.xid_count++;
        }
    }
    sc = next;
}

/* Re-read the scenario when its file changed; called with the lock held at every entry point. */
static void refresh(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    /* Writers replace the file (a new inode), so a rewrite within one mtime tick is still seen. */
    if (st.st_ino == loaded_inode && st.st_size == loaded_size && st.st_mtim.tv_sec == loaded_mtime.tv_sec &&
        st.st_mtim.tv_nsec == loaded_mtime.tv_nsec)
        return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    parse(f);
    fclose(f);
    loaded_size = st.st_size;
    loaded_inode = st.st_ino;
    loaded_mtime = st.st_mtim;
}

static double elapsed(void) { return now_s() - sc.epoch; }

static int unsupported(int gpu, const char *fn) {
    for (int i = 0; i < sc.unsupported_count; i++)
        if (sc.unsupported[i].gpu == gpu && !strcmp(sc.unsupported[i].fn, fn)) return 1;
    return 0;
}

/* Validate a handle against the current scenario; the handle points into `sc`, so it stays valid. */
static nvmlReturn_t check(nvmlDevice_t d, const char *fn) {
    if (!initialised) return NVML_ERROR_UNINITIALIZED;
    if (initialised_generation != sc.generation) return NVML_ERROR_UNINITIALIZED;
    if (!d || d->gpu < 0 || d->gpu >= sc.gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    struct gpu *g = &sc.gpus[d->gpu];
    if (g->lost && elapsed() >= g->lost_from) return NVML_ERROR_GPU_IS_LOST;
    if (unsupported(d->gpu, fn)) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

#define ENTER(d, fn)                      \
    pthread_mutex_lock(&lock);            \
    refresh();                            \
    nvmlReturn_t rc_ = check((d), (fn));  \
    if (rc_ != NVML_SUCCESS) {            \
        pthread_mutex_unlock(&lock);      \
        return rc_;                       \
    }
#define LEAVE(rc)                  \
    do {                           \
        pthread_mutex_unlock(&lock); \
        return (rc);               \
    } while (0)

/* The process's utilization at time t (seconds after epoch): the covering util segment, else 0. */
static void util_at(int gpu, unsigned pid, double t, unsigned *sm, unsigned *mem) {
    *sm = *mem = 0;
    for (int i = 0; i < sc.util_count; i++) {
        struct util *u = &sc.utils[i];
        if (u->gpu == gpu && u->pid == pid && t >= u->from && t < u->to) {
            *sm = u->sm;
            *mem = u->mem;
        }
    }
}

static int proc_visible(const struct proc *p, nvmlDevice_t d) {
    if (p->gpu != d->gpu) return 0;
    return d->mig_slot < 0 || p->gi == d->gi;
}

/* ---- library lifecycle ---- */

static nvmlReturn_t init_common(void) {
    pthread_mutex_lock(&lock);
    refresh();
    if (sc.init_error) LEAVE(sc.init_error);
    initialised = 1;
    initialised_generation = sc.generation;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlInitWithFlags(unsigned flags) { (void)flags; return init_common(); }
nvmlReturn_t nvmlInit_v2(void) { return init_common(); }
nvmlReturn_t nvmlInit(void) { return init_common(); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    initialised = 0;
    LEAVE(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned length) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (strlen(sc.driver) + 1 > length) LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    strcpy(version, sc.driver);
    LEAVE(NVML_SUCCESS);
}

/* ---- enumeration ---- */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised || initialised_generation != sc.generation) LEAVE(NVML_ERROR_UNINITIALIZED);
    *count = (unsigned)sc.gpu_count;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *device) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised || initialised_generation != sc.generation) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (index >= (unsigned)sc.gpu_count) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    struct gpu *g = &sc.gpus[index];
    if (g->lost && elapsed() >= g->lost_from) LEAVE(NVML_ERROR_GPU_IS_LOST);
    *device = &g->dev;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending) {
    ENTER(d, "nvmlDeviceGetMigMode");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *current = *pending = (unsigned)sc.gpus[d->gpu].mig_enabled;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned *count) {
    ENTER(d, "nvmlDeviceGetMaxMigDeviceCount");
    *count = sc.gpus[d->gpu].mig_enabled ? 7 : 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned index, nvmlDevice_t *mig) {
    ENTER(d, "nvmlDeviceGetMigDeviceHandleByIndex");
    struct gpu *g = &sc.gpus[d->gpu];
    if (!g->mig_enabled || d->mig_slot >= 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (index >= (unsigned)g->mig_count) LEAVE(NVML_ERROR_NOT_FOUND);
    *mig = &g->migs[index];
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t d, unsigned *is_mig) {
    ENTER(d, "nvmlDeviceIsMigDeviceHandle");
    *is_mig = d->mig_slot >= 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id) {
    ENTER(d, "nvmlDeviceGetGpuInstanceId");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = d->gi;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned *id) {
    ENTER(d, "nvmlDeviceGetComputeInstanceId");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = d->ci;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t d, nvmlDevice_t *parent) {
    ENTER(d, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
    if (d->mig_slot < 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *parent = &sc.gpus[d->gpu].dev;
    LEAVE(NVML_SUCCESS);
}

/* ---- identity ---- */

static nvmlReturn_t copy_string(const char *value, char *out, unsigned length) {
    if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned length) {
    ENTER(d, "nvmlDeviceGetUUID");
    LEAVE(copy_string(d->uuid, uuid, length));
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned length) {
    ENTER(d, "nvmlDeviceGetName");
    LEAVE(copy_string(d->name, name, length));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *index) {
    ENTER(d, "nvmlDeviceGetIndex");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *index = (unsigned)d->gpu;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *minor) {
    ENTER(d, "nvmlDeviceGetMinorNumber");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *minor = sc.gpus[d->gpu].minor;
    LEAVE(NVML_SUCCESS);
}

/* ---- device readings ---- */

typedef struct { unsigned gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *utilization) {
    ENTER(d, "nvmlDeviceGetUtilizationRates");
    /* A real driver has no device-wide utilization with MIG on, neither for the GPU nor its instances. */
    if (d->mig_slot >= 0 || sc.gpus[d->gpu].mig_enabled) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    double t = elapsed();
    unsigned sm_total = 0, mem_total = 0;
    for (int i = 0; i < sc.proc_count; i++) {
        if (sc.procs[i].gpu != d->gpu) continue;
        unsigned sm, mem;
        util_at(d->gpu, sc.procs[i].pid, t, &sm, &mem);
        sm_total += sm;
        mem_total += mem;
    }
    utilization->gpu = sm_total > 100 ? 100 : sm_total;
    utilization->memory = mem_total > 100 ? 100 : mem_total;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *memory) {
    ENTER(d, "nvmlDeviceGetMemoryInfo");
    unsigned long long used = d->mig_slot < 0 ? sc.gpus[d->gpu].fb_reserved_mib << 20 : 0;
    for (int i = 0; i < sc.proc_count; i++)
        if (proc_visible(&sc.procs[i], d) && sc.procs[i].used > 0) used += (unsigned long long)sc.procs[i].used;
    memory->total = d->fb_total_mib << 20;
    memory->used = used;
    memory->free = memory->total > used ? memory->total - used : 0;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned *milliwatts) {
    ENTER(d, "nvmlDeviceGetPowerUsage");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *milliwatts = sc.gpus[d->gpu].power_mw;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *millijoules) {
    ENTER(d, "nvmlDeviceGetTotalEnergyConsumption");
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    double t = elapsed();
    /* Constant power since the epoch: energy in mJ is mW times seconds. */
    *millijoules = (unsigned long long)((double)sc.gpus[d->gpu].power_mw * (t > 0 ? t : 0));
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned *temp) {
    ENTER(d, "nvmlDeviceGetTemperature");
    if (sensor != 0) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *temp = sc.gpus[d->gpu].temp_c;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned *clock) {
    ENTER(d, "nvmlDeviceGetClockInfo");
    if (type != 1) LEAVE(NVML_ERROR_NOT_SUPPORTED); /* only NVML_CLOCK_SM is scripted */
    if (d->mig_slot >= 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *clock = sc.gpus[d->gpu].sm_mhz;
    LEAVE(NVML_SUCCESS);
}

/* ---- processes ---- */

typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
} nvmlProcessInfo_t;

#ifndef FAKE_NVML_OLD_DRIVER
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *infos) {
    ENTER(d, "nvmlDeviceGetComputeRunningProcesses_v3");
    unsigned n = 0;
    for (int i = 0; i < sc.proc_count; i++)
        if (proc_visible(&sc.procs[i], d)) n++;
    if (n == 0) {
        *count = 0;
        LEAVE(NVML_SUCCESS);
    }
    if (!infos || *count < n) {
        *count = n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned k = 0;
    for (int i = 0; i < sc.proc_count; i++) {
        struct proc *p = &sc.procs[i];
        if (!proc_visible(p, d)) continue;
        infos[k].pid = p->pid;
        infos[k].usedGpuMemory = p->used < 0 ? ~0ULL : (unsigned long long)p->used;
        infos[k].gpuInstanceId = p->gi;
        infos[k].computeInstanceId = p->ci;
        k++;
    }
    *count = k;
    LEAVE(NVML_SUCCESS);
}
#endif

typedef struct {
    unsigned pid;
    unsigned long long timeStamp;
    unsigned smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/*
 * Like the driver: one sample per process that was busy in the ticks newer than lastSeen (the mean of those
 * ticks, stamped with the newest one), NOT_FOUND when there is none, and the driver's buffer holds at most
 * the last few seconds.
 */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *samples,
                                             unsigned *count, unsigned long long last_seen_us) {
    ENTER(d, "nvmlDeviceGetProcessUtilization");
    if (d->mig_slot >= 0 || sc.gpus[d->gpu].mig_enabled) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    unsigned long long period = sc.period_us ? sc.period_us : 100000;
    unsigned long long now_us = (unsigned long long)(now_s() * 1e6);
    unsigned long long newest = now_us / period * period;
    unsigned long long buffer_start = newest > 5000000ULL ? newest - 5000000ULL : 0;
    unsigned long long first = last_seen_us >= buffer_start ? last_seen_us + 1 : buffer_start;
    first = (first + period - 1) / period * period;
    nvmlProcessUtilizationSample_t found[512];
    unsigned n = 0;
    for (int i = 0; i < sc.proc_count && n < 512; i++) {
        struct proc *p = &sc.procs[i];
        if (p->gpu != d->gpu) continue;
        unsigned long long sm_sum = 0, mem_sum = 0, ticks = 0, stamp = 0;
        for (unsigned long long tick = first; tick <= newest; tick += period) {
            unsigned sm, mem;
            util_at(d->gpu, p->pid, (double)tick / 1e6 - sc.epoch, &sm, &mem);
            ticks++;
            sm_sum += sm;
            mem_sum += mem;
            if (sm || mem) stamp = tick;
        }
        if (!stamp) continue;
        found[n].pid = p->pid;
        found[n].timeStamp = stamp;
        found[n].smUtil = (unsigned)(sm_sum / ticks);
        found[n].memUtil = (unsigned)(mem_sum / ticks);
        found[n].encUtil = found[n].decUtil = 0;
        n++;
    }
    if (n == 0) LEAVE(NVML_ERROR_NOT_FOUND);
    if (!samples || *count < n) {
        *count = n;
        LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    memcpy(samples, found, n * sizeof found[0]);
    *count = n;
    LEAVE(NVML_SUCCESS);
}

/* ---- XID events ---- */

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned gpuInstanceId;
    unsigned computeInstanceId;
} nvmlEventData_t;

struct event_set {
    unsigned long long registered[MAX_GPUS];
    double delivered_until; /* events at or before this time (since epoch) were handed out */
};
typedef struct event_set *nvmlEventSet_t;

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    pthread_mutex_lock(&lock);
    refresh();
    if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
    *set = calloc(1, sizeof **set);
    if (!*set) LEAVE(NVML_ERROR_UNKNOWN);
    (*set)->delivered_until = elapsed();
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    free(set);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long *types) {
    ENTER(d, "nvmlDeviceGetSupportedEventTypes");
    *types = EVENT_XID;
    LEAVE(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set) {
    ENTER(d, "nvmlDeviceRegisterEvents");
    if (types & ~EVENT_XID) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    set->registered[d->gpu] |= types;
    LEAVE(NVML_SUCCESS);
}

/* Hands out the oldest undelivered XID; waits by polling so a scenario rewrite is seen while waiting. */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
    double deadline = now_s() + timeout_ms / 1000.0;
    for (;;) {
        pthread_mutex_lock(&lock);
        refresh();
        if (!initialised) LEAVE(NVML_ERROR_UNINITIALIZED);
        double t = elapsed();
        int best = -1;
        for (int i = 0; i < sc.xid_count; i++) {
            struct xid *x = &sc.xids[i];
            if (x->gpu < 0 || x->gpu >= sc.gpu_count || !(set->registered[x->gpu] & EVENT_XID)) continue;
            if (x->at <= set->delivered_until || x->at > t) continue;
            if (best < 0 || x->at < sc.xids[best].at) best = i;
        }
        if (best >= 0) {
            struct xid *x = &sc.xids[best];
            set->delivered_until = x->at;
            data->device = &sc.gpus[x->gpu].dev;
            data->eventType = EVENT_XID;
            data->eventData = x->code;
            data->gpuInstanceId = data->computeInstanceId = NO_INSTANCE;
            LEAVE(NVML_SUCCESS);
        }
        pthread_mutex_unlock(&lock);
        if (now_s() >= deadline) return NVML_ERROR_TIMEOUT;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}
