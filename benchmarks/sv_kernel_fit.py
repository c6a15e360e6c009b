"""Seconds per state element of the compiled statevector kernels, by gate width and dtype.

Times :func:`qsimdist.executors.sv_kernels.apply_dense` (a random unitary on random bits
at or above ``LOW_BITS``), :func:`~qsimdist.executors.sv_kernels.swap_bits` (two pairs) and
:func:`~qsimdist.executors.sv_kernels.pauli_expectations` (20 strings of weight 3-4 on
random qubits, read together; the time per string) on ``2^n`` states, the median of
``--repeats`` calls after one untimed call. The statevector cost model's
``COMPILED_*`` constants and ``PAULI_PASS_SECONDS_PER_ELEMENT`` (both in
``qsimdist.hardware.costs``) are fitted to these numbers. Run::

    python -m benchmarks.sv_kernel_fit [--qubits 20 24] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _time(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    from qsimdist.executors import sv_kernels as k

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--qubits", type=int, nargs="+", default=[20, 24])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    chunks = k.n_chunks()
    rng = np.random.default_rng(0)
    print("| qubits | dtype | dense k=1 | k=2 | k=3 | k=4 | k=5 | swap (2 pairs) | "
          "Pauli, per string of 20 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in args.qubits:
        for dt in ("complex64", "complex128"):
            s = np.zeros(1 << n, dt)
            s[0] = 1
            row = []
            for width in (1, 2, 3, 4, 5):
                a = rng.normal(size=(1 << width, 1 << width))
                m = np.linalg.qr(a + 1j * rng.normal(size=a.shape))[0].astype(dt)
                bits = [int(b) for b in rng.choice(np.arange(k.LOW_BITS, n), width,
                                                   replace=False)]
                re, im = np.ascontiguousarray(m.real), np.ascontiguousarray(m.imag)
                row.append(_time(lambda: k.apply_dense(s, re, im, bits, chunks), args.repeats))
            row.append(_time(lambda: k.swap_bits(s, [0, 2], [n - 1, 7], chunks), args.repeats))
            masks = []
            for _ in range(20):
                qs = rng.choice(n, int(rng.integers(3, 5)), replace=False)
                ops = rng.choice(list("XYZ"), len(qs))
                masks.append((sum(1 << int(q) for q, o in zip(qs, ops) if o in "XY"),
                              sum(1 << int(q) for q, o in zip(qs, ops) if o in "ZY"),
                              int(sum(o == "Y" for o in ops))))
            row.append(_time(lambda: k.pauli_expectations(s, masks, chunks), args.repeats)
                       / len(masks))
            cells = " | ".join(f"{t / 2**n * 1e9:.2f}" for t in row)
            print(f"| {n} | {dt} | {cells} |", flush=True)
    print("(nanoseconds per state element)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
