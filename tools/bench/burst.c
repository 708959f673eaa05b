/* qtts-bench burst: what the tasks behind a burst's first audios cost on two
 * cores, one at a time and side by side, and the least median first audio of
 * a burst that any schedule of those tasks could reach (docs/BENCH.md,
 * "qtts-bench burst").
 *
 * A request's first audio needs its prefill (P), a step that gives its
 * first frame's codes (S) and the decode of its first one-frame chunk (D).
 * The engine can run a task on both cores (the 2-thread model), on one core
 * with the other idle, or two tasks side by side, one a core (two 1-thread
 * models, one thread each). This tool measures all twelve configurations in
 * turn (P, S, D on 2 threads and on 1; PP, SS, DD, PS, PD, SD side by side),
 * each for a window of seconds, round after round, and takes each
 * configuration's median over the rounds of its windows' medians.
 *
 * The bound (burst_bounds): with the configurations' rates, the least time
 * to finish a given amount of work (prefills, steps, decodes), whatever the
 * order and mix of configurations, is a linear programme (burst_tmin). The
 * 2nd and 3rd first audios of a burst of 4 (their mean is its median) need 2
 * and 3 prefills and decodes, and either two distinct steps by the 3rd (case
 * 1) or one step after all three prefills (case 2); the bound is the smaller
 * of the two cases' means. It ignores order inside each amount (a step may
 * "run beside" a prefill it in fact has to wait for), so it is a lower bound
 * for every schedule, the engine's included. With the 2-thread
 * configurations alone it equals the one-at-a-time engine's bound,
 * 2.5 (P2 + D2) + 1.5 S2 (when P2 >= S2).
 *
 * End to end (burst_tput_bounds): it also times steps of 2, 3 and 4
 * streams and a 4-frame chunk's decode, on 2 threads and on 1, two chunks
 * side by side and a 4-stream step beside a chunk, and bounds
 * the audio 4 streams can get a wall second by the cores' time each
 * stream-frame needs at least (bench.h); against the one-at-a-time engine's
 * single stream that is the most 4 streams can gain. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* The load generator's default sentence (tools/server/loadgen.c), so that
 * the costs are those of the server runs in docs/BENCH.md. */
static const char *const BURST_TEXT =
    "Hello, my name is Ryan. It is 3:45 pm on the 12th of June; are you ready to begin?";

static const char BT_NAME[BT_N] = {'P', 'S', 'D'};

/* ------------------------------------------------------------ the bound */

/* Rate vectors of the configurations: work done per ms of each kind. */
static int rates(const burst_costs *c, double r[][BT_N]) {
    int n = 0;
    for (int k = 0; k < BT_N; k++) {
        const double t[2] = {c->two[k], c->one[k]};
        for (int v = 0; v < 2; v++) {
            if (!(t[v] > 0)) continue;
            memset(r[n], 0, sizeof r[n]);
            r[n++][k] = 1.0 / t[v];
        }
    }
    for (int a = 0; a < BT_N; a++)
        for (int b = a; b < BT_N; b++) {
            const double ta = c->pair[a][b][0], tb = c->pair[a][b][1];
            if (!(ta > 0 && tb > 0)) continue;
            memset(r[n], 0, sizeof r[n]);
            r[n][a] += 1.0 / ta;
            r[n++][b] += 1.0 / tb;
        }
    return n;
}

static double det3(const double M[3][3]) {
    return M[0][0] * (M[1][1] * M[2][2] - M[1][2] * M[2][1]) - M[0][1] * (M[1][0] * M[2][2] - M[1][2] * M[2][0]) +
           M[0][2] * (M[1][0] * M[2][1] - M[1][1] * M[2][0]);
}

/* A x = b by Cramer's rule; -1 when A is singular. */
static int solve3(const double A[3][3], const double b[3], double x[3]) {
    const double d = det3(A);
    if (fabs(d) < 1e-300) return -1;
    for (int i = 0; i < 3; i++) {
        double M[3][3];
        memcpy(M, A, sizeof M);
        for (int k = 0; k < 3; k++) M[k][i] = b[k];
        x[i] = det3(M) / d;
    }
    return 0;
}

