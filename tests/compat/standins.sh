#!/bin/sh
# The stand-in libmlx5.so.1 and libefa.so.1 export every function Debian's real ones export,
# each at the same version (default or not), and answer "not supported" the way callers test:
# mlx5dv_is_supported false, pointers NULL with errno EOPNOTSUPP, int calls EOPNOTSUPP.
LIBDIR=$1
fail=0
funcs() { objdump -T "$1" | awk '$2 == "g" && $3 == "DF" && $4 == ".text" {print $(NF-1), $NF}' | sort; }
for lib in libmlx5.so.1 libefa.so.1; do
  real=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')
  [ -n "$real" ] || { echo "FAIL: Debian's $lib is not installed"; fail=1; continue; }
  funcs "$real" > /tmp/standin-real-$$
  funcs "$LIBDIR/$lib" > /tmp/standin-ours-$$
  n=$(wc -l < /tmp/standin-real-$$)
  if ! diff /tmp/standin-real-$$ /tmp/standin-ours-$$ > /tmp/standin-diff-$$; then
    echo "FAIL: $lib differs from $real (< real, > ours):"; cat /tmp/standin-diff-$$; fail=1
  elif [ "$n" -lt 3 ]; then
    echo "FAIL: only $n functions read from $real: the check itself is broken"; fail=1
  else
    echo "ok - $lib: all $n functions of $real at their versions"
  fi
  rm -f /tmp/standin-real-$$ /tmp/standin-ours-$$ /tmp/standin-diff-$$
done
/usr/bin/python3 - "$LIBDIR" <<'PY' || fail=1
import ctypes, errno, sys
d = sys.argv[1]
mlx5 = ctypes.CDLL(f'{d}/libmlx5.so.1', use_errno=True)
efa = ctypes.CDLL(f'{d}/libefa.so.1', use_errno=True)
ok = True
def check(cond, what):
    global ok
    print(('ok - ' if cond else 'FAIL: ') + what)
    ok = ok and cond
mlx5.mlx5dv_is_supported.restype = ctypes.c_bool
check(mlx5.mlx5dv_is_supported(None) is False, 'mlx5dv_is_supported: false')
mlx5.mlx5dv_open_device.restype = ctypes.c_void_p
ctypes.set_errno(0)
check(mlx5.mlx5dv_open_device(None, None) is None and ctypes.get_errno() == errno.EOPNOTSUPP,
      'mlx5dv_open_device: NULL, errno EOPNOTSUPP')
check(mlx5.mlx5dv_query_device(None, None) == errno.EOPNOTSUPP, 'mlx5dv_query_device: EOPNOTSUPP')
check(efa.efadv_query_device(None, None, 0) == errno.EOPNOTSUPP, 'efadv_query_device: EOPNOTSUPP')
efa.efadv_create_cq.restype = ctypes.c_void_p
check(efa.efadv_create_cq(None, None, None, 0) is None, 'efadv_create_cq: NULL')
sys.exit(0 if ok else 1)
PY
[ $fail = 0 ] && echo "standins: complete and answering not supported"
exit $fail
