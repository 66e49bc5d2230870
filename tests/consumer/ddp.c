/* ddp.c: a data-parallel program outside the source tree, against an
 * installed cft and its distributed library (cft::dist / cft-dist.pc), run
 * by scripts/test-consumer.sh under mpirun -np 2: each rank's gradient of
 * a least-squares loss on its own batch, averaged by DDP, equals the
 * gradient of the whole batch computed on one rank. Exits 0 when it does. */
#include <cft/cft.h>
#include <cft/dist.h>
#include <math.h>
#include <stdio.h>

static cft_status loss(void *env, const cft_tree *p, int nin, cft_array *const *in, int nout,
                       cft_array **out) {
    (void)env, (void)nin, (void)nout;
    cft_array *r = cft_sub(cft_matmul(in[0], cft_tree_get(p, "w")), in[1]);
    out[0] = cft_mean(cft_mul(r, r), NULL, 0, false);
    return CFT_OK;
}

int main(int argc, char **argv) {
    if (cft_dist_init(&argc, &argv) != CFT_OK) {
        fprintf(stderr, "cft_dist_init: %s\n", cft_last_error_message());
        return 1;
    }
    cft_dist_group *world = cft_dist_world();
    int rank = cft_dist_rank(world), size = cft_dist_size(world);
    cft_tree *p = cft_tree_set(cft_tree_new(), "w", cft_ones(CFT_F64, (int64_t[]){3}, 1));
    /* the whole batch: 4 rows per rank; this rank's rows */
    cft_array *x = cft_random_normal(cft_random_key(7), CFT_F64, (int64_t[]){4 * size, 3}, 2),
              *y = cft_random_normal(cft_random_key(8), CFT_F64, (int64_t[]){4 * size}, 1);
    cft_array *xr = cft_slice(x, (int64_t[]){4 * rank, 0}, (int64_t[]){4 * rank + 4, 3}, NULL),
              *yr = cft_slice(y, (int64_t[]){4 * rank}, (int64_t[]){4 * rank + 4}, NULL);
    cft_fn *f = cft_tree_fn_new(loss, NULL, p, 2, 1);
    cft_ddp *ddp = cft_ddp_new(world, f, p, NULL);
    cft_array *l;
    cft_tree *g;
    int bad = !ddp || cft_ddp_step(ddp, p, (cft_array *[]){xr, yr}, NULL, &l, &g) != CFT_OK;
    if (bad) {
        fprintf(stderr, "rank %d: %s\n", rank, cft_last_error_message());
    } else {
        cft_tree *whole;
        cft_tree_call(cft_tree_grad(f, p, false), p, (cft_array *[]){x, y}, p, &whole, NULL);
        bad = !cft_allclose(cft_tree_get(g, "w"), cft_tree_get(whole, "w"), 1e-12, 1e-12, false);
        if (bad)
            fprintf(stderr, "rank %d: the averaged gradient is not the whole batch's\n", rank);
    }
    cft_dist_finalize();
    if (!bad)
        printf("ddp consumer ok (rank %d of %d)\n", rank, size);
    return bad;
}
