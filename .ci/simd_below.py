"""Print the shell exports that run numpy's dispatched loops and OpenBLAS's kernels one SIMD level below this
CPU's best (x86-64: AVX-512 -> AVX2, AVX2 -> SSE4.2), or nothing where that level is unknown (another architecture,
another numpy). CI's second suite runs under them, so that the two suites cover two CPUs' numerics: a test must pass
on a CPU with AVX-512 and on one without. Disabling a feature numpy builds in as its baseline would stop its import,
so only dispatched features this CPU has are named."""

try:
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
except ImportError:
    raise SystemExit from None
for level, coretype in (("X86_V4", "Haswell"), ("X86_V3", "Nehalem")):
    if level in __cpu_dispatch__ and level not in __cpu_baseline__ and __cpu_features__.get(level):
        above = __cpu_dispatch__[__cpu_dispatch__.index(level):]
        off = " ".join(f for f in above if f not in __cpu_baseline__ and __cpu_features__.get(f))
        print(f"export NPY_DISABLE_CPU_FEATURES='{off}' OPENBLAS_CORETYPE={coretype}")
        break