/* min sum_c t_c subject to sum_c t_c r_c >= w, t >= 0, through its dual:
 * max w.y subject to r_c.y <= 1, y >= 0. Three unknowns: the optimum is a
 * vertex where three constraints meet, and there are at most C(15, 3) to try. */
double burst_tmin(const burst_costs *c, const double w[BT_N]) {
    double r[BT_N * 2 + BT_N * (BT_N + 1) / 2][BT_N];
    const int nr = rates(c, r);
    /* work of a kind no configuration does: the primal is infeasible (the
     * dual unbounded): NaN */
    for (int k = 0; k < BT_N; k++) {
        int any = 0;
        for (int i = 0; i < nr; i++) any |= r[i][k] > 0;
        if (w[k] > 0 && !any) return NAN;
    }
    double A[BT_N * 3 + BT_N * (BT_N + 1) / 2][BT_N], rhs[BT_N * 3 + BT_N * (BT_N + 1) / 2];
    int na = 0;
    for (int i = 0; i < nr; i++, na++) {
        memcpy(A[na], r[i], sizeof A[na]);
        rhs[na] = 1;
    }
    for (int k = 0; k < BT_N; k++, na++) {
        memset(A[na], 0, sizeof A[na]);
        A[na][k] = -1;
        rhs[na] = 0;
    }
    double best = -1;
    for (int i = 0; i < na; i++)
        for (int j = i + 1; j < na; j++)
            for (int k = j + 1; k < na; k++) {
                const double M[3][3] = {{A[i][0], A[i][1], A[i][2]}, {A[j][0], A[j][1], A[j][2]},
                                        {A[k][0], A[k][1], A[k][2]}};
                const double b[3] = {rhs[i], rhs[j], rhs[k]};
                double y[3];
                if (solve3(M, b, y)) continue;
                int ok = 1;
                for (int q = 0; q < na && ok; q++)
                    ok = A[q][0] * y[0] + A[q][1] * y[1] + A[q][2] * y[2] <= rhs[q] + 1e-9 * (1 + fabs(rhs[q]));
                if (!ok) continue;
                const double v = w[0] * y[0] + w[1] * y[1] + w[2] * y[2];
                if (v > best) best = v;
            }
    return best;
}

void burst_bounds(const burst_costs *c, burst_result *res) {
    memset(res, 0, sizeof *res);
    res->t1 = c->two[BT_P] + c->two[BT_S] + c->two[BT_D];
    res->serial = 2.5 * (c->two[BT_P] + c->two[BT_D]) + 1.5 * c->two[BT_S];
    const double w21[BT_N] = {2, 1, 2}, w32[BT_N] = {3, 2, 3}, w31a[BT_N] = {3, 1, 2}, w31b[BT_N] = {3, 1, 3};
    res->case1 = (burst_tmin(c, w21) + burst_tmin(c, w32)) / 2;
    res->case2 = (burst_tmin(c, w31a) + burst_tmin(c, w31b)) / 2;
    res->any = res->case1 < res->case2 ? res->case1 : res->case2;
    const double one[BT_N][BT_N] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    for (int k = 0; k < BT_N; k++) res->share[k] = burst_tmin(c, one[k]);
}

/* The least of the positive values among n (a measured time; 0 or NaN: not measured) */
static double least(int n, const double *v) {
    double m = INFINITY;
    for (int i = 0; i < n; i++)
        if (v[i] > 0 && v[i] < m) m = v[i];
    return m;
}

