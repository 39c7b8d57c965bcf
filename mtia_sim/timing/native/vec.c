/* Growable arrays for the flattened traces. */
#include <stdlib.h>
#include <string.h>
#include "ktiming.h"

void vec_init(Vec *v, size_t size) { v->p = NULL; v->n = v->cap = 0; v->size = size; }

int vec_reserve(Vec *v, size_t n) {
    if (n <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < n) cap *= 2;
    void *p = realloc(v->p, cap * v->size);
    if (!p) return -1;
    v->p = p; v->cap = cap;
    return 0;
}

void *vec_push(Vec *v) {
    if (v->n == v->cap && vec_reserve(v, v->n + 1)) return NULL;
    void *item = (char *)v->p + v->n * v->size;
    memset(item, 0, v->size);
    v->n++;
    return item;
}

void vec_free(Vec *v) { free(v->p); v->p = NULL; v->n = v->cap = 0; }

void trace_init(Trace *t) {
    vec_init(&t->progs, sizeof(ProgStatic));
    vec_init(&t->ev_kind, sizeof(int8_t));
    vec_init(&t->ev_arg, sizeof(i64));
    vec_init(&t->ev_mem, sizeof(i64));
    vec_init(&t->ev_nmem, sizeof(int32_t));
    vec_init(&t->mem, sizeof(i64));
    vec_init(&t->cmds, sizeof(CmdStatic));
    vec_init(&t->ranges, sizeof(i64));
    vec_init(&t->spans, sizeof(Span));
    vec_init(&t->dims, sizeof(i64));
    vec_init(&t->starts, sizeof(i64));
}

void trace_free(Trace *t) {
    vec_free(&t->progs); vec_free(&t->ev_kind); vec_free(&t->ev_arg); vec_free(&t->ev_mem);
    vec_free(&t->ev_nmem); vec_free(&t->mem); vec_free(&t->cmds); vec_free(&t->ranges);
    vec_free(&t->spans); vec_free(&t->dims); vec_free(&t->starts);
}
