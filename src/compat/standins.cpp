// Stand-ins for vendor provider libraries that programs such as perftest link directly
// (libmlx5.so.1, libefa.so.1). The real ones need rdma-core's private provider ABI; these export
// what such programs import and answer "not supported", so the programs load and fall back to
// plain verbs. Built twice, once per library, with that library's version script.
#include <cerrno>
#include <cstddef>

#define STANDIN_NULL(name) \
  extern "C" void* name(...) { errno = EOPNOTSUPP; return nullptr; }
#define STANDIN_ERR(name) \
  extern "C" int name(...) { return EOPNOTSUPP; }

#ifdef UROCE_STANDIN_MLX5
STANDIN_NULL(mlx5dv_open_device)
STANDIN_NULL(mlx5dv_create_qp)
STANDIN_NULL(mlx5dv_qp_ex_from_ibv_qp_ex)
STANDIN_NULL(mlx5dv_create_mkey)
STANDIN_NULL(mlx5dv_dek_create)
STANDIN_ERR(mlx5dv_destroy_mkey)
STANDIN_ERR(mlx5dv_dek_destroy)
STANDIN_ERR(mlx5dv_crypto_login)
STANDIN_ERR(mlx5dv_devx_general_cmd)
STANDIN_ERR(mlx5dv_query_device)
STANDIN_ERR(mlx5dv_is_supported)
#endif

#ifdef UROCE_STANDIN_EFA
STANDIN_ERR(efadv_query_device)
STANDIN_NULL(efadv_create_qp_ex)
STANDIN_NULL(efadv_create_driver_qp)
#endif