void burst_tput_bounds(const burst_costs *c, int frames, burst_tput *t) {
    memset(t, 0, sizeof *t);
    const double s1[] = {2 * c->two[BT_S], c->one[BT_S], c->pair[BT_S][BT_S][0], c->pair[BT_S][BT_S][1],
                         c->pair[BT_P][BT_S][1], c->pair[BT_S][BT_D][0]};
    const double p1[] = {2 * c->two[BT_P], c->one[BT_P], c->pair[BT_P][BT_P][0], c->pair[BT_P][BT_P][1],
                         c->pair[BT_P][BT_S][0], c->pair[BT_P][BT_D][0]};
    const double e1[] = {2 * c->chunk_two, c->chunk_one, c->chunk_pair[0], c->chunk_pair[1], c->step4_chunk[1]};
    double best = INFINITY;
    for (int b = 1; b <= 4; b++) {
        const double sb[] = {2 * c->step_two[b], c->step_one[b], b == 4 ? c->step4_chunk[0] : 0};
        const double share = (b == 1 ? least(6, s1) : least(3, sb)) / b;
        if (share < best) best = share;
        t->g[b] = best;
    }
    t->e = least(5, e1) / 4;
    t->p = least(6, p1) / frames;
    t->t1 = c->two[BT_S] + c->chunk_two / 4 + c->two[BT_P] / frames;
    t->t4 = 4 * (t->g[4] + t->e + t->p) / 2;
    t->ratio = 4 * t->t1 / t->t4;
}

/* ------------------------------------------------------------ measuring */

/* Task kinds beyond BT_*: steps of 2, 3 and 4 streams, a 4-frame chunk */
enum { TK_S2 = BT_N, TK_S3, TK_S4, TK_E };
#define N_CFG 22

typedef struct lane {
    qtts_model *m;
    const burst_opts *o;
    qtts_context *c, *cs; /* c: prefills and decodes; cs: the running stream that steps */
    qtts_batch *b, *bs;
    int G;                /* codebooks a frame */
    int32_t codes[64];    /* the first frame of a generation on this lane */
    float *pcm;
    uint64_t seed;
    int cs_started;       /* cs has had a generation (to finish before the next) */
    qtts_context *cn[4], *ce; /* cn: the streams of a multi-stream step; ce: a running decode */
    qtts_batch *bn;
    int cn_n;             /* streams last added to bn (to finish before the next) */
    int32_t codes4[4 * 64]; /* the first 4 frames of a generation, for the 4-frame chunks */
    float *pcm4;
    qtts_status st;       /* first failure */
    char msg[256];
} lane;

static qtts_gen_params lane_params(lane *L, int frames) {
    qtts_gen_params p = qtts_gen_default_params(L->m);
    p.text = L->o->text;
    p.speaker = L->o->voice;
    p.instruct = L->o->instructions;
    p.force_frames = frames;
    p.seed = ++L->seed;
    return p;
}

static int grab_first(const int32_t *codes, int idx, void *u) {
    lane *L = u;
    if (idx == 0) memcpy(L->codes, codes, sizeof(int32_t) * (size_t)L->G);
    if (idx < 4) memcpy(L->codes4 + (size_t)idx * L->G, codes, sizeof(int32_t) * (size_t)L->G);
    return 0;
}

static void lane_fail(lane *L, qtts_status st, const char *what, qtts_context *c) {
    if (L->st) return;
    L->st = st;
    snprintf(L->msg, sizeof L->msg, "%s: %s (%s)", what, qtts_status_str(st), c ? qtts_context_last_error(c) : "");
}

