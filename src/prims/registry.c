/* registry.c: the list of every primitive, for the registry test and for
 * tools that walk all rules. Adding a primitive adds one line here. */
#include "prims/rules.h"
#include "prims/linalg_prims.h"
#include "prims/fft_prims.h"

#define CFT_UNARY(NAME, ...) extern const cft_prim cft_p_##NAME;
#include "prims/unary.def"
#undef CFT_UNARY
#define CFT_BINARY(NAME, ...) extern const cft_prim cft_p_##NAME;
#include "prims/binary.def"
#undef CFT_BINARY

extern const cft_prim cft_p_real, cft_p_imag, cft_p_conj, cft_p_complex, cft_p_cabs;
extern const cft_prim cft_p_sparse24_meta, cft_p_sparse24_gather, cft_p_sparse24_densify,
    cft_p_dot_sparse24, cft_p_qlinear_pack, cft_p_qlinear_unpack, cft_p_dot_qlinear,
    cft_p_qlinear_quantize, cft_p_dot_qstatic, cft_p_dot_qint, cft_p_conv_qstatic, cft_p_conv_qint,
    cft_p_conv_qact, cft_p_dot_qwords;

const cft_prim *const cft__prims[] = {
#define CFT_UNARY(NAME, ...) &cft_p_##NAME,
#include "prims/unary.def"
#undef CFT_UNARY
#define CFT_BINARY(NAME, ...) &cft_p_##NAME,
#include "prims/binary.def"
#undef CFT_BINARY
    &cft_p_select,
    &cft_p_real,
    &cft_p_imag,
    &cft_p_conj,
    &cft_p_complex,
    &cft_p_cabs,
    &cft_p_convert_element_type,
    &cft_p_broadcast_in_dim,
    &cft_p_reshape,
    &cft_p_transpose,
    &cft_p_squeeze,
    &cft_p_expand_dims,
    &cft_p_slice,
    &cft_p_pad,
    &cft_p_concatenate,
    &cft_p_iota,
    &cft_p_stop_gradient,
    &cft_p_reduce_sum,
    &cft_p_reduce_max,
    &cft_p_reduce_min,
    &cft_p_reduce_prod,
    &cft_p_argmax,
    &cft_p_argmin,
    &cft_p_dot_general,
    &cft_p_random_uniform,
    &cft_p_random_split,
    &cft_p_random_fold_in,
    &cft_p_gather,
    &cft_p_scatter,
    &cft_p_scatter_add,
    &cft_p_dynamic_slice,
    &cft_p_dynamic_update_slice,
    &cft_p_cumsum,
    &cft_p_cumprod,
    &cft_p_cummax,
    &cft_p_cummin,
    &cft_p_cumlogsumexp,
    &cft_p_sort,
    &cft_p_top_k,
    &cft_p_gather_along,
    &cft_p_scatter_add_along,
    &cft_p_clamp,
    &cft_p_integer_pow,
    &cft_p_conv_general_dilated,
    &cft_p_rev,
    &cft_p_reduce_window_sum,
    &cft_p_reduce_window_max,
    &cft_p_select_and_gather_add,
    &cft_p_select_and_scatter_add,
    &cft_p_scan,
    &cft_p_while,
    &cft_p_cond,
    &cft_p_remat,
    &cft_p_cholesky,
    &cft_p_triangular_solve,
    &cft_p_solve,
    &cft_p_slogdet,
    &cft_p_eigh,
    &cft_p_qr,
    &cft_p_svd,
    &cft_p_fft,
    &cft_p_sparse24_meta,
    &cft_p_sparse24_gather,
    &cft_p_sparse24_densify,
    &cft_p_dot_sparse24,
    &cft_p_qlinear_pack,
    &cft_p_qlinear_unpack,
    &cft_p_dot_qlinear,
    &cft_p_qlinear_quantize,
    &cft_p_dot_qstatic,
    &cft_p_dot_qint,
    &cft_p_conv_qstatic,
    &cft_p_conv_qint,
    &cft_p_conv_qact,
    &cft_p_dot_qwords,
    NULL,
};
