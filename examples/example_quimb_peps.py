"""Exact PEPS norm and <Z> through qsimdist, checked against quimb's own contraction.

Run: python examples/example_quimb_peps.py
Distributed (the plan is made on rank 0, each rank runs its share, rank 0 prints):
    mpiexec -n 2 python examples/example_quimb_peps.py --mpi
"""

from __future__ import annotations

import sys

import numpy as np
import quimb.tensor as qtn

import qsimdist.quimb as qq


def main(mpi: bool = False) -> None:
    options: dict = {"memory_limit": "256MiB"}
    if mpi:
        options.update(executor="mpi", profile="local-cpu")
    rank = 0
    if mpi:
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()

    peps = qtn.PEPS.rand(3, 3, bond_dim=2, seed=7, dtype="complex128")
    z = np.diag([1.0, -1.0])

    # 1. Helpers: the networks are built with quimb's tools, contracted by qsimdist.
    norm = qq.peps_norm(peps, **options)
    z_11 = qq.peps_local_expectation(peps, z, (1, 1), **options)

    # 2. contract(): any quimb network; open indices come back as a quimb Tensor.
    rho_tn = peps.make_norm()  # ket tensors tagged KET, bra tensors BRA
    (ket_11,) = rho_tn.select_tensors(["KET", peps.site_tag(1, 1)], which="all")
    ket_11.reindex_({"k1,1": "ket"})  # open the physical bond at (1, 1): its density matrix
    rho = qq.contract(rho_tn, output_inds=("ket", "k1,1"), **options)

    # 3. The hook: quimb's own call, routed through qsimdist inside the block.
    with qq.use(**options) as hook:
        norm2_hooked = peps.make_norm() ^ all

    # quimb's own contractions (cotengra), the reference
    ref_norm2 = peps.make_norm(layer_tags=None).contract(all, output_inds=(), optimize="greedy")
    ref_z = peps.local_expectation_exact(z, (1, 1), optimize="greedy")
    if rank == 0:
        print(f"|psi| = {norm:.12g}   <Z(1,1)> = {z_11:+.12f}   hook: {hook.routed} call(s)")
    assert abs(norm**2 - ref_norm2.real) <= 1e-10 * abs(ref_norm2)
    assert abs(z_11 - ref_z) <= 1e-10
    assert abs(norm2_hooked - ref_norm2) <= 1e-10 * abs(ref_norm2) and hook.routed == 1
    assert isinstance(rho, qtn.Tensor) and rho.inds == ("ket", "k1,1")
    assert abs(np.trace(rho.data @ z) / np.trace(rho.data) - ref_z) <= 1e-10


def test_example() -> None:
    main()


if __name__ == "__main__":
    main(mpi="--mpi" in sys.argv[1:])