/* One task; returns its ms (or -1 after a failure, recorded in L). */
static double lane_task(lane *L, int kind) {
    qtts_status st;
    double t0 = bench_now_ms();
    if (kind == BT_P) {
        qtts_gen_params p = lane_params(L, 2);
        if ((st = qtts_batch_add(L->b, L->c, &p, NULL, NULL))) {
            lane_fail(L, st, "prefill", L->c);
            return -1;
        }
        const double t = bench_now_ms() - t0;
        qtts_batch_remove(L->b, L->c);
        qtts_context_finish(L->c, NULL); /* cancelled: the prefill was the task */
        return t;
    }
    if (kind == BT_D) {
        qtts_gen_params p = lane_params(L, 2);
        if ((st = qtts_context_audio_begin(L->c, &p)) || (st = qtts_context_audio_decode(L->c, L->codes, 1, L->pcm))) {
            lane_fail(L, st, "decode", L->c);
            return -1;
        }
        return bench_now_ms() - t0;
    }
    if (kind == TK_E) {
        if ((st = qtts_context_audio_decode(L->ce, L->codes4, 4, L->pcm4))) {
            lane_fail(L, st, "4-frame decode", L->ce);
            return -1;
        }
        return bench_now_ms() - t0;
    }
    if (kind >= TK_S2 && kind <= TK_S4) {
        /* a step of b running streams, all (re)started untimed when they end
         * or when the window wants another count */
        const int b = kind - TK_S2 + 2;
        if (qtts_batch_size(L->bn) != b) {
            for (int i = 0; i < L->cn_n; i++) {
                qtts_batch_remove(L->bn, L->cn[i]);
                qtts_context_finish(L->cn[i], NULL);
            }
            L->cn_n = 0;
            for (int i = 0; i < b; i++) {
                qtts_gen_params p = lane_params(L, L->o->stream_frames);
                if ((st = qtts_batch_add(L->bn, L->cn[i], &p, NULL, NULL))) {
                    lane_fail(L, st, "multi-stream step", L->cn[i]);
                    return -1;
                }
                L->cn_n = i + 1;
            }
            t0 = bench_now_ms();
        }
        qtts_batch_step(L->bn);
        return bench_now_ms() - t0;
    }
    /* a step of one running stream, started again (untimed) when it ends */
    if (qtts_batch_size(L->bs) == 0) {
        if (L->cs_started) qtts_context_finish(L->cs, NULL);
        qtts_gen_params p = lane_params(L, L->o->stream_frames);
        if ((st = qtts_batch_add(L->bs, L->cs, &p, NULL, NULL))) {
            lane_fail(L, st, "step", L->cs);
            return -1;
        }
        L->cs_started = 1;
        t0 = bench_now_ms();
    }
    qtts_batch_step(L->bs);
    return bench_now_ms() - t0;
}

static qtts_status lane_init(lane *L, qtts_model *m, const burst_opts *o, char *err, size_t n) {
    memset(L, 0, sizeof *L);
    L->m = m;
    L->o = o;
    qtts_model_info info;
    qtts_model_get_info(m, &info);
    if (info.n_code_groups < 1 || info.n_code_groups > 64) {
        snprintf(err, n, "%d codebooks a frame (1..64 expected)", info.n_code_groups);
        return QTTS_ERR_UNSUPPORTED;
    }
    L->G = info.n_code_groups;
    qtts_context_params cp = qtts_context_default_params();
    cp.decode_on_model_threads = 1; /* a 2-thread model decodes on both threads */
    char why[1024] = "";
    qtts_status st = qtts_context_new(m, &cp, &L->c, why, sizeof why);
    if (!st) st = qtts_context_new(m, &cp, &L->cs, why, sizeof why);
    if (!st) st = qtts_batch_new(m, 1, &L->b);
    if (!st) st = qtts_batch_new(m, 1, &L->bs);
    for (int i = 0; i < 4 && !st; i++) st = qtts_context_new(m, &cp, &L->cn[i], why, sizeof why);
    if (!st) st = qtts_context_new(m, &cp, &L->ce, why, sizeof why);
    if (!st) st = qtts_batch_new(m, 4, &L->bn);
    if (!st && !(L->pcm = malloc(sizeof(float) * (size_t)info.samples_per_frame))) st = QTTS_ERR_NOMEM;
    if (!st && !(L->pcm4 = malloc(sizeof(float) * 4 * (size_t)info.samples_per_frame))) st = QTTS_ERR_NOMEM;
    if (st) {
        snprintf(err, n, "cannot set up a lane: %s", why[0] ? why : qtts_status_str(st));
        return st;
    }
    /* real frames to decode, and the voice prefix in the cache */
    qtts_gen_params p = lane_params(L, 4);
    if ((st = qtts_batch_add(L->b, L->c, &p, grab_first, L))) {
        snprintf(err, n, "the first generation failed: %s", qtts_context_last_error(L->c));
        return st;
    }
    while (qtts_batch_size(L->b)) qtts_batch_step(L->b);
    if ((st = qtts_context_finish(L->c, NULL))) {
        snprintf(err, n, "the first generation failed: %s", qtts_context_last_error(L->c));
        return st;
    }
    if ((st = qtts_context_audio_begin(L->ce, &p))) snprintf(err, n, "cannot start a decode: %s", qtts_context_last_error(L->ce));
    return st;
}

