/* What machine and build a measurement came from, and the machine-side
 * measurements: CPU model and count, MHz sampled from /proc/cpuinfo by a
 * thread during each run, peak RSS (VmHWM, reset per run through
 * /proc/self/clear_refs). The read bandwidth probe is in bandwidth.c. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

/* The compile flags gcc records in the DWARF producer string of each unit
 * ("GNU C11 12.2.0 -mavx2 -O2 -g ..."): the most frequent one is the
 * library's baseline. clang records none unless -grecord-command-line. */
static void producer_flags(char *out, size_t n) {
    snprintf(out, n, "unknown (build with gcc -g, or define QTTS_BUILD_FLAGS)");
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return;
    enum { MAXP = 16 };
    char *seen[MAXP];
    int count[MAXP], ns = 0;
    static const char pat[] = "GNU C";
    char buf[1 << 16];
    char cur[1024];
    size_t cl = 0;
    int in = 0, matched = 0;
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < r; i++) {
            const char c = buf[i];
            if (!in) {
                if (c == pat[matched]) {
                    if (++matched == sizeof pat - 1) in = 1, cl = 0;
                } else matched = c == pat[0];
                continue;
            }
            if (c == 0 || cl == sizeof cur - 1) {
                cur[cl] = 0;
                if (strstr(cur, " -O") || strstr(cur, " -g")) {
                    int k = 0;
                    while (k < ns && strcmp(seen[k], cur)) k++;
                    if (k < ns) count[k]++;
                    else if (ns < MAXP && (seen[ns] = strdup(cur))) count[ns++] = 1;
                }
                in = 0, matched = 0;
                continue;
            }
            cur[cl++] = c;
        }
    }
    fclose(f);
    int best = -1;
    for (int k = 0; k < ns; k++)
        if (best < 0 || count[k] > count[best]) best = k;
    if (best >= 0) snprintf(out, n, "GNU C%s", seen[best]);
    for (int k = 0; k < ns; k++) free(seen[k]);
}

static void git_commit(char *out, size_t n) {
#ifdef QTTS_BUILD_COMMIT
    snprintf(out, n, "%s", QTTS_BUILD_COMMIT);
    return;
#endif
    snprintf(out, n, "unknown");
    char exe[2048];
    ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (l <= 0) return;
    exe[l] = 0;
    char *s = strrchr(exe, '/');
    if (!s) return;
    *s = 0; /* build/ */
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "git -C '%s' describe --always --dirty --abbrev=12 2>/dev/null", exe);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    char line[128];
    if (fgets(line, sizeof line, p)) {
        trim(line);
        if (line[0]) snprintf(out, n, "%.40s (source tree at run time)", line);
    }
    pclose(p);
}

void sys_collect(sys_info *s) {
    memset(s, 0, sizeof *s);
    snprintf(s->cpu_model, sizeof s->cpu_model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    /* the first CPU's block: its model name and, as the name may not tell
     * the generation ("AMD EPYC"), its family / model / stepping (x86) or
     * implementer / part (arm) */
    int family = -1, model = -1, stepping = -1, got_name = 0;
    char impl[24] = "", part[24] = "";
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (line[0] == '\n') break; /* end of the first CPU */
            char *c = strchr(line, ':');
            if (!c) continue;
            if (strncmp(line, "model name", 10) == 0 && !got_name) {
                snprintf(s->cpu_model, sizeof s->cpu_model, "%s", c + 2);
                trim(s->cpu_model);
                got_name = 1;
            } else if (strncmp(line, "cpu family", 10) == 0) family = atoi(c + 1);
            else if (strncmp(line, "model\t", 6) == 0 || strncmp(line, "model :", 7) == 0) model = atoi(c + 1);
            else if (strncmp(line, "stepping", 8) == 0) stepping = atoi(c + 1);
            else if (strncmp(line, "CPU implementer", 15) == 0) {
                snprintf(impl, sizeof impl, "%s", c + 2);
                trim(impl);
            } else if (strncmp(line, "CPU part", 8) == 0) {
                snprintf(part, sizeof part, "%s", c + 2);
                trim(part);
            }
        }
        fclose(f);
    }
    if (family >= 0)
        snprintf(s->cpu_id, sizeof s->cpu_id, "x86 family %d model %d stepping %d", family, model, stepping);
    else if (impl[0])
        snprintf(s->cpu_id, sizeof s->cpu_id, "arm implementer %s part %s", impl, part);
    else
        snprintf(s->cpu_id, sizeof s->cpu_id, "unknown");
    s->n_cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    struct utsname u;
    if (uname(&u) == 0) snprintf(s->kernel, sizeof s->kernel, "%.20s %.60s %.20s", u.sysname, u.release, u.machine);
    gethostname(s->hostname, sizeof s->hostname - 1);
#if defined(__clang__)
    snprintf(s->compiler, sizeof s->compiler, "clang %s", __VERSION__);
#elif defined(__GNUC__)
    snprintf(s->compiler, sizeof s->compiler, "gcc %s", __VERSION__);
#endif
#ifdef QTTS_BUILD_FLAGS
    snprintf(s->cflags, sizeof s->cflags, "%s", QTTS_BUILD_FLAGS);
#else
    producer_flags(s->cflags, sizeof s->cflags);
#endif
    git_commit(s->commit, sizeof s->commit);
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fgets(s->loadavg, sizeof s->loadavg, f)) trim(s->loadavg);
        fclose(f);
    }
    f = fopen("/proc/meminfo", "r");
    if (f) {
        long kb;
        if (fscanf(f, "MemTotal: %ld kB", &kb) == 1) s->mem_total_gb = kb / 1048576.0;
        fclose(f);
    }
}

/* ---------------------------------------------------------------- MHz */

struct mhz_sampler {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop, period_ms, started;
    double sum, min, max;
    long n;
};

static void sample_mhz(mhz_sampler *m) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu MHz", 7)) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        const double v = atof(c + 1);
        if (v <= 0) continue;
        m->sum += v;
        if (m->n == 0 || v < m->min) m->min = v;
        if (m->n == 0 || v > m->max) m->max = v;
        m->n++;
    }
    fclose(f);
}

static void *mhz_main(void *arg) {
    mhz_sampler *m = arg;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        sample_mhz(m);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (long)m->period_ms * 1000000L;
        ts.tv_sec += ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

mhz_sampler *mhz_start(int period_ms) {
    mhz_sampler *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->period_ms = period_ms > 0 ? period_ms : 100;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    m->started = pthread_create(&m->th, NULL, mhz_main, m) == 0;
    return m;
}

void mhz_stop(mhz_sampler *m, double *mean, double *min, double *max) {
    *mean = *min = *max = 0;
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    if (m->started) pthread_join(m->th, NULL);
    sample_mhz(m); /* at least one sample even for a very short run */
    if (m->n) *mean = m->sum / m->n, *min = m->min, *max = m->max;
    pthread_mutex_destroy(&m->mu);
    pthread_cond_destroy(&m->cv);
    free(m);
}

/* ---------------------------------------------------------------- memory */

int rss_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static double status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    const size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = atof(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

double rss_peak_mib(void) {
    const double kb = status_kb("VmHWM");
    return kb < 0 ? -1 : kb / 1024.0;
}

double rss_now_mib(void) {
    const double kb = status_kb("VmRSS");
    return kb < 0 ? -1 : kb / 1024.0;
}
