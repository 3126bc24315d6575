/* SPDX-License-Identifier: MIT */
/* Overlap rules between tensor views: distinct output elements, identical (in-place) views, and
 * whether two strided views share a byte, decided with a bounded integer search. */
#include "core/tensor.h"

#include <stdlib.h>

/* Where a view lives: host-visible memory is compared by absolute address (so two wrappers of
 * the same host array are seen to alias); device memory by buffer and offset. */
typedef struct location {
    const void *space;
    int64_t base;
} location;

static location locate(posenc_context *ctx, const posenc__view *view)
{
    uint8_t *host = posenc__view_host_base(ctx, view);
    if (host)
        return (location){NULL, (int64_t)(intptr_t)host};
    return (location){view->buffer, (int64_t)view->offset};
}

static int64_t view_extent(const posenc__view *view)
{
    int64_t extent = (int64_t)posenc__dtype_size(view->dtype);
    for (int k = 0; k < POSENC_MAX_DIMS; k++)
        extent += (view->shape[k] - 1) * view->strides[k];
    return extent;
}

posenc__view_span posenc__view_span_of(posenc_context *ctx, const posenc__view *view)
{
    location at = locate(ctx, view);
    return (posenc__view_span){at.space, at.base, at.base + view_extent(view)};
}

posenc_status posenc__check_output_distinct(posenc_context *ctx, const posenc__view *view,
                                            const char *name)
{
    /* Sorted by stride, each dim must step over everything the smaller dims span. This is the
     * usual sufficient condition; it accepts every packed, padded or permuted layout. */
    int order[POSENC_MAX_DIMS] = {0, 1, 2, 3};
    for (int i = 1; i < POSENC_MAX_DIMS; i++) {
        for (int j = i; j > 0 && view->strides[order[j]] < view->strides[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    }
    int64_t span = (int64_t)posenc__dtype_size(view->dtype);
    for (int i = 0; i < POSENC_MAX_DIMS; i++) {
        int k = order[i];
        if (view->shape[k] == 1)
            continue;
        if (view->strides[k] < span)
            return posenc__fail(ctx, POSENC_INVALID_LAYOUT,
                                "%s.strides: output elements overlap (a stride of %lld bytes "
                                "steps inside the %lld bytes of the smaller dims)",
                                name, (long long)view->strides[k], (long long)span);
        span += (view->shape[k] - 1) * view->strides[k];
    }
    return POSENC_OK;
}

bool posenc__views_identical(posenc_context *ctx, const posenc__view *a, const posenc__view *b)
{
    location la = locate(ctx, a), lb = locate(ctx, b);
    if (la.space != lb.space || la.base != lb.base || a->dtype != b->dtype)
        return false;
    for (int k = 0; k < POSENC_MAX_DIMS; k++) {
        if (a->shape[k] != b->shape[k])
            return false;
        if (a->shape[k] > 1 && a->strides[k] != b->strides[k])
            return false;
    }
    return true;
}

/* Terms of sum(coefficient_k * m_k) = target with lo_k <= m_k <= hi_k, coefficients > 0,
 * sorted by coefficient, largest first. */
typedef struct term {
    int64_t coefficient, lo, hi;
} term;

typedef struct search {
    const term *terms;
    int count;
    int64_t min_rest[2 * POSENC_MAX_DIMS + 2]; /* smallest and largest sum of terms k.. */
    int64_t max_rest[2 * POSENC_MAX_DIMS + 2];
    long budget;
} search;

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

/* 1: a solution exists; 0: none; -1: out of budget. */
static int solve(search *s, int k, int64_t target)
{
    if (k == s->count)
        return target == 0;
    if (target < s->min_rest[k] || target > s->max_rest[k])
        return 0;
    if (--s->budget < 0)
        return -1;
    const term *t = &s->terms[k];
    /* m must leave a remainder the smaller terms can still reach. */
    int64_t lo = ceil_div(target - s->max_rest[k + 1], t->coefficient);
    int64_t hi = floor_div(target - s->min_rest[k + 1], t->coefficient);
    if (lo < t->lo)
        lo = t->lo;
    if (hi > t->hi)
        hi = t->hi;
    for (int64_t m = lo; m <= hi; m++) {
        int r = solve(s, k + 1, target - m * t->coefficient);
        if (r != 0)
            return r;
    }
    return 0;
}

static void add_term(term *terms, int *count, int64_t coefficient, int64_t lo, int64_t hi)
{
    for (int i = 0; i < *count; i++) {
        if (terms[i].coefficient == coefficient) {
            terms[i].lo += lo;
            terms[i].hi += hi;
            return;
        }
    }
    terms[(*count)++] = (term){coefficient, lo, hi};
}

static int by_coefficient_descending(const void *a, const void *b)
{
    int64_t ca = ((const term *)a)->coefficient, cb = ((const term *)b)->coefficient;
    return ca < cb ? 1 : ca > cb ? -1 : 0;
}

bool posenc__views_may_overlap(posenc_context *ctx, const posenc__view *a, const posenc__view *b)
{
    location la = locate(ctx, a), lb = locate(ctx, b);
    if (la.space != lb.space)
        return false;
    int64_t distance = lb.base - la.base; /* where b starts, relative to a */
    if (distance >= view_extent(a) || -distance >= view_extent(b))
        return false;

    /* A byte of a: sum(x_i * a_i) + u, u < size_a; of b: distance + sum(y_j * b_j) + v.
     * They meet when sum(x_i a_i) - sum(y_j b_j) + (u - v) = distance. */
    term terms[2 * POSENC_MAX_DIMS + 1];
    int count = 0;
    for (int k = 0; k < POSENC_MAX_DIMS; k++) {
        if (a->shape[k] > 1)
            add_term(terms, &count, a->strides[k], 0, a->shape[k] - 1);
        if (b->shape[k] > 1)
            add_term(terms, &count, b->strides[k], -(b->shape[k] - 1), 0);
    }
    add_term(terms, &count, 1, -((int64_t)posenc__dtype_size(b->dtype) - 1),
             (int64_t)posenc__dtype_size(a->dtype) - 1);
    qsort(terms, (size_t)count, sizeof terms[0], by_coefficient_descending);

    search s = {.terms = terms, .count = count, .budget = 100000};
    s.min_rest[count] = s.max_rest[count] = 0;
    for (int k = count; k-- > 0;) {
        s.min_rest[k] = s.min_rest[k + 1] + terms[k].coefficient * terms[k].lo;
        s.max_rest[k] = s.max_rest[k + 1] + terms[k].coefficient * terms[k].hi;
    }
    return solve(&s, 0, distance) != 0;
}