static void lane_free(lane *L) {
    qtts_batch_free(L->b);
    qtts_batch_free(L->bs);
    qtts_context_free(L->c);
    qtts_context_free(L->cs);
    qtts_batch_free(L->bn);
    for (int i = 0; i < 4; i++) qtts_context_free(L->cn[i]);
    qtts_context_free(L->ce);
    free(L->pcm);
    free(L->pcm4);
}

typedef struct job {
    lane *L;
    int kind;
    atomic_int *stop;
    double *v;
    int n, cap;
    atomic_int n_done; /* n, for the watching thread */
    atomic_int failed; /* the lane failed (its message is in the lane) */
} job;

static void *job_run(void *u) {
    job *j = u;
    while (!atomic_load(j->stop)) {
        const double t = lane_task(j->L, j->kind);
        if (t < 0) {
            atomic_store(&j->failed, 1);
            break;
        }
        if (j->n < j->cap) {
            j->v[j->n++] = t;
            atomic_store(&j->n_done, j->n);
        }
    }
    return NULL;
}

static void sleep_ms(double ms) {
    struct timespec s = {(time_t)(ms / 1000), (long)(fmod(ms, 1000) * 1e6)};
    nanosleep(&s, NULL);
}

/* Median of a window's tasks after the first (which meets cold caches). */
static double window_median(job *j) {
    if (j->n < 2) return NAN;
    return bench_summarize(j->v + 1, j->n - 1).median;
}

/* One window: kind a (and b >= 0 side by side on the second lane), for secs
 * and until each side has two tasks (the first is not counted). */
static int window(lane *La, lane *Lb, int a, int b, double secs, double out[2]) {
    atomic_int stop;
    atomic_init(&stop, 0);
    enum { CAP = 1 << 14 };
    job ja = {La, a, &stop, malloc(sizeof(double) * CAP), 0, CAP, 0, 0};
    job jb = {Lb, b, &stop, b >= 0 ? malloc(sizeof(double) * CAP) : NULL, 0, CAP, 0, 0};
    int ok = ja.v && (b < 0 || jb.v);
    pthread_t ta, tb;
    int sa = ok && pthread_create(&ta, NULL, job_run, &ja) == 0;
    int sb = ok && sa && b >= 0 && pthread_create(&tb, NULL, job_run, &jb) == 0;
    if (sa && (b < 0 || sb)) {
        const double t0 = bench_now_ms();
        while ((bench_now_ms() - t0 < secs * 1000 || atomic_load(&ja.n_done) < 2 || (b >= 0 && atomic_load(&jb.n_done) < 2)) &&
               !atomic_load(&ja.failed) && !atomic_load(&jb.failed))
            sleep_ms(10);
    }
    atomic_store(&stop, 1);
    if (sa) pthread_join(ta, NULL);
    if (sb) pthread_join(tb, NULL);
    ok = ok && sa && (b < 0 || sb);
    out[0] = window_median(&ja);
    out[1] = b >= 0 ? window_median(&jb) : NAN;
    free(ja.v);
    free(jb.v);
    return ok ? 0 : -1;
}

static double med_of(const double *v, int n) { return bench_summarize(v, n).median; }

