/* Meta endpoints: GET /health (the process answers), GET /ready (model
 * loaded, warmed up and not draining: what a load balancer routes on),
 * GET /metrics (Prometheus text), GET /v1/models (the one model served). */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "metrics.h"
#include "scheduler.h"

enum MHD_Result api_health(http_req *r) {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string("ok"));
    return http_send_json(r, 200, o);
}

enum MHD_Result api_ready(http_req *r) {
    server *s = r->srv;
    json_t *o = json_object();
    int status = 200;
    if (atomic_load(&s->stopping)) {
        status = 503;
        json_object_set_new(o, "status", json_string("draining"));
    } else if (!sched_ready(s->sch)) {
        status = 503;
        const char *why = sched_warmup_error(s->sch);
        json_object_set_new(o, "status", json_string(*why ? "failed" : "warming_up"));
        if (*why) json_object_set_new(o, "error", json_string(why));
    } else {
        json_object_set_new(o, "status", json_string("ready"));
    }
    json_object_set_new(o, "model", json_string(s->cfg.model_name));
    json_object_set_new(o, "slots", json_integer(s->cfg.n_slots));
    json_object_set_new(o, "busy", json_integer(sched_active(s->sch)));
    return http_send_json(r, status, o);
}

enum MHD_Result api_metrics(http_req *r) {
    qtts_model_info info; /* device memory now: contexts come and go with the slots */
    qtts_model_get_info(r->srv->model, &info);
    metrics_set_device_bytes(r->srv->mx, (long long)info.device_bytes_allocated, (long long)info.device_bytes_reserved);
    char *txt = metrics_render(r->srv->mx);
    if (!txt) return MHD_NO;
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(txt);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    return http_queue(r, 200, resp);
}

enum MHD_Result api_models(http_req *r) {
    server *s = r->srv;
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(s->cfg.model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(0));
    json_object_set_new(m, "owned_by", json_string("qtts"));
    json_object_set_new(m, "model_type", json_string(s->info.type_name));
    json_object_set_new(m, "model_size", json_string(s->info.size_name));
    json_t *data = json_array();
    json_array_append_new(data, m);
    json_t *o = json_object();
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    return http_send_json(r, 200, o);
}
