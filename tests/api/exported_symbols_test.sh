#!/bin/sh
# libpccl.so exports exactly the functions that pccl.h marks PCCL_EXPORT (or a subset: a function
# is exported only once it works), and nothing else: no libuv, no internal module symbols.
set -u
so=$TEST_SRCDIR/$TEST_WORKSPACE/libpccl.so
hdr=$TEST_SRCDIR/$TEST_WORKSPACE/include/pccl.h
declared=$(tr '\n' ' ' < "$hdr" | grep -o 'PCCL_EXPORT [^(]*(' | sed -e 's/($//' -e 's/.*[ *]//' | sort -u)
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v -E '^(__bss_start|_edata|_end|_init|_fini)$' | sort -u)
[ -n "$declared" ] || { echo "FAILED: no PCCL_EXPORT declarations found in pccl.h"; exit 1; }
[ -n "$exported" ] || { echo "FAILED: libpccl.so exports nothing"; exit 1; }
fail=0
for s in $exported; do
    if ! echo "$declared" | grep -qx "$s"; then
        echo "FAILED: libpccl.so exports $s, which pccl.h does not declare PCCL_EXPORT"
        fail=1
    fi
done
echo "exported ($(echo "$exported" | wc -l) of $(echo "$declared" | wc -l) declared):"
echo "$exported" | sed 's/^/  /'
exit $fail