int burst_measure(burst_opts *o, burst_costs *med, burst_costs *rounds, char *err, size_t n) {
    qtts_model *m[3] = {NULL, NULL, NULL};
    lane L[3];
    int nl = 0, rc = -1;
    for (int v = 0; v < 3; v++) {
        qtts_model_params mp = qtts_model_default_params();
        mp.n_threads = v == 0 ? 2 : 1;
        mp.weights = o->weights;
        bench_apply_backend(&o->backend, &mp);
        char e[512];
        if (qtts_model_load(&m[v], o->model_dir, &mp, e, sizeof e)) {
            snprintf(err, n, "cannot load %s: %s", o->model_dir, e);
            goto done;
        }
        if (v == 0) { /* the same folder each time: check and fill in the defaults once */
            qtts_model_info info;
            qtts_model_get_info(m[0], &info);
            if (!info.has_codec || info.type == QTTS_MODEL_BASE) {
                snprintf(err, n, "%s: burst needs a CustomVoice or VoiceDesign model with its speech_tokenizer/ (a "
                         "Base model speaks only in a cloned voice)", o->model_dir);
                goto done;
            }
            o->frame_ms = 1000.0 * info.samples_per_frame / info.sample_rate_hz;
            if (info.type == QTTS_MODEL_CUSTOM_VOICE && !o->voice && qtts_model_n_speakers(m[0]) > 0)
                o->voice = qtts_model_speaker(m[0], 0);
            if (info.type == QTTS_MODEL_VOICE_DESIGN && !o->instructions)
                o->instructions = "A calm, clear voice."; /* the load generator's */
        }
        if (lane_init(&L[v], m[v], o, err, n)) {
            lane_free(&L[v]);
            goto done;
        }
        nl++;
    }
    /* the twelve configurations of the TTFA bound and the ten more of the
     * end-to-end one, in this order every round */
    static const int cfg[N_CFG][3] = {
        {BT_P, -1, 2},   {BT_S, -1, 2},   {BT_D, -1, 2},   {BT_P, -1, 1},   {BT_S, -1, 1},   {BT_D, -1, 1},
        {BT_P, BT_P, 0}, {BT_S, BT_S, 0}, {BT_D, BT_D, 0}, {BT_P, BT_S, 0}, {BT_P, BT_D, 0}, {BT_S, BT_D, 0},
        {TK_S2, -1, 2},  {TK_S2, -1, 1},  {TK_S3, -1, 2},  {TK_S3, -1, 1},  {TK_S4, -1, 2},  {TK_S4, -1, 1},
        {TK_E, -1, 2},   {TK_E, -1, 1},   {TK_E, TK_E, 0}, {TK_S4, TK_E, 0}};
    for (int r = 0; r < o->rounds; r++) {
        burst_costs *c = &rounds[r];
        memset(c, 0, sizeof *c);
        for (int q = 0; q < N_CFG; q++) {
            const int a = cfg[q][0], b = cfg[q][1], th = cfg[q][2];
            double t[2];
            lane *La = th == 2 ? &L[0] : &L[1], *Lb = b >= 0 ? &L[2] : NULL;
            if (window(La, Lb, a, b, o->seconds, t)) {
                snprintf(err, n, "cannot start the measuring threads");
                goto done;
            }
            for (int v = 0; v < 3; v++)
                if (L[v].st) {
                    snprintf(err, n, "%s", L[v].msg);
                    goto done;
                }
            if (b == TK_E) {
                double *d = a == TK_E ? c->chunk_pair : c->step4_chunk;
                d[0] = t[0];
                d[1] = t[1];
            } else if (a >= TK_S2 && a <= TK_S4)
                *(th == 2 ? &c->step_two[a - TK_S2 + 2] : &c->step_one[a - TK_S2 + 2]) = t[0];
            else if (a == TK_E) *(th == 2 ? &c->chunk_two : &c->chunk_one) = t[0];
            else if (th == 2) c->two[a] = t[0];
            else if (th == 1) c->one[a] = t[0];
            else {
                c->pair[a][b][0] = t[0];
                c->pair[a][b][1] = t[1];
            }
        }
        c->step_two[1] = c->two[BT_S];
        c->step_one[1] = c->one[BT_S];
        if (o->on_round) o->on_round(o->arg, r, c);
    }
    /* each configuration's median over the rounds: burst_costs is doubles
     * only, so field by field as an array (unmeasured fields stay 0) */
    enum { NF = sizeof(burst_costs) / sizeof(double) };
    _Static_assert(sizeof(burst_costs) == NF * sizeof(double), "burst_costs holds doubles only");
    double *x = malloc(sizeof(double) * (size_t)o->rounds);
    if (!x) {
        snprintf(err, n, "out of memory");
        goto done;
    }
    for (int f = 0; f < NF; f++) {
        for (int r = 0; r < o->rounds; r++) x[r] = ((const double *)&rounds[r])[f];
        ((double *)med)[f] = med_of(x, o->rounds);
    }
    free(x);
    rc = 0;
done:
    for (int v = 0; v < nl; v++) lane_free(&L[v]);
    for (int v = 0; v < 3; v++) qtts_model_free(m[v]);
    return rc;
}

/* ------------------------------------------------------------ the command */

static void print_costs(const char *label, const burst_costs *c) {
    printf("%s: 2 threads P %.1f S %.1f D %.1f | 1 thread P %.1f S %.1f D %.1f | side by side", label, c->two[BT_P],
           c->two[BT_S], c->two[BT_D], c->one[BT_P], c->one[BT_S], c->one[BT_D]);
    for (int a = 0; a < BT_N; a++)
        for (int b = a; b < BT_N; b++)
            printf(" %c%c %.1f/%.1f", BT_NAME[a], BT_NAME[b], c->pair[a][b][0], c->pair[a][b][1]);
    printf(" | steps of 2, 3, 4 streams: 2 threads %.1f %.1f %.1f, 1 thread %.1f %.1f %.1f | 4-frame chunk E: 2 threads "
           "%.1f, 1 thread %.1f | side by side EE %.1f/%.1f, 4-stream step and E %.1f/%.1f\n",
           c->step_two[2], c->step_two[3], c->step_two[4], c->step_one[2], c->step_one[3], c->step_one[4],
           c->chunk_two, c->chunk_one, c->chunk_pair[0], c->chunk_pair[1], c->step4_chunk[0], c->step4_chunk[1]);
}

static void print_bounds(const char *label, const burst_costs *c, int frames, double frame_ms) {
    burst_result r;
    burst_bounds(c, &r);
    burst_tput t;
    burst_tput_bounds(c, frames, &t);
    printf("%s: lone first audio T1 = P2 + S2 + D2 = %.1f ms; a burst of 4's median first audio: one task at a "
           "time on both cores >= %.1f ms (%.2f T1), any schedule of these tasks on the two cores >= %.1f ms (%.2f T1)\n",
           label, r.t1, r.serial, r.serial / r.t1, r.any, r.any / r.t1);
    printf("%s: end to end, %d-frame requests: one stream, one task at a time on both cores %.1f ms a frame; 4 streams, "
           "any schedule >= %.1f ms a frame (core-ms a stream-frame: steps %.1f, decode %.1f, prefill %.1f): 4 "
           "streams gain at most %.2fx (%.3f audio s a wall s at most)\n",
           label, frames, t.t1, t.t4, t.g[4], t.e, t.p, t.ratio, 4 * frame_ms / t.t4);
}

static void on_round(void *arg, int r, const burst_costs *c) {
    const burst_opts *o = arg;
    char label[32];
    snprintf(label, sizeof label, "round %d", r + 1);
    print_costs(label, c);
    print_bounds(label, c, o->stream_frames, o->frame_ms);
    fflush(stdout);
}

int cmd_burst(int argc, char **argv) {
    /* the stepping stream restarts after 69 frames: the load generator's
     * length for its sentence (--frames auto), as in the server runs */
    burst_opts o = {.text = BURST_TEXT, .rounds = 5, .seconds = 2.0, .stream_frames = 69,
                    .weights = QTTS_WEIGHTS_Q8, .on_round = on_round};
    o.arg = &o;
    const char *wname = "q8";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) o.model_dir = argv[++i];
        else if ((!strcmp(a, "-w") || !strcmp(a, "--weights")) && v) {
            wname = argv[++i];
            const char *canon;
            if (bench_parse_weights(wname, &o.weights, &canon)) {
                fprintf(stderr, "qtts-bench burst: unknown weights '%s' (%s)\n", wname, bench_weight_names());
                return 2;
            }
            wname = canon;
        } else if (!strcmp(a, "--text") && v) o.text = argv[++i];
        else if (!strcmp(a, "--voice") && v) o.voice = argv[++i];
        else if (!strcmp(a, "--instructions") && v) o.instructions = argv[++i];
        else if (!strcmp(a, "--backend") || !strcmp(a, "--device")) {
            if (bench_parse_backend(a, v, &o.backend)) return 2;
            i++;
        }
        else if (!strcmp(a, "--rounds") && v) {
            o.rounds = (int)strtol(argv[++i], &end, 10);
            if (*end || o.rounds < 1 || o.rounds > 1000) {
                fprintf(stderr, "qtts-bench burst: --rounds takes 1..1000 (got '%s')\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--seconds") && v) {
            o.seconds = strtod(argv[++i], &end);
            if (*end || !(o.seconds >= 0.01 && o.seconds <= 600)) {
                fprintf(stderr, "qtts-bench burst: --seconds takes 0.01..600 (got '%s')\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: qtts-bench burst -m DIR [-w q8|q4|native] [--rounds N] [--seconds S] [--text STR]\n"
                            "                        [--voice NAME] [--instructions STR] [--backend cpu|vulkan]\n"
                            "                        [--device N]\n");
            return 2;
        }
    }
    if (!o.model_dir) {
        fprintf(stderr, "qtts-bench burst: -m DIR is required\n");
        return 2;
    }
    sys_info s;
    sys_collect(&s);
    qtts_model_params dp = qtts_model_default_params();
    bench_apply_backend(&o.backend, &dp);
    printf("# qtts-bench burst: %s, weights %s, backend %s device %d; CPU %s (%s; %d online); load average %s\n",
           o.model_dir, wname, qtts_backend_name(dp.backend), dp.device, s.cpu_model, s.cpu_id, s.n_cpus, s.loadavg);
    printf("# text: %s\n", o.text);
    printf("# ms a task (P prefill with the voice prefix reused, S a step of one stream, D the first 1-frame chunk's\n"
           "# decode with the decoder's reset; steps of 2-4 streams, a 4-frame chunk's decode in a running stream);\n"
           "# streams restart after %d frames; each configuration %.2f s a round, the twenty-two in turn, %d rounds;\n"
           "# a window's median of its tasks after the first; the summary takes each configuration's median over "
           "rounds\n",
           o.stream_frames, o.seconds, o.rounds);
    if (s.n_cpus < 2) printf("# note: %d online CPU: side by side shares one core\n", s.n_cpus);
    burst_costs med, *rounds = calloc((size_t)o.rounds, sizeof *rounds);
    if (!rounds) return 1;
    char err[512];
    if (burst_measure(&o, &med, rounds, err, sizeof err)) {
        fprintf(stderr, "qtts-bench burst: %s\n", err);
        free(rounds);
        return 1;
    }
    if (o.voice) printf("# voice: %s\n", o.voice);
    if (o.instructions) printf("# instructions: %s\n", o.instructions);
    print_costs("median", &med);
    print_bounds("median", &med, o.stream_frames, o.frame_ms);
    double lo = INFINITY, hi = -INFINITY, elo = INFINITY, ehi = -INFINITY;
    for (int r = 0; r < o.rounds; r++) {
        burst_result b;
        burst_bounds(&rounds[r], &b);
        burst_tput t;
        burst_tput_bounds(&rounds[r], o.stream_frames, &t);
        lo = fmin(lo, b.any / b.t1), hi = fmax(hi, b.any / b.t1);
        elo = fmin(elo, t.ratio), ehi = fmax(ehi, t.ratio);
    }
    printf("round by round: any-schedule median first audio of a burst of 4 over T1 %.2f-%.2f; most 4 streams "
           "gain end to end %.2f-%.2f\n",
           lo, hi, elo, ehi);
    free(rounds);
    return 0;
}
